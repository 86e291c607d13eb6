"""tools/bench.py: one entry point, whose --help lists every benchmark's subcommand and each
subcommand's --help works."""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import pytest

from tools.bench.cli import build_parser, main, subcommands

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: Every benchmark there is (the former scripts tools/bench*.py are subcommands now).
EXPECTED = {"suite", "render", "io-baseline", "checks-cost", "memory-bound", "larger-than-ram",
            "scheduler", "convert", "codecs", "readers", "alm", "nesvm", "newton-in-ram",
            "kernels", "avsf", "ww", "walrus", "matrix", "matrix-render", "cv"}


def test_help_lists_every_subcommand():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--help"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert set(subcommands()) == EXPECTED
    listed = {line.split()[0] for line in out.splitlines()
              if line.startswith("    ") and line[4] != " "}      # not wrapped help text
    assert listed == EXPECTED
    assert not list(ROOT.glob("tools/bench_*.py"))          # no second entry point


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: tools/bench.py {name}")
    nested = [a for a in build_parser()._subparsers._group_actions[0].choices[name]._actions
              if isinstance(a, argparse._SubParsersAction)]
    for experiment in (nested[0].choices if nested else ()):       # alm race, avsf order, ...
        with pytest.raises(SystemExit) as exc:
            main([name, experiment, "--help"])
        assert exc.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: tools/bench.py {name} {experiment}")


def test_python_m_runs_the_same_command_line():
    out = subprocess.run([sys.executable, "-m", "tools.bench", "walrus", "--help"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.startswith("usage: tools/bench.py walrus")


def test_no_subcommand_and_an_unknown_one_are_refused(capsys):
    for argv in ([], ["nope"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert "SUBCOMMAND" in capsys.readouterr().err
