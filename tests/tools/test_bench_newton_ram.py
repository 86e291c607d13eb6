"""tools/bench.py newton-in-ram: newton and dcd to a certified gap in memory, each in a child
process, and an earlier checkout's newton beside them (here the same checkout)."""

from __future__ import annotations

import json
import pathlib

from ..conftest import data_file
from tools.bench.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_newton_in_ram_measures_both_solvers_and_the_checkout_before(tmp_path, capsys):
    vowel = data_file("vowel/vowel.scale")
    out = tmp_path / "r.json"
    assert main(["newton-in-ram", "--data", str(vowel), "--work", str(tmp_path / "w"),
                 "--before", str(ROOT), "--repeat", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["data"] for r in rows] == ["vowel.scale"]
    for key in ("dcd", "newton", "newton_before"):
        r = rows[0][key]
        assert r["converged"] and r["gap"] <= 1e-3 and r["passes"] >= 1 and r["seconds"] > 0
    assert rows[0]["newton_before"]["package"].startswith(str(ROOT))
    # the same code either way: the same iterates
    assert rows[0]["newton"]["primal"] == rows[0]["newton_before"]["primal"]
    # the polish's seconds and the passes' own, newton only
    for key in ("newton", "newton_before"):
        r = rows[0][key]
        assert r["polish_s_per_pass"] > 0 and r["work_s_per_pass"] > 0
    assert rows[0]["dcd"]["polish_s_per_pass"] == 0
    table = capsys.readouterr().out
    assert "| vowel.scale |" in table and "newton before" in table
    assert "polish ÷ pass s (before)" in table
