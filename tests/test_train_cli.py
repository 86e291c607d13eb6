"""train / predict / evaluate from the command line; kill-and-resume; S3 end to end."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from streamsvm.cli import main
from streamsvm.io import convert
from streamsvm.model import load_model

from .conftest import data_file

TRAIN = [sys.executable, "-m", "streamsvm.cli", "train"]


@pytest.fixture(scope="module")
def a9a_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("a9a")
    src = data_file("a9a/a9a")
    convert(str(src), str(d / "a9a.zarr"), chunk_rows=2048)
    convert(str(data_file("a9a/a9a.t")), str(d / "a9a.t.zarr"), chunk_rows=4096,
            n_features=123)
    return d


def _train_args(store, out, ckpt, *extra):
    return [str(store), "-o", str(out), "--loss", "hinge", "--tol", "1e-4", "--memory", "2MB",
            "--checkpoint", str(ckpt), "--checkpoint-every-passes", "1", "-q", *extra]


def _manifests(ckpt):
    return sorted(p for p in os.listdir(ckpt)
                  if p.startswith("manifest-") and p.endswith(".json")) \
        if os.path.isdir(ckpt) else []


def test_kill_and_resume_gives_identical_model(a9a_store, tmp_path):
    store = a9a_store / "a9a.zarr"
    ref = tmp_path / "ref.json"
    subprocess.run(TRAIN + _train_args(store, ref, tmp_path / "ck_ref"), check=True)
    n_ckpt = int(load_model(ref).summary["passes"])      # one checkpoint per pass
    assert n_ckpt > 10
    rng = random.Random(7)
    for trial in range(3):
        ckpt = tmp_path / f"ck{trial}"
        out = tmp_path / f"m{trial}.json"
        kill_at = rng.randint(2, n_ckpt // 2)
        proc = subprocess.Popen(TRAIN + _train_args(store, out, ckpt))
        while proc.poll() is None:
            names = _manifests(ckpt)
            if names and int(names[-1][len("manifest-"):-len(".json")]) >= kill_at:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.002)
        if proc.returncode == 0:
            continue                       # finished before the kill point: nothing to test
        assert not out.exists()
        if trial == 1:                     # damage the newest checkpoint: the previous is used
            newest = _manifests(ckpt)[-1]
            payload = json.loads((ckpt / newest).read_text())["payload"]
            with open(ckpt / payload, "r+b") as f:
                f.seek(100)
                f.write(b"\xff\xff\xff\xff")
        subprocess.run(TRAIN + _train_args(store, out, ckpt, "--resume"), check=True)
        assert out.read_bytes() == ref.read_bytes(), f"trial {trial}: killed at {kill_at}"


def test_sigterm_writes_checkpoint_then_resume(a9a_store, tmp_path):
    store = a9a_store / "a9a.zarr"
    ref = tmp_path / "ref.json"
    subprocess.run(TRAIN + _train_args(store, ref, tmp_path / "ck_ref"), check=True)
    ckpt, out = tmp_path / "ck", tmp_path / "m.json"
    proc = subprocess.Popen(TRAIN + _train_args(store, out, ckpt, "--checkpoint-every-passes",
                                                "1000"), stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not ckpt.exists():
        time.sleep(0.01)           # the checkpoint directory appears when training starts
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("training finished before SIGTERM arrived")
    assert proc.returncode == 130, err
    assert b"the same command continues from its checkpoint" in err
    assert _manifests(ckpt)
    subprocess.run(TRAIN + _train_args(store, out, ckpt, "--resume"), check=True)
    assert out.read_bytes() == ref.read_bytes()


def test_train_predict_evaluate(a9a_store, tmp_path, capsys):
    store, test = a9a_store / "a9a.zarr", a9a_store / "a9a.t.zarr"
    model = tmp_path / "m.json"
    assert main(["train", str(store), "-o", str(model), "--loss", "hinge", "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    for key in ("passes", "primal", "dual", "gap", "converged", "seconds"):
        assert key in summary
    assert summary["converged"] and summary["gap"] <= 1e-3
    assert main(["evaluate", str(model), str(test), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["n_rows"] == 16281 and 0.84 < ev["accuracy"] < 0.86 and ev["objective"] > 0
    # a libsvm file (not a store) gives the same numbers
    assert main(["evaluate", str(model), str(data_file("a9a/a9a.t")), "--json"]) == 0
    ev2 = json.loads(capsys.readouterr().out)
    assert ev2["accuracy"] == ev["accuracy"]
    assert ev2["objective"] == pytest.approx(ev["objective"], rel=1e-6)
    # training objective from evaluate equals the solver's primal
    assert main(["evaluate", str(model), str(store), "--json"]) == 0
    ev3 = json.loads(capsys.readouterr().out)
    assert ev3["objective"] == pytest.approx(summary["primal"], rel=1e-9)
    pred = tmp_path / "pred.txt"
    assert main(["predict", str(model), str(test), "-o", str(pred)]) == 0
    lines = pred.read_text().split()
    assert len(lines) == 16281 and set(lines) <= {"1", "-1"}
    m = load_model(model)
    y = np.array([float(v) for v in lines])
    assert np.mean(y == np.array([1.0 if "+1" in l.split()[0] or l.split()[0] == "1" else -1.0
                                  for l in data_file("a9a/a9a.t").read_text().splitlines()
                                  ])) == pytest.approx(ev["accuracy"])
    assert m.task == "binary"


@pytest.mark.filterwarnings("ignore:dcd reached max_passes")
def test_small_budget_uses_the_scratch_dir_and_cleans_it(a9a_store, tmp_path, capsys,
                                                         monkeypatch):
    """--memory too small for the RAM slab: the active rows go to a disk slab under
    --scratch-dir (removed at the end); --no-disk-slab streams the store every sweep."""
    from streamsvm.schedule import _slabs
    store, scratch = a9a_store / "a9a.zarr", tmp_path / "scratch"
    seen = []
    real = _slabs.DiskWriter.__init__

    def spy(self, sched, *a, **kw):
        real(self, sched, *a, **kw)
        seen.extend(self.paths.values())
    monkeypatch.setattr(_slabs.DiskWriter, "__init__", spy)
    args = ["train", str(store), "--loss", "hinge", "--memory", "2MB", "--json", "-q",
            "--scratch-dir", str(scratch)]
    assert main(args + ["-o", str(tmp_path / "a.json")]) == 0
    with_disk = json.loads(capsys.readouterr().out)
    assert seen and all(str(p).startswith(str(scratch)) for p in seen)
    assert scratch.is_dir() and not list(scratch.iterdir())
    n = len(seen)
    assert main(args + ["-o", str(tmp_path / "b.json"), "--no-disk-slab"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert len(seen) == n                      # no slab written
    assert with_disk["converged"] and with_disk["passes"] < streamed["passes"]
    assert load_model(tmp_path / "b.json").params["disk_slab"] is False


def test_liblinear_export_predicts_the_same(a9a_store, tmp_path):
    lib = pytest.importorskip("liblinear.liblinearutil")
    sk = pytest.importorskip("sklearn.datasets")
    store = a9a_store / "a9a.zarr"
    out = tmp_path / "m.liblinear"
    assert main(["train", str(store), "-o", str(tmp_path / "m.json"), "-q"]) == 0
    assert main(["train", str(store), "-o", str(out), "--format", "liblinear", "-q"]) == 0
    ll = lib.load_model(str(out))
    Xt, yt = sk.load_svmlight_file(str(data_file("a9a/a9a.t")), n_features=123)
    p_ll, _, _ = lib.predict(yt, Xt, ll, "-q")
    ours = load_model(tmp_path / "m.json").predict(Xt)
    assert np.mean(np.asarray(p_ll) == ours) == 1.0


def test_bad_train_parameters_exit_2(a9a_store, tmp_path, capsys):
    store = str(a9a_store / "a9a.zarr")
    out = str(tmp_path / "m.json")
    for args, needle in [(["-C", "0"], "The -C option"), (["-C", "-2"], "The -C option"),
                         (["--tol", "0"], "The --tol option"), (["--memory", "much"], "memory"),
                         (["--readers", "0"], "readers")]:
        assert main(["train", store, "-o", out, "-q", *args]) == 2
        assert needle in capsys.readouterr().err
    assert main(["train", str(tmp_path / "none.zarr"), "-o", out, "-q"]) == 2
    assert "no streamsvm store" in capsys.readouterr().err
    for bad in (["--loss", "log"], ["--solver", "sgd"]):
        with pytest.raises(SystemExit):
            main(["train", store, "-o", out, *bad])
        assert "invalid choice" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_s3_end_to_end(s3, tmp_path, capsys):
    bucket, opts = s3
    endpoint = opts["client_kwargs"]["endpoint_url"]
    so = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
          "--storage-option", f"client_kwargs.endpoint_url={endpoint}"]
    import s3fs
    fs = s3fs.S3FileSystem(**opts)
    fs.put(str(data_file("dna/dna.scale")), f"{bucket}/dna.svm")
    fs.put(str(data_file("dna/dna.scale.t")), f"{bucket}/dna.t.svm")
    assert main(["convert", f"{bucket}/dna.svm", f"{bucket}/dna.zarr", "-q", *so]) == 0
    assert main(["train", f"{bucket}/dna.zarr", "-o", f"{bucket}/model.json", "-q",
                 "--checkpoint", f"{bucket}/ckpt", "--checkpoint-every-passes", "2", *so]) == 0
    assert any("manifest-" in p for p in fs.ls(f"{bucket}/ckpt"))
    capsys.readouterr()
    assert main(["evaluate", f"{bucket}/model.json", f"{bucket}/dna.t.svm", "--json",
                 "--storage-option", "key=testing", "--storage-option", "secret=testing",
                 "--storage-option", f"client_kwargs.endpoint_url={endpoint}"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["n_rows"] == 1186 and ev["accuracy"] > 0.9
    # resuming from the S3 checkpoint of a finished run reproduces the model
    assert main(["train", f"{bucket}/dna.zarr", "-o", f"{bucket}/model2.json", "-q",
                 "--checkpoint", f"{bucket}/ckpt", "--resume", *so]) == 0
    assert fs.cat(f"{bucket}/model.json") == fs.cat(f"{bucket}/model2.json")


def test_evaluate_prints_each_class_of_a_multiclass_model(tmp_path, capsys):
    store, model = tmp_path / "dna.zarr", tmp_path / "m.json"
    convert(str(data_file("dna/dna.scale")), str(store), chunk_rows=1024)
    assert main(["train", str(store), "-o", str(model), "-q"]) == 0
    capsys.readouterr()
    test = str(data_file("dna/dna.scale.t"))
    assert main(["evaluate", str(model), test, "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert set(ev["per_class"]) == {"1", "2", "3"}
    assert sum(c["rows"] for c in ev["per_class"].values()) == ev["n_rows"] == 1186
    assert main(["evaluate", str(model), test]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith(f"accuracy {ev['accuracy']:.4f}")
    for label, c in ev["per_class"].items():      # a row per class: precision, recall, F1
        assert any(ln.split()[:5] == [label, f"{c['precision']:.4f}", f"{c['recall']:.4f}",
                                      f"{c['f1']:.4f}", f"{c['rows']:,}"] for ln in text)
