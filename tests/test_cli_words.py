"""The command line speaks its own words: errors name flags, not Python arguments, and no
``--help`` cites a spec section or a paper number the user cannot look up."""

from __future__ import annotations

import re

import pytest

from streamsvm._cli_words import cli_words
from streamsvm.cli import build_parser, main

from .conftest import data_file


@pytest.mark.parametrize("command, text, said", [
    ("train", "give --no-polish (polish=False) or use dcd", "give --no-polish or use dcd"),
    ("train", "continue with --resume (resume=True) once", "continue with --resume once"),
    ("train", "nesvm: screening=True needs loss='hinge'", "nesvm: --screening needs --loss hinge"),
    ("train", "stopped at max_passes=40 > tol=0.001;", "stopped at --max-passes 40 > --tol 0.001;"),
    ("convert", "pass --overwrite (overwrite=True) to", "pass --overwrite to"),
    ("convert", "stored as inf; pass dtype='float64'.", "stored as inf; pass --dtype float64."),
    ("convert", "label=3 polish=False C=1", "label=3 polish=False C=1"),   # no convert options
])
def test_python_arguments_become_flags(command, text, said):
    assert cli_words(text, build_parser(), command) == said


def test_errors_on_the_command_line_name_flags(tmp_path, capsys):
    store = tmp_path / "dna.zarr"
    assert main(["convert", str(data_file("dna/dna.scale")), str(store), "-q"]) == 0
    assert main(["convert", str(data_file("dna/dna.scale")), str(store), "-q"]) == 2
    err = capsys.readouterr().err
    assert "--overwrite to replace it" in err and "overwrite=True" not in err
    assert main(["train", str(store), "-o", str(tmp_path / "m.json"), "--solver", "nesvm",
                 "--screening", "--loss", "squared", "-q"]) == 2
    err = capsys.readouterr().err
    assert "--screening needs --loss hinge" in err and "=True" not in err, err
    assert main(["train", str(store), "-o", str(tmp_path / "m.json"), "--solver", "newton",
                 "--loss", "squared", "-q"]) == 2
    assert "The --loss option of solver 'newton' must be one of" in capsys.readouterr().err


def _helps():
    parser = build_parser()
    yield ["--help"]
    for action in parser._actions:
        for name in getattr(action, "choices", None) or ():
            if isinstance(action.choices, dict):
                yield [name, "--help"]
    for solver in ("dcd", "avsf", "newton", "nesvm", "alm", "ww"):
        yield ["train", "--solver", solver, "--help"]


def test_no_help_cites_a_spec_section_or_a_paper_number(capsys):
    for argv in _helps():
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        bad = re.findall(r"\bspec\b[^\n]*|spec_0\d+|paper \d{3}|§|DESIGN", out)
        assert not bad, (argv, bad)
