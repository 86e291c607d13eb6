"""PassScheduler.read_all: the whole store as one block, for solvers that hold it in RAM."""

from __future__ import annotations

import numpy as np
import pytest

from streamsvm.exceptions import StoreError
from streamsvm.io._writer import write_store
from streamsvm.schedule import PassScheduler

from .helpers import CountingStore, random_problem, random_store


def _csr_of(block):
    import scipy.sparse as sp
    return sp.csr_matrix((block.data, block.indices, block.indptr), shape=(block.n_rows, 17))


def test_read_all_equals_the_data_and_counts_bytes_not_rows():
    store, X, y = random_store(n=103, chunk_rows=10)
    sched = PassScheduler(store, memory="1GB")
    blk = sched.read_all()
    assert blk.id == -1 and blk.row_start == 0 and blk.n_rows == 103
    np.testing.assert_array_equal(_csr_of(blk).toarray(), X.toarray())
    np.testing.assert_array_equal(blk.y, y)
    assert sched.passes == 0 and sched.bytes_read == blk.nbytes
    assert sched.cached_blocks == 0                 # nothing cached


def test_read_all_from_a_zarr_store_is_one_read(tmp_path):
    X, y = random_problem(n=300, d=17)
    store = write_store(tmp_path / "s.zarr", X, y, chunk_rows=64, dtype="float64")
    counting = CountingStore(store)
    blk = PassScheduler(counting, memory="1GB").read_all()
    np.testing.assert_array_equal(_csr_of(blk).toarray(), X.toarray())
    assert counting.reads == [(-1, 0, 300)]         # one read_rows call, not 5 chunk reads


def test_read_all_errors_name_the_store(tmp_path):
    X, y = random_problem(n=300, d=17)
    store = write_store(tmp_path / "s.zarr", X, y, chunk_rows=64, dtype="float64")
    for f in (tmp_path / "s.zarr" / "indices" / "c").iterdir():
        f.write_bytes(b"garbage")
    with pytest.raises(StoreError, match="s.zarr"):
        PassScheduler(store, memory="1GB").read_all()
