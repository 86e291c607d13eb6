"""The store's writing side: append CSR rows to a Zarr v3 group with bounded memory.

Rows arrive in blocks of any size. ``indices``/``data`` are 1-D arrays of length nnz,
sharded (small inner chunks inside large shards) so a reader of one row chunk touches
only that chunk's inner chunks; the writer buffers appended entries and writes whole
shards, so no shard is rewritten during a conversion (only at a resume point).
``y_raw`` keeps the original labels (float64) until :meth:`StoreWriter.finish` knows
the full label set, encodes them into ``y`` and removes it. ``complete: true`` is the
last thing written.
"""

from __future__ import annotations

import logging
import time
import uuid

import numpy as np

from ..exceptions import FormatError, InvalidParameterError
from ._compression import DEFAULT as DEFAULT_COMPRESSION
from ._compression import parse_compression
from ._integrity import crc32c, seal
from ._labels import apply_label_plan, label_key, plan_labels
from ._output import prepare_output
from ._store_open import ATTRS_KEY, FORMAT_VERSION, _zarr_store, open_store
from ._urls import join_url, url_to_fs

__all__ = ["StoreWriter", "write_store"]

log = logging.getLogger(__name__)

INNER_ELEMS = 1 << 18        # entries per inner chunk of indices/data (1 MB of int32)
SHARD_ELEMS = 1 << 20        # entries per shard (4 MB of int32): bounds the write buffer
ROW_SHARD = 1 << 20          # rows per shard of indptr / y
ROW_INNER_MIN = 4096         # fewest rows per inner chunk of indptr / y
MAX_CLASSES = 100_000


# Every chunk is written, also one equal to the fill value: a reader then treats a missing
# chunk as damage, never as zeros.
_ARRAY_CONFIG = {"write_empty_chunks": True}


