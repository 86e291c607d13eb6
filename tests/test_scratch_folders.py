"""Private scratch folders (``streamsvm-state-*``, ``streamsvm-shuffle-*``): removed when a
run ends, SIGTERM included (also while it sets up), and, when a run was killed outright,
removed by the next run unless their owner is still alive. Real processes (issue 33)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from streamsvm import _scratch

from .conftest import data_file

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="process start times from /proc (Linux)"),
              pytest.mark.filterwarnings("ignore::streamsvm.exceptions.ConvergenceWarning")]

# the CLI with a set-up that takes about 20 s (0.2 s for each 4 kB slice of dcd's flags),
# announcing it on stderr
SLOW_SETUP = """
import sys, time
from streamsvm.schedule._state import RowState
from streamsvm.cli import main
RowState.FILL_BYTES = 4096
real = RowState.drop_rows
def slow(self, lo, hi):
    if lo == 0:
        print("SETTING-UP", file=sys.stderr, flush=True)
    time.sleep(0.2)
    real(self, lo, hi)
RowState.drop_rows = slow
sys.exit(main(sys.argv[1:]))
"""

# convert --shuffle whose scatter takes 0.5 s a block, announcing it on stderr
SLOW_SHUFFLE = """
import sys, time
from streamsvm.io import _shuffle
from streamsvm.cli import main
real = _shuffle.Shuffler.scatter
def slow(self, *a):
    print("SCATTER", file=sys.stderr, flush=True)
    time.sleep(0.5)
    real(self, *a)
_shuffle.Shuffler.scatter = slow
sys.exit(main(sys.argv[1:]))
"""


def _train(store, scratch, tmp_path, script=None):
    tmp_path.mkdir(exist_ok=True)        # an output file's directory must exist
    args = ["train", str(store), "-o", str(tmp_path / "m.json"), "--memory", "3MB",
            "--max-passes", "1", "-q", "-v", "--scratch-dir", str(scratch),
            "--solver", "dcd"]                   # (dcd.alpha: the state spilled)
    cmd = [sys.executable, "-c", script, *args] if script else \
        [sys.executable, "-m", "streamsvm.cli", *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for(proc, marker: str) -> None:
    """Read the process's stderr until ``marker`` (fails if it exits first)."""
    for line in proc.stderr:
        if marker in line:
            return
    raise AssertionError(f"exited ({proc.wait()}) before {marker!r}")


def _folders(parent, prefix="streamsvm-state-"):
    return sorted(n for n in os.listdir(parent) if n.startswith(prefix))


def test_sigterm_while_setting_up_stops_at_once_and_cleans_up(many_classes_store, tmp_path):
    store = many_classes_store
    scratch = tmp_path / "scratch"
    proc = _train(store, scratch, tmp_path, SLOW_SETUP)
    try:
        _wait_for(proc, "SETTING-UP")
        assert len(_folders(scratch)) == 1                    # α spilled there
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 130
    finally:
        proc.kill()
        proc.wait()
    assert "streamsvm train: interrupted" in err and "Traceback" not in err
    assert " iter " not in err and "iter    1" not in err     # no pass was begun
    assert _folders(scratch) == [] and not (tmp_path / "m.json").exists()


def test_a_killed_runs_folder_is_swept_by_the_next_run_a_live_ones_kept(many_classes_store,
                                                                        tmp_path):
    store = many_classes_store
    scratch = tmp_path / "scratch"
    dead = _train(store, scratch, tmp_path, SLOW_SETUP)
    live = None
    try:
        _wait_for(dead, "SETTING-UP")
        left = _folders(scratch)
        dead.kill()
        dead.wait()
        assert len(left) == 1 and _folders(scratch) == left   # SIGKILL: nothing cleaned
        live = _train(store, scratch, tmp_path, SLOW_SETUP)
        _wait_for(live, "SETTING-UP")
        mine = [f for f in _folders(scratch) if f not in left]
        assert len(mine) == 1 and left[0] not in _folders(scratch)   # swept at its start
        # a run that ends normally: the live run's folder is kept, its own removed
        done = _train(store, scratch, tmp_path / "other")
        err = done.stderr.read()
        assert done.wait(timeout=120) == 0, err
        assert _folders(scratch) == mine and "left behind" not in err
    finally:
        for p in (dead, live):
            if p is not None:
                p.kill()
                p.wait()
    # live is gone too now: the next run removes its folder, saying so (-v)
    done = _train(store, scratch, tmp_path / "other")
    err = done.stderr.read()
    assert done.wait(timeout=120) == 0, err
    assert _folders(scratch) == []
    assert f"removed {scratch / mine[0]}, left behind by process {live.pid} (no longer " \
           f"running)" in err


def _convert(src, out, scratch, script):
    return subprocess.Popen([sys.executable, "-c", script, "convert", str(src), str(out),
                             "--shuffle", "-q", "--scratch-dir", str(scratch)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_convert_shuffle_folders_removed_on_sigterm_and_swept_after_sigkill(tmp_path):
    src, scratch = data_file("a9a/a9a"), tmp_path / "scratch"
    proc = _convert(src, tmp_path / "a.zarr", scratch, SLOW_SHUFFLE)
    try:
        _wait_for(proc, "SCATTER")
        assert len(_folders(scratch, "streamsvm-shuffle-")) == 1
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 130, err
    finally:
        proc.kill()
        proc.wait()
    assert "interrupted" in err and "Traceback" not in err
    assert _folders(scratch, "streamsvm-shuffle-") == []
    proc = _convert(src, tmp_path / "b.zarr", scratch, SLOW_SHUFFLE)
    try:
        _wait_for(proc, "SCATTER")
    finally:
        proc.kill()
        proc.wait()
    left = _folders(scratch, "streamsvm-shuffle-")          # SIGKILL: nothing cleaned
    assert len(left) == 1
    assert _scratch.sweep_stale(scratch) == [str(scratch / left[0])]
    assert _folders(scratch, "streamsvm-shuffle-") == []


def test_an_owner_is_gone_once_its_pid_is_dead_or_reused():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rec = _scratch.owner_record(child.pid)
        assert rec["pid"] == child.pid and rec["start"] is not None
        assert not _scratch.owner_gone(rec)
        assert _scratch.owner_gone(dict(rec, start=rec["start"] + 1))    # the pid reused
        assert not _scratch.owner_gone(dict(rec, host=rec["host"] + "-elsewhere"))
        assert not _scratch.owner_gone(dict(rec, pid=2**22 + 1, pidns="pid:[1]"))  # a container
        assert _scratch.owner_gone(dict(rec, pid=2**22 + 1))      # no such pid here
        assert _scratch.owner_gone(dict(rec, boot="rebooted"))
        assert not _scratch.owner_gone(_scratch.owner_record())          # this process
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)          # a zombie now
        assert _scratch.owner_gone(rec)
    finally:
        child.kill()
        child.wait()
    assert _scratch.owner_gone(rec)


def test_folders_without_an_owner_file_are_left_alone(tmp_path):
    (tmp_path / "streamsvm-state-abc").mkdir()
    (tmp_path / "streamsvm-shuffle-def").mkdir()
    (tmp_path / "streamsvm-shuffle-def" / _scratch.OWNER).write_text("{not json")
    assert _scratch.sweep_stale(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["streamsvm-shuffle-def", "streamsvm-state-abc"]
