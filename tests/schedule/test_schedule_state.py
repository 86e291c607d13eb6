"""Per-row state: RAM or memmap spill, views, checkpoint arrays, resumable scheduler state."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from streamsvm.exceptions import CheckpointError, InvalidParameterError
from streamsvm.kernels import csr_matvec
from streamsvm.schedule import PassScheduler, RowState

from .helpers import random_store


@pytest.fixture
def store():
    return random_store(n=103, d=11, chunk_rows=10)


@pytest.mark.parametrize("memory", ["1GB", 0])
def test_state_values_survive_sweeps(store, memory, tmp_path):
    s, X, _ = store
    sched = PassScheduler(s, memory=memory, scratch_dir=tmp_path / "scratch")
    margins = sched.state("margins", np.float64, fill=np.nan)
    counts = sched.state("visits", np.int32)
    assert isinstance(margins, RowState) and margins.spilled == (memory == 0)
    assert sched.states == {"margins": margins, "visits": counts}
    assert np.isnan(margins.to_array()).all()
    w = np.arange(11, dtype=np.float64)
    for _ in range(3):
        for block in sched.blocks("random"):
            csr_matvec((block.indptr, block.indices, block.data), w, margins.view(block))
            counts.view(block)[:] += 1
    np.testing.assert_allclose(margins.to_array(), X @ w, rtol=1e-12)
    np.testing.assert_array_equal(counts.to_array(), 3)
    if memory == 0:
        assert os.path.dirname(os.path.dirname(margins.path)) == str(tmp_path / "scratch")
        assert os.path.getsize(margins.path) == 103 * 8
        assert sched.state_bytes == 0
    else:
        assert sched.state_bytes == 103 * 8 + 103 * 4


def test_spilled_files_are_removed_on_close(store, tmp_path):
    s, _, _ = store
    with PassScheduler(s, memory=0, scratch_dir=tmp_path) as sched:
        a = sched.state("a", np.float64)
        b = sched.state("b", np.float32, width=3)
        assert os.path.exists(a.path) and os.path.exists(b.path)
        sched.free_state("a")
        assert not os.path.exists(a.path) and os.path.exists(b.path)
        with pytest.raises(InvalidParameterError, match="freed"):
            a.to_array()
    assert not os.path.exists(b.path) and os.listdir(tmp_path) == []


def test_to_array_and_load_array_round_trip(store):
    s, _, _ = store
    src = PassScheduler(s, memory="1GB")
    beta = src.state("beta", np.float64, width=2)
    for block in src.blocks():
        beta.view(block)[:] = block.row_start + np.arange(block.n_rows)[:, None] * [1.0, -1.0]
    saved = beta.to_array()
    saved_copy = saved.copy()
    beta.fill(0.0)
    np.testing.assert_array_equal(saved, saved_copy)            # to_array is a copy
    dst = PassScheduler(s, memory=0)
    restored = dst.state("beta", np.float64, width=2)
    restored.load_array(saved)
    for block in dst.blocks("random"):
        rows = np.arange(block.row_start, block.row_start + block.n_rows)
        np.testing.assert_array_equal(restored.view(block), saved[rows])
    with pytest.raises(InvalidParameterError, match="'array' parameter"):
        restored.load_array(saved[:, :1])
    with pytest.raises(InvalidParameterError, match="'array' parameter"):
        dst.state("mask", np.bool_).load_array(np.ones(103))


@pytest.mark.parametrize("kwargs,match", [
    ({"name": "", "dtype": np.float64}, "'name' parameter"),
    ({"name": "alpha", "dtype": np.float64}, "'name' parameter"),      # already exists
    ({"name": "s", "dtype": object}, "dtype"),
    ({"name": "s", "dtype": "not-a-dtype"}, "dtype"),
    ({"name": "s", "dtype": np.float64, "width": 0}, "'width' parameter"),
])
def test_state_validation(store, kwargs, match):
    sched = PassScheduler(store[0])
    sched.state("alpha", np.float64)
    with pytest.raises(InvalidParameterError, match=match):
        sched.state(**kwargs)


def test_view_rejects_foreign_rows(store):
    sched = PassScheduler(store[0])
    st = sched.state("a", np.float64)
    other, _, _ = random_store(n=300, chunk_rows=100)
    with pytest.raises(InvalidParameterError, match="outside"):
        st.view(other.read_chunk(2))


def test_values_is_a_writable_whole_view(store):
    sched = PassScheduler(store[0], memory=0)
    st = sched.state("a", np.float64)
    st.values[:] = np.arange(103)
    block = next(iter(sched.blocks([4])))
    np.testing.assert_array_equal(st.view(block), np.arange(40, 50))


def test_state_dict_round_trip_resumes_the_same_orders(store):
    s, _, _ = store
    a = PassScheduler(s, seed=7, block_rows=4)
    for order in ["random", "cyclic", "sequential"]:
        a.map_reduce(lambda b, *_: None, order=order)
    saved = json.loads(json.dumps(a.state_dict()))

    def future(sched):
        seen = []
        for order in ["random", "cyclic", "random", "cyclic"]:
            seen.append([(b.id, sched.block_rng(b).integers(1 << 30)) for b in sched.blocks(order)])
        seen.append(sched.rng(3).integers(1 << 30, size=4).tolist())
        return seen

    expected = future(a)
    b = PassScheduler(s, seed=0, block_rows=4)
    b.load_state_dict(saved)
    assert b.passes == 3.0 and b.sweeps == 3 and b.seed == 7
    assert future(b) == expected
    assert b.passes == a.passes == 7.0


@pytest.mark.parametrize("change,match", [
    ({"n_blocks": 5}, "n_blocks"), ({"block_rows": None}, "block_rows"),
    ({"version": 99}, "version"), ({"sweep": None}, "lacks sweep"),
])
def test_load_state_dict_rejects_mismatches(store, change, match):
    sched = PassScheduler(store[0], block_rows=4)
    d = sched.state_dict()
    d.update(change)
    if change.get("sweep", 0) is None:
        del d["sweep"]
    with pytest.raises(CheckpointError, match=match):
        sched.load_state_dict(d)


def test_dropping_a_spilled_states_pages_keeps_its_values(tmp_path):
    # wide rows so that blocks span whole pages: unmapped after each block, re-read after
    s, _, _ = random_store(n=3000, d=5, chunk_rows=500)
    sched = PassScheduler(s, memory=0, scratch_dir=tmp_path / "scratch")
    try:
        beta = sched.state("beta", np.float64, width=64)
        assert beta.spilled
        for sweep in range(3):
            for block in sched.blocks("random"):
                v = beta.view(block)
                v += np.arange(block.row_start, block.row_start + block.n_rows)[:, None]
                beta.drop_pages(block)
        expect = 3.0 * np.arange(3000)[:, None] * np.ones(64)
        np.testing.assert_array_equal(beta.to_array(), expect)
        other = sched.state("other", np.float64, fill=2.0)     # untouched since its fill
        other.drop_pages(next(iter(sched.blocks())))
        np.testing.assert_array_equal(other.to_array(), 2.0)
    finally:
        sched.close()


def _mapped_kb(path) -> int:
    """Resident kB of ``path``'s mappings in this process (/proc/self/smaps)."""
    kb, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" in head[3]:
                inside = len(head) > 5 and head[5] == str(path)
            elif inside and line.startswith("Rss:"):
                kb += int(head[1])
    return kb


