"""Reading the store's arrays straight from their shards, without zarr's event loop.

The converter writes every array as a Zarr v3 ``sharding_indexed`` array with the shard
index at the end (``bytes`` + ``crc32c``) and inner chunks encoded ``bytes`` (little
endian) + ``blosc`` (``_writer.py``). For that layout a read of entries ``[a, b)`` is: for
each inner chunk it overlaps, look its (offset, size) up in the shard index (read once per
shard, checksum verified), read those bytes, and blosc-decompress them, straight into the
output when the inner chunk lies inside ``[a, b)``.

Why not zarr: zarr 3 routes every read through its asyncio event loop, ~0.9 ms per array
read of a small store in this project's measurements (``tools/bench.py --suite dcd``
reads the a9a store whole before training), and holds the GIL on that loop while the
solver thread computes; here the file reads and blosc run without the GIL, into buffers
sized by the caller. Any other layout (an older or hand-made store) is read by zarr:
:meth:`DirectArray.open` returns None.
"""

from __future__ import annotations

import collections
import json
import os
import threading

import numpy as np

__all__ = ["DirectArray"]

_EMPTY = np.uint64(2**64 - 1)


def _expected_layout(meta: dict):
    """``(shard_len, inner_len, fill)`` when ``meta`` (an array's zarr.json) has the
    converter's layout, else None."""
    try:
        if meta.get("zarr_format") != 3 or len(meta["shape"]) != 1:
            return None
        if meta["chunk_grid"]["name"] != "regular" or \
                meta["chunk_key_encoding"]["name"] != "default" or \
                meta["chunk_key_encoding"].get("configuration", {}).get("separator", "/") != "/":
            return None
        if meta.get("storage_transformers"):
            return None
        codecs = meta["codecs"]
        if len(codecs) != 1 or codecs[0]["name"] != "sharding_indexed":
            return None
        conf = codecs[0]["configuration"]
        inner = conf["codecs"]
        if conf.get("index_location", "end") != "end":
            return None
        if [c["name"] for c in conf["index_codecs"]] != ["bytes", "crc32c"] or \
                conf["index_codecs"][0].get("configuration", {}).get("endian", "little") != "little":
            return None
        if [c["name"] for c in inner] != ["bytes", "blosc"] or \
                inner[0].get("configuration", {}).get("endian", "little") != "little":
            return None
        shard = int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
        inner_len = int(conf["chunk_shape"][0])
        if inner_len <= 0 or shard % inner_len:
            return None
        return shard, inner_len, meta.get("fill_value", 0)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


