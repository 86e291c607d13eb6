"""Reading the store's arrays straight from their shards, without zarr's event loop.

The converter writes every array as a Zarr v3 ``sharding_indexed`` array with the shard
index at the end (``bytes`` + ``crc32c``) and inner chunks encoded ``bytes`` (little
endian) + ``blosc`` + ``crc32c`` (``_writer.py``), every chunk written. For that layout a
read of entries ``[a, b)`` is: for each inner chunk it overlaps, look its (offset, size) up
in the shard index (read once per shard, checksum verified), read those bytes, check their
CRC-32C, and blosc-decompress them, straight into the output when the inner chunk lies
inside ``[a, b)``.

Damage is never read as data: a missing shard file, an index entry marking an inner chunk
absent, a checksum that does not match, a short read or a chunk that decodes to the wrong
size raises :class:`~streamsvm.exceptions.StoreCorruptError` naming the array, the shard
file and the inner chunk (the store adds the rows).

Why not zarr: zarr 3 routes every read through its asyncio event loop, ~0.9 ms per array
read of a small store in this project's measurements (``tools/bench.py --suite dcd``
reads the a9a store whole before training), and holds the GIL on that loop while the
solver thread computes; here the file reads, the CRC and blosc run without the GIL, into
buffers sized by the caller. A store in any other layout is refused (``open``).
"""

from __future__ import annotations

import collections
import json
import os
import threading

import numpy as np

from ..exceptions import StoreCorruptError, StoreError
from ._integrity import crc32c

__all__ = ["DirectArray", "VERIFY_CHECKSUMS"]

_EMPTY = np.uint64(2**64 - 1)

VERIFY_CHECKSUMS = True
"""Check the CRC-32C of every inner chunk read (always, except in ``tools/bench.py``'s
measurement of what the check costs)."""


