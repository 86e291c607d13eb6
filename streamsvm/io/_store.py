"""The chunked Zarr v3 CSR store: reading side (``open_store``, ``Store``, ``Chunk``).

Layout (DESIGN.md §3): a Zarr v3 group with arrays ``indptr`` (int64, n_rows + 1),
``indices`` (int32, or int64 when n_features >= 2**31), ``data`` (float32/float64; absent
when every stored value is 1.0) and ``y`` (float32 ±1 for binary, int32 class index for
multiclass). Group attribute ``streamsvm`` holds the metadata, with ``complete: true``
written last by the converter.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

import numpy as np

from ..exceptions import IncompleteStoreError, StoreError, StoreNotFoundError
from ._direct import DirectArray
from ._urls import join_url, url_to_fs

__all__ = ["Chunk", "Store", "StoreMeta", "open_store", "FORMAT_VERSION", "ATTRS_KEY"]

FORMAT_VERSION = 1
ATTRS_KEY = "streamsvm"


@dataclasses.dataclass(frozen=True, eq=False)
class Chunk:
    """One row chunk of a store, as CSR arrays local to the chunk.

    Attributes
    ----------
    id : int
        Chunk index in the store.
    row_start : int
        Global index of the chunk's first row.
    indptr : ndarray of shape (n_rows + 1,), int64
        Row pointer starting at 0.
    indices : ndarray of shape (nnz,), int32 or int64
        0-based feature ids, strictly increasing within a row.
    data : ndarray of shape (nnz,), float32 or float64
        Values (all ones when the store omits ``data``).
    y : ndarray of shape (n_rows,)
        float32 ±1 (binary) or int32 class index (multiclass).
    """

    id: int
    row_start: int
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    y: np.ndarray

    @property
    def n_rows(self) -> int:
        return len(self.y)

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.indptr, self.indices, self.data, self.y))

    def rows(self, start: int, stop: int) -> "Chunk":
        """A view of rows ``[start, stop)`` of this chunk (same ``id``)."""
        p0, p1 = int(self.indptr[start]), int(self.indptr[stop])
        return Chunk(self.id, self.row_start + start, self.indptr[start:stop + 1] - p0,
                     self.indices[p0:p1], self.data[p0:p1], self.y[start:stop])

    def to_scipy(self):
        """The chunk as a ``scipy.sparse.csr_matrix`` with ``n_features`` inferred."""
        import scipy.sparse as sp
        n_cols = int(self.indices.max()) + 1 if len(self.indices) else 0
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.n_rows, n_cols))


class StoreMeta:
    """Metadata accessors shared by :class:`Store` and ``InMemoryStore`` (from ``meta``)."""

    meta: dict
    url: str

    # -- metadata ------------------------------------------------------------------
    n_rows = property(lambda self: int(self.meta["n_rows"]))
    n_features = property(lambda self: int(self.meta["n_features"]))
    nnz = property(lambda self: int(self.meta["nnz"]))
    chunk_rows = property(lambda self: int(self.meta["chunk_rows"]))
    n_chunks = property(lambda self: int(self.meta["n_chunks"]))
    task = property(lambda self: self.meta["task"])
    binary_values = property(lambda self: bool(self.meta["binary_values"]))
    dtype = property(lambda self: np.dtype(self.meta["dtype"]))

    @property
    def classes(self) -> np.ndarray:
        """Original labels, in stored order (binary: ``[negative, positive]``)."""
        return np.asarray(self.meta["classes"], dtype=np.float64)

    @property
    def label_counts(self) -> dict[str, int]:
        return dict(self.meta["label_counts"])

    @property
    def chunk_nnz(self) -> np.ndarray:
        return np.asarray(self.meta["chunk_nnz"], dtype=np.int64)

    @property
    def chunk_max_sq_norm(self) -> np.ndarray:
        return np.asarray(self.meta["chunk_max_sq_norm"], dtype=np.float64)

    def _check_chunk(self, i: int) -> None:
        if not 0 <= i < self.n_chunks:
            raise StoreError(f"store {self.url!r}: chunk {i} out of range [0, {self.n_chunks})")

    def chunk_bounds(self, i: int) -> tuple[int, int]:
        """Global row range ``[start, stop)`` of chunk ``i``."""
        self._check_chunk(i)
        start = i * self.chunk_rows
        return start, min(start + self.chunk_rows, self.n_rows)

    def chunk_sizes(self) -> np.ndarray:
        """Number of rows of every chunk, shape (n_chunks,)."""
        sizes = np.full(self.n_chunks, self.chunk_rows, dtype=np.int64)
        if self.n_chunks:
            sizes[-1] = self.n_rows - (self.n_chunks - 1) * self.chunk_rows
        return sizes

    def read_chunk(self, i: int) -> Chunk:
        """Read row chunk ``i``; touches only that chunk's bytes."""
        start, stop = self.chunk_bounds(i)
        return self.read_rows(start, stop, chunk_id=i)

    def iter_chunks(self):
        """Yield every chunk in order (a convenience; solvers use the PassScheduler)."""
        for i in range(self.n_chunks):
            yield self.read_chunk(i)


