"""Reading the store's arrays straight from their shards, without zarr's event loop.

The converter writes every array as a Zarr v3 ``sharding_indexed`` array with the shard
index at the end (``bytes`` + ``crc32c``) and inner chunks encoded ``bytes`` (little
endian) + ``blosc`` (any compressor, level and shuffle) + ``crc32c``, or ``bytes`` +
``crc32c`` with no compressor (``convert --compression``, ``_compression.py``), every chunk
written. For that layout a read of entries ``[a, b)`` is: for each inner chunk it overlaps,
look its (offset, size) up in the shard index (read once per shard, checksum verified), read
those bytes, check their CRC-32C, and blosc-decompress (or copy) them, straight into the
output when the inner chunk lies inside ``[a, b)``.

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
from ._compression import recorded_compression
from ._integrity import crc32c

__all__ = ["DirectArray", "VERIFY_CHECKSUMS"]

_EMPTY = np.uint64(2**64 - 1)
_THREAD = threading.local()

VERIFY_CHECKSUMS = True
"""Check the CRC-32C of the inner chunks read (:meth:`DirectArray._inner_bytes`; always,
except in ``tools/bench.py``'s measurement of what the checks cost)."""


def _expected_layout(meta: dict):
    """``(shard_len, inner_len, compression)`` when ``meta`` (an array's zarr.json) has a
    layout the converter writes, else None (``compression``: a
    :class:`~streamsvm.io._compression.Compression`)."""
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
        if len(inner) < 2 or [inner[0]["name"], inner[-1]["name"]] != ["bytes", "crc32c"] or \
                inner[0].get("configuration", {}).get("endian", "little") != "little":
            return None
        compression = recorded_compression(inner[1:-1])
        if compression is None:
            return None
        shard = int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
        inner_len = int(conf["chunk_shape"][0])
        if inner_len <= 0 or shard % inner_len:
            return None
        return shard, inner_len, compression
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None


class _Changed(Exception):
    """A shard file changed since its index was read."""


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
        self.shard_len, self.inner_len, self.compression = layout
        self.per_shard = self.shard_len // self.inner_len
        self.local = type(fs).__name__ == "LocalFileSystem"
        # a store that cannot stay in the page cache: drop what was read (_page_cache.py)
        self.drop_after_read = False
        self._index: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        # the last inner chunks decoded for a partial read: consecutive row ranges (blocks
        # cut from one store chunk) share their boundary inner chunks
        self._partial: collections.OrderedDict = collections.OrderedDict()
        # local shard files: identity when last read, and inner chunks whose CRC passed
        self._seen: dict[int, tuple] = {}
        self._verified = np.zeros(-(-self.shape[0] // self.inner_len), dtype=bool)
        self.valid = None
        self.bytes_read = 0

    bytes_read: int
    """Bytes read from the shard files so far (as stored: compressed), by every thread."""

    valid: tuple | None
    """``(lo, hi, nonzero)``: the range every value must lie in (checked on each inner chunk
    the first time it is decoded, :func:`~streamsvm.kernels.values_within`), or None."""

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
                                    f"checksum (CRC-32C {crc32c(raw):08x}, attribute "
                                    f"'array_meta_crc32c' records {meta_crc:08x})")
        try:
            meta = json.loads(raw)
        except ValueError as exc:
            raise StoreCorruptError(f"store {where!r} is damaged: {name}/zarr.json is not "
                                    f"valid JSON ({exc})") from exc
        if not isinstance(meta, dict) or _expected_layout(meta) is None:
            raise StoreError(f"store {where!r}: array {name!r} is not in the layout streamsvm "
                             f"writes (sharded, blosc or uncompressed + crc32c inner chunks, "
                             f"index at the end); convert the input again")
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

    def _scratch(self, nbytes: int) -> memoryview:
        """A buffer of ``nbytes`` owned by the calling thread, reused from read to read
        (a fresh ``bytes`` per inner chunk costs page faults on new memory: py-spy on a
        streamed pass put ``pread`` at 37 % of the reader thread's samples)."""
        buf = getattr(_THREAD, "buf", None)
        if buf is None or len(buf) < nbytes:
            buf = _THREAD.buf = np.empty(max(nbytes, 1 << 16) * 5 // 4, dtype=np.uint8)
        return memoryview(buf)[:nbytes]

    def _read_bytes(self, s: int, start: int, nbytes: int, into=None):
        """``nbytes`` of shard ``s`` at ``start`` (negative: from the end), as ``bytes`` or,
        for a local file when ``into`` is given, read into that buffer (returned).

        A local shard file that changed since it was last read (inode, size or mtime)
        loses what was learnt from it: its cached index and which of its inner chunks
        passed their checksum; :class:`_Changed` is raised when ``start`` was taken from
        that index."""
        path = self._shard_path(s)
        try:
            if self.local:
                fd = os.open(path, os.O_RDONLY)
                try:
                    st = os.fstat(fd)
                    if self._seen.get(s) != (st.st_ino, st.st_size, st.st_mtime_ns):
                        self._forget(s, (st.st_ino, st.st_size, st.st_mtime_ns))
                        if start >= 0:
                            raise _Changed()
                    if start < 0:
                        size = st.st_size
                        if size < -start:
                            raise self._damaged(s, f"file of {size} bytes is shorter than its "
                                                   f"index")
                        start = size + start
                    if into is None:
                        out = os.pread(fd, nbytes, start)
                    else:
                        out = into[:os.preadv(fd, [into], start)]
                    if self.drop_after_read:
                        os.posix_fadvise(fd, start, nbytes, os.POSIX_FADV_DONTNEED)
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
        with self._lock:
            self.bytes_read += nbytes
        return out

    def _forget(self, s: int, key) -> None:
        with self._lock:
            self._seen[s] = key
            self._index.pop(s, None)
            first = s * self.per_shard
            self._verified[first:first + self.per_shard] = False
            for g in range(first, first + self.per_shard):
                self._partial.pop(g, None)

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
        """The compressed bytes of inner chunk ``g`` (global number), checksum verified (in
        the calling thread's scratch buffer: valid until its next read).

        The CRC-32C of a local file's inner chunk (and the range of its values,
        :meth:`_decode`) is checked the first time this process reads it, and again
        whenever its file has changed since (``_read_bytes``): the page cache serves later
        passes the bytes that were checked. A remote store's chunks are checked on every
        read (each is a new transfer)."""
        s, j = divmod(g, self.per_shard)
        for _ in range(2):
            off, nb = self._shard_index(s)[j]
            if off == _EMPTY:
                raise self._damaged(s, "the index marks it absent (every chunk is written)", j)
            if nb < 20:
                raise self._damaged(s, f"{int(nb)} bytes is too short for a chunk", j)
            try:
                raw = memoryview(self._read_bytes(s, int(off), int(nb),
                                                  self._scratch(int(nb))))
                break
            except _Changed:            # the file changed: read its index again
                continue
        else:
            raise self._damaged(s, "the shard file changes while it is being read", j)
        if VERIFY_CHECKSUMS and not self._verified[g]:
            if crc32c(raw[:-4]) != int.from_bytes(raw[-4:], "little"):
                raise self._damaged(s, "checksum mismatch", j)
        return raw[:-4]

    def _decode(self, g: int, raw: memoryview, dst: np.ndarray | None = None) -> np.ndarray:
        """Decompress (or, stored uncompressed, copy) inner chunk ``g`` (into ``dst`` when
        given: a whole inner chunk)."""
        size = min(self.inner_len, len(self) - g * self.inner_len)
        whole = dst is not None and len(dst) == self.inner_len
        full = self._unpack(g, raw, dst if whole else None)
        if not self._verified[g]:
            if self.valid is not None and VERIFY_CHECKSUMS:
                from ..kernels import values_within
                if not values_within(full[:size], *self.valid):
                    s, j = divmod(g, self.per_shard)
                    lo, hi, nonzero = self.valid
                    raise self._damaged(s, f"holds a value outside [{lo}, {hi}]"
                                        + (" or 0" if nonzero else ""), j)
            # a local file's chunk is trusted from now on (_inner_bytes); a remote one not
            self._verified[g] = self.local and VERIFY_CHECKSUMS
        return full[:size] if dst is None else full

    def _unpack(self, g: int, raw: memoryview, dst: np.ndarray | None) -> np.ndarray:
        """The values of inner chunk ``g`` from its bytes ``raw``, written into ``dst`` (a
        whole inner chunk) when given, else into a new array."""
        want = self.inner_len * self.dtype.itemsize
        if self.compression.cname is None:          # bytes + crc32c: the values themselves
            if len(raw) != want:
                s, j = divmod(g, self.per_shard)
                raise self._damaged(s, f"holds {len(raw)} bytes, expected {want} "
                                       f"(uncompressed)", j)
            values = np.frombuffer(raw, dtype=self.dtype)
            if dst is None:
                return values.copy()        # ``raw`` is the thread's scratch buffer
            dst[...] = values
            return dst
        from numcodecs import blosc
        if int.from_bytes(raw[4:8], "little") != want:     # blosc header: decoded size
            s, j = divmod(g, self.per_shard)
            raise self._damaged(s, f"decodes to {int.from_bytes(raw[4:8], 'little')} bytes, "
                                   f"expected {want}", j)
        try:
            if dst is not None:
                blosc.decompress(raw, dst)
                return dst
            return np.frombuffer(blosc.decompress(raw), dtype=self.dtype)
        except Exception as exc:          # blosc's own errors (RuntimeError, ValueError)
            s, j = divmod(g, self.per_shard)
            raise self._damaged(s, f"does not decompress ({exc})", j) from exc

    # -- reading -------------------------------------------------------------------
    def read(self, start: int, stop: int) -> np.ndarray:
        """Entries ``[start, stop)`` as a new array."""
        start, stop = max(0, int(start)), min(len(self), int(stop))
        out = np.empty(max(0, stop - start), dtype=self.dtype)
        if stop <= start:
            return out
        L = self.inner_len
        with self._lock:
            # the range's first and last inner chunks are the ones it may share with the
            # ranges read before: kept decoded ones are marked used before anything new is
            # kept, so that it does not push them out (going backwards through a chunk, a
            # range's new first inner chunk evicted its last one, shared with the previous
            # range, just before it was needed: dcd's streamed passes decoded 1.49x the
            # inner chunks of the store)
            for g in {start // L, (stop - 1) // L}:
                if g in self._partial:
                    self._partial.move_to_end(g)
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
