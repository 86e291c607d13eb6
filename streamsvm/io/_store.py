"""The zarr-backed store: :class:`Store`, its arrays opened and checked, its rows read.

What a reader trusts is checked (``_integrity.py``): when the store is opened
(``_store_open.py``), the attributes against their checksum and against everything the store
proves about them (``_attrs.py``), and each array's ``zarr.json`` against the CRC recorded in
them and against the lengths and dtypes the attributes imply; every inner chunk against its
CRC-32C (``_direct.py``); every row range read against the metadata before a kernel sees it —
``indptr`` non-decreasing, within the stored entries and, at every chunk boundary the range
covers, where ``chunk_nnz`` puts it, feature ids in ``[0, n_features)``, labels ±1 or class
ids; and ``label_counts`` against the labels of ``y`` the first time they are used. A failed
check raises :class:`~streamsvm.exceptions.StoreCorruptError` naming the attribute, or the
array, the chunk and the rows.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from ..exceptions import StoreCorruptError, StoreError
from ._attrs import (array_names, array_problem, boundary_problem, count_labels,
                     label_counts_problem)
from ._direct import DirectArray
from ._page_cache import store_outgrows_page_cache
from ._store_meta import Chunk, StoreMeta
from ._urls import join_url, url_to_fs

logger = logging.getLogger("streamsvm.io")

__all__ = ["CHECK_ROWS", "Store"]

CHECK_ROWS = True
"""Check every row range read (module doc): always, except in ``tools/bench.py``'s
measurement of what the checks cost."""


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
    def outgrows_page_cache(self) -> bool:
        """A local store too large to stay in the page cache between passes: each pass
        reads it from the disk, and its reads are dropped from the cache once decoded
        (:mod:`._page_cache`)."""
        return any(a.drop_after_read for a in self._open_arrays().values())

    @property
    def held_bytes(self) -> int:
        """Bytes the direct reader keeps decoded between reads."""
        return sum(a.held_bytes for a in self._open_arrays().values())

    def held_bytes_for(self, keep: int) -> int:
        """:attr:`held_bytes` when ``keep`` inner chunks are kept per array (at least one
        is decoded at a time)."""
        return sum(a.held_bytes_for(keep) for a in self._open_arrays().values())

    @property
    def stored_bytes_read(self) -> int:
        """Bytes read from the shard files so far, as stored (compressed), over every array
        (index reads included)."""
        if self._arrays is None:
            return 0
        return sum(a.bytes_read for a in self._arrays.values())

    def largest_inner_bytes(self) -> int:
        """Decoded bytes of the largest inner chunk of any array (what one read decodes at
        once)."""
        return max(a.inner_len * a.dtype.itemsize for a in self._open_arrays().values())

    def rows_per_inner_chunk(self) -> float:
        """Rows one inner chunk of the entry arrays (``indices``, ``data``) holds, on
        average over the store (the smaller of the two): how many consecutive rows share
        the inner chunks one partial read decodes."""
        arrays = self._open_arrays()
        inner = min(arrays[n].inner_len for n in ("indices", "data") if n in arrays)
        return inner * self.n_rows / max(1, self.nnz)

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
                size = self.bytes_on_disk() if type(fs).__name__ == "LocalFileSystem" else 0
                if size and store_outgrows_page_cache(size):
                    logger.info("store %s (%d bytes) outgrows the page cache: its reads are "
                                "dropped from it once decoded", self.url, size)
                    for arr in arrays.values():
                        arr.drop_after_read = True
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

    def compression(self) -> str:
        """What the inner chunks were written with, in the form of ``convert
        --compression`` (``lz4:5``, ``zstd:1``, ``none``), read from the arrays' zarr.json:
        one form when every array has the same, else ``name: form`` per array."""
        found = {name: a.compression.spec for name, a in self._open_arrays().items()}
        if len(set(found.values())) == 1:
            return next(iter(found.values()))
        return ", ".join(f"{name}: {spec}" for name, spec in found.items())

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
            "compression": self.compression(),
            "source": m.get("source"),
            "converter": m.get("converter"),
        }
