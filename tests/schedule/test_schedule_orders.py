"""Visiting orders, weighted schedules, block splitting, skipping and pass accounting."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from streamsvm.io import Chunk
from streamsvm.schedule import Block, PassScheduler, weighted_schedule
from streamsvm.schedule._orders import mix64

from .helpers import CountingStore, random_store


def visited(sched, order="sequential", **kw):
    return [b.id for b in sched.blocks(order, **kw)]


@pytest.fixture
def sched():
    store, _, _ = random_store(n=103, chunk_rows=10)      # 11 blocks, the last has 3 rows
    return PassScheduler(store, memory=0, prefetch=2, seed=3)


def test_sequential_visits_every_block_once(sched):
    assert sched.n_blocks == 11
    assert visited(sched) == list(range(11))
    assert sched.passes == 1.0 and sched.rows_visited == 103 and sched.blocks_visited == 11


def test_blocks_are_chunk_views_with_their_rows(sched):
    X, y = sched.store._X, sched.store._y
    for block in sched.blocks("random"):
        assert isinstance(block, Block) and isinstance(block, Chunk)
        start, stop = sched.block_bounds(block.id)
        assert (block.row_start, block.row_start + block.n_rows) == (start, stop)
        assert block.chunk == block.id
        np.testing.assert_array_equal(block.to_scipy().toarray(),
                                      X[start:stop].toarray()[:, :block.to_scipy().shape[1]])
        np.testing.assert_array_equal(block.y, y[start:stop])


def test_random_order_is_a_new_permutation_each_sweep_and_seeded(sched):
    orders = [visited(sched, "random") for _ in range(4)]
    for o in orders:
        assert sorted(o) == list(range(11))
    assert len({tuple(o) for o in orders}) == 4
    twin = PassScheduler(sched.store, memory="1GB", prefetch=0, seed=3)   # other cache, prefetch
    assert [visited(twin, "random") for _ in range(4)] == orders
    other = PassScheduler(sched.store, seed=4)
    assert visited(other, "random") != orders[0]


def test_orders_depend_on_the_sweep_index_not_on_what_ran_before(sched):
    twin = PassScheduler(sched.store, seed=3)
    visited(sched, "sequential")
    visited(twin, "cyclic")
    assert visited(sched, "random") == visited(twin, "random")


def test_cyclic_alternates_direction(sched):
    assert visited(sched, "cyclic") == list(range(11))
    assert visited(sched, "cyclic") == list(range(10, -1, -1))
    visited(sched, "sequential")                 # other sweeps in between do not count
    sched.map_reduce(lambda b, *_: None, order="random")
    assert visited(sched, "cyclic") == list(range(11))
    assert visited(sched, "cyclic") == list(range(10, -1, -1))
    assert sched.cyclic_sweeps == 4 and sched.sweeps == 6


def test_explicit_schedule_with_repeats(sched):
    order = [4, 4, 0, 10, 4, 2]
    assert visited(sched, order) == order
    assert sched.rows_visited == 3 * 10 + 10 + 3 + 10
    assert visited(sched, np.array([], dtype=np.int64)) == []


def test_weighted_schedule_counts():
    w = np.array([1.0, 0.0, 3.0, 0.5, 2.5, 0.0])
    rng = np.random.default_rng(0)
    totals = np.zeros(len(w))
    for _ in range(200):
        s = weighted_schedule(w, 50, rng)
        assert len(s) == 50 and s.dtype == np.int64
        counts = np.bincount(s, minlength=len(w))
        expected = 50 * w / w.sum()
        assert np.all((counts == np.floor(expected)) | (counts == np.ceil(expected)))
        assert counts[1] == counts[5] == 0
        totals += counts
    np.testing.assert_allclose(totals / 200, 50 * w / w.sum(), atol=0.15)


def test_weighted_schedule_is_shuffled_and_reproducible(sched):
    w = np.arange(1, 12, dtype=float)
    a = weighted_schedule(w, 40, sched.rng(5))
    b = weighted_schedule(w, 40, sched.rng(5))
    np.testing.assert_array_equal(a, b)
    assert np.any(np.diff(a) < 0)                       # not sorted
    assert not np.array_equal(a, weighted_schedule(w, 40, sched.rng(6)))
    assert collections.Counter(visited(sched, a)) == collections.Counter(a.tolist())


@pytest.mark.parametrize("weights,n", [([0.0, 0.0], 3), ([1.0, -1.0], 3), ([1.0, np.nan], 3),
                                       ([[1.0]], 3), ([1.0], -1), ([1.0], 2.5)])
def test_weighted_schedule_rejects(weights, n):
    with pytest.raises(ValueError):
        weighted_schedule(weights, n, np.random.default_rng(0))


def test_active_mask_skips_blocks_without_reading_or_counting(sched):
    store = CountingStore(sched.store)
    s = PassScheduler(store, memory=0)
    active = np.zeros(11, dtype=bool)
    active[[1, 3, 5, 7, 9]] = True
    assert sorted(visited(s, "random", active=active)) == [1, 3, 5, 7, 9]
    assert visited(s, "sequential", active=active) == [1, 3, 5, 7, 9]
    assert sorted(c for c, _, _ in store.reads) == sorted([1, 3, 5, 7, 9] * 2)
    assert s.passes == pytest.approx(2 * 50 / 103)


def test_half_the_blocks_is_half_a_pass():
    store, _, _ = random_store(n=100, chunk_rows=10)
    sched = PassScheduler(store)
    for _ in sched.blocks([0, 1, 2, 3, 4]):
        pass
    assert sched.passes == 0.5
    active = np.arange(10) % 2 == 0
    sched.map_reduce(lambda b, *_: None, order="random", active=active)
    assert sched.passes == 1.0


def test_abandoned_sweep_counts_only_rows_handed_out(sched):
    it = sched.blocks()
    next(it), next(it)
    it.close()
    assert sched.rows_visited == 20 and sched.blocks_visited == 2
    assert sched.sweeps == 1


@pytest.mark.parametrize("chunk_rows,block_rows", [(10, 3), (10, 10), (10, 25), (7, 1), (100, 16)])
def test_block_rows_split_covers_every_row_once(chunk_rows, block_rows):
    store, X, y = random_store(n=103, chunk_rows=chunk_rows)
    sched = PassScheduler(store, block_rows=block_rows, memory=0)
    chunk_sizes = store.chunk_sizes()
    expected = sum(-(-int(s) // min(block_rows, int(s))) for s in chunk_sizes)
    assert sched.n_blocks == expected
    assert sched.block_sizes.sum() == 103 and sched.block_sizes.max() <= block_rows
    covered = np.zeros(103, dtype=int)
    for block in sched.blocks("random"):
        covered[block.row_start:block.row_start + block.n_rows] += 1
        c_start, c_stop = store.chunk_bounds(block.chunk)
        assert c_start <= block.row_start and block.row_start + block.n_rows <= c_stop
        dense = X[block.row_start:block.row_start + block.n_rows].toarray()
        got = np.zeros_like(dense)
        for i in range(block.n_rows):
            sl = slice(block.indptr[i], block.indptr[i + 1])
            got[i, block.indices[sl]] = block.data[sl]
        np.testing.assert_array_equal(got, dense)
    np.testing.assert_array_equal(covered, 1)
    assert sched.passes == 1.0


def test_split_blocks_decode_each_chunk_once():
    """Blocks of one chunk visited together share one decode of the chunk."""
    store, _, _ = random_store(n=103, chunk_rows=10)
    counting = CountingStore(store)
    sched = PassScheduler(counting, block_rows=4, memory=0)
    rows = sum(b.n_rows for b in sched.blocks())
    assert rows == 103 and sched.n_blocks == 11 * 3 - 2
    assert counting.n_reads == store.n_chunks
    assert sum(stop - start for _, start, stop in counting.reads) == 103


def test_block_rng_differs_per_visit_and_replays():
    store, _, _ = random_store()
    perms = []
    for _ in range(2):
        sched = PassScheduler(store, seed=9)
        perms.append([sched.block_rng(b).permutation(b.n_rows).tolist()
                      for b in sched.blocks([2, 2, 5])])
    assert perms[0] == perms[1]
    assert perms[0][0] != perms[0][1]          # the same block visited twice
    with pytest.raises(ValueError, match="block_rng"):
        sched.block_rng(store.read_chunk(0))


def test_block_seed_differs_per_visit_and_replays():
    store, _, _ = random_store()
    seeds = []
    for _ in range(2):
        sched = PassScheduler(store, seed=9)
        seeds.append([sched.block_seed(b) for b in sched.blocks([2, 2, 5])])
        seeds[-1] += [sched.block_seed(b) for b in sched.blocks([2])]    # next sweep
    assert seeds[0] == seeds[1]
    assert len(set(seeds[0])) == 4 and all(0 <= s < 2 ** 64 for s in seeds[0])
    other = PassScheduler(store, seed=10)
    assert [other.block_seed(b) for b in other.blocks([2])][0] != seeds[0][0]
    with pytest.raises(ValueError, match="block_seed"):
        sched.block_seed(store.read_chunk(0))


def test_mix64_is_splitmix64():
    # one key: SplitMix64's first output for that seed (Vigna's reference: seed 0 gives
    # 0xE220A8397B1DCDAF)
    assert mix64(0) == 0xE220A8397B1DCDAF
    assert mix64(1, 2) != mix64(2, 1)
    assert mix64(2 ** 64 + 5) == mix64(5)      # keys are taken modulo 2**64
