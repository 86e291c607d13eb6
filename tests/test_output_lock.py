"""One writer per output (issue 33, item 5): ``OutputLock`` locally (flock) and on S3 (a
conditional-create marker on a real moto server), and two real ``convert``s to one store or
two ``train``s on one checkpoint directory: exactly one wins, the other exits 2 naming it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from streamsvm.cli import main
from streamsvm.exceptions import OutputLockedError, OutputNotWritableError
from streamsvm.io import OutputLock, convert, open_store

from .io.helpers import write_svm

CLI = [sys.executable, "-m", "streamsvm.cli"]

# A streamsvm command whose ``target`` (module:function, called after the lock is taken)
# waits until the test creates the file ``gate``: the first process holds the lock for as
# long as the test needs, whatever the machine's speed.
GATED = """
import importlib, os, sys, time
gate, target = sys.argv[1], sys.argv[2]
module, name = target.split(":")
module = importlib.import_module(module)
real = getattr(module, name)

def gated(*a, **k):
    while not os.path.exists(gate):
        time.sleep(0.01)
    return real(*a, **k)

setattr(module, name, gated)
from streamsvm.cli import main
sys.argv = ["streamsvm", *sys.argv[3:]]
sys.exit(main(sys.argv[1:]))
"""


def _holder(lock_path, proc, timeout=120.0):
    """The details in ``lock_path`` once process ``proc`` holds it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            holder = json.loads(open(lock_path).read())
            if holder.get("pid") == proc.pid:
                return holder
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"process {proc.pid} did not take {lock_path}")