class _Appender:
    """Append 1-D data to a zarr array, writing only whole shards until :meth:`flush`.

    Appended values are copied into one shard-sized buffer, allocated once, that is written
    when it reaches the next shard boundary; an append that holds whole shards itself, with
    the buffer empty, is written straight from its own memory.
    """

    def __init__(self, array, shard: int, pos: int = 0):
        self.array, self.shard, self.pos = array, shard, pos
        self.n_pending = 0          # values in the buffer, to be written at ``pos``
        self._buf = None

    def append(self, values: np.ndarray) -> None:
        while len(values):
            room = (self.pos // self.shard + 1) * self.shard - self.pos   # to the boundary
            if self.n_pending == 0 and len(values) >= room:
                n = room + (len(values) - room) // self.shard * self.shard
                self._write(values[:n])
                values = values[n:]
                continue
            if self._buf is None:
                self._buf = np.empty(self.shard, dtype=self.array.dtype)
            take = min(room - self.n_pending, len(values))
            self._buf[self.n_pending:self.n_pending + take] = values[:take]
            self.n_pending += take
            values = values[take:]
            if self.n_pending == room:
                self._write(self._buf[:room])

    def _write(self, data: np.ndarray) -> None:
        end = self.pos + len(data)
        if self.array.shape[0] < end:
            self.array.resize((end,))
        self.array[self.pos:end] = data
        self.pos = end
        self.n_pending = 0

    def flush(self) -> None:
        """Write everything pending (a partial shard; later appends rewrite it)."""
        if self.n_pending:
            self._write(self._buf[:self.n_pending])
        if self.array.shape[0] != self.pos:
            self.array.resize((self.pos,))


class StoreWriter:
    """Write a store row block by row block.

    Parameters
    ----------
    url : str
        Output location (local path or fsspec URL). Must not exist (see prepare_output).
    chunk_rows : int
        Rows per row chunk (the scheduler's unit).
    dtype : {"float32", "float64"}
        Value dtype.
    index_dtype : {"int32", "int64"}
    options, source : dict
        Converter options and input description, recorded in the attributes (``options``
        completed with ``chunk_rows``, ``dtype`` and, at :meth:`finish`, ``task`` and
        ``n_features``: what a reader checks the store against, ``_attrs.py``).
    resume_meta : dict, optional
        The ``streamsvm`` attributes of an unfinished store to continue.
    compression : str, default "lz4"
        The inner chunks' compressor (:func:`~streamsvm.io._compression.parse_compression`);
        recorded in ``options`` and in every array's ``zarr.json``. Blosc lz4 (level 5, byte
        shuffle) by default: decoded 2-4x as fast as zstd's, for a store 12 % larger
        (``tools/bench.py codecs``, BENCHMARKS.md); then a CRC-32C of the compressed bytes,
        checked on every read (``_integrity.py``).
    """

    def __init__(self, url: str, *, chunk_rows: int, dtype="float32", index_dtype="int32",
                 storage_options=None, options: dict | None = None, source: dict | None = None,
                 resume_meta: dict | None = None, compression=DEFAULT_COMPRESSION):
        import zarr
        self.url, self.storage_options = url, storage_options
        self.chunk_rows = int(chunk_rows)
        self.dtype, self.index_dtype = np.dtype(dtype), np.dtype(index_dtype)
        self.compression = parse_compression(compression)
        self.options = {"chunk_rows": self.chunk_rows, "dtype": self.dtype.name,
                        "compression": self.compression.spec, **dict(options or {})}
        self.source = dict(source or {})
        zstore = _zarr_store(url, storage_options, "w")
        row_inner = self._row_inner = min(max(self.chunk_rows, ROW_INNER_MIN), 1 << 18)
        self._row_shard = row_inner * max(1, ROW_SHARD // row_inner)
        if resume_meta is None:
            self.st = {"rows_done": 0, "nnz_done": 0, "max_index": -1, "all_ones": True,
                       "labels": {}, "chunk_nnz": [], "chunk_max_sq_norm": [],
                       "cur_nnz": 0, "cur_sq": 0.0, "input": None}
            # the group is created with its attributes: a kill at any point leaves a store
            # that says it is unfinished (prepare_output also knows an older bare group)
            self.group = zarr.open_group(zstore, mode="w", zarr_format=3,
                                         attributes={ATTRS_KEY: self._attrs(complete=False)})
            kw = dict(shape=(0,), compressors=self.compression.codecs(), fill_value=0,
                      config=_ARRAY_CONFIG)
            self.group.create_array("indptr", dtype="int64", chunks=(row_inner,),
                                    shards=(self._row_shard,), **kw)
            self.group.create_array("indices", dtype=self.index_dtype, chunks=(INNER_ELEMS,),
                                    shards=(SHARD_ELEMS,), **kw)
            self.group.create_array("data", dtype=self.dtype, chunks=(INNER_ELEMS,),
                                    shards=(SHARD_ELEMS,), **kw)
            self.group.create_array("y_raw", dtype="float64", chunks=(row_inner,),
                                    shards=(self._row_shard,), **kw)
        else:
            self.group = zarr.open_group(zstore, mode="r+")
            self.st = dict(resume_meta["progress"])
        a = {k: self.group[k].with_config(_ARRAY_CONFIG)
             for k in ("indptr", "indices", "data", "y_raw")}
        rows, nnz = self.st["rows_done"], self.st["nnz_done"]
        self._indptr = _Appender(a["indptr"], self._row_shard, rows + 1)
        self._indices = _Appender(a["indices"], SHARD_ELEMS, nnz)
        # While every value so far is 1.0 nothing is written to ``data`` (the array is
        # dropped at the end); the first other value back-fills the ones.
        self._data = _Appender(a["data"], SHARD_ELEMS, 0 if self.st["all_ones"] else nnz)
        self._y = _Appender(a["y_raw"], self._row_shard, rows)
        if resume_meta is None:
            self._indptr.pos = 0
            self._indptr.append(np.zeros(1, dtype=np.int64))
        self._label_counts: dict[float, int] = {float(k): v for k, v in self.st["labels"].items()}
        self._write_attrs(complete=False)

    # -- appending --------------------------------------------------------------------
    def append(self, labels: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
               values: np.ndarray, *, source_pos=None) -> None:
        """Append rows (``indptr`` local from 0; indices already 0-based)."""
        st = self.st
        n = len(labels)
        if n == 0:
            return
        indices = indices.astype(self.index_dtype, copy=False)
        values = values.astype(self.dtype, copy=False)
        if len(indices):
            st["max_index"] = max(st["max_index"], int(indices.max()))
            if st["all_ones"] and not np.all(values == 1):
                st["all_ones"] = False
                for s in range(0, st["nnz_done"], SHARD_ELEMS):      # back-fill the ones
                    self._data.append(np.ones(min(SHARD_ELEMS, st["nnz_done"] - s),
                                              dtype=self.dtype))
        self._indptr.append(indptr[1:] + st["nnz_done"])
        self._indices.append(indices)
        if not st["all_ones"]:
            self._data.append(values)
        self._y.append(np.asarray(labels, dtype=np.float64))
        uniq, cnt = np.unique(labels, return_counts=True)
        for u, c in zip(uniq.tolist(), cnt.tolist()):
            self._label_counts[u] = self._label_counts.get(u, 0) + c
        if len(self._label_counts) > MAX_CLASSES:
            raise FormatError(f"more than {MAX_CLASSES} distinct labels: this looks like a "
                              f"regression file, not classification", file=str(source_pos))
        self._chunk_stats(indptr, values)
        st["rows_done"] += n
        st["nnz_done"] += int(indptr[-1])

    def _chunk_stats(self, indptr: np.ndarray, values: np.ndarray) -> None:
        st = self.st
        sq = np.square(values, dtype=np.float64)
        cs = np.concatenate([[0.0], np.cumsum(sq)])
        row_sq = cs[indptr[1:]] - cs[indptr[:-1]]
        row_nnz = np.diff(indptr)
        pos = 0
        done_in_chunk = st["rows_done"] % self.chunk_rows
        while pos < len(row_nnz):
            take = min(self.chunk_rows - done_in_chunk, len(row_nnz) - pos)
            st["cur_nnz"] += int(row_nnz[pos:pos + take].sum())
            st["cur_sq"] = max(st["cur_sq"], float(row_sq[pos:pos + take].max()))
            pos += take
            done_in_chunk += take
            if done_in_chunk == self.chunk_rows:
                self._close_chunk()
                done_in_chunk = 0

    def _close_chunk(self) -> None:
        st = self.st
        st["chunk_nnz"].append(st["cur_nnz"])
        st["chunk_max_sq_norm"].append(st["cur_sq"])
        st["cur_nnz"], st["cur_sq"] = 0, 0.0

    # -- progress and finishing -------------------------------------------------------
    def save_progress(self, input_state) -> None:
        """Flush everything and record a resume point (``input_state`` is JSON-able)."""
        for ap in (self._indptr, self._indices, self._data, self._y):
            ap.flush()
        self.st["input"] = input_state
        self.st["labels"] = {repr(k): v for k, v in self._label_counts.items()}
        self._write_attrs(complete=False)

    def _attrs(self, *, complete: bool, extra: dict | None = None) -> dict:
        attrs = {"format_version": FORMAT_VERSION, "complete": complete,
                 "chunk_rows": self.chunk_rows, "options": self.options, "source": self.source}
        if not complete:
            attrs["progress"] = self.st
        if extra:
            attrs.update(extra)
        return seal(attrs) if complete else attrs

    def _write_attrs(self, *, complete: bool, extra: dict | None = None) -> None:
        self.group.attrs[ATTRS_KEY] = self._attrs(complete=complete, extra=extra)

    @staticmethod
    def _array_meta_crcs(fs, path: str, binary_values: bool) -> dict:
        """CRC-32C of each array's final ``zarr.json`` (checked by the reader)."""
        names = ["indptr", "indices", "y"] + ([] if binary_values else ["data"])
        return {name: crc32c(fs.cat_file(join_url(path, name, "zarr.json"))) for name in names}

    def finish(self, *, n_features: int | None = None, task: str = "auto", source_name="input",
               extra_source: dict | None = None, n_underflow: int = 0):
        """Encode labels, drop ``data`` if all ones, and mark the store complete.

        ``n_underflow`` (recorded) counts the input's non-zero values that the store's dtype
        holds as 0."""
        t0 = time.perf_counter()
        for ap in (self._indptr, self._indices, self._data, self._y):
            ap.flush()
        st = self.st
        n_rows, nnz = st["rows_done"], st["nnz_done"]
        if n_rows == 0:
            raise FormatError("empty input: no rows (only blank or comment lines)",
                              file=source_name)
        if st["rows_done"] % self.chunk_rows:
            self._close_chunk()
        self.options.setdefault("task", task)
        self.options.setdefault("n_features", None if n_features is None else int(n_features))
        if n_features is None:
            n_features = st["max_index"] + 1
        task, classes = plan_labels(np.array(list(self._label_counts)), task=task,
                                    source=source_name)
        self._encode_y(n_rows, task, classes)
        fs, path = url_to_fs(self.url, self.storage_options)
        binary_values = bool(st["all_ones"]) and nnz > 0
        if binary_values:
            fs.rm(join_url(path, "data"), recursive=True)
        fs.rm(join_url(path, "y_raw"), recursive=True)
        source = dict(self.source)
        source.update(extra_source or {})
        meta = {
            "n_rows": n_rows, "n_features": int(n_features), "nnz": nnz,
            "n_chunks": len(st["chunk_nnz"]), "task": task,
            "classes": classes.tolist(),
            "label_map": {label_key(c): (i if task == "multiclass" else (1 if i == len(classes) - 1 else -1))
                          for i, c in enumerate(classes)},
            "label_counts": {label_key(k): v for k, v in sorted(self._label_counts.items())},
            "binary_values": binary_values, "dtype": self.dtype.name,
            "index_dtype": self.index_dtype.name,
            "chunk_nnz": st["chunk_nnz"], "chunk_max_sq_norm": st["chunk_max_sq_norm"],
            "max_index": int(st["max_index"]), "n_underflow": int(n_underflow),
            "converter": {"version": _version(), "options": self.options},
            "store_id": uuid.uuid4().hex,
        }
        meta["array_meta_crc32c"] = self._array_meta_crcs(fs, path, binary_values)
        self.source = source
        self._write_attrs(complete=False, extra=meta)      # everything but the flag ...
        self._write_attrs(complete=True, extra=meta)       # ... then the flag, last
        log.debug("finished store %s in %.2fs", self.url, time.perf_counter() - t0)
        return open_store(self.url, storage_options=self.storage_options)

    def _encode_y(self, n_rows: int, task: str, classes: np.ndarray) -> None:
        raw = self.group["y_raw"]
        y_dtype = "float32" if task == "binary" else "int32"
        if "y" in self.group:
            del self.group["y"]
        y = self.group.create_array("y", shape=(n_rows,), dtype=y_dtype,
                                    chunks=(self._row_inner,), shards=(self._row_shard,),
                                    compressors=self.compression.codecs(), fill_value=0,
                                    config=_ARRAY_CONFIG)
        step = self._row_shard
        for s in range(0, n_rows, step):
            y[s:s + step] = apply_label_plan(raw[s:s + step], task, classes)


def _version() -> str:
    from .. import __version__
    return __version__


def _check_finite(X, dtype) -> None:
    """Refuse values that are not finite, or that ``dtype`` turns into inf."""
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore"):
        bad = np.flatnonzero(~np.isfinite(X.data.astype(dtype, copy=False)))
    if len(bad) == 0:
        return
    k = int(bad[0])
    row = int(np.searchsorted(X.indptr, k, side="right")) - 1
    col, value = int(X.indices[k]), float(X.data[k])
    if np.isfinite(value):
        raise InvalidParameterError(
            f"Input X contains a value too large for dtype('{dtype.name}'): X[{row}, {col}] = "
            f"{value!r} would be stored as inf; pass dtype='float64'.")
    raise InvalidParameterError(f"Input X contains NaN or infinity: X[{row}, {col}] = {value!r}.")


def write_store(url, X, y, *, chunk_rows: int = 65536, dtype="float32", task: str = "auto",
                overwrite: bool = False, storage_options=None,
                compression=DEFAULT_COMPRESSION):
    """Write an in-memory CSR matrix and labels as a store (tests, small data).

    Parameters
    ----------
    url : str or os.PathLike
    X : sparse matrix or array-like of shape (n_rows, n_features)
    y : array-like of shape (n_rows,)
        Original labels.
    compression : str, default "lz4"
        As ``streamsvm convert --compression`` (:class:`StoreWriter`).

    Returns
    -------
    Store
    """
    import scipy.sparse as sp
    url = str(url)
    compression = parse_compression(compression)
    X = sp.csr_matrix(X)
    X.sort_indices()
    _check_finite(X, dtype)
    prepare_output(url, storage_options, overwrite=overwrite)
    index_dtype = "int64" if X.shape[1] >= 2**31 else "int32"
    w = StoreWriter(url, chunk_rows=chunk_rows, dtype=dtype, index_dtype=index_dtype,
                    storage_options=storage_options, options={"from": "write_store"},
                    source={"files": [{"url": "<memory>"}]}, compression=compression)
    step = max(chunk_rows, 1 << 16)
    for s in range(0, X.shape[0], step):
        part = X[s:s + step]
        w.append(np.asarray(y[s:s + step], dtype=np.float64), part.indptr.astype(np.int64),
                 part.indices, part.data)
    return w.finish(n_features=X.shape[1], task=task)