class Store(StoreMeta):
    """A read-only handle on a complete streamsvm store.

    Picklable (it holds only the URL, storage options and metadata); zarr arrays are
    opened lazily in each process. Use :func:`open_store` to obtain one.
    """

    def __init__(self, url: str, storage_options: dict | None, meta: dict):
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.meta = meta
        self._arrays: dict[str, Any] | None = None
        self._direct = False
        self._lock = threading.Lock()

    # -- pickling: drop the open zarr handles ---------------------------------------
    def __getstate__(self):
        return {"url": self.url, "storage_options": self.storage_options, "meta": self.meta}

    def __setstate__(self, state):
        self.__init__(state["url"], state["storage_options"], state["meta"])

    def __repr__(self) -> str:
        return (f"Store({self.url!r}, n_rows={self.n_rows}, n_features={self.n_features}, "
                f"nnz={self.nnz}, n_chunks={self.n_chunks}, task={self.task!r})")

    # -- data ----------------------------------------------------------------------
    @property
    def range_reads(self) -> bool:
        """Whether reading a row range decodes only the inner chunks it overlaps, with no
        per-read overhead worth batching (the arrays are read by :mod:`._direct`)."""
        return self._open_arrays() is not None and self._direct

    @property
    def held_bytes(self) -> int:
        """Bytes the direct reader keeps decoded between reads (0 through zarr)."""
        arrays = self._open_arrays()
        return sum(a.held_bytes for a in arrays.values()) if self._direct else 0

    def _open_arrays(self) -> dict[str, Any]:
        with self._lock:
            if self._arrays is None:
                names = ["indptr", "indices", "y"] + ([] if self.binary_values else ["data"])
                fs, path = url_to_fs(self.url, self.storage_options)
                direct = {name: DirectArray.open(fs, join_url(path, name)) for name in names}
                self._direct = all(a is not None for a in direct.values())
                if self._direct:
                    self._arrays = direct
                else:           # not the converter's layout: zarr reads anything
                    import zarr
                    group = zarr.open_group(_zarr_store(self.url, self.storage_options, "r"),
                                            mode="r")
                    self._arrays = {name: group[name] for name in names}
            return self._arrays

    def read_rows(self, start: int, stop: int, chunk_id: int = -1) -> Chunk:
        """Read global rows ``[start, stop)`` as a :class:`Chunk`."""
        arrays = self._open_arrays()
        try:
            if start == 0 and stop == self.n_rows and not self._direct:
                # the whole store: entries [0, nnz) are known, so read every array at once
                names = [n for n in ("indptr", "indices", "data", "y") if n in arrays]
                sel = {"indptr": slice(0, stop + 1), "y": slice(0, stop)}
                got = dict(zip(names, _read_concurrently(
                    [arrays[n] for n in names], [sel.get(n, slice(0, self.nnz)) for n in names])))
                indptr = np.asarray(got["indptr"], dtype=np.int64)
            else:
                indptr = np.asarray(arrays["indptr"][start:stop + 1], dtype=np.int64)
                got = None
            p0, p1 = int(indptr[0]), int(indptr[-1])
            if got is None:
                got = {"indices": arrays["indices"][p0:p1], "y": arrays["y"][start:stop]}
                if not self.binary_values:
                    got["data"] = arrays["data"][p0:p1]
            indices = np.asarray(got["indices"])
            if self.binary_values:
                data = np.ones(p1 - p0, dtype=self.dtype)
            else:
                data = np.asarray(got["data"])
            y = np.asarray(got["y"])
        except Exception as exc:  # zarr/fsspec/codec failures
            raise StoreError(f"store {self.url!r}: cannot read rows [{start}, {stop}) "
                             f"(chunk {chunk_id}): {type(exc).__name__}: {exc}") from exc
        if len(indices) != p1 - p0 or len(y) != stop - start:
            raise StoreError(f"store {self.url!r}: chunk {chunk_id} is truncated: expected "
                             f"{p1 - p0} entries and {stop - start} labels, got "
                             f"{len(indices)} and {len(y)}")
        return Chunk(chunk_id, start, indptr - p0, indices, data, y)

    def bytes_on_disk(self) -> int:
        """Total size of the store's files."""
        fs, path = url_to_fs(self.url, self.storage_options)
        return int(fs.du(path, total=True))

    def info(self) -> dict:
        """A summary as printed by ``streamsvm info --json``."""
        m = self.meta
        raw = m["n_rows"] * 8 + m["nnz"] * (np.dtype(m["index_dtype"]).itemsize
                                           + (0 if m["binary_values"] else self.dtype.itemsize))
        raw += m["n_rows"] * 4
        on_disk = self.bytes_on_disk()
        cells = m["n_rows"] * m["n_features"]
        return {
            "url": self.url,
            "n_rows": m["n_rows"],
            "n_features": m["n_features"],
            "nnz": m["nnz"],
            "density": (m["nnz"] / cells) if cells else 0.0,
            "n_chunks": m["n_chunks"],
            "chunk_rows": m["chunk_rows"],
            "task": m["task"],
            "labels": dict(m["label_counts"]),
            "dtype": m["dtype"],
            "binary_values": m["binary_values"],
            "bytes_on_disk": on_disk,
            "bytes_uncompressed": int(raw),
            "compression_ratio": (raw / on_disk) if on_disk else None,
            "source": m.get("source"),
            "converter": m.get("converter"),
        }


