"""The worker's side of the dask backend (``schedule/_dask_worker.py``) in one process, no
cluster: a fused pass's block and its states kept between passes, and what a kernel derives
from the block's rows kept with it (``Block.derived``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from streamsvm.io import open_store, write_store
from streamsvm.schedule._blocks import BlockLayout
from streamsvm.schedule._dask_worker import (_CONTEXTS, _context, _fused_block, _joined_state,
                                             worker_drop, worker_put_rows, worker_set_state,
                                             worker_take_rows)

_SPEC = ("alpha", "float64", 2, 0.0)


def _worker(tmp_path, key):
    X = sp.random(300, 8, density=0.5, format="csr", random_state=0)
    y = np.where(np.arange(300) % 3, 1.0, -1.0)
    store = open_store(write_store(tmp_path / "s.zarr", X, y, chunk_rows=100).url)
    layout = BlockLayout.from_store(store, 50)
    return store, layout, _context(key, store, layout, 64 << 20)


def test_a_fused_pass_keeps_its_states_as_one_array_the_blocks_views_of_it(tmp_path):
    key = ("test-joined", 1)
    try:
        _, layout, ctx = _worker(tmp_path, key)
        ids = (1, 2, 4)
        sizes = [int(layout.sizes[b]) for b in ids]
        worker_put_rows(key, _SPEC, {2: (sizes[1], np.array([3]), np.array([[7.0, 8.0]]))})
        whole = _joined_state(ctx, _SPEC, ids, sizes)
        assert whole.shape == (sum(sizes), 2)
        np.testing.assert_array_equal(whole[sizes[0] + 3], [7.0, 8.0])    # (kept)
        whole[0] = 5.0                  # a kernel's writes are the blocks' own
        whole[-1] = 6.0
        got = worker_take_rows(key, _SPEC, {1: (sizes[0], np.array([0])),
                                            4: (sizes[2], np.array([sizes[2] - 1]))})
        np.testing.assert_array_equal(got[1], [[5.0, 5.0]])
        np.testing.assert_array_equal(got[4], [[6.0, 6.0]])
        # the next fused pass over the same blocks: the same array, no copy
        assert _joined_state(ctx, _SPEC, ids, sizes) is whole
        # rows written from outside (a resume, the client's copy) land in it
        worker_put_rows(key, _SPEC, {4: (sizes[2], np.array([0]), np.array([[1.0, 2.0]]))})
        np.testing.assert_array_equal(whole[sizes[0] + sizes[1]], [1.0, 2.0])
        # other blocks: a new array; a block left out owns its rows again, values kept
        other = _joined_state(ctx, _SPEC, (2, 4), sizes[1:])
        assert other is not whole
        np.testing.assert_array_equal(worker_take_rows(key, _SPEC, {1: (sizes[0],
                                      np.array([0]))})[1], [[5.0, 5.0]])
        assert ctx.states["alpha"][1].base is not whole
        # a state set anew (a checkpoint's) is not the joined array any more
        worker_set_state(key, "alpha", {b: np.full((n, 2), 9.0) for b, n in zip(ids, sizes)})
        again = _joined_state(ctx, _SPEC, ids, sizes)
        assert again is not whole and (again == 9.0).all()
        worker_drop(key, "alpha")
        assert "alpha" not in ctx.joined
    finally:
        _CONTEXTS.pop(key, None)


def test_a_kept_fused_block_keeps_what_kernels_derive_from_its_rows(tmp_path):
    key = ("test-memo", 1)
    try:
        _, layout, ctx = _worker(tmp_path, key)
        one, _ = _fused_block(ctx, 64 << 20, [3, 0, 1])
        assert ctx.fused is not None and one.memo == {}
        assert one.n_rows == sum(int(layout.sizes[b]) for b in (0, 1, 3))
        calls = []

        def norms():
            calls.append(1)
            return np.diff(one.indptr).astype(np.float64)

        first = one.derived("q", norms)
        again, _ = _fused_block(ctx, 64 << 20, [1, 3, 0])       # the next pass: kept
        assert again is one and again.derived("q", norms) is first and len(calls) == 1
        # a block without a memo (a streamed one) derives at every visit
        blk = next(iter(ctx.backend.iter_blocks([2])))
        assert blk.memo is None
        blk.derived("q", norms)
        blk.derived("q", norms)
        assert len(calls) == 3
    finally:
        _CONTEXTS.pop(key, None)


class _Client:
    """A client whose own view of the cluster lists ``seen`` while the scheduler has
    ``there``."""

    def __init__(self, seen, there):
        self.seen, self.there, self.asked = seen, there, 0

    def scheduler_info(self):
        return {"workers": {w: {} for w in self.seen}}

    def run_on_scheduler(self, fn):
        self.asked += 1
        return fn(dask_scheduler=type("S", (), {"workers": {w: None for w in self.there}}))


def test_a_worker_is_lost_only_when_the_scheduler_says_so():
    """The client's copy of the scheduler's state once listed no worker for a moment during
    a pass (CI, ww's checkpoint test): a loss it shows is confirmed by asking the scheduler."""
    from streamsvm.schedule._dask import DaskBackend
    be = object.__new__(DaskBackend)
    be.client = _Client(seen=[], there=["tcp://a", "tcp://b"])
    assert be._gone(["tcp://a", "tcp://b"]) == [] and be.client.asked == 1
    be.client = _Client(seen=["tcp://a"], there=["tcp://a"])
    assert be._gone(["tcp://a", "tcp://b"]) == ["tcp://b"]
    be.client = _Client(seen=["tcp://a", "tcp://b"], there=[])
    assert be._gone(["tcp://a"]) == [] and be.client.asked == 0     # (no question asked)


def test_ww_rounds_decide_their_next_epoch_as_a_python_bool():
    """A snapshot kept in memory (to resume after a lost worker) is checked against the
    fresh solver's types: numpy's bool in ``full`` refused it (CheckpointError)."""
    from streamsvm.solvers._ww_cocoa import WestonWatkinsCocoa
    s = WestonWatkinsCocoa(C=0.1)
    s.pgsweep, s.pgfull, s.since_full = np.zeros(1), np.ones(1), 0
    s._next_round(False, np.float64(0.1), np.int64(5), 0)       # the sweep's last round
    assert type(s.full) is bool and s.full
    s._next_round(True, np.float64(0.2), np.int64(0), 1)
    assert type(s.full) is bool and s.full
