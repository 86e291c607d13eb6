"""``streamsvm verify``: check every byte and every invariant of a store, listing all problems.

Training stops at the first damaged chunk it meets; ``verify`` reads the whole store once,
chunk by chunk, and reports everything it finds:

* the attributes against their checksum and against each other (``_attrs.py``, as every
  reader does when it opens the store);
* each array's ``zarr.json`` against the CRC recorded at conversion, its length and dtype;
* every shard index and every inner chunk against its CRC-32C; missing shard files;
  chunks that do not decode to their size;
* the CSR structure: ``indptr`` starting at 0, non-decreasing and ending at ``nnz``,
  each chunk holding the entries the attributes record, feature ids in ``[0, n_features)``
  and strictly increasing within a row, finite values, labels that are labels of the store;
* the recorded statistics: per-chunk largest squared row norm, the largest feature id and
  the label counts.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import StoreCorruptError, StreamSVMError
from ._attrs import array_names, array_problem, label_codes, label_counts_problem
from ._direct import DirectArray
from ._store_open import open_meta
from ._urls import join_url, url_to_fs

__all__ = ["verify_store"]

MAX_LISTED = 50


class _Report:
    """Problems in the order found; one message per problem, with the chunks it affects."""

    def __init__(self, store=None):
        self.store = store
        self._chunks: dict[str, list[int]] = {}

    def add(self, message: str, chunk: int | None = None) -> None:
        chunks = self._chunks.setdefault(message, [])
        if chunk is not None and chunk not in chunks:
            chunks.append(chunk)

    @property
    def n_problems(self) -> int:
        return len(self._chunks)

    def messages(self) -> list[str]:
        out = []
        for message, chunks in list(self._chunks.items())[:MAX_LISTED]:
            out.append(message + self._where(chunks))
        return out

    def _where(self, chunks: list[int]) -> str:
        if not chunks or self.store is None:
            return ""
        lo, hi = min(chunks), max(chunks)
        rows = (self.store.chunk_bounds(lo)[0], self.store.chunk_bounds(hi)[1])
        if len(chunks) == 1:
            return f" (chunk {lo}, rows [{rows[0]}, {rows[1]}))"
        if hi - lo + 1 == len(chunks):
            return f" (chunks {lo}-{hi}, rows [{rows[0]}, {rows[1]}))"
        shown = ", ".join(str(c) for c in sorted(chunks)[:8])
        return f" ({len(chunks)} chunks: {shown}{', ...' if len(chunks) > 8 else ''})"


def verify_store(url, *, storage_options=None, progress: bool = False) -> dict:
    """Check a whole store (module doc).

    Parameters
    ----------
    url : str or os.PathLike
    storage_options : dict, optional
    progress : bool
        Show a progress bar over the chunks.

    Returns
    -------
    dict
        ``url``, ``ok`` (no problem found), ``problems`` (the first 50 messages, each naming
        the array, shard or chunk and rows), ``n_problems``, ``n_rows``, ``nnz``,
        ``n_chunks`` and ``bytes_checked`` (decoded bytes read).
    """
    url = str(url)
    rep = _Report()
    out = {"url": url, "ok": False, "problems": [], "n_problems": 0, "n_rows": None,
           "nnz": None, "n_chunks": None, "bytes_checked": 0}
    try:
        store = open_meta(url, storage_options)
    except StreamSVMError as exc:
        rep.add(str(exc))
    else:
        rep.store = store
        out.update(n_rows=store.n_rows, nnz=store.nnz, n_chunks=store.n_chunks)
        arrays = _open_arrays(store, storage_options, rep)
        out["bytes_checked"] = _check_chunks(store, arrays, rep, progress)
    out.update(problems=rep.messages(), n_problems=rep.n_problems, ok=rep.n_problems == 0)
    return out


def _open_arrays(store, storage_options, rep: _Report):
    fs, path = url_to_fs(store.url, storage_options)
    if store.binary_values and fs.exists(join_url(path, "data", "zarr.json")):
        rep.add(f"store {store.url!r} is damaged: attribute 'binary_values' is true, but the "
                f"store holds a 'data' array")
    crcs = store.meta["array_meta_crc32c"]
    arrays = {}
    for name in array_names(store.meta):
        try:
            arr = DirectArray.open(fs, join_url(path, name), where=store.url,
                                   meta_crc=crcs[name])
        except StreamSVMError as exc:
            rep.add(str(exc))
            continue
        problem = array_problem(store.meta, name, len(arr), arr.dtype)
        if problem is not None:
            rep.add(f"store {store.url!r} is damaged: {problem}")
            continue
        arrays[name] = arr
    return arrays


def _check_chunks(store, arrays: dict, rep: _Report, progress: bool) -> int:
    """Read every chunk of every array once; return the decoded bytes read."""
    bar = None
    if progress:
        from .._progress import progress_bar
        bar = progress_bar(total=store.n_chunks, unit="chunk", desc="verify")
    counts = np.zeros(len(store.meta["classes"]), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(store.meta["chunk_nnz"])]).astype(np.int64)
    max_index = np.full(1, -1, dtype=np.int64)
    nbytes = 0
    n0 = rep.n_problems
    try:
        for c in range(store.n_chunks):
            nbytes += _check_chunk(store, arrays, c, offsets, counts, max_index, rep)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    if rep.n_problems == n0 and "y" in arrays:
        problem = label_counts_problem(store.meta, counts)
        if problem is not None:
            rep.add(problem)
    if rep.n_problems == n0 and "indptr" in arrays and "indices" in arrays and \
            int(max_index[0]) != store.meta["max_index"]:
        rep.add(f"attribute 'max_index' is {store.meta['max_index']}, but the largest feature "
                f"id stored is {int(max_index[0])}")
    return nbytes


def _read(arrays, name, a, b, c, rep):
    """Entries ``[a, b)`` of array ``name``, or None (missing array, or damage recorded)."""
    if name not in arrays:
        return None
    try:
        return arrays[name][a:b]
    except StoreCorruptError as exc:
        rep.add(str(exc), c)
        return None


def _check_chunk(store, arrays, c: int, offsets, counts, max_index, rep: _Report) -> int:
    from ..kernels import csr_check
    start, stop = store.chunk_bounds(c)
    p0, p1 = int(offsets[c]), int(offsets[c + 1])         # as the attributes record
    indptr = _read(arrays, "indptr", start, stop + 1, c, rep)
    y = _read(arrays, "y", start, stop, c, rep)
    indices = _read(arrays, "indices", p0, p1, c, rep)
    data = None if store.binary_values else _read(arrays, "data", p0, p1, c, rep)
    nbytes = sum(a.nbytes for a in (indptr, y, indices, data) if a is not None)
    if indptr is not None:
        indptr = indptr.astype(np.int64)
        if indptr[0] != p0 or indptr[-1] != p1:
            rep.add(f"array 'indptr' gives the chunk entries [{indptr[0]}, {indptr[-1]}); "
                    f"attribute 'chunk_nnz' gives [{p0}, {p1})", c)
        elif indices is not None:
            code, row = csr_check(indptr - p0, indices, store.n_features, True)
            if len(indices):
                max_index[0] = max(int(max_index[0]), int(indices.max()))
            if code:
                what = {1: "array 'indptr' decreases",
                        2: f"a feature id outside [0, {store.n_features})",
                        3: "feature ids not strictly increasing"}[code]
                rep.add(f"{what} in row {start + row}", c)
            elif data is not None and np.isfinite(data).all():
                sq = np.zeros(stop - start)
                np.add.at(sq, np.repeat(np.arange(stop - start), np.diff(indptr)),
                          np.square(data, dtype=np.float64))
                _check_norm(store, c, float(sq.max()) if len(sq) else 0.0, rep)
            elif store.binary_values:
                _check_norm(store, c, float(np.diff(indptr).max()) if stop > start else 0.0,
                            rep)
    if data is not None and not np.isfinite(data).all():
        bad = int(np.flatnonzero(~np.isfinite(data))[0])
        rep.add(f"a non-finite value ({data[bad]}) in array 'data', entry {p0 + bad}", c)
    if y is not None:
        _count_labels(store, y, counts, c, rep)
    return nbytes


def _check_norm(store, c: int, got: float, rep: _Report) -> None:
    want = float(store.meta["chunk_max_sq_norm"][c])
    if not np.isclose(got, want, rtol=1e-6, atol=0.0):
        rep.add(f"largest squared row norm {got:.9g}, attribute 'chunk_max_sq_norm' records "
                f"{want:.9g}", c)


def _count_labels(store, y, counts, c: int, rep: _Report) -> None:
    """Add the rows of chunk ``c`` holding each class's code (``label_codes``) to
    ``counts``; report a value that codes no class."""
    if store.task == "binary":
        codes = label_codes(store.meta)
        ok = np.isin(y, codes)
        counts += [np.count_nonzero(y == v) for v in codes]
    else:
        ok = (y >= 0) & (y < len(counts))
        counts += np.bincount(y[ok], minlength=len(counts))[:len(counts)]
    if not ok.all():
        rep.add(f"array 'y' holds {y[~ok][0]!r}, which is no label of this store", c)