def _touch_all(block, views, args, acc):
    """A map_reduce kernel that writes every row of its state."""
    views[0][...] += 1.0
    acc["n"] += block.n_rows


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps")
def test_passes_keep_one_blocks_pages_of_a_spilled_state(tmp_path):
    # a spilled state that every block of a pass writes: the scheduler unmaps its pages
    # block by block (in map_reduce and sweep), so they do not pile up in the process's RSS
    from streamsvm.schedule import Accumulator
    s, _, _ = random_store(n=6000, d=5, chunk_rows=500)
    sched = PassScheduler(s, memory=0, scratch_dir=tmp_path / "scratch")
    try:
        beta = sched.state("beta", np.float64, width=64)         # 3 MB, 250 kB a block
        assert beta.spilled
        r = sched.map_reduce(_touch_all, states=(beta,), acc={"n": Accumulator(())})
        assert r["n"] == 6000 and _mapped_kb(beta.path) <= 2 * 256 + 8
        sched.sweep(lambda block, views: views[0].__iadd__(1.0), over="store",
                    states=(beta,))
        assert _mapped_kb(beta.path) <= 2 * 256 + 8
        np.testing.assert_array_equal(beta.to_array(), 2.0)
    finally:
        sched.close()


def test_a_state_that_does_not_fit_beside_the_held_needs_is_spilled(store, tmp_path):
    from streamsvm.schedule import Need
    s, _, _ = store
    sched = PassScheduler(s, memory="4MB", prefetch=0, scratch_dir=tmp_path / "scratch")
    try:
        room = sched.data_budget - sched.inflight_bytes
        sched.check_budget("test", {"most of the budget": Need((room - 2000,), np.uint8)})
        small = sched.state("small", np.float64)              # 824 B: beside them in RAM
        big = sched.state("big", np.float64, width=4)         # 3.3 kB: not
        assert not small.spilled and big.spilled
        assert sched.cache_bytes == 0                         # nothing cached beyond them
    finally:
        sched.close()
