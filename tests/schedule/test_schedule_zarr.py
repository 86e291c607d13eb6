"""The scheduler on a real Zarr store (written by ``write_store``) equals the in-memory one."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from streamsvm.io import InMemoryStore
from streamsvm.kernels import csr_matvec, csr_rmatvec_add
from streamsvm.schedule import Accumulator, PassScheduler

from .helpers import a9a_problem


def _grad(block, views, args, acc):
    (w,) = args
    X = (block.indptr, block.indices, block.data)
    m = np.empty(block.n_rows)
    csr_matvec(X, w, m)
    z = np.maximum(0.0, 1.0 - block.y * m)
    acc["loss"] += float(z @ z)
    csr_rmatvec_add(X, -2.0 * block.y * z, acc["g"])


def grad_pass(sched, w):
    r = sched.map_reduce(_grad, args=(w,), order="random",
                         acc={"loss": Accumulator((), per_block=True),
                              "g": Accumulator(sched.n_features, per_block=True)})
    return float(r["loss"]), r["g"]


@pytest.mark.parametrize("block_rows", [None, 100])
def test_zarr_store_matches_in_memory_store(tmp_path, block_rows):
    write_store = pytest.importorskip("streamsvm.io").write_store
    X, y = a9a_problem(3000)
    zarr_store = write_store(tmp_path / "a9a.zarr", X, y, chunk_rows=512)
    mem_store = InMemoryStore(X, y, chunk_rows=512, dtype=np.float32)
    w = np.random.default_rng(0).standard_normal(123) * 0.3
    results = []
    for store in (zarr_store, mem_store):
        sched = PassScheduler(store, memory=0, prefetch=2, block_rows=block_rows, seed=5)
        results.append(grad_pass(sched, w))
        assert sched.passes == 1.0 and sched.store_reads == sched.n_blocks
    # zarr keeps its own I/O event-loop threads; ours are all gone
    assert not [t for t in threading.enumerate() if t.name.startswith("streamsvm-read")]
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
