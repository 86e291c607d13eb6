"""``streamsvm train`` checks its outputs before the first pass, turns a failing checkpoint
write into an error naming the last good checkpoint, and recognises its store on resume by
the id written at conversion, not by the path naming it (issue 10, "Nothing silent")."""

from __future__ import annotations

import errno
import json
import os
import shutil

import numpy as np
import pytest

import streamsvm as ss
import streamsvm.schedule as schedule
from streamsvm.cli import main
from streamsvm.exceptions import ConvergenceWarning
from streamsvm._train import _store_identity
from streamsvm.exceptions import CheckpointError, OutputNotWritableError
from streamsvm.io import Store, convert, open_store

from .conftest import data_file


@pytest.fixture(scope="module")
def dna_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("dna")
    convert(str(data_file("dna/dna.scale")), str(d / "dna.zarr"), chunk_rows=256)
    return d / "dna.zarr"


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if a PassScheduler (and so a pass) is created."""
    def refuse(*a, **k):
        raise AssertionError("training started")
    monkeypatch.setattr(schedule, "PassScheduler", refuse)


def _manifests(ckpt):
    return sorted(n for n in os.listdir(ckpt) if n.startswith("manifest-"))


# -- 4. outputs checked before the first pass -----------------------------------------------

def test_unwritable_outputs_are_refused_before_training(dna_store, tmp_path, capsys,
                                                        no_training):
    afile = tmp_path / "afile"
    afile.write_text("")
    out = str(tmp_path / "m.json")
    for args, needles in [
        (["-o", str(tmp_path)], ["model output (-o)", str(tmp_path), "existing directory"]),
        (["-o", str(afile / "m.json")], ["model output (-o)", "afile/m.json",
                                         "Not a directory"]),
        (["-o", out, "--checkpoint", str(afile / "ck")], ["checkpoint directory",
                                                          "afile/ck", "Not a directory"]),
        (["-o", out, "--scratch-dir", str(afile)], ["scratch directory", "Not a directory"]),
    ]:
        assert main(["train", str(dna_store), "-q", *args]) == 2, args
        err = capsys.readouterr().err
        assert all(n in err for n in needles), (args, err)
        assert "Traceback" not in err
    assert not os.path.exists(out)


def test_probe_failure_names_the_os_reason(dna_store, tmp_path, capsys, monkeypatch,
                                           no_training):
    real_open = os.open

    def deny_probe(path, *a, **k):     # tests run as root: chmod would not stop a write
        if ".streamsvm-probe-" in os.fspath(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, *a, **k)
    monkeypatch.setattr(os, "open", deny_probe)
    out = tmp_path / "m.json"
    assert main(["train", str(dna_store), "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the model output (-o) '{out}': Permission denied" in err
    with pytest.raises(OutputNotWritableError, match="checkpoint directory.*Permission denied"):
        ss.LinearSVC(checkpoint=str(tmp_path / "ck")).fit(str(dna_store))
    assert isinstance(OutputNotWritableError("x"), OSError)


def test_remote_outputs_are_probed(dna_store, capsys):
    import fsspec
    fs = fsspec.filesystem("memory")
    base = "memory://probe-test"
    fs.pipe_file("/probe-test/adir/x", b"x")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(schedule, "PassScheduler", lambda *a, **k: 1 / 0)
        assert main(["train", str(dna_store), "-o", f"{base}/adir", "-q"]) == 2
    assert "existing directory" in capsys.readouterr().err
    assert main(["train", str(dna_store), "-o", f"{base}/m.json", "-q",
                 "--checkpoint", f"{base}/ck"]) == 0
    names = fs.find("/probe-test")
    assert "/probe-test/m.json" in names and not any("probe-" in n.rsplit("/", 1)[1]
                                                     for n in names)
    fs.rm("/probe-test", recursive=True)


def test_s3_output_in_a_missing_bucket_is_refused(s3, dna_store, capsys, no_training):
    bucket, opts = s3
    endpoint = opts["client_kwargs"]["endpoint_url"]
    so = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
          "--storage-option", f"client_kwargs.endpoint_url={endpoint}"]
    assert main(["train", str(dna_store), "-o", f"{bucket}-missing/m.json", "-q", *so]) == 2
    assert f"cannot write the model output (-o) '{bucket}-missing/m.json'" in \
        capsys.readouterr().err


# -- 5. a checkpoint that cannot be written ------------------------------------------------

def _fail_fsync_after(monkeypatch, n_ok):
    """os.fsync raises ENOSPC after ``n_ok`` calls (a local checkpoint save makes four)."""
    real, calls = os.fsync, [0]

    def fsync(fd):
        calls[0] += 1
        if calls[0] > n_ok:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)


def test_full_checkpoint_disk_stops_training_and_resume_continues(dna_store, tmp_path, capsys,
                                                                  monkeypatch):
    # streamed sweeps (no RAM slab), one checkpoint each: in RAM dna takes two iterations
    args = ["train", str(dna_store), "-q", "--checkpoint-every-passes", "1", "--no-slab",
            "--max-passes", "8"]
    ref = tmp_path / "ref.json"
    with pytest.warns(ConvergenceWarning):
        assert main(args + ["-o", str(ref), "--checkpoint", str(tmp_path / "ck_ref")]) == 0
    ckpt, out = tmp_path / "ck", tmp_path / "m.json"
    with monkeypatch.context() as mp:
        _fail_fsync_after(mp, 4 * 3)                # the fourth checkpoint hits a full disk
        assert main(args + ["-o", str(out), "--checkpoint", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "No space left on device" in err
    assert f"cannot write checkpoint manifest-00000004.json under {ckpt}" in err
    assert "the last good checkpoint is manifest-00000003.json" in err and "--resume" in err
    assert not out.exists()
    files = sorted(os.listdir(ckpt))
    assert _manifests(ckpt) == ["manifest-00000002.json", "manifest-00000003.json"]
    assert not [f for f in files if f.endswith(".partial") or f.startswith("ckpt-00000004")]
    with pytest.warns(ConvergenceWarning):
        assert main(args + ["-o", str(out), "--checkpoint", str(ckpt), "--resume"]) == 0
    assert out.read_bytes() == ref.read_bytes()


# -- 6. the store is recognised by its id, not its path ---------------------------------------

def test_store_id_is_written_at_conversion_and_identifies_the_store(dna_store, tmp_path):
    store = open_store(dna_store)
    assert len(store.meta["store_id"]) == 32
    ident = _store_identity(store)
    assert ident == {"n_rows": 2000, "n_features": 180, "nnz": store.nnz,
                     "store_id": store.meta["store_id"]}
    old = Store(store.url, None, {k: v for k, v in store.meta.items() if k != "store_id"})
    assert _store_identity(old) == {"n_rows": 2000, "n_features": 180, "nnz": store.nnz,
                                    "crc32": store.meta["source"]["crc32"]}


def test_resume_with_another_path_to_the_same_store(dna_store, tmp_path, monkeypatch):
    shutil.copytree(dna_store, tmp_path / "dna.zarr")
    monkeypatch.chdir(tmp_path)
    args = ["-q", "--checkpoint", "ck"]
    assert main(["train", "dna.zarr", "-o", "a.json", *args]) == 0
    assert main(["train", str(tmp_path / "dna.zarr"), "-o", "b.json", "--resume", *args]) == 0
    shutil.move("dna.zarr", "moved.zarr")        # moved: still the same store
    assert main(["train", "moved.zarr", "-o", "c.json", "--resume", *args]) == 0
    a = (tmp_path / "a.json").read_bytes()
    assert (tmp_path / "b.json").read_bytes() == a and (tmp_path / "c.json").read_bytes() == a


def test_mismatching_checkpoint_names_every_differing_parameter(dna_store, tmp_path, capsys):
    ckpt = tmp_path / "ck"
    base = ["train", str(dna_store), "-o", str(tmp_path / "m.json"), "-q", "--checkpoint",
            str(ckpt)]
    assert main(base) == 0
    newest = _manifests(ckpt)[-1]
    assert main(base + ["--resume", "-C", "2"]) == 2
    err = capsys.readouterr().err
    assert (f"checkpoint {newest} under {ckpt} was written by a run with -C 1.0; this run has "
            f"-C 2.0 — resume with the same data and parameters or use another --checkpoint "
            f"directory") in err
    assert main(base + ["--resume", "-C", "2", "--seed", "3", "--loss", "hinge"]) == 2
    err = capsys.readouterr().err
    assert ("with -C 1.0, --loss squared_hinge, --seed 0; this run has -C 2.0, --loss hinge, "
            "--seed 3") in err
    assert "{" not in err                        # no raw dict
    other = tmp_path / "other.zarr"              # converted again: another store
    convert(str(data_file("dna/dna.scale")), str(other), chunk_rows=256)
    assert main(["train", str(other), "-o", str(tmp_path / "m.json"), "-q", "--checkpoint",
                 str(ckpt), "--resume"]) == 2
    assert "store.store_id=" in capsys.readouterr().err


def test_in_memory_fit_resumes_only_on_the_same_data(tmp_path):
    from sklearn.datasets import load_svmlight_file
    X, y = load_svmlight_file(str(data_file("dna/dna.scale")))
    ckpt = str(tmp_path / "ck")
    a = ss.LinearSVC(checkpoint=ckpt).fit(X, y)
    b = ss.LinearSVC(checkpoint=ckpt).fit(X, y)          # resumes: same data
    np.testing.assert_array_equal(a.coef_, b.coef_)
    y2 = np.roll(y, 1)                                   # same shape and classes, other labels
    with pytest.raises(CheckpointError, match="store.fingerprint='[0-9a-f]{64}'; this run "
                                              "has store.fingerprint="):
        ss.LinearSVC(checkpoint=ckpt).fit(X, y2)


def test_the_estimators_follow_the_clis_checkpoint_rule(tmp_path):
    """checkpoint= as --checkpoint: the same fit again continues (resume=True, the default),
    another C is refused naming it, resume=False refuses this run's own checkpoints, and
    overwrite_checkpoint=True starts afresh."""
    from sklearn.datasets import load_svmlight_file
    X, y = load_svmlight_file(str(data_file("dna/dna.scale")))
    ckpt = str(tmp_path / "ck")
    a = ss.LinearSVC(checkpoint=ckpt).fit(X, y)
    with pytest.raises(CheckpointError, match="with C=1.0; this run has C=2.0"):
        ss.LinearSVC(checkpoint=ckpt, C=2.0).fit(X, y)
    with pytest.raises(CheckpointError, match="holds checkpoints of this same run"):
        ss.LinearSVC(checkpoint=ckpt, resume=False).fit(X, y)
    b = ss.LinearSVC(checkpoint=ckpt, C=2.0, overwrite_checkpoint=True).fit(X, y)
    assert b.model_.params["C"] == 2.0 and not np.array_equal(a.coef_, b.coef_)
    again = ss.LinearSVC(checkpoint=ckpt, C=2.0).fit(X, y)
    np.testing.assert_array_equal(again.coef_, b.coef_)


def test_class_weight_with_checkpoints(dna_store, tmp_path):
    out = tmp_path / "m.json"
    assert main(["train", str(dna_store), "-o", str(out), "-q", "--class-weight", "1=2",
                 "--checkpoint", str(tmp_path / "ck")]) == 0
    assert json.loads(out.read_text())["params"]["class_weight"] == {"1": 2.0}