def _expected_layout(meta: dict):
    """``(shard_len, inner_len)`` when ``meta`` (an array's zarr.json) has the converter's
    layout, else None."""
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
        if [c["name"] for c in inner] != ["bytes", "blosc", "crc32c"] or \
                inner[0].get("configuration", {}).get("endian", "little") != "little":
            return None
        shard = int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
        inner_len = int(conf["chunk_shape"][0])
        if inner_len <= 0 or shard % inner_len:
            return None
        return shard, inner_len
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
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
    where : str, optional
        How errors name the store (its URL).
    """

    def __init__(self, fs, path: str, meta: dict, where: str | None = None):
        layout = _expected_layout(meta)
        if layout is None:
            raise ValueError(f"{path}: not the converter's shard layout")
        self.fs, self.path = fs, path.rstrip("/")
        self.name = self.path.rsplit("/", 1)[-1]
        self.where = where or self.path
        self.shape = (int(meta["shape"][0]),)
        self.dtype = np.dtype(meta["data_type"]).newbyteorder("<")
        self.shard_len, self.inner_len = layout
        self.per_shard = self.shard_len // self.inner_len
        self.local = type(fs).__name__ == "LocalFileSystem"
        self._index: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        # the last inner chunks decoded for a partial read: consecutive row ranges (blocks
        # cut from one store chunk) share their boundary inner chunks
        self._partial: collections.OrderedDict = collections.OrderedDict()

    keep_partial = 4
    """Inner chunks kept decoded for partial reads (see :attr:`held_bytes`): by default the
    two boundary inner chunks of each of two chunks read in alternation (dcd's chunk
    pairs); the scheduler lowers it for small memory budgets."""

    @property
    def held_bytes(self) -> int:
        """Most bytes this array keeps decoded between reads, or decodes at once."""
        return self.held_bytes_for(self.keep_partial)

    def held_bytes_for(self, keep: int) -> int:
        """:attr:`held_bytes` with ``keep`` inner chunks kept (one is decoded at a time)."""
        n_inner = -(-len(self) // self.inner_len)
        return min(max(1, keep), n_inner) * self.inner_len * self.dtype.itemsize

    @classmethod
    def open(cls, fs, path: str, *, where: str | None = None, meta_crc: int | None = None):
        """The array at ``path``.

        Parameters
        ----------
        where : str, optional
            The store's URL, for messages.
        meta_crc : int, optional
            The CRC-32C its ``zarr.json`` must have (recorded by the converter).

        Raises
        ------
        StoreCorruptError
            ``zarr.json`` is missing, unreadable, or fails ``meta_crc``.
        StoreError
            The array is not in the layout the converter writes.
        """
        path = path.rstrip("/")
        name = path.rsplit("/", 1)[-1]
        where = where or path
        try:
            raw = fs.cat_file(path + "/zarr.json")
        except FileNotFoundError:
            raise StoreCorruptError(f"store {where!r} is damaged: array {name!r} has no "
                                    f"zarr.json") from None
        except OSError as exc:
            raise StoreError(f"store {where!r}: cannot read {name}/zarr.json: {exc}") from exc
        if meta_crc is not None and crc32c(raw) != meta_crc:
            raise StoreCorruptError(f"store {where!r} is damaged: {name}/zarr.json fails its "
                                    f"checksum (CRC-32C {crc32c(raw):08x}, recorded "
                                    f"{meta_crc:08x})")
        try:
            meta = json.loads(raw)
        except ValueError as exc:
            raise StoreCorruptError(f"store {where!r} is damaged: {name}/zarr.json is not "
                                    f"valid JSON ({exc})") from exc
        if not isinstance(meta, dict) or _expected_layout(meta) is None:
            raise StoreError(f"store {where!r}: array {name!r} is not in the layout streamsvm "
                             f"writes (sharded, blosc + crc32c inner chunks, index at the end); "
                             f"convert the input again")
        return cls(fs, path, meta, where)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def n_shards(self) -> int:
        return -(-self.shape[0] // self.shard_len)

    def _damaged(self, s: int, what: str, j: int | None = None) -> StoreCorruptError:
        """The error for damage in shard ``s`` (inner chunk ``j``, or the whole shard);
        its ``array`` and ``entries`` attributes say which entries cannot be read."""
        if j is None:
            e0, e1 = s * self.shard_len, min(len(self), (s + 1) * self.shard_len)
            part = f"{self.name}/c/{s}"
        else:
            g = s * self.per_shard + j
            e0, e1 = g * self.inner_len, min(len(self), (g + 1) * self.inner_len)
            part = f"{self.name}/c/{s}, inner chunk {j} (entries [{e0}, {e1}))"
        exc = StoreCorruptError(f"store {self.where!r} is damaged: array {self.name!r}, "
                                f"shard {part}: {what}")
        exc.array, exc.entries = self.name, (e0, e1)
        return exc

    # -- bytes ---------------------------------------------------------------------
    def _shard_path(self, s: int) -> str:
        return f"{self.path}/c/{s}"

    def _read_bytes(self, s: int, start: int, nbytes: int) -> bytes:
        path = self._shard_path(s)
        try:
            if self.local:
                fd = os.open(path, os.O_RDONLY)
                try:
                    if start < 0:
                        size = os.fstat(fd).st_size
                        if size < -start:
                            raise self._damaged(s, f"file of {size} bytes is shorter than its "
                                                   f"index")
                        start = size + start
                    out = os.pread(fd, nbytes, start)
                finally:
                    os.close(fd)
            else:
                out = self.fs.cat_file(path, start=start,
                                       end=None if start < 0 and start + nbytes == 0
                                       else start + nbytes)
        except FileNotFoundError:
            raise self._damaged(s, "the shard file is missing") from None
        if len(out) != nbytes:
            raise self._damaged(s, f"expected {nbytes} bytes at offset {start}, got "
                                   f"{len(out)} (file truncated)")
        return out

    def _shard_index(self, s: int):
        """``(offset, nbytes)`` of every inner chunk of shard ``s``."""
        idx = self._index.get(s)
        if idx is not None:
            return idx
        n = self.per_shard * 16 + 4
        raw = self._read_bytes(s, -n, n)
        body = memoryview(raw)[:-4]
        if crc32c(body) != int.from_bytes(raw[-4:], "little"):
            raise self._damaged(s, "the shard index fails its checksum")
        idx = np.frombuffer(bytes(body), dtype="<u8").reshape(self.per_shard, 2)
        with self._lock:
            self._index[s] = idx
        return idx

    def _inner_bytes(self, g: int) -> memoryview:
        """The compressed bytes of inner chunk ``g`` (global number), checksum verified."""
        s, j = divmod(g, self.per_shard)
        off, nb = self._shard_index(s)[j]
        if off == _EMPTY:
            raise self._damaged(s, "the index marks it absent (every chunk is written)", j)
        if nb < 20:
            raise self._damaged(s, f"{int(nb)} bytes is too short for a chunk", j)
        raw = memoryview(self._read_bytes(s, int(off), int(nb)))
        if VERIFY_CHECKSUMS and crc32c(raw[:-4]) != int.from_bytes(raw[-4:], "little"):
            raise self._damaged(s, "checksum mismatch", j)
        return raw[:-4]

    def _decode(self, g: int, raw: memoryview, dst: np.ndarray | None = None) -> np.ndarray:
        """Decompress inner chunk ``g`` (into ``dst`` when given: a whole inner chunk)."""
        from numcodecs import blosc
        size = min(self.inner_len, len(self) - g * self.inner_len)
        want = self.inner_len * self.dtype.itemsize
        if int.from_bytes(raw[4:8], "little") != want:     # blosc header: decoded size
            s, j = divmod(g, self.per_shard)
            raise self._damaged(s, f"decodes to {int.from_bytes(raw[4:8], 'little')} bytes, "
                                   f"expected {want}", j)
        try:
            if dst is not None and len(dst) == self.inner_len:
                blosc.decompress(raw, dst)
                return dst
            full = np.frombuffer(blosc.decompress(raw), dtype=self.dtype)
        except Exception as exc:          # blosc's own errors (RuntimeError, ValueError)
            s, j = divmod(g, self.per_shard)
            raise self._damaged(s, f"does not decompress ({exc})", j) from exc
        return full[:size] if dst is None else full

    # -- reading -------------------------------------------------------------------
    def read(self, start: int, stop: int) -> np.ndarray:
        """Entries ``[start, stop)`` as a new array."""
        start, stop = max(0, int(start)), min(len(self), int(stop))
        out = np.empty(max(0, stop - start), dtype=self.dtype)
        if stop <= start:
            return out
        L = self.inner_len
        for g in range(start // L, (stop - 1) // L + 1):
            a, b = max(start, g * L), min(stop, (g + 1) * L)
            dst = out[a - start:b - start]
            if a == g * L and b == (g + 1) * L:
                self._decode(g, self._inner_bytes(g), dst)       # whole inner chunk: in place
                continue
            with self._lock:
                full = self._partial.get(g)
                if full is not None:
                    self._partial.move_to_end(g)
            if full is None:
                full = self._decode(g, self._inner_bytes(g))
                with self._lock:
                    self._partial[g] = full
                    while len(self._partial) > self.keep_partial:
                        self._partial.popitem(last=False)
            dst[...] = full[a - g * L:b - g * L]
        return out

    def check_shard(self, s: int) -> list[str]:
        """Problems of shard ``s`` (every inner chunk read, checked and decoded), for
        ``streamsvm verify``; an empty list when it is sound."""
        try:
            self._shard_index(s)
        except StoreCorruptError as exc:
            return [str(exc)]
        problems = []
        first = s * self.per_shard
        for g in range(first, min(first + self.per_shard, -(-len(self) // self.inner_len))):
            try:
                self._decode(g, self._inner_bytes(g))
            except StoreCorruptError as exc:
                problems.append(str(exc))
        return problems

    def __getitem__(self, sel: slice) -> np.ndarray:
        if not isinstance(sel, slice) or sel.step not in (None, 1):
            raise TypeError("DirectArray supports contiguous slices only")
        start, stop, _ = sel.indices(len(self))
        return self.read(start, stop)
