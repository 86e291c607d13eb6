"""The command line's manners: a closed stdout pipe, log lines beside a progress bar, -v."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import streamsvm as ss
from streamsvm import cli

ROOT = pathlib.Path(ss.__file__).resolve().parents[1]


def _cli(*args, **kwargs) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]]
                                                       if "PYTHONPATH" in env else []))
    return subprocess.Popen([sys.executable, "-m", "streamsvm.cli", *args], env=env,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def _text(tmp_path, n=200) -> pathlib.Path:
    src = tmp_path / "t.svm"
    src.write_text("".join(f"{1 if i % 3 else -1} {1 + i % 7}:1 9:{i % 5 + 1}\n"
                           for i in range(n)))
    return src


def test_closed_stdout_pipe_exits_141_quietly(tmp_path):
    store = ss.convert(str(_text(tmp_path)), str(tmp_path / "s.zarr"))
    proc = _cli("info", store.url, stdout=subprocess.PIPE)
    proc.stdout.close()                 # like `streamsvm info s.zarr | head -0`
    err = proc.stderr.read()
    assert proc.wait() == 141, err
    assert err == ""


def test_other_broken_pipes_are_not_silenced(monkeypatch, capsys):
    def broken(args):
        raise BrokenPipeError(32, "Broken pipe")   # e.g. a dropped connection, not stdout

    monkeypatch.setitem(cli.COMMANDS, "info", broken)
    with pytest.raises(BrokenPipeError):
        cli.main(["info", "nowhere.zarr"])


def _screen(text: str) -> list[str]:
    """The lines a terminal shows: ``\\r`` returns to column 0 and overwrites."""
    lines = []
    for raw in text.split("\n"):
        cells: list[str] = []
        for part in raw.split("\r"):
            cells[:len(part)] = part
        lines.append("".join(cells).rstrip())
    return lines


def _cli_on_a_terminal(*args) -> tuple[int, str]:
    """Run the CLI with its stderr on a pseudo-terminal (where the progress is a bar);
    returns its exit status and what the terminal received."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 120 columns
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]]
                                                       if "PYTHONPATH" in env else []))
    proc = subprocess.Popen([sys.executable, "-m", "streamsvm.cli", *args], env=env,
                            stderr=slave, stdout=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:                 # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(), b"".join(chunks).decode(errors="replace")


def test_log_lines_are_not_glued_to_the_progress_bar(tmp_path):
    # -v before the subcommand: works with and without the -v-after-subcommand fix
    rc, err = _cli_on_a_terminal("-v", "convert", "--zero-based", "auto",
                                 str(_text(tmp_path)), str(tmp_path / "s.zarr"))
    assert rc == 0, err
    screen = _screen(err)
    logs = [ln for ln in screen if "INFO" in ln]
    assert any("--zero-based auto" in ln for ln in logs), screen
    assert all(ln.startswith("INFO streamsvm") for ln in logs), screen   # not after a bar
    assert any(ln.startswith("convert: 100%") for ln in screen), screen  # the bar is there


def test_progress_to_a_pipe_is_plain_lines(tmp_path):
    proc = _cli("-v", "convert", "--zero-based", "auto", str(_text(tmp_path)),
                str(tmp_path / "s.zarr"))
    err = proc.stderr.read()
    assert proc.wait() == 0, err
    lines = err.splitlines()
    assert "\r" not in err
    assert any(ln.startswith("INFO streamsvm") and "--zero-based auto" in ln for ln in lines)
    assert any(ln.startswith("convert: finished, ") for ln in lines), lines   # the summary


@pytest.mark.parametrize("flags, level", [(["convert", "-v"], "INFO"),
                                          (["-v", "convert"], "INFO"),
                                          (["-v", "convert", "-v"], "DEBUG"),
                                          (["convert", "--verbose", "--verbose"], "DEBUG")])
def test_verbose_before_and_after_the_subcommand(flags, level, tmp_path):
    cmd, *after = flags[flags.index("convert"):]
    proc = _cli(*flags[:flags.index("convert")], cmd, str(_text(tmp_path)),
                str(tmp_path / "s.zarr"), "-q", *after)
    err = proc.stderr.read()
    assert proc.wait() == 0, err
    assert f"{level} streamsvm" in err, err
    if level == "INFO":
        assert "DEBUG" not in err, err


@pytest.mark.parametrize("argv, says", [
    (["train", "s.zarr", "-o", "m.json", "--solver", "dcd", "--alpha0", "1"],
     "--alpha0 is not a parameter"),
    (["train", "s.zarr", "-o", "m.json", "--class-weight", "oops"],
     "--class-weight expects LABEL=WEIGHT"),
    (["info", "s.zarr", "--storage-option", "foo"], "--storage-option expects KEY=VALUE"),
])
def test_usage_errors_exit_2_and_name_the_option(argv, says, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.startswith(f"streamsvm {argv[0]}: error: ")
