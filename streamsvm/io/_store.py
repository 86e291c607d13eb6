"""The chunked Zarr v3 CSR store: reading side (``open_store``, ``Store``, ``Chunk``).

Layout (DESIGN.md §3): a Zarr v3 group with arrays ``indptr`` (int64, n_rows + 1),
``indices`` (int32, or int64 when n_features >= 2**31), ``data`` (float32/float64; absent
when every stored value is 1.0) and ``y`` (float32 ±1 for binary, int32 class index for
multiclass). Group attribute ``streamsvm`` holds the metadata, with ``complete: true``
written last by the converter.

What a reader trusts is checked (``_integrity.py``): when the store is opened, the
attributes against their checksum and against everything the store proves about them
(``_attrs.py``), and each array's ``zarr.json`` against the CRC recorded in them and against
the lengths and dtypes the attributes imply; every inner chunk against its CRC-32C
(``_direct.py``); every row range read against the metadata before a kernel sees it —
``indptr`` non-decreasing, within the stored entries and, at every chunk boundary the range
covers, where ``chunk_nnz`` puts it, feature ids in ``[0, n_features)``, labels ±1 or class
ids; and ``label_counts`` against the labels of ``y`` the first time they are used. A failed
check raises :class:`~streamsvm.exceptions.StoreCorruptError` naming the attribute, or the
array, the chunk and the rows.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import threading
from typing import Any

import numpy as np

from ..exceptions import IncompleteStoreError, StoreCorruptError, StoreError, StoreNotFoundError
from ._attrs import (array_names, array_problem, boundary_problem, check_meta, count_labels,
                     label_counts_problem)
from ._direct import DirectArray
from ._integrity import check_attrs
from ._urls import join_url, names_remote_errors, url_to_fs

__all__ = ["Chunk", "Store", "StoreMeta", "open_store", "FORMAT_VERSION", "ATTRS_KEY"]

FORMAT_VERSION = 3
"""Version 3: every chunk written and checksummed (CRC-32C), attributes sealed, the largest
feature id (``max_index``) recorded so that ``n_features`` can be checked. Older stores are
refused: convert the input again."""
_OLD_VERSIONS = {1: "written before chunks were checksummed",
                 2: "written before its attributes recorded the largest feature id"}
ARRAY_NAMES = ("indptr", "indices", "data", "y", "y_raw")
"""The arrays the converter writes into a store (``y_raw`` until it finishes)."""
ATTRS_KEY = "streamsvm"

CHECK_ROWS = True
"""Check every row range read (module doc): always, except in ``tools/bench.py``'s
measurement of what the checks cost."""


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


class StoreMeta(abc.ABC):
    """The store interface: all the scheduler, the solvers and training use of a store.

    Shared by :class:`Store` and ``InMemoryStore`` (``_memory.py``); any other store (a
    wrapper that counts reads, in the tests) subclasses it too, and the
    :class:`~streamsvm.schedule.PassScheduler` refuses anything else. Metadata accessors read
    ``meta``; a store implements :meth:`read_rows`. The capabilities below default to those
    of a store whose blocks own their arrays, that decodes nothing it keeps between reads,
    and that reads a row range by its whole chunk; a store overrides what differs.

    Attributes
    ----------
    meta : dict
        The store's ``streamsvm`` attributes (DESIGN.md §3).
    url : str
        Where the store is (``"memory"`` for an in-memory store).
    storage_options : dict
        fsspec options that open ``url`` (empty in memory).
    """

    meta: dict
    url: str
    storage_options: dict

    # -- capabilities --------------------------------------------------------------
    zero_copy = False
    """Whether blocks are views of memory the caller holds, so that reading costs nothing of
    the memory budget."""

    range_reads = False
    """Whether reading a row range costs only that range's bytes. If not, the scheduler
    cuts blocks that split a chunk from the chunk read whole, keeping the last few."""

    fingerprint = ""
    """A content hash that stands for ``meta['store_id']`` in checkpoint identities, for a
    store written without one (in memory); empty when the store has its id."""

    def held_bytes_for(self, keep: int) -> int:
        """Bytes the reader keeps decoded between reads when it keeps up to ``keep`` inner
        chunks per array (none here)."""
        return 0

    def keep_partial(self, keep: int) -> None:
        """Keep up to ``keep`` decoded inner chunks per array between reads (nothing to keep
        here)."""

    def largest_inner_bytes(self) -> int:
        """Decoded bytes of the largest inner chunk, what one read decodes at once (none
        here)."""
        return 0

    @abc.abstractmethod
    def read_rows(self, start: int, stop: int, chunk_id: int = -1) -> Chunk:
        """Read global rows ``[start, stop)`` as a :class:`Chunk` with id ``chunk_id``."""

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

    Picklable (it holds only the URL, storage options and metadata); the arrays are
    opened lazily in each process. Use :func:`open_store` to obtain one.
    """

    def __init__(self, url: str, storage_options: dict | None, meta: dict,
                 labels_checked: bool = False):
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.meta = meta
        self._arrays: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._labels_checked = labels_checked
        self._offsets: np.ndarray | None = None

    # -- pickling: drop the open array handles ---------------------------------------
    def __getstate__(self):
        return {"url": self.url, "storage_options": self.storage_options, "meta": self.meta,
                "labels_checked": self._labels_checked}

    def __setstate__(self, state):
        self.__init__(state["url"], state["storage_options"], state["meta"],
                      state.get("labels_checked", False))

    def __repr__(self) -> str:
        return (f"Store({self.url!r}, n_rows={self.n_rows}, n_features={self.n_features}, "
                f"nnz={self.nnz}, n_chunks={self.n_chunks}, task={self.task!r})")

    # -- data ----------------------------------------------------------------------
    range_reads = True
    """Reading a row range decodes only the inner chunks it overlaps, with no per-read
    overhead worth batching (:mod:`._direct`)."""

    @property
    def held_bytes(self) -> int:
        """Bytes the direct reader keeps decoded between reads."""
        return sum(a.held_bytes for a in self._open_arrays().values())

    def held_bytes_for(self, keep: int) -> int:
        """:attr:`held_bytes` when ``keep`` inner chunks are kept per array (at least one
        is decoded at a time)."""
        return sum(a.held_bytes_for(keep) for a in self._open_arrays().values())

    def largest_inner_bytes(self) -> int:
        """Decoded bytes of the largest inner chunk of any array (what one read decodes at
        once)."""
        return max(a.inner_len * a.dtype.itemsize for a in self._open_arrays().values())

    def keep_partial(self, keep: int) -> None:
        """Keep up to ``keep`` decoded inner chunks per array between reads (memory for
        fewer decompressions of chunks shared by consecutive row ranges)."""
        for a in self._open_arrays().values():
            a.keep_partial = int(keep)

    def _open_arrays(self) -> dict[str, Any]:
        with self._lock:
            if self._arrays is None:
                fs, path = url_to_fs(self.url, self.storage_options)
                if self.binary_values and fs.exists(join_url(path, "data", "zarr.json")):
                    raise StoreCorruptError(
                        f"store {self.url!r} is damaged: attribute 'binary_values' is true, "
                        f"but the store holds a 'data' array; convert the input again")
                crcs = self.meta["array_meta_crc32c"]
                arrays = {name: DirectArray.open(fs, join_url(path, name), where=self.url,
                                                 meta_crc=crcs[name])
                          for name in array_names(self.meta)}
                for name, arr in arrays.items():
                    problem = array_problem(self.meta, name, len(arr), arr.dtype)
                    if problem is not None:
                        raise StoreCorruptError(f"store {self.url!r} is damaged: {problem}")
                # the values a kernel may meet (checked as inner chunks are decoded)
                arrays["indices"].valid = (0, self.n_features - 1, False)
                arrays["y"].valid = (-1, 1, True) if self.task == "binary" else \
                    (0, len(self.meta["classes"]) - 1, False)
                self._arrays = arrays
            return self._arrays

    @property
    def label_counts(self) -> dict[str, int]:
        """Rows per original label; checked against the labels in ``y`` the first time."""
        if not self._labels_checked:
            self._check_label_counts()
        return dict(self.meta["label_counts"])

    def _check_label_counts(self) -> None:
        y = self._open_arrays()["y"]
        try:
            problem = label_counts_problem(self.meta, count_labels(self.meta, y))
        except StoreCorruptError as exc:
            raise StoreCorruptError(f"{exc}; {self._affected(exc, 0, self.n_rows, None)}") \
                from None
        except StoreError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:     # fsspec/network failures
            raise StoreError(f"store {self.url!r}: cannot read array 'y': "
                             f"{type(exc).__name__}: {exc}") from exc
        if problem is not None:
            raise StoreCorruptError(f"store {self.url!r} is damaged: {problem}; convert the "
                                    f"input again")
        self._labels_checked = True

    def read_rows(self, start: int, stop: int, chunk_id: int = -1) -> Chunk:
        """Read global rows ``[start, stop)`` as a :class:`Chunk`, checked (module doc)."""
        arrays = self._open_arrays()
        where = f"rows [{start}, {stop})" + (f" of chunk {chunk_id}" if chunk_id >= 0 else "")
        indptr = None
        try:
            indptr = np.asarray(arrays["indptr"][start:stop + 1], dtype=np.int64)
            p0, p1 = int(indptr[0]), int(indptr[-1])
            if not 0 <= p0 <= p1 <= self.nnz:
                raise StoreCorruptError(
                    f"store {self.url!r} is damaged: array 'indptr' points outside the "
                    f"{self.nnz} stored entries ([{p0}, {p1}))")
            indices = arrays["indices"][p0:p1]
            y = arrays["y"][start:stop]
            data = np.ones(p1 - p0, dtype=self.dtype) if self.binary_values else \
                arrays["data"][p0:p1]
        except StoreCorruptError as exc:
            raise StoreCorruptError(f"{exc}; {self._affected(exc, start, stop, indptr)}") \
                from None
        except (OSError, ValueError, RuntimeError) as exc:     # fsspec/network failures
            raise StoreError(f"store {self.url!r}: cannot read {where}: "
                             f"{type(exc).__name__}: {exc}") from exc
        indptr -= p0
        if CHECK_ROWS:
            self._check_rows(indptr, indices, start, p0, where)
        return Chunk(chunk_id, start, indptr, indices, data, y)

    def _check_rows(self, indptr, indices, start: int, p0: int, where: str) -> None:
        """The checks of the module doc, before any kernel sees the rows (feature ids and
        labels were checked as their inner chunks were decoded: ``DirectArray.valid``)."""
        from ..kernels import indptr_check
        row = indptr_check(indptr, len(indices))
        problem = None
        if row >= 0:
            problem = f"array 'indptr' decreases at row {row}"
        else:
            if self._offsets is None:
                self._offsets = np.concatenate([[0], np.cumsum(self.chunk_nnz)])
            problem = boundary_problem(self._offsets, self.chunk_rows, self.n_rows, indptr,
                                       start, p0)
        if problem is not None:
            raise StoreCorruptError(f"store {self.url!r} is damaged: {problem} ({where})")

    def _affected(self, exc, start: int, stop: int, indptr) -> str:
        """"rows [a, b) of chunk(s) ..." that a damaged entry range of ``exc`` (from
        :class:`DirectArray`) spoils, within the rows ``[start, stop)`` being read."""
        entries = getattr(exc, "entries", None)
        if entries is None:
            r0, r1 = start, stop
        elif exc.array in ("indptr", "y"):
            r0 = max(start, entries[0] - (exc.array == "indptr"))
            r1 = min(stop, entries[1])
        elif indptr is not None:            # indices/data: the rows holding those entries
            r0 = start + max(0, int(np.searchsorted(indptr, entries[0], "right")) - 1)
            r1 = start + min(stop - start, int(np.searchsorted(indptr, entries[1], "left")))
        else:
            r0, r1 = start, stop
        r1 = max(r1, r0 + 1)
        c0, c1 = r0 // self.chunk_rows, (r1 - 1) // self.chunk_rows
        chunks = f"chunk {c0}" if c0 == c1 else f"chunks {c0}-{c1}"
        return f"rows [{r0}, {r1}) ({chunks}) cannot be read"

    def chunk_rows_of(self, i: int) -> int:
        """Rows of chunk ``i``."""
        start, stop = self.chunk_bounds(i)
        return stop - start

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
            "labels": self.label_counts,
            "dtype": m["dtype"],
            "binary_values": m["binary_values"],
            "bytes_on_disk": on_disk,
            "bytes_uncompressed": int(raw),
            "compression_ratio": (raw / on_disk) if on_disk else None,
            "source": m.get("source"),
            "converter": m.get("converter"),
        }


