"""Read-ahead threads: ordered delivery, clean shutdown, reader errors with the block id."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm import open_store
from streamsvm.exceptions import StoreError
from streamsvm.io._writer import write_store
from streamsvm.schedule import Accumulator, PassScheduler

from .helpers import CountingStore, random_store


@pytest.fixture
def store():
    s, _, _ = random_store(n=200, chunk_rows=10)          # 20 blocks
    return s


def test_blocks_arrive_in_order_despite_random_read_times(store):
    slow = CountingStore(store, delay=0.004, seed=1)
    sched = PassScheduler(slow, memory=0, prefetch=4, readers=4, seed=2)
    twin = PassScheduler(store, memory=0, prefetch=0, seed=2)
    for _ in range(2):
        expected = [b.id for b in twin.blocks("random")]
        assert [b.id for b in sched.blocks("random")] == expected
    assert len(slow.threads) > 1
    # the reader threads, and the consumer while it would wait for them
    main = threading.current_thread().name
    assert all(name.startswith("streamsvm-read") or name == main for name in slow.threads)


def test_fewer_reader_threads_than_blocks_in_flight():
    """``threads`` < ``depth``: one thread runs the loads, yet ``depth`` are queued ahead."""
    import time
    from streamsvm.schedule._prefetch import read_ahead
    names, done = set(), []

    def load(key):
        names.add(threading.current_thread().name)
        time.sleep(0.002)
        done.append(key)
        return key * 10

    out = []
    for key, value, loaded in read_ahead(range(12), load, 4, threads=1,
                                         help_while_waiting=False):
        if key == 0:            # while the consumer works, the next 4 (not 5) are loaded
            time.sleep(0.2)
            assert sorted(done) == [0, 1, 2, 3, 4]
        out.append(value)
    assert out == [k * 10 for k in range(12)] and names == {"streamsvm-read_0"}


def test_a_consumer_that_would_wait_loads_the_next_items_itself():
    """One reader, loads slower than the consumer: the consumer runs loads no thread has
    started, every item still arrives in order with its own value, and a load's error
    raised in the consumer's thread comes at that key's turn, not before."""
    import time
    from streamsvm.schedule._prefetch import read_ahead
    main = threading.current_thread().name
    by = {}

    def load(key):
        by[key] = threading.current_thread().name
        time.sleep(0.01)
        if key == 9:
            raise OSError(f"disk error at {key}")
        return key * 10

    out = []
    with pytest.raises(OSError, match="at 9"):
        for key, value, loaded in read_ahead(range(12), load, 4, threads=1):
            out.append((key, value, loaded))
    assert out == [(k, k * 10, True) for k in range(9)]
    helped = {k for k, name in by.items() if name == main}
    assert helped and len(helped) < len(by)             # both threads loaded
    assert {name for name in by.values()} == {main, "streamsvm-read_0"}
    # without help, only the reader thread loads
    by.clear()
    assert [v for _, v, _ in read_ahead(range(6), load, 4, threads=1,
                                        help_while_waiting=False)] == [0, 10, 20, 30, 40, 50]
    assert set(by.values()) == {"streamsvm-read_0"}


def test_default_readers_leave_the_solver_a_core(store, monkeypatch):
    from streamsvm.schedule import _local
    monkeypatch.setattr(_local, "usable_cpus", lambda: 2)
    assert PassScheduler(store, memory=0, prefetch=4).readers == 1
    monkeypatch.setattr(_local, "usable_cpus", lambda: 8)
    assert PassScheduler(store, memory=0, prefetch=4).readers == 4
    assert PassScheduler(store, memory=0, prefetch=2).readers == 2
    assert PassScheduler(store, memory=0).readers == 7        # default: 8 in flight
    monkeypatch.setattr(_local, "usable_cpus", lambda: 1)
    assert PassScheduler(store, memory=0, prefetch=4).readers == 1

    class Remote:               # network reads wait, they do not compute: one per block
        url = "s3://bucket/train.zarr"
    assert _local.default_readers(Remote(), 4) == 4
    Remote.url = "file:///data/train.zarr"
    assert _local.default_readers(Remote(), 4) == 1
    with pytest.raises(ValueError, match="'readers'"):
        PassScheduler(store, memory=0, readers=0)


def test_a_store_read_from_disk_every_pass_gets_a_reader_per_cpu(tmp_path, monkeypatch):
    """A reader waiting for the disk leaves its core: one more reader than the CPU rule."""
    from streamsvm.io import _store
    from streamsvm.schedule import _local
    rng = np.random.default_rng(1)
    write_store(tmp_path / "s.zarr", sp.random(300, 20, density=0.2, format="csr",
                                               random_state=1),
                rng.choice([-1.0, 1.0], 300), chunk_rows=100)
    monkeypatch.setattr(_local, "usable_cpus", lambda: 2)
    fits = open_store(str(tmp_path / "s.zarr"))
    assert not fits.outgrows_page_cache
    assert PassScheduler(fits, memory=0, prefetch=4).readers == 1
    monkeypatch.setattr(_store, "store_outgrows_page_cache", lambda size: size > 0)
    big = open_store(str(tmp_path / "s.zarr"))
    assert big.outgrows_page_cache
    assert PassScheduler(big, memory=0, prefetch=4).readers == 2
    assert PassScheduler(big, memory=0, prefetch=1).readers == 1    # one block in flight
    assert PassScheduler(big, memory=0, prefetch=4, readers=1).readers == 1   # as asked


def test_prefetch_zero_reads_in_the_calling_thread(store):
    counting = CountingStore(store)
    sched = PassScheduler(counting, memory=0, prefetch=0)
    before = threading.active_count()
    ids = [b.id for b in sched.blocks("random")]
    assert sorted(ids) == list(range(20))
    assert counting.threads == {threading.current_thread().name}
    assert threading.active_count() == before


@pytest.mark.parametrize("how", ["close", "break", "exception", "map_reduce", "gc"])
def test_abandoned_sweep_stops_its_threads(store, how):
    slow = CountingStore(store, delay=0.002)
    sched = PassScheduler(slow, memory=0, prefetch=3)
    baseline = threading.active_count()
    if how == "close":
        it = sched.blocks()
        next(it), next(it)
        assert threading.active_count() > baseline
        it.close()
    elif how == "break":
        for block in sched.blocks("random"):
            if block.position == 2:
                break
    elif how == "exception":
        with pytest.raises(RuntimeError, match="solver bug"):
            for block in sched.blocks():
                if block.id == 5:
                    raise RuntimeError("solver bug")
    elif how == "map_reduce":
        def func(block, views, args, acc):
            if block.id == 4:
                raise ZeroDivisionError("kernel failed")
        with pytest.raises(ZeroDivisionError):
            sched.map_reduce(func)
    else:
        it = sched.blocks()
        next(it)
        del it
    assert threading.active_count() == baseline
    assert slow.n_reads <= 20


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_reader_exception_surfaces_with_the_block_id(store, prefetch):
    failing = CountingStore(store, fail_chunk=7)
    sched = PassScheduler(failing, memory=0, prefetch=prefetch)
    baseline = threading.active_count()
    seen = []
    with pytest.raises(StoreError, match=r"block 7 \(chunk 7, rows \[70, 80\)\).*OSError.*"
                                         r"disk on fire") as info:
        for block in sched.blocks():
            seen.append(block.id)
    assert seen == list(range(7))
    assert isinstance(info.value.__cause__, OSError)
    assert threading.active_count() == baseline


def test_reader_exception_with_split_blocks_names_block_and_chunk(store):
    failing = CountingStore(store, fail_chunk=3)
    sched = PassScheduler(failing, memory=0, prefetch=2, block_rows=4)
    with pytest.raises(StoreError, match=r"block 9 \(chunk 3, rows \[30, 34\)\)"):
        sched.map_reduce(lambda b, *_: None)


def test_failure_ahead_of_an_abandoned_consumer_is_not_raised(store):
    failing = CountingStore(store, fail_chunk=3)
    sched = PassScheduler(failing, memory=0, prefetch=3)
    baseline = threading.active_count()
    it = sched.blocks()
    assert [next(it).id for _ in range(2)] == [0, 1]          # block 3 is being read ahead
    it.close()
    assert threading.active_count() == baseline


def test_cached_sweeps_start_no_threads(store):
    sched = PassScheduler(store, memory="1GB", prefetch=4)
    sched.map_reduce(lambda b, *_: None)
    baseline = threading.active_count()
    counts = []
    for block in sched.blocks("random"):
        counts.append(threading.active_count())
    assert set(counts) == {baseline} and sched.cache_hits == 20


def _sq_sum(block, views, args, acc):
    acc["s"] += block.data.astype(np.float64) @ block.data


def test_results_do_not_depend_on_prefetch(store):
    out = []
    for prefetch in (0, 1, 5):
        sched = PassScheduler(CountingStore(store, delay=0.001), memory=0, prefetch=prefetch)
        out.append(float(sched.map_reduce(_sq_sum, order="random",
                                          acc={"s": Accumulator((), per_block=True)})["s"]))
    assert out[0] == out[1] == out[2]
