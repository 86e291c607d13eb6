"""``streamsvm verify``: check every byte and every invariant of a store, listing all problems.

Training stops at the first damaged chunk it meets; ``verify`` reads the whole store once,
chunk by chunk, and reports everything it finds:

* the attributes against their checksum, and their counts against each other;
* each array's ``zarr.json`` against the CRC recorded at conversion, and its length;
* every shard index and every inner chunk against its CRC-32C; missing shard files;
  chunks that do not decode to their size;
* the CSR structure: ``indptr`` starting at 0, non-decreasing and ending at ``nnz``,
  each chunk holding the entries the attributes record, feature ids in ``[0, n_features)``
  and strictly increasing within a row, finite values, labels that are labels of the store;
* the recorded statistics: per-chunk largest squared row norm and the label counts.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import StoreCorruptError, StreamSVMError
from ._direct import DirectArray
from ._integrity import check_attrs
from ._store import open_store, read_meta
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
        meta = read_meta(url, storage_options)
        if meta is not None:
            check_attrs(url, meta)
        store = open_store(url, storage_options=storage_options)
    except StreamSVMError as exc:
        rep.add(str(exc))
    else:
        rep.store = store
        out.update(n_rows=store.n_rows, nnz=store.nnz, n_chunks=store.n_chunks)
        if _check_counts(store, rep):
            arrays = _open_arrays(store, storage_options, rep)
            out["bytes_checked"] = _check_chunks(store, arrays, rep, progress)
    out.update(problems=rep.messages(), n_problems=rep.n_problems, ok=rep.n_problems == 0)
    return out


def _check_counts(store, rep: _Report) -> bool:
    """Whether the counts in the attributes agree (else the chunks cannot be located)."""
    n0 = rep.n_problems
    m = store.meta
    n_chunks = -(-store.n_rows // store.chunk_rows) if store.chunk_rows > 0 else -1
    if m["n_chunks"] != n_chunks:
        rep.add(f"the attributes record {m['n_chunks']} chunks; {store.n_rows} rows of "
                f"{store.chunk_rows} make {n_chunks}")
    for key in ("chunk_nnz", "chunk_max_sq_norm"):
        if len(m[key]) != m["n_chunks"]:
            rep.add(f"the attributes list {len(m[key])} values of {key!r} for {m['n_chunks']} "
                    f"chunks")
    if sum(m["chunk_nnz"]) != store.nnz:
        rep.add(f"the per-chunk entry counts add up to {sum(m['chunk_nnz'])}, not nnz = "
                f"{store.nnz}")
    if sum(m["label_counts"].values()) != store.n_rows:
        rep.add(f"the label counts add up to {sum(m['label_counts'].values())}, not "
                f"n_rows = {store.n_rows}")
    return rep.n_problems == n0


def _open_arrays(store, storage_options, rep: _Report):
    fs, path = url_to_fs(store.url, storage_options)
    names = ["indptr", "indices", "y"] + ([] if store.binary_values else ["data"])
    want = {"indptr": store.n_rows + 1, "indices": store.nnz, "data": store.nnz,
            "y": store.n_rows}
    crcs = store.meta.get("array_meta_crc32c") or {}
    arrays = {}
    for name in names:
        try:
            arr = DirectArray.open(fs, join_url(path, name), where=store.url,
                                   meta_crc=crcs.get(name))
        except StreamSVMError as exc:
            rep.add(str(exc))
            continue
        if len(arr) != want[name]:
            rep.add(f"store {store.url!r} is damaged: array {name!r} has {len(arr)} entries, "
                    f"the attributes say {want[name]}")
            continue
        arrays[name] = arr
    return arrays


def _check_chunks(store, arrays: dict, rep: _Report, progress: bool) -> int:
    """Read every chunk of every array once; return the decoded bytes read."""
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=store.n_chunks, unit="chunk", desc="verify", dynamic_ncols=True)
    classes = np.asarray(store.meta["classes"], dtype=np.float64)
    counts = np.zeros(len(classes), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(store.meta["chunk_nnz"])]).astype(np.int64)
    nbytes = 0
    n0 = rep.n_problems
    try:
        for c in range(store.n_chunks):
            nbytes += _check_chunk(store, arrays, c, offsets, counts, rep)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    if rep.n_problems == n0 and "y" in arrays:
        from ._labels import label_key
        if store.task == "binary" and len(classes) == 2:
            by_label = {label_key(classes[0]): int(counts[0]), label_key(classes[1]): int(counts[1])}
        else:
            by_label = {label_key(v): int(n) for v, n in zip(classes, counts)}
        recorded = {k: int(v) for k, v in store.meta["label_counts"].items()}
        if by_label != recorded:
            rep.add(f"the labels count {by_label}; the attributes record {recorded}")
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


def _check_chunk(store, arrays, c: int, offsets, counts, rep: _Report) -> int:
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
            rep.add(f"array 'indptr' gives the chunk entries [{indptr[0]}, {indptr[-1]}); the "
                    f"attributes' per-chunk counts give [{p0}, {p1})", c)
        elif indices is not None:
            code, row = csr_check(indptr - p0, indices, store.n_features, True)
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
        rep.add(f"largest squared row norm {got:.9g}, the attributes record {want:.9g}", c)


def _count_labels(store, y, counts, c: int, rep: _Report) -> None:
    if store.task == "binary":
        ok = np.abs(y) == 1
        if len(counts) == 2:
            counts[1] += int(np.count_nonzero(y == 1))
            counts[0] += int(np.count_nonzero(y == -1))
        else:
            counts[0] += int(np.count_nonzero(ok))
    else:
        ok = (y >= 0) & (y < len(counts))
        counts += np.bincount(y[ok], minlength=len(counts))[:len(counts)]
    if not ok.all():
        rep.add(f"array 'y' holds {y[~ok][0]!r}, which is no label of this store", c)