def _zarr_store(url: str, storage_options: dict | None, mode: str):
    """Map a URL onto a zarr store object (the only place URLs become zarr stores)."""
    import zarr.storage
    from ._urls import is_local
    if is_local(url):
        fs, path = url_to_fs(url, storage_options)
        return zarr.storage.LocalStore(path, read_only=(mode == "r"))
    return zarr.storage.FsspecStore.from_url(url, storage_options=dict(storage_options or {}),
                                             read_only=(mode == "r"))


@names_remote_errors          # the first touch of a store: no credentials, no endpoint
def read_meta(url: str, storage_options: dict | None = None) -> dict | None:
    """The ``streamsvm`` attributes of the group at ``url``, or None if there is none."""
    fs, path = url_to_fs(url, storage_options)
    key = join_url(path, "zarr.json")
    if not fs.exists(key):
        return None
    try:
        raw = fs.cat_file(key)
    except OSError as exc:
        raise StoreError(f"store {url!r}: cannot read zarr.json: {exc}") from exc
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise StoreCorruptError(f"store {url!r} is damaged: its zarr.json is not valid JSON "
                                f"({exc})") from exc
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    meta = attrs.get(ATTRS_KEY) if isinstance(attrs, dict) else None
    if meta is not None and not isinstance(meta, dict):
        raise StoreCorruptError(f"store {url!r} is damaged: its '{ATTRS_KEY}' attributes are "
                                f"not a JSON object")
    return meta


