"""dcd's disk slab: the active rows, resident on scratch disk, swept instead of the store."""

from __future__ import annotations

import copy
import os
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.exceptions import ConvergenceWarning, OutputNotWritableError
from streamsvm.io import InMemoryStore
from streamsvm.schedule import PassScheduler
from streamsvm.solvers._driver import run
from streamsvm.solvers.dcd import DCDSolver

from ..conftest import data_file

sk = pytest.importorskip("sklearn.datasets")


@pytest.fixture(scope="module")
def a9a_part():
    X, y = sk.load_svmlight_file(str(data_file("a9a/a9a")), n_features=123)
    return sp.csr_matrix(X[:6000]), y[:6000]


def _solve(X, y, memory="100KB", state=None, snapshots=None, **kw):
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=1000), memory=memory, block_rows=250)
    kw.setdefault("loss", "hinge")
    kw.setdefault("tol", 1e-4)
    kw.setdefault("max_passes", 500)
    save = None
    if snapshots is not None:
        def save(arrays, meta):
            snapshots.append((copy.deepcopy(arrays), copy.deepcopy(meta)))
    solver = DCDSolver(**kw)
    try:
        res = run(solver, sched, state=state, checkpoint=save, every_passes=1)
        scratch = sched._scratch.path
        files = os.listdir(scratch) if scratch and os.path.isdir(scratch) else []
    finally:
        solver.close()
        sched.close()
    return res, files


def _kinds(res):
    return [h["kind"] for h in res.history]


def test_disk_slab_reaches_the_same_optimum_in_fewer_passes(a9a_part):
    X, y = a9a_part
    res, files = _solve(X, y)
    modes = _kinds(res)
    assert res.converged and "disk" in modes and "slab" not in modes
    # no slab file is left once the run is over (only the spilled states, if any)
    assert not [f for f in files if f.startswith("resident-")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        streamed, _ = _solve(X, y, disk_slab=False, max_passes=150)
    assert "disk" not in _kinds(streamed)
    # without it, every sweep is a streamed pass: more passes (or none certified in 150)
    assert res.passes < streamed.passes
    # the same optimum as in RAM (both certified within 1e-4)
    ref, _ = _solve(X, y, memory="1GB")
    assert ref.converged and "disk" not in _kinds(ref)
    assert abs(res.primal - ref.primal) <= 2e-4 * ref.primal
    # a disk sweep reads only the slab: fewer MB than a streamed pass
    stream_mb = max(h["mb_read"] for h in res.history if h["kind"] == "stream")
    disk_mb = [h["mb_read"] for h in res.history if h["kind"] == "disk"]
    assert disk_mb and max(disk_mb) < 0.6 * stream_mb


def test_resume_inside_the_disk_slab_is_bit_identical(a9a_part):
    X, y = a9a_part
    snaps = []
    full, _ = _solve(X, y, snapshots=snaps)
    in_disk = [s for s in snaps if s[1]["solver_meta"]["rows"]["where"] == "disk"]
    assert len(in_disk) >= 2
    for arrays, meta in (in_disk[0], in_disk[len(in_disk) // 2]):
        resumed, _ = _solve(X, y, state=(arrays, meta))
        np.testing.assert_array_equal(resumed.coef, full.coef)
        assert resumed.passes == full.passes and resumed.n_iter == full.n_iter


def test_full_scratch_disk_is_a_warning_not_a_failure(a9a_part, monkeypatch, caplog):
    """A write error (disk full) drops the disk slab for the rest of the run; training goes
    on with streamed passes and reaches the same optimum."""
    from streamsvm.schedule import _slabs
    X, y = a9a_part
    calls = {"n": 0}
    real = _slabs.DiskWriter._write_parts

    def full(self, parts):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(28, "No space left on device")
        return real(self, parts)
    monkeypatch.setattr(_slabs.DiskWriter, "_write_parts", full)
    with caplog.at_level("WARNING"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res, files = _solve(X, y, max_passes=60)
    assert "cannot write the disk slab" in caplog.text
    assert "disk" not in _kinds(res)
    assert not [f for f in files if f.startswith("resident-")]


def test_a_slab_that_cannot_fit_the_scratch_disk_is_not_begun(a9a_part, monkeypatch, caplog):
    """The free space is checked before collecting: no file is written, the warning names
    the scratch directory and the bytes needed and free."""
    from streamsvm.schedule import _resident, _slabs
    X, y = a9a_part
    monkeypatch.setattr(_resident, "free_bytes", lambda path: 1000)
    opened = []
    monkeypatch.setattr(_slabs.DiskWriter, "__init__",
                        lambda self, *a, **k: opened.append(1))
    with caplog.at_level("WARNING"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res, files = _solve(X, y, max_passes=60)
    assert not opened and "disk" not in _kinds(res)
    assert re.search(r"cannot write the disk slab to the scratch directory \(scratch "
                     r"directory '.+': [\d.]+ [kM]B needed for the disk slab of resident "
                     r"rows, 1 kB free;", caplog.text)


def test_a_full_disk_when_the_slab_is_closed_is_a_warning(a9a_part, monkeypatch, caplog):
    """The last buffered writes reach the disk when the files are closed: a full disk
    there drops the slab as a failed write does."""
    from streamsvm.schedule import _slabs
    X, y = a9a_part
    real = _slabs.DiskWriter._close

    def full(self):
        real(self)
        if not self.failed:
            raise OSError(28, "No space left on device")
    monkeypatch.setattr(_slabs.DiskWriter, "_close", full)
    with caplog.at_level("WARNING"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res, files = _solve(X, y, max_passes=60)
    assert "cannot write the disk slab" in caplog.text and "disk" not in _kinds(res)
    assert not [f for f in files if f.startswith("resident-")]


def test_resume_without_room_for_the_slab_is_refused_with_the_numbers(a9a_part, monkeypatch):
    import streamsvm._scratch as scratch
    X, y = a9a_part
    snaps = []
    _solve(X, y, snapshots=snaps)
    arrays, meta = next(s for s in snaps if s[1]["solver_meta"]["rows"]["where"] == "disk")
    monkeypatch.setattr(scratch, "free_bytes", lambda path: 1000)
    with pytest.raises(OutputNotWritableError, match=r"scratch directory '.+': [\d.]+ kB "
                                                     r"needed for the disk slab of resident "
                                                     r"rows \(\w+\), 1 kB free"):
        _solve(X, y, state=(arrays, meta))
