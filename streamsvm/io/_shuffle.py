"""External shuffle of parsed rows with bounded memory.

Pass 1 (:meth:`Shuffler.scatter`) sends every row to one of ``n_buckets`` scratch files
on local disk (a seeded random bucket per row). Pass 2 (:meth:`Shuffler.gather`) loads
one bucket at a time into arrays allocated once, draws a seeded permutation of its rows
and yields them in pieces of about 1/32 of the budget, so the writer's queue holds
little. A bucket that turns out larger than its share of the budget
(:func:`bucket_bytes`: the budget less the pieces in flight) is split again the same way,
so the memory the shuffle holds stays within the budget whatever the input size. The
result depends only on the seed, the input, the budget and the reader's block size (not
on timing). The scratch folder (``streamsvm-shuffle-*``) is removed when the shuffle ends,
however it ends; one left by a killed process is removed by the next run
(``streamsvm._scratch``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import tempfile

import numpy as np

from .._scratch import private_dir
from ._output import write_errors

__all__ = ["Shuffler", "bucket_bytes"]

_HEADER = np.dtype([("n", "<i8"), ("nnz", "<i8")])
_PIECES = 32       # a piece of a permuted bucket: about budget / _PIECES bytes
# Pieces alive at once besides the loaded bucket: one being cut, two in the writer's queue,
# one being written and the writer's float64 row statistics (about three pieces' worth),
# plus one of slack.
_IN_FLIGHT = 8


def bucket_bytes(budget: int) -> int:
    """Memory a loaded bucket may take (its rows, row pointer and permutation): the budget
    less the permuted pieces in flight."""
    return int(budget) - _IN_FLIGHT * (int(budget) // _PIECES)


class Shuffler:
    """Scatter rows to scratch buckets, then gather them back in a random order.

    Parameters
    ----------
    n_buckets : int
    seed : int
    index_dtype, dtype : numpy dtypes of indices and values in the scratch files
    budget_bytes : int
        Memory for one loaded bucket and the permuted pieces cut from it; larger buckets
        are split recursively.
    scratch_dir : str, optional
        Parent directory of the scratch folder (default: the system temp dir).
    """

    def __init__(self, n_buckets: int, seed: int, *, index_dtype, dtype, budget_bytes: int,
                 scratch_dir: str | None = None):
        self.n_buckets = max(1, int(n_buckets))
        self.seed = int(seed)
        self.index_dtype, self.dtype = np.dtype(index_dtype), np.dtype(dtype)
        self.budget = int(budget_bytes)
        self.piece_bytes = max(1, self.budget // _PIECES)
        self.bucket_bytes = bucket_bytes(self.budget)
        self.dir = scratch_dir if scratch_dir is not None else tempfile.gettempdir()
        self._files = []
        with self._errors():      # with an owner file: a later run removes it if we die
            self.dir = private_dir("streamsvm-shuffle-", scratch_dir)
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
        _release_free_memory()

    def _gather_file(self, path: str, key: tuple):
        """Yield the rows of one bucket file, permuted; the file is removed afterwards."""
        frames = _frame_sizes(path, self.index_dtype, self.dtype)
        n = sum(fn for fn, _ in frames)
        if n == 0:
            os.remove(path)
            return
        need = _loaded_bytes(n, sum(fz for _, fz in frames), self.index_dtype, self.dtype)
        if need <= self.bucket_bytes or len(key) > 6:   # depth guard: a few huge rows
            labels, indptr, indices, values = _read_bucket(path, frames, self.index_dtype,
                                                           self.dtype)
            os.remove(path)
            perm = np.random.default_rng([self.seed, 2, *key]).permutation(n)
            step = max(1, n * self.piece_bytes // need)
            for s in range(0, n, step):
                _release_free_memory()
                yield _take_rows(perm[s:s + step], labels, indptr, indices, values)
            return
        n_sub = int(np.ceil(need / self.bucket_bytes)) + 1
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


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim      # glibc
    except (OSError, AttributeError):
        return None


def _release_free_memory() -> None:
    """Hand memory freed on the heap back to the operating system (glibc only).

    glibc keeps what the writer's threads free in their arenas for reuse rather than
    returning it, so RSS grows well past what is alive: converting 1.5 GB of text with
    ``--shuffle-memory 64MB``, the peak RSS was 319-322 MB without this call (before every
    piece and after the last) and 279-286 MB with it, for about 0.7 s more of 11 s.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _loaded_bytes(n: int, nnz: int, index_dtype, dtype) -> int:
    """Memory of a loaded bucket: labels, row pointer and permutation, indices, values."""
    return 8 * (3 * n + 1) + nnz * (index_dtype.itemsize + dtype.itemsize)


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
    """Rows ``rows`` (in that order) of a CSR block, as ``(labels, indptr, indices, values)``
    (``values`` may be empty: then the result has none either)."""
    from ..kernels import take_rows
    y, (new_indptr, out_indices, out_values) = take_rows(rows, labels, (indptr, indices, values))
    return y, new_indptr, out_indices, out_values


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


def _frame_sizes(path, index_dtype, dtype) -> list[tuple[int, int]]:
    """``(n_rows, nnz)`` of every frame of a bucket file, from the frame headers alone."""
    sizes = []
    with open(path, "rb") as f:
        while True:
            head = f.read(_HEADER.itemsize)
            if not head:
                return sizes
            h = np.frombuffer(head, dtype=_HEADER)[0]
            n, nnz = int(h["n"]), int(h["nnz"])
            sizes.append((n, nnz))
            f.seek(16 * n + nnz * (index_dtype.itemsize + dtype.itemsize), os.SEEK_CUR)


def _read_bucket(path, frames, index_dtype, dtype):
    """A whole bucket file as one CSR block, read straight into arrays allocated once."""
    n, nnz = sum(fn for fn, _ in frames), sum(fz for _, fz in frames)
    labels = np.empty(n, dtype="<f8")
    indptr = np.empty(n + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=index_dtype)
    values = np.empty(nnz, dtype=dtype)
    indptr[0] = 0
    r = p = 0
    with open(path, "rb") as f:
        for fn, fz in frames:
            f.seek(_HEADER.itemsize, os.SEEK_CUR)
            for out in (labels[r:r + fn], indptr[r + 1:r + 1 + fn], indices[p:p + fz],
                        values[p:p + fz]):
                view = memoryview(out).cast("B")
                if f.readinto(view) != len(view):
                    raise OSError(f"shuffle scratch file {path!r} is truncated")
            r, p = r + fn, p + fz
    np.cumsum(indptr[1:], out=indptr[1:])         # row lengths → row pointer, in place
    return labels, indptr, indices, values