def is_bare_group(url: str, storage_options: dict | None = None) -> bool:
    """Whether ``url`` holds a Zarr group with no attributes and nothing but arrays the
    converter writes (or none): a conversion killed before it wrote its first attributes
    (stores written before the converter created its group with them)."""
    fs, path = url_to_fs(url, storage_options)
    try:
        doc = json.loads(fs.cat_file(join_url(path, "zarr.json")))
        names = {n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(path, detail=False)}
    except (OSError, ValueError):
        return False
    return (isinstance(doc, dict) and doc.get("node_type") == "group"
            and doc.get("attributes", {}) == {}
            and names <= {"zarr.json", *ARRAY_NAMES})


def _unfinished(url: str, meta: dict | None) -> IncompleteStoreError:
    progress = (meta or {}).get("progress")
    progress = progress if isinstance(progress, dict) else {}
    rows = progress.get("rows_done", 0)
    if progress.get("input"):
        how = "Continue it with 'streamsvm convert ... --resume' or convert again."
    else:
        how = "It has no resume point: convert the input again."
    return IncompleteStoreError(f"store {url!r} is incomplete: its conversion did not finish "
                                f"(rows written so far: {rows}). {how}")


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
    StoreCorruptError
        Its attributes fail their checksum or contradict the store (``_attrs.py``), or an
        array's ``zarr.json`` fails its CRC or contradicts the attributes.
    """
    if isinstance(url, Store):
        if storage_options:
            raise TypeError("storage_options given together with an already opened Store")
        return url
    store = open_meta(str(url), storage_options)
    store._open_arrays()
    return store


def open_meta(url: str, storage_options: dict | None = None) -> Store:
    """:func:`open_store` without opening the arrays: the attributes checked (``verify``
    opens the arrays itself, to list every problem)."""
    meta = read_meta(url, storage_options)
    if meta is None:
        if is_bare_group(url, storage_options):
            raise _unfinished(url, None)
        raise StoreNotFoundError(f"no streamsvm store at {url!r} (no zarr.json with "
                                 f"'{ATTRS_KEY}' attributes)")
    if "checksum" in meta:              # sealed at the end of a conversion: check it first
        check_attrs(url, meta)
        if meta.get("complete") is not True:
            found = f"is {meta['complete']!r}" if "complete" in meta else "is missing"
            raise StoreCorruptError(
                f"store {url!r} is damaged: attribute 'complete' {found}, but only a finished "
                f"conversion seals the attributes; convert the input again")
    if not meta.get("complete"):
        raise _unfinished(url, meta)
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        why = f" ({_OLD_VERSIONS[version]})" if isinstance(version, int) and \
            version in _OLD_VERSIONS else ""
        raise StoreError(f"store {url!r} has format version {version!r}{why} (attribute "
                         f"'format_version'); this streamsvm reads version {FORMAT_VERSION}: "
                         f"convert the input again")
    check_attrs(url, meta)
    check_meta(url, meta)
    return Store(url, storage_options, meta)