@contextlib.contextmanager
def _gated(tmp_path, target, *args):
    """The first process (``GATED``) and a function opening its gate and checking that it
    then finishes with exit 0; killed on the way out if it is still running."""
    gate = tmp_path / "gate"
    proc = subprocess.Popen([sys.executable, "-c", GATED, str(gate), target, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def open_gate():
        gate.touch()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    try:
        yield proc, open_gate
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _one_error_line(err: str, command: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"streamsvm {command}: error: "), err
    return lines[0]


# -- the lock itself ---------------------------------------------------------------------

def test_local_lock_names_its_holder_and_is_removed(tmp_path):
    out = tmp_path / "s.zarr"
    with OutputLock(out) as lock:
        assert lock.lock_url == f"{out}.lock"
        holder = json.loads((tmp_path / "s.zarr.lock").read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(OutputLockedError, match=rf"output {out} is being written by "
                                                    rf"process {os.getpid()} on host "
                                                    rf"{socket.gethostname()} \(.*\) since "
                                                    rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
                                                    ) as exc:
            OutputLock(out).acquire()
        assert exc.value.holder["token"] == holder["token"]
    assert not (tmp_path / "s.zarr.lock").exists()
    OutputLock(out).acquire().release()             # free again


def test_lock_file_of_a_killed_process_is_not_stale(tmp_path):
    """A lock file left by a process killed while holding it: the kernel released its flock,
    so the next process takes it (no stale rule needed locally)."""
    out = tmp_path / "s.zarr"
    code = ("import os, sys, time; from streamsvm.io import OutputLock; "
            "OutputLock(sys.argv[1]).acquire(); print('locked', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "locked\n"
        with pytest.raises(OutputLockedError, match=f"process {proc.pid} "):
            OutputLock(out).acquire()
    finally:
        proc.kill()
        proc.wait()
    assert (tmp_path / "s.zarr.lock").exists()      # left behind by the killed holder
    with OutputLock(out):
        assert json.loads((tmp_path / "s.zarr.lock").read_text())["pid"] == os.getpid()


def test_checkpoint_directory_lock_lives_inside_it(tmp_path):
    ck = tmp_path / "ck"
    with OutputLock(ck, what="checkpoint directory", inside=True):
        assert os.listdir(ck) == [".streamsvm.lock"]
        with pytest.raises(OutputLockedError, match=f"checkpoint directory {ck} is being"):
            OutputLock(ck, what="checkpoint directory", inside=True).acquire()
    assert os.listdir(ck) == []


def test_unwritable_lock_location(tmp_path):
    (tmp_path / "afile").write_text("not a directory")
    with pytest.raises(OutputNotWritableError, match=r"cannot lock the output .*afile/s\.zarr"
                                                     r".*: cannot write its lock file"):
        OutputLock(tmp_path / "afile" / "s.zarr").acquire()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_s3_marker(s3):
    """On S3 the lock is a marker object created with If-None-Match: of two takers exactly
    one wins; the loser names the holder and the marker to delete if it is gone; release
    removes it."""
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    out = f"{bucket}/s.zarr"
    a = OutputLock(out, storage_options=opts).acquire()
    assert json.loads(fs.cat(f"{out}.lock"))["pid"] == os.getpid()
    with pytest.raises(OutputLockedError, match=rf"output {out} is being written by process "
                                                rf"{os.getpid()} .*; if that process is gone, "
                                                rf"delete the lock marker {out}\.lock"):
        OutputLock(out, storage_options=opts).acquire()
    a.release()
    fs.invalidate_cache()
    assert not fs.exists(f"{out}.lock")
    OutputLock(out, storage_options=opts).acquire().release()


def test_s3_stale_marker_rule(s3, caplog):
    """A marker of a process of this host that no longer exists is replaced; one of another
    host is never presumed stale."""
    import s3fs
    bucket, opts = s3
    fs = s3fs.S3FileSystem(**opts)
    out = f"{bucket}/s.zarr"
    dead = {"pid": _dead_pid(), "host": socket.gethostname(), "command": "streamsvm convert",
            "started": "2020-01-01 00:00:00 UTC", "token": "0" * 32}
    fs.pipe_file(f"{out}.lock", json.dumps(dead).encode())
    with OutputLock(out, storage_options=opts):
        assert json.loads(fs.cat(f"{out}.lock"))["pid"] == os.getpid()
    assert f"removed the stale lock marker {out}.lock of process {dead['pid']}" in caplog.text
    other = dict(dead, host="another-host")
    fs.pipe_file(f"{out}.lock", json.dumps(other).encode())
    with pytest.raises(OutputLockedError, match=rf"process {dead['pid']} on host another-host "
                                                rf"\(streamsvm convert\) since 2020-01-01 "
                                                rf"00:00:00 UTC; if that process is gone"):
        OutputLock(out, storage_options=opts).acquire()
    fs.invalidate_cache()
    assert json.loads(fs.cat(f"{out}.lock")) == other     # left alone


def test_convert_to_a_locked_s3_output_exits_2(s3, tmp_path):
    bucket, opts = s3
    write_svm(tmp_path / "a.svm", n=200)
    endpoint = opts["client_kwargs"]["endpoint_url"]
    so = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
          "--storage-option", f"client_kwargs.endpoint_url={endpoint}"]
    out = f"{bucket}/s.zarr"
    with OutputLock(out, storage_options=opts):
        p = subprocess.run(CLI + ["convert", str(tmp_path / "a.svm"), out, "-q", *so],
                           capture_output=True, text=True)
    assert p.returncode == 2
    line = _one_error_line(p.stderr, "convert")
    assert f"output {out} is being written by process {os.getpid()}" in line
    import s3fs
    assert not s3fs.S3FileSystem(**opts).exists(out)


# -- real processes -------------------------------------------------------------------------

def test_two_converts_to_one_output(tmp_path):
    """The first convert takes the lock and waits on the gate; the second, to the same
    output, exits 2 naming it; the first then finishes a store that verifies and holds its
    own input."""
    write_svm(tmp_path / "a.svm", n=300, seed=1)
    write_svm(tmp_path / "b.svm", n=500, seed=2)
    out = tmp_path / "s.zarr"
    with _gated(tmp_path, "streamsvm.io._convert:_convert", "convert",
                str(tmp_path / "a.svm"), str(out), "-q") as (first, open_gate):
        holder = _holder(f"{out}.lock", first)
        assert holder["command"] == f"streamsvm convert {tmp_path / 'a.svm'} {out} -q"
        second = subprocess.run(CLI + ["convert", str(tmp_path / "b.svm"), str(out), "-q",
                                       "--overwrite"], capture_output=True, text=True)
        assert second.returncode == 2
        line = _one_error_line(second.stderr, "convert")
        assert (f"output {out} is being written by process {first.pid} on host "
                f"{socket.gethostname()} (streamsvm convert {tmp_path / 'a.svm'} {out} -q) "
                f"since {holder['started']}") in line
        assert not out.exists()                       # the loser touched nothing
        open_gate()
    assert not os.path.exists(f"{out}.lock")
    assert main(["verify", str(out), "-q"]) == 0
    assert open_store(str(out)).n_rows == 300


def test_two_trains_on_one_checkpoint_directory(tmp_path):
    """The first train holds the checkpoint directory (waiting on the gate before its first
    pass); a second train there exits 2 naming it and writes nothing; the first finishes,
    and its checkpoints resume to its model."""
    write_svm(tmp_path / "a.svm", n=600)
    store = tmp_path / "s.zarr"
    convert(str(tmp_path / "a.svm"), str(store), chunk_rows=200)
    ck = tmp_path / "ck"
    args = [str(store), "-q", "-C", "0.1", "--checkpoint", str(ck)]
    with _gated(tmp_path, "streamsvm._train:run", "train", *args,
                "-o", str(tmp_path / "a.json")) as (first, open_gate):
        holder = _holder(ck / ".streamsvm.lock", first)
        second = subprocess.run(CLI + ["train", *args, "-o", str(tmp_path / "b.json")],
                                capture_output=True, text=True)
        assert second.returncode == 2
        line = _one_error_line(second.stderr, "train")
        assert (f"checkpoint directory {ck} is being written by process {first.pid} on host "
                f"{socket.gethostname()} (streamsvm train") in line
        assert f"since {holder['started']}" in line
        assert not (tmp_path / "b.json").exists()
        open_gate()
    assert not (ck / ".streamsvm.lock").exists()
    assert main(["train", *args, "-o", str(tmp_path / "c.json"), "--resume"]) == 0
    assert (tmp_path / "c.json").read_bytes() == (tmp_path / "a.json").read_bytes()
