"""Full disks during ``streamsvm train``, for real: a small tmpfs as the scratch directory,
the checkpoint directory or the model's directory (skipped, saying why, where mounting is
not permitted). Each ends with exit 2 and one line naming what is at fault, leaves nothing
that looks valid, and the run goes on once space is freed (issue 33)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from streamsvm.checkpoint import CheckpointManager
from streamsvm.cli import main
from streamsvm.io import convert

from .conftest import fill_disk, data_file

pytestmark = pytest.mark.filterwarnings("ignore::streamsvm.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def dna_store(tmp_path_factory):
    url = tmp_path_factory.mktemp("dna") / "dna.zarr"
    convert(str(data_file("dna/dna.scale")), str(url), chunk_rows=256)
    return url


def _pages(path) -> int:
    """Bytes ``path`` takes on a file system of 4 kB pages."""
    return -(-os.path.getsize(path) // 4096) * 4096


@pytest.mark.parametrize("solver, state, size", [("dcd", "dcd.alpha", "3.2 MB"),
                                                  ("ww", "ww.beta", "3.04 MB")])
def test_full_scratch_disk(many_classes_store, small_tmpfs, tmp_path, solver, state, size):
    scratch = small_tmpfs("4m")
    args = ["train", str(many_classes_store), "--solver", solver, "--memory", "3MB",
            "--max-passes", "2", "-q", "--scratch-dir", str(scratch)]
    ref, out = tmp_path / "ref.json", tmp_path / "m.json"
    assert main(args + ["-o", str(ref)]) == 0          # fits: spilled there, removed after
    assert os.listdir(scratch) == []
    filler = fill_disk(scratch, 1 << 20)
    # in a subprocess: a write into a mapped file on a full disk is a SIGBUS (exit 135)
    run = subprocess.run([sys.executable, "-m", "streamsvm.cli", *args, "-o", str(out),
                          "--checkpoint", str(tmp_path / "ck")], capture_output=True, text=True)
    err = run.stderr
    assert run.returncode == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.fullmatch(
        rf"streamsvm train: error: scratch directory '{re.escape(str(scratch))}': {size} "
        rf"needed for per-row state '{state}' \(20,000 rows of \d+ B\), 1\.\d+ MB free; free "
        rf"space there or pass --scratch-dir \(scratch_dir=\) on a larger disk\n", err)
    assert os.listdir(scratch) == ["filler"] and not out.exists()    # no state folder left
    filler.unlink()
    assert main(args + ["-o", str(out), "--checkpoint", str(tmp_path / "ck"), "--resume"]) == 0
    assert out.read_bytes() == ref.read_bytes()
    assert os.listdir(scratch) == []


def test_full_checkpoint_disk(dna_store, small_tmpfs, tmp_path, capsys):
    # streamed sweeps (no RAM slab), one checkpoint each pass
    args = ["train", str(dna_store), "-q", "--checkpoint-every-passes", "1", "--no-slab",
            "--max-passes", "8"]
    ref, out = tmp_path / "ref.json", tmp_path / "m.json"
    assert main(args + ["-o", str(ref), "--checkpoint", str(tmp_path / "ck_ref")]) == 0
    one = max(_pages(p) for p in (tmp_path / "ck_ref").glob("ckpt-*.bin")) + \
        max(_pages(p) for p in (tmp_path / "ck_ref").glob("manifest-*.json"))
    disk = small_tmpfs("1m")
    ckpt = disk / "ck"
    filler = fill_disk(disk, 2 * one + one // 2)       # two checkpoints fit, not a third
    assert main(args + ["-o", str(out), "--checkpoint", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "No space left on device" in err and "--resume" in err
    m = re.search(r"the last good checkpoint is (manifest-(\d+)\.json)", err)
    assert m and int(m.group(2)) >= 2
    # nothing that looks valid but is not: no partial file, no payload without its manifest
    names = sorted(os.listdir(ckpt))
    assert not [n for n in names if n.endswith(".partial")]
    seqs = {n[len("manifest-"):-len(".json")] for n in names if n.startswith("manifest-")}
    assert m.group(1) in names and max(seqs) == m.group(2)
    assert all(n.split("-")[1] in seqs for n in names if n.startswith("ckpt-"))
    assert CheckpointManager(str(ckpt)).load_latest() is not None
    assert not out.exists()
    filler.unlink()
    assert main(args + ["-o", str(out), "--checkpoint", str(ckpt), "--resume"]) == 0
    assert out.read_bytes() == ref.read_bytes()


def test_full_model_output_disk(dna_store, small_tmpfs, tmp_path, capsys):
    args = ["train", str(dna_store), "-q", "--checkpoint", str(tmp_path / "ck")]
    ref = tmp_path / "ref.json"
    assert main(["train", str(dna_store), "-q", "-o", str(ref)]) == 0
    assert os.path.getsize(ref) > 4096
    disk = small_tmpfs("1m")
    out = disk / "m.json"
    filler = fill_disk(disk, 4096)          # room for the probe at start, not for the model
    assert main(args + ["-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"cannot write the model output (-o) {str(out)!r}" in err
    assert "No space left on device" in err and "rerun the same command" in err
    assert os.listdir(disk) == ["filler"]                   # no model, no partial file
    filler.unlink()
    assert main(args + ["-o", str(out), "--resume"]) == 0
    assert out.read_bytes() == ref.read_bytes()
