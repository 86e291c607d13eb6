"""External shuffle of parsed rows with bounded memory.

Pass 1 (:meth:`Shuffler.scatter`) sends every row to one of ``n_buckets`` scratch files
on local disk (a seeded random bucket per row). Pass 2 (:meth:`Shuffler.gather`) loads
one bucket at a time, permutes its rows in memory with a seeded permutation and yields
them. A bucket that turns out larger than the memory budget is split again the same
way, so peak memory stays near the budget whatever the input size. The result depends
only on the seed and the input (not on timing or block sizes of the reader).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from ._writer import write_errors

__all__ = ["Shuffler"]

_HEADER = np.dtype([("n", "<i8"), ("nnz", "<i8")])


class Shuffler:
    """Scatter rows to scratch buckets, then gather them back in a random order.

    Parameters
    ----------
    n_buckets : int
    seed : int
    index_dtype, dtype : numpy dtypes of indices and values in the scratch files
    budget_bytes : int
        Largest bucket loaded at once; larger ones are split recursively.
    scratch_dir : str, optional
        Parent directory of the scratch folder (default: the system temp dir).
    """

    def __init__(self, n_buckets: int, seed: int, *, index_dtype, dtype, budget_bytes: int,
                 scratch_dir: str | None = None):
        self.n_buckets = max(1, int(n_buckets))
        self.seed = int(seed)
        self.index_dtype, self.dtype = np.dtype(index_dtype), np.dtype(dtype)
        self.budget = int(budget_bytes)
        self.dir = scratch_dir if scratch_dir is not None else tempfile.gettempdir()
        self._files = []
        with self._errors():
            if scratch_dir is not None:
                os.makedirs(scratch_dir, exist_ok=True)
            self.dir = tempfile.mkdtemp(prefix="streamsvm-shuffle-", dir=scratch_dir)
        try:
            with self._errors():
                for k in range(self.n_buckets):
                    self._files.append(open(os.path.join(self.dir, f"b{k:05d}"), "wb"))
        except BaseException:
            self.close()
            raise
        self.rows_in = 0

    def _errors(self):
        """Disk errors on the scratch files as a StoreWriteError naming the directory."""
        return write_errors(f"the shuffle's scratch files in {self.dir!r}",
                            hint="; free space there or pass --scratch-dir (scratch_dir=) "
                                 "on a larger disk")

    def close(self) -> None:
        """Close and remove the scratch files, even after a write error (a full disk)."""
        try:
            for f in self._files:
                try:
                    f.close()
                except OSError:      # flushing to a full disk: removed below anyway
                    pass
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- pass 1 ----------------------------------------------------------------------
    def scatter(self, block_index: int, labels, indptr, indices, values) -> None:
        """Send the rows of one parsed block to their buckets."""
        rng = np.random.default_rng([self.seed, 1, block_index])
        bucket = rng.integers(0, self.n_buckets, size=len(labels))
        with self._errors():
            _write_by_bucket(self._files, bucket, self.n_buckets, labels, indptr,
                             indices.astype(self.index_dtype, copy=False),
                             values.astype(self.dtype, copy=False))
        self.rows_in += len(labels)

    # -- pass 2 ----------------------------------------------------------------------
    def gather(self):
        """Yield ``(labels, indptr, indices, values)`` bucket by bucket, rows permuted."""
        with self._errors():
            for f in self._files:
                f.close()
            for k in range(self.n_buckets):
                path = os.path.join(self.dir, f"b{k:05d}")
                yield from self._gather_file(path, (k,))

    def _gather_file(self, path: str, key: tuple):
        """Yield the rows of one bucket file, permuted; the file is removed afterwards."""
        size = os.path.getsize(path)
        if size == 0:
            os.remove(path)
            return
        if size <= self.budget or len(key) > 6:   # depth guard: a few huge rows
            labels, indptr, indices, values = _read_frames(path, self.index_dtype, self.dtype)
            os.remove(path)
            perm = np.random.default_rng([self.seed, 2, *key]).permutation(len(labels))
            yield _take_rows(perm, labels, indptr, indices, values)
            return
        n_sub = int(np.ceil(size / self.budget)) + 1
        subs = [open(f"{path}.{j}", "wb") for j in range(n_sub)]
        try:
            for j, frame in enumerate(_iter_frames(path, self.index_dtype, self.dtype)):
                rng = np.random.default_rng([self.seed, 3, *key, j])
                _write_by_bucket(subs, rng.integers(0, n_sub, size=len(frame[0])), n_sub, *frame)
        finally:
            for f in subs:
                f.close()
        os.remove(path)
        for j in range(n_sub):
            yield from self._gather_file(f"{path}.{j}", key + (j,))


def _write_frame(f, labels, indptr, indices, values) -> None:
    head = np.array([(len(labels), int(indptr[-1]))], dtype=_HEADER)
    f.write(head.tobytes())
    f.write(np.ascontiguousarray(labels, dtype="<f8").tobytes())
    f.write(np.diff(indptr).astype("<i8").tobytes())
    f.write(np.ascontiguousarray(indices).tobytes())
    f.write(np.ascontiguousarray(values).tobytes())


def _write_by_bucket(files, bucket, n_buckets, labels, indptr, indices, values) -> None:
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(n_buckets + 1))
    for k in range(n_buckets):
        rows = order[bounds[k]:bounds[k + 1]]
        if len(rows):
            _write_frame(files[k], *_take_rows(rows, labels, indptr, indices, values))


def _take_rows(rows, labels, indptr, indices, values):
    """Rows ``rows`` (in that order) of a CSR block, as a new CSR block (``values`` may be
    empty: then the result has none either)."""
    from ..kernels import csr_take_rows
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    nnz = int((indptr[rows + 1] - indptr[rows]).sum())
    new_indptr = np.empty(len(rows) + 1, dtype=np.int64)
    out_indices = np.empty(nnz, dtype=indices.dtype)
    out_values = np.empty(nnz if len(values) else 0, dtype=values.dtype)
    csr_take_rows(indptr, indices, values, rows, new_indptr, out_indices, out_values)
    return labels[rows], new_indptr, out_indices, out_values


def _iter_frames(path, index_dtype, dtype):
    with open(path, "rb") as f:
        while True:
            head = f.read(_HEADER.itemsize)
            if not head:
                return
            h = np.frombuffer(head, dtype=_HEADER)[0]
            n, nnz = int(h["n"]), int(h["nnz"])
            labels = np.frombuffer(f.read(8 * n), dtype="<f8")
            lens = np.frombuffer(f.read(8 * n), dtype="<i8")
            indices = np.frombuffer(f.read(index_dtype.itemsize * nnz), dtype=index_dtype)
            values = np.frombuffer(f.read(dtype.itemsize * nnz), dtype=dtype)
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(lens, out=indptr[1:])
            yield labels, indptr, indices, values


def _read_frames(path, index_dtype, dtype):
    parts = list(_iter_frames(path, index_dtype, dtype))
    labels = np.concatenate([p[0] for p in parts])
    lens = np.concatenate([np.diff(p[1]) for p in parts])
    indptr = np.zeros(len(labels) + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    return (labels, indptr, np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]))
