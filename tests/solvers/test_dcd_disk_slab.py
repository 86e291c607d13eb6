"""dcd's disk slab: active rows copied to scratch files and swept instead of the store."""

from __future__ import annotations

import copy
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.exceptions import ConvergenceWarning
from streamsvm.io import InMemoryStore
from streamsvm.schedule import PassScheduler
from streamsvm.solvers._disk_slab import DiskSlabWriter, rebuild
from streamsvm.solvers.dcd import DCDSolver

from ..conftest import shared_dataset

sk = pytest.importorskip("sklearn.datasets")


@pytest.fixture(scope="module")
def a9a_part():
    X, y = sk.load_svmlight_file(str(shared_dataset("a9a/a9a")), n_features=123)
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
    try:
        res = DCDSolver(**kw).solve(sched, state=state, checkpoint=save, checkpoint_every=1)
        scratch = sched._scratch.path
        files = os.listdir(scratch) if scratch and os.path.isdir(scratch) else []
    finally:
        sched.close()
    return res, files


def test_disk_slab_reaches_the_same_optimum_in_fewer_passes(a9a_part):
    X, y = a9a_part
    res, files = _solve(X, y)
    modes = [h["mode"] for h in res.history]
    assert res.converged and "disk" in modes and "slab" not in modes
    # no slab file is left once the run is over (only the spilled states, if any)
    assert not [f for f in files if f.startswith("dcd-slab-")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        streamed, _ = _solve(X, y, disk_slab=False, max_passes=150)
    assert "disk" not in [h["mode"] for h in streamed.history]
    # without it, every sweep is a streamed pass: more passes (or none certified in 150)
    assert res.passes < streamed.passes
    # the same optimum as in RAM (both certified within 1e-4)
    ref, _ = _solve(X, y, memory="1GB")
    assert ref.converged and "disk" not in [h["mode"] for h in ref.history]
    assert abs(res.primal - ref.primal) <= 2e-4 * ref.primal
    # a disk sweep reads only the slab: fewer MB than a streamed pass
    stream_mb = max(h["mb_read"] for h in res.history if h["mode"] == "stream")
    disk_mb = [h["mb_read"] for h in res.history if h["mode"] == "disk" and not h["exact"]]
    assert disk_mb and max(disk_mb) < 0.6 * stream_mb


def test_resume_inside_the_disk_slab_is_bit_identical(a9a_part):
    X, y = a9a_part
    snaps = []
    full, _ = _solve(X, y, snapshots=snaps)
    in_disk = [s for s in snaps if s[1]["mode"] == "disk"]
    assert len(in_disk) >= 2
    for arrays, meta in (in_disk[0], in_disk[len(in_disk) // 2]):
        resumed, _ = _solve(X, y, state=(arrays, meta))
        np.testing.assert_array_equal(resumed.coef, full.coef)
        assert resumed.passes == full.passes and resumed.n_iter == full.n_iter


@pytest.mark.parametrize("unit", [False, True])
def test_rebuild_writes_the_same_files(unit, tmp_path):
    rng = np.random.default_rng(3)
    X = sp.random(500, 30, density=0.2, format="csr", random_state=rng, dtype=np.float64)
    if unit:
        X.data[:] = 1.0
    y = np.where(rng.random(500) < 0.5, 1.0, -1.0)
    store = InMemoryStore(X, y, chunk_rows=100)
    sched = PassScheduler(store, memory="1MB", block_rows=40, scratch_dir=tmp_path)
    dtypes = {"indices": np.int32, "data": np.float64, "y": None}
    w = DiskSlabWriter(sched, dtypes, unit, block_rows=60, limit=1 << 30)
    order = rng.permutation(sched.n_blocks)
    for blk in sched.read_blocks(order):               # a random block order, as a pass
        w.add(blk, rng.random(blk.n_rows) < 0.4)
    slab = w.finish()
    assert slab is not None and slab.n_blocks > 2
    assert np.all(np.diff(slab.bounds[:, 0]) > 0)
    assert np.all(slab.bounds[:, 1] - slab.bounds[:, 0] <= 60)
    again = rebuild(sched, sched.read_blocks(range(sched.n_blocks)), slab.layout(),
                    dict(dtypes, y=str(slab.dtypes["y"])), unit)
    parts = {"rows", "lens", "y", "indices"} | (set() if unit else {"data"})
    assert set(slab.paths) == set(again.paths) == parts
    for part in slab.paths:
        with open(slab.paths[part], "rb") as a, open(again.paths[part], "rb") as b:
            assert a.read() == b.read(), part
    # the blocks read back are the rows of X
    for j in range(slab.n_blocks):
        blk = slab.read_block(j)
        ref = X[blk.ids]
        np.testing.assert_array_equal(blk.indptr, ref.indptr)
        np.testing.assert_array_equal(blk.indices, ref.indices)
        if not unit:
            np.testing.assert_array_equal(blk.data, ref.data)
        np.testing.assert_array_equal(blk.y, y[blk.ids])
    assert sched.passes == 0.0 and sched.sweep == 0        # read_blocks counts nothing
    slab.delete()
    again.delete()
    paths = list(slab.paths.values()) + list(again.paths.values())
    assert not any(os.path.exists(p) for p in paths)
    sched.close()


def test_writer_gives_up_past_its_limit(tmp_path):
    X = sp.random(200, 20, density=0.3, format="csr", random_state=0)
    y = np.where(np.arange(200) % 2, 1.0, -1.0)
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=50), memory="1MB", scratch_dir=tmp_path)
    w = DiskSlabWriter(sched, {"indices": np.int32, "data": np.float64, "y": None}, False,
                       block_rows=50, limit=2000)
    for blk in sched.read_blocks(range(sched.n_blocks)):
        w.add(blk, np.ones(blk.n_rows, dtype=bool))
    assert w.failed and w.finish() is None
    assert not any(os.path.exists(p) for p in w.paths.values())
    sched.close()


def test_read_blocks_checks_ids():
    X = sp.random(20, 5, density=0.5, format="csr", random_state=0)
    sched = PassScheduler(InMemoryStore(X, np.where(np.arange(20) % 2, 1.0, -1.0), chunk_rows=5))
    with pytest.raises(ValueError, match="read_blocks"):
        list(sched.read_blocks([0, 9]))


def test_full_scratch_disk_is_a_warning_not_a_failure(a9a_part, monkeypatch, caplog):
    """A write error (disk full) drops the disk slab for the rest of the run; training goes
    on with streamed passes and reaches the same optimum."""
    from streamsvm.solvers import _disk_slab
    X, y = a9a_part
    calls = {"n": 0}
    real = _disk_slab.DiskSlabWriter._write_parts

    def full(self, parts):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(28, "No space left on device")
        return real(self, parts)
    monkeypatch.setattr(_disk_slab.DiskSlabWriter, "_write_parts", full)
    with caplog.at_level("WARNING"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res, files = _solve(X, y, max_passes=60)
    assert "cannot write the disk slab" in caplog.text
    assert "disk" not in [h["mode"] for h in res.history]
    assert not [f for f in files if f.startswith("dcd-slab-")]