def _read_concurrently(arrays, selections) -> list:
    """``[a[s] for a, s in zip(arrays, selections)]`` with the reads overlapped on zarr's
    event loop (one round trip instead of one per array: what matters on S3, and for
    small stores read whole)."""
    import asyncio
    from zarr.core.sync import sync

    async def gather():
        return await asyncio.gather(*(a.async_array.getitem(s)
                                      for a, s in zip(arrays, selections)))
    return list(sync(gather()))


def _zarr_store(url: str, storage_options: dict | None, mode: str):
    """Map a URL onto a zarr store object (the only place URLs become zarr stores)."""
    import zarr.storage
    from ._urls import is_local
    if is_local(url):
        fs, path = url_to_fs(url, storage_options)
        return zarr.storage.LocalStore(path, read_only=(mode == "r"))
    return zarr.storage.FsspecStore.from_url(url, storage_options=dict(storage_options or {}),
                                             read_only=(mode == "r"))


def read_meta(url: str, storage_options: dict | None = None) -> dict | None:
    """The ``streamsvm`` attributes of the group at ``url``, or None if there is none."""
    fs, path = url_to_fs(url, storage_options)
    key = join_url(path, "zarr.json")
    if not fs.exists(key):
        return None
    try:
        doc = json.loads(fs.cat_file(key))
    except (ValueError, OSError) as exc:
        raise StoreError(f"store {url!r}: unreadable zarr.json: {exc}") from exc
    return doc.get("attributes", {}).get(ATTRS_KEY)


def open_store(url, *, storage_options: dict | None = None) -> Store:
    """Open a complete store for reading.

    Parameters
    ----------
    url : str or os.PathLike or Store
        Local path or fsspec URL (``s3://bucket/train.zarr``).
    storage_options : dict, optional
        Passed to fsspec (e.g. ``{"endpoint_url": ...}`` for S3).

    Raises
    ------
    StoreNotFoundError
        Nothing at ``url``, or not a streamsvm store.
    IncompleteStoreError
        The conversion that writes it did not finish.
    """
    if isinstance(url, Store):
        if storage_options:
            raise TypeError("storage_options given together with an already opened Store")
        return url
    url = str(url)
    meta = read_meta(url, storage_options)
    if meta is None:
        raise StoreNotFoundError(f"no streamsvm store at {url!r} (no zarr.json with "
                                 f"'{ATTRS_KEY}' attributes)")
    if not meta.get("complete"):
        raise IncompleteStoreError(
            f"store {url!r} is incomplete: its conversion did not finish "
            f"(rows written so far: {meta.get('progress', {}).get('rows_done', 0)}). "
            f"Continue it with 'streamsvm convert ... --resume' or convert again.")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise StoreError(f"store {url!r} has format version {version}; this streamsvm reads "
                         f"version {FORMAT_VERSION}")
    return Store(url, storage_options, meta)