class DirectArray:
    """A 1-d array of a store, read shard by shard (see module doc).

    Parameters
    ----------
    fs : fsspec filesystem
    path : str
        The array's directory (holding ``zarr.json`` and ``c/``).
    meta : dict
        Its parsed ``zarr.json``.
    """

    def __init__(self, fs, path: str, meta: dict):
        layout = _expected_layout(meta)
        if layout is None:
            raise ValueError(f"{path}: not the converter's shard layout")
        self.fs, self.path = fs, path.rstrip("/")
        self.shape = (int(meta["shape"][0]),)
        self.dtype = np.dtype(meta["data_type"]).newbyteorder("<")
        self.shard_len, self.inner_len, fill = layout
        self.fill = np.array(fill if fill is not None else 0, dtype=self.dtype)
        self.per_shard = self.shard_len // self.inner_len
        self.local = type(fs).__name__ == "LocalFileSystem"
        self._index: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        # the last inner chunks decoded for a partial read: consecutive row ranges (blocks
        # cut from one store chunk) share their boundary inner chunks
        self._partial: collections.OrderedDict = collections.OrderedDict()

    KEEP_PARTIAL = 4
    """Inner chunks kept decoded for partial reads (see :attr:`held_bytes`): the two
    boundary inner chunks of each of two chunks read in alternation (dcd's chunk pairs)."""

    @property
    def held_bytes(self) -> int:
        """Most bytes this array keeps decoded between reads."""
        return self.KEEP_PARTIAL * self.inner_len * self.dtype.itemsize

    @classmethod
    def open(cls, fs, path: str):
        """The array at ``path``, or None when it is not in the converter's layout."""
        try:
            meta = json.loads(fs.cat_file(path.rstrip("/") + "/zarr.json"))
        except (OSError, ValueError):
            return None
        if _expected_layout(meta) is None:
            return None
        return cls(fs, path, meta)

    def __len__(self) -> int:
        return self.shape[0]

    # -- bytes ---------------------------------------------------------------------
    def _shard_path(self, s: int) -> str:
        return f"{self.path}/c/{s}"

    def _read_bytes(self, s: int, start: int, nbytes: int) -> bytes:
        path = self._shard_path(s)
        if self.local:
            fd = os.open(path, os.O_RDONLY)
            try:
                if start < 0:
                    start = os.fstat(fd).st_size + start
                out = os.pread(fd, nbytes, start)
            finally:
                os.close(fd)
        else:
            out = self.fs.cat_file(path, start=start,
                                   end=None if start < 0 and start + nbytes == 0
                                   else start + nbytes)
        if len(out) != nbytes:
            raise OSError(f"{path}: expected {nbytes} bytes at offset {start}, got {len(out)}")
        return out

    def _shard_index(self, s: int):
        """``(offset, nbytes)`` of every inner chunk of shard ``s`` (None: no shard)."""
        idx = self._index.get(s)
        if idx is not None:
            return idx
        from numcodecs.checksum32 import CRC32C
        n = self.per_shard * 16 + 4
        try:
            raw = self._read_bytes(s, -n, n)
        except FileNotFoundError:
            idx = np.full((self.per_shard, 2), _EMPTY, dtype=np.uint64)
        else:
            try:
                body = CRC32C().decode(raw)
            except Exception as exc:
                raise OSError(f"{self._shard_path(s)}: shard index checksum mismatch "
                              f"({exc})") from exc
            idx = np.frombuffer(bytes(body), dtype="<u8").reshape(self.per_shard, 2)
        with self._lock:
            self._index[s] = idx
        return idx

    # -- reading -------------------------------------------------------------------
    def read(self, start: int, stop: int) -> np.ndarray:
        """Entries ``[start, stop)`` as a new array."""
        from numcodecs import blosc
        start, stop = max(0, int(start)), min(len(self), int(stop))
        out = np.empty(max(0, stop - start), dtype=self.dtype)
        if stop <= start:
            return out
        L = self.inner_len
        item = self.dtype.itemsize
        for g in range(start // L, (stop - 1) // L + 1):
            a, b = max(start, g * L), min(stop, (g + 1) * L)
            dst = out[a - start:b - start]
            s, j = divmod(g, self.per_shard)
            off, nb = self._shard_index(s)[j]
            if off == _EMPTY:
                dst[...] = self.fill
                continue
            if a == g * L and b == (g + 1) * L:
                raw = self._read_bytes(s, int(off), int(nb))
                if len(raw) < 16 or int.from_bytes(raw[4:8], "little") != L * item:
                    raise OSError(f"{self._shard_path(s)}: inner chunk {j} does not decode "
                                  f"to {L} entries")
                blosc.decompress(raw, dst)          # the whole inner chunk: in place
                # (blosc's header, bytes 4-8: the decoded size, checked above)
                continue
            with self._lock:
                full = self._partial.get(g)
                if full is not None:
                    self._partial.move_to_end(g)
            if full is None:
                raw = self._read_bytes(s, int(off), int(nb))
                full = np.frombuffer(blosc.decompress(raw), dtype=self.dtype)
                if len(full) != L:
                    raise OSError(f"{self._shard_path(s)}: inner chunk {j} decodes to "
                                  f"{len(full)} entries, expected {L}")
                with self._lock:
                    self._partial[g] = full
                    while len(self._partial) > self.KEEP_PARTIAL:
                        self._partial.popitem(last=False)
            dst[...] = full[a - g * L:b - g * L]
        return out

    def __getitem__(self, sel: slice) -> np.ndarray:
        if not isinstance(sel, slice) or sel.step not in (None, 1):
            raise TypeError("DirectArray supports contiguous slices only")
        start, stop, _ = sel.indices(len(self))
        return self.read(start, stop)
