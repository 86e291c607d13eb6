"""Every output option writes through what its name points at (issue 33, items 10 and 13):
``-`` and ``/dev/stdout`` are standard output, a symbolic link stays a link and its target
is replaced whole, a device or FIFO is written in place; new files get ``0666 & ~umask``,
a replaced file keeps its mode; a failed write leaves the old output untouched."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from streamsvm.cli import main

from .test_cli_ux import ROOT, _cli, _text


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A store, a text file and a model trained on it, and what each output option writes
    for them to a plain file (the reference bytes)."""
    d = tmp_path_factory.mktemp("outputs")
    src = _text(d)
    assert main(["convert", str(src), str(d / "s.zarr"), "-q"]) == 0
    assert main(["train", str(d / "s.zarr"), "-o", str(d / "m.json"), "-q"]) == 0
    ref = {}
    for name, argv in OPTIONS.items():
        out = d / f"ref-{name}"
        assert main(_argv(d, argv, str(out))) == 0
        ref[name] = out.read_bytes()
    return d, ref


OPTIONS = {     # every option that writes a file, OUT standing for its value
    "train": ["train", "{d}/s.zarr", "-q", "-o", "OUT"],
    "train-liblinear": ["train", "{d}/s.zarr", "-q", "--format", "liblinear", "-o", "OUT"],
    "predict": ["predict", "{d}/m.json", "{d}/t.svm", "-o", "OUT"],
    "predict-scores": ["predict", "{d}/m.json", "{d}/s.zarr", "--scores", "-o", "OUT"],
}


def _argv(d, argv, out: str) -> list[str]:
    return [out if a == "OUT" else a.format(d=d) for a in argv]


def _fifo_reader(path):
    """Start a thread reading the FIFO ``path`` to its end; returns (thread, chunks)."""
    got: list[bytes] = []

    def read():
        with open(path, "rb") as f:
            got.append(f.read())
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t, got


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_symlinks_devices_and_fifos_are_written_through(option, work, tmp_path, capsys):
    d, ref = work
    argv = OPTIONS[option]
    # a link to a file: the target gets the output, the link stays a link
    real = tmp_path / "real.out"
    real.write_bytes(b"old\n")
    link = tmp_path / "link.out"
    link.symlink_to(real)
    assert main(_argv(d, argv, str(link))) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == ref[option]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.out", "real.out"]
    # a dangling link: its target is created (in the target's directory)
    (tmp_path / "sub").mkdir()
    dangling = tmp_path / "dangling.out"
    dangling.symlink_to(tmp_path / "sub" / "new.out")
    assert main(_argv(d, argv, str(dangling))) == 0
    assert dangling.is_symlink() and (tmp_path / "sub" / "new.out").read_bytes() == ref[option]
    # a link to /dev/null: written to the device, the link and /dev/null untouched
    null = tmp_path / "null.out"
    null.symlink_to(os.devnull)
    assert main(_argv(d, argv, str(null))) == 0
    assert null.is_symlink() and os.readlink(null) == os.devnull
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    # a FIFO, directly and through a link: read by a thread as it is written
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fifo_link = tmp_path / "fifo-link"
    fifo_link.symlink_to(fifo)
    for name in (fifo, fifo_link):
        t, got = _fifo_reader(fifo)
        assert main(_argv(d, argv, str(name))) == 0
        t.join(10)
        assert got == [ref[option]]
        assert stat.S_ISFIFO(os.stat(fifo).st_mode) and fifo_link.is_symlink()
    # '-': standard output
    capsys.readouterr()
    assert main(_argv(d, argv, "-")) == 0
    assert capsys.readouterr().out.encode() == ref[option]


@pytest.fixture
def dev_stdout():
    """``/dev/stdout``, put back if a test replaced it (as ``predict`` once did: the test
    fails, the machine keeps its link)."""
    if not os.path.islink("/dev/stdout"):
        pytest.skip("/dev/stdout is not a symbolic link on this system")
    link = os.readlink("/dev/stdout")
    yield "/dev/stdout"
    if not os.path.islink("/dev/stdout") or os.readlink("/dev/stdout") != link:
        os.remove("/dev/stdout")
        os.symlink(link, "/dev/stdout")
        pytest.fail(f"/dev/stdout was replaced (put back as a link to {link})")


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_dev_stdout_is_standard_output(option, work, capfd, dev_stdout):
    """``/dev/stdout`` (a link to ``/proc/self/fd/1``) is this process's standard output,
    written through, never replaced (capfd: fd 1 is a file here)."""
    d, ref = work
    capfd.readouterr()
    assert main(_argv(d, OPTIONS[option], dev_stdout)) == 0
    assert capfd.readouterr().out.encode() == ref[option]


def test_dev_stdout_into_a_pipe_survives(work, dev_stdout):
    """The issue's own case: ``predict -o /dev/stdout`` with stdout a pipe."""
    d, ref = work
    proc = _cli(*_argv(d, OPTIONS["predict"], dev_stdout), stdout=subprocess.PIPE)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert out == ref["predict"].decode()
    assert err == "wrote 200 predictions to /dev/stdout\n"


def test_dash_streams_to_a_pipe_and_stops_quietly_when_it_closes(work):
    d, ref = work
    proc = _cli(*_argv(d, OPTIONS["predict"], "-"), stdout=subprocess.PIPE)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert out == ref["predict"].decode() and err == "wrote 200 predictions to standard output\n"
    assert not (d / "-").exists()
    # like `streamsvm predict m.json t.svm -o - | head -0`: the reader is gone
    proc = _cli(*_argv(d, OPTIONS["predict"], "-"), stdout=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait() == 141, err
    assert err == ""
    # train -o -: the model on standard output, its summary on standard error
    proc = _cli("train", str(d / "s.zarr"), "-o", "-", stdout=subprocess.PIPE)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert out == ref["train"].decode() and "wrote standard output: " in err


def test_failed_write_leaves_the_old_output(work, tmp_path, capsys):
    """Bad data after the first rows: the file (a link's target) keeps its old bytes and no
    temporary file is left."""
    d, _ = work
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:1\n" * 10 + "1 1:x\n")
    real = tmp_path / "p.txt"
    real.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    for out in (real, link):
        assert main(["predict", str(d / "m.json"), str(bad), "-o", str(out)]) == 2
        assert "line 11" in capsys.readouterr().err
        assert real.read_text() == "old\n" and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.svm", "link.txt", "p.txt"]


def test_new_outputs_honour_the_umask_and_replaced_ones_keep_their_mode(work, tmp_path):
    d, _ = work
    script = (
        "import os, sys\n"
        "from streamsvm.cli import main\n"
        "os.umask(int(sys.argv[1], 8))\n"
        "for args in sys.argv[2:]:\n"
        "    assert main(args.split('|')) == 0, args\n")
    outs = {name: tmp_path / name for name in OPTIONS}
    kept = tmp_path / "kept.txt"
    kept.write_text("old\n")
    kept.chmod(0o604)
    runs = ["|".join(_argv(d, argv, str(outs[name]))) for name, argv in OPTIONS.items()]
    runs.append("|".join(_argv(d, OPTIONS["predict"], str(kept))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if "PYTHONPATH" in os.environ else [])))
    for umask, mode in (("027", 0o640), ("002", 0o664)):
        for p in outs.values():
            p.unlink(missing_ok=True)
        res = subprocess.run([sys.executable, "-c", script, umask, *runs], env=env,
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        for name, p in outs.items():
            assert stat.S_IMODE(p.stat().st_mode) == mode, (name, umask, oct(p.stat().st_mode))
        assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and kept.read_text() != "old\n"
