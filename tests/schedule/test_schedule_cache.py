"""The decoded-block cache: what is read from the store, pass after pass."""

from __future__ import annotations

import numpy as np
import pytest

from streamsvm.schedule import PassScheduler

from .helpers import CountingStore, random_store


def sweep(sched, order="sequential"):
    for _ in sched.blocks(order):
        pass


@pytest.fixture
def store():
    s, _, _ = random_store(n=100, d=12, chunk_rows=10, density=0.5)   # 10 blocks
    return CountingStore(s)


def block_bytes(store):
    return [store.read_chunk(i).nbytes for i in range(store.n_chunks)]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_big_budget_second_pass_reads_nothing(store, prefetch):
    sched = PassScheduler(store, memory="1GB", prefetch=prefetch)
    sweep(sched, "random")
    assert store.n_reads == 10 and sched.store_reads == 10 and sched.cache_hits == 0
    assert sched.bytes_read == sum(block_bytes(store)) == sched.cache_bytes
    assert sched.fully_cached
    before = store.n_reads - 10                    # block_bytes() read 10 more directly
    for order in ["sequential", "random", "cyclic", [3, 3, 7]]:
        sweep(sched, order)
    assert store.n_reads - 10 == before + 0 and sched.store_reads == 10
    assert sched.cache_hits == 10 + 10 + 10 + 3
    assert sched.passes == pytest.approx(4.3)


@pytest.mark.parametrize("order", ["sequential", "random", "cyclic"])
def test_zero_budget_reads_every_block_every_pass(store, order):
    sched = PassScheduler(store, memory=0)
    for _ in range(3):
        sweep(sched, order)
    assert store.n_reads == sched.store_reads == 30 and sched.cache_hits == 0
    assert sched.cached_blocks == 0 and sched.cache_bytes == 0


@pytest.mark.parametrize("order", ["sequential", "cyclic", "random"])
def test_partial_budget_serves_what_fits_on_every_pass(store, order):
    sizes = block_bytes(store)
    sched = PassScheduler(store, memory=_budget(max(sizes) * 3 + _inflight(store, 2)), prefetch=2,
                           seed=4)
    sweep(sched, order)
    m = sched.cached_blocks
    assert 3 >= m >= 2 and sched.cache_bytes <= max(sizes) * 3
    hits = []
    for _ in range(4):
        h0 = sched.cache_hits
        sweep(sched, order)
        hits.append(sched.cache_hits - h0)
    assert hits == [m] * 4                         # LRU would get 0 on sequential sweeps
    assert sched.store_reads == 10 + 4 * (10 - m)


def test_cyclic_turn_blocks_come_from_cache(store):
    sizes = block_bytes(store)
    sched = PassScheduler(store, memory=_budget(sum(sizes[:2]) + _inflight(store, 0)), prefetch=0)
    sweep(sched, "cyclic")                         # ascending: blocks 0, 1 stay cached
    n0 = store.n_reads
    reads = []
    for block in sched.blocks("cyclic"):           # descending: 9 ... 2 read, 1, 0 cached
        reads.append(store.n_reads - n0)
    assert reads[-1] == reads[-2] == reads[-3] == 8
    n0 = store.n_reads
    first = []
    for block in sched.blocks("cyclic"):           # ascending again: the turn is cached
        first.append(store.n_reads - n0)
    assert first[:2] == [0, 0] and first[-1] == 8


def test_state_claims_memory_before_the_cache(store):
    sizes = block_bytes(store)
    budget = sum(sizes) + 50
    sched = PassScheduler(store, memory=_budget(budget + _inflight(store, 2)), prefetch=2)
    sweep(sched)
    assert sched.fully_cached
    alpha = sched.state("alpha", np.float64)                  # 800 bytes: in RAM ...
    assert not alpha.spilled and sched.state_bytes == 800
    assert sched.cache_bytes + sched.state_bytes <= budget    # ... evicting cached blocks
    cached = sched.cached_blocks
    assert cached < 10
    reads = sched.store_reads
    sweep(sched)
    assert sched.store_reads == reads + 10 - cached
    huge = sched.state("huge", np.float64, width=sched.memory // 800 + 1)
    assert huge.spilled and sched.cached_blocks == cached     # spilled: costs no budget
    sched.free_state("alpha")
    sweep(sched)                                              # room again: re-admitted
    reads = sched.store_reads
    sweep(sched)
    assert sched.store_reads == reads and sched.fully_cached


def test_cache_never_changes_block_values(store):
    a = PassScheduler(store, memory="1GB")
    b = PassScheduler(store, memory=0)
    for _ in range(2):
        for x, y in zip(a.blocks(), b.blocks()):
            assert x.id == y.id
            for name in ("indptr", "indices", "data", "y"):
                np.testing.assert_array_equal(getattr(x, name), getattr(y, name))


def _budget(data_bytes):
    """The memory budget whose data share (after the allocator headroom) is data_bytes."""
    return int(np.ceil(data_bytes / (1.0 - PassScheduler.ALLOCATOR_HEADROOM))) + 1


def test_data_budget_leaves_the_allocator_headroom():
    s, _, _ = random_store(n=10, d=3, chunk_rows=5, density=0.5)
    sched = PassScheduler(s, memory=1000)
    assert sched.data_budget == int(1000 * (1 - PassScheduler.ALLOCATOR_HEADROOM)) < 1000


def _inflight(store, prefetch):
    """Bytes the scheduler charges for blocks in flight (outside the cache)."""
    return PassScheduler(store, memory=0, prefetch=prefetch).inflight_bytes


def test_cached_split_blocks_do_not_pin_their_chunk(store):
    """A block cut from a chunk is cached as a compact copy, not a view of the chunk."""
    sched = PassScheduler(store, memory="1GB", block_rows=3)
    sweep(sched)
    assert sched.fully_cached
    for b in range(sched.n_blocks):
        blk = sched._backend.cache.get(b)
        if not sched._layout.whole[b]:
            assert blk.indices.base is None and blk.data.base is None
