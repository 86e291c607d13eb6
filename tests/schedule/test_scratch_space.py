"""Scratch space for per-row state: reserved before use, refused with the numbers before any
allocation when it cannot fit, never zero-filled by hand, nothing left behind (issue 33)."""

from __future__ import annotations

import errno
import logging
import os
import re
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import streamsvm._scratch as scratch
from streamsvm._train import train
from streamsvm.exceptions import InvalidParameterError, OutputNotWritableError
from streamsvm.io import InMemoryStore
from streamsvm.schedule import PassScheduler, RowState

from .helpers import random_store


def _folders(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_spilled_state_has_its_blocks_reserved(tmp_path):
    s, _, _ = random_store(n=5000, d=5, chunk_rows=500)
    with PassScheduler(s, memory=0, scratch_dir=tmp_path) as sched:
        st = sched.state("alpha", np.float64, width=3)
        assert st.spilled
        info = os.stat(st.path)
        assert info.st_size == 5000 * 3 * 8 and info.st_blocks * 512 >= info.st_size
        # the private folder carries its owner: this process
        folder = os.path.dirname(st.path)
        assert sorted(os.listdir(folder)) == sorted([scratch.OWNER, os.path.basename(st.path)])
        assert not scratch.owner_gone(scratch.owner_record())
        np.testing.assert_array_equal(st.to_array(), 0.0)
    assert _folders(tmp_path) == []


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS from /proc (Linux)")
def test_an_initial_value_is_written_without_holding_the_pages(tmp_path, monkeypatch):
    """A 32 MB spilled state filled with ones: written slice by slice, each slice's pages
    dropped, so the process does not hold the state (it did: one write through the whole
    mapping)."""
    monkeypatch.setattr(RowState, "FILL_BYTES", 1 << 20)
    n = 4 << 20
    X = sp.csr_matrix((np.ones(2), ([0, n - 1], [0, 1])), shape=(n, 2))
    s = InMemoryStore(X, np.r_[np.ones(n // 2), -np.ones(n // 2)], chunk_rows=1 << 20)
    with PassScheduler(s, memory=0, scratch_dir=tmp_path) as sched:
        before = _rss()
        st = sched.state("flags", np.float64, fill=1.0)
        grown = _rss() - before
        assert st.spilled and grown < 8 << 20
        st.fill(np.nan)
        assert _rss() - before < 8 << 20
        assert np.isnan(st.values[::4096]).all() and np.isnan(st.values[-1])


@pytest.mark.parametrize("memory", ["1GB", 0])
def test_fill_and_load_array_by_slices(tmp_path, monkeypatch, memory):
    monkeypatch.setattr(RowState, "FILL_BYTES", 64)
    s, _, _ = random_store(n=103, d=5, chunk_rows=10)
    with PassScheduler(s, memory=memory, scratch_dir=tmp_path) as sched:
        st = sched.state("p", np.float32, width=3, fill=1.5)
        assert st.spilled == (memory == 0)
        np.testing.assert_array_equal(st.to_array(), np.full((103, 3), 1.5, np.float32))
        src = np.arange(309, dtype=np.float32).reshape(103, 3)
        st.load_array(src)
        np.testing.assert_array_equal(st.to_array(), src)


def test_a_state_that_cannot_fit_is_refused_before_anything_is_written(tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(scratch, "free_bytes", lambda path: 500)
    s, _, _ = random_store(n=103, d=5, chunk_rows=10)
    with PassScheduler(s, memory=0, scratch_dir=tmp_path / "scratch") as sched:
        with pytest.raises(OutputNotWritableError) as exc:
            sched.state("alpha", np.float64)
        assert str(exc.value) == (
            f"scratch directory {str(tmp_path / 'scratch')!r}: 824 B needed for per-row "
            f"state 'alpha' (103 rows of 8 B), 500 B free; free space there or pass "
            f"--scratch-dir (scratch_dir=) on a larger disk")
        assert exc.value.errno == errno.ENOSPC
        assert _folders(tmp_path / "scratch") == [] and sched.states == {}
        small = sched.state("flags", np.uint8)               # 103 B still fit
        assert small.spilled


def test_a_file_system_that_cannot_reserve_is_checked_by_its_free_space(tmp_path, monkeypatch,
                                                                        caplog):
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    monkeypatch.setattr(scratch, "free_bytes", lambda path: 1000)
    s, _, _ = random_store(n=103, d=5, chunk_rows=10)
    with PassScheduler(s, memory=0, scratch_dir=tmp_path) as sched, \
            caplog.at_level(logging.DEBUG, logger="streamsvm._scratch"):
        a = sched.state("a", np.float64, fill=2.0)
        assert os.path.getsize(a.path) == 824
        np.testing.assert_array_equal(a.to_array(), 2.0)
        assert "cannot reserve file space" in caplog.text
        # the sparse file's bytes still count: 824 + 824 > 1000
        with pytest.raises(OutputNotWritableError, match=r"1\.65 kB needed for per-row state "
                                                         r"'b' .* 1 kB free"):
            sched.state("b", np.float64)
        sched.free_state("a")
        assert sched.state("b", np.float64).spilled       # room again once a is freed


def _claims_rows(n_rows: int, task="binary", k=2) -> InMemoryStore:
    """A tiny store whose metadata claims ``n_rows`` rows in two chunks (nothing is read
    before the states are allocated)."""
    y = np.arange(4) % k if task == "multiclass" else np.r_[1.0, -1.0, 1.0, -1.0]
    s = InMemoryStore(sp.random(4, 3, density=1.0, format="csr", random_state=0), y,
                      chunk_rows=2)
    half = n_rows // 2
    s.meta.update(n_rows=n_rows, chunk_rows=half, n_chunks=2, nnz=3 * n_rows,
                  chunk_nnz=[3 * half, 3 * half])
    return s


@pytest.mark.parametrize("solver", ["dcd", "ww", "avsf", "alm"])
def test_a_store_claiming_1e12_rows_is_refused_before_any_allocation(tmp_path, solver):
    tracemalloc.start()
    try:
        # avsf's declared needs (a pair of blocks' visit codes, blocks of ~2·10^9 rows here)
        # are refused by the budget first, before any state; the others by the scratch disk
        with pytest.raises(InvalidParameterError if solver == "avsf" else
                           OutputNotWritableError) as exc:
            train(_claims_rows(10**12), solver=solver, memory="16MB", scratch_dir=tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    msg = str(exc.value)
    if solver == "avsf":
        assert "The 'memory' budget (16 MB) is too small for avsf" in msg
        assert peak < 16 << 20 and _folders(tmp_path) == []
        return
    m = re.fullmatch(rf"scratch directory {re.escape(repr(str(tmp_path)))}: ([\d.]+) TB "
                     r"needed for per-row state '(\w+\.[\w.]+)' \(1,000,000,000,000 rows of "
                     r"(\d+) B\), [\d.]+ [kMGT]?B free; free space there or pass "
                     r"--scratch-dir \(scratch_dir=\) on a larger disk", msg)
    assert m, msg
    assert float(m.group(1)) == pytest.approx(int(m.group(3)), rel=1e-2)    # 10^12 rows
    assert peak < 16 << 20                           # nothing O(n_rows) was allocated
    assert _folders(tmp_path) == []


def test_a_ram_state_that_cannot_be_allocated_is_an_error_naming_it(monkeypatch):
    s, _, _ = random_store(n=103, d=5, chunk_rows=10)

    def no_memory(*a, **k):
        raise MemoryError
    with PassScheduler(s, memory="1GB") as sched:
        monkeypatch.setattr(np, "empty", no_memory)
        with pytest.raises(ValueError, match=r"state 'p': this machine cannot allocate its "
                                             r"412 B in RAM; give a smaller memory budget"):
            sched.state("p", np.float32, fill=1)


def test_interrupt_is_polled_while_setting_up_only(tmp_path, monkeypatch):
    monkeypatch.setattr(RowState, "FILL_BYTES", 64)
    s, _, _ = random_store(n=103, d=5, chunk_rows=10)
    asked = []
    stop = {"now": False}

    def interrupt():
        asked.append(1)
        return stop["now"]
    with PassScheduler(s, memory=0, scratch_dir=tmp_path, interrupt=interrupt) as sched:
        sched.state("a", np.float64, fill=1.0)
        assert len(asked) > 10                       # between slices
        stop["now"] = True
        with pytest.raises(KeyboardInterrupt):
            sched.state("b", np.float64, fill=1.0)
        stop["now"] = False
        list(sched.blocks())                         # the first sweep ends the set-up
        stop["now"] = True
        n = len(asked)
        sched.state("c", np.float64, fill=1.0)       # mid-run: the driver stops between
        assert len(asked) == n                       # iterations, not here
