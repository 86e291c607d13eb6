"""tools/bench.py matrix and matrix-render: every solver's seconds to a certified gap per cell,
``--solver auto`` on the same grid, and auto's ratio to the fastest (table and heat map)."""

from __future__ import annotations

import json

import pytest

from tools.bench.cli import main
from tools.bench.matrix import cells, streamed_memory
from tools.bench.matrix_render import auto_ratios

from ..conftest import data_file


def test_the_matrix_times_each_solver_and_auto_is_checked_against_the_fastest(tmp_path,
                                                                              capsys):
    vowel = data_file("vowel/vowel.scale")
    grid, auto = tmp_path / "grid.json", tmp_path / "auto.json"
    common = ["--data", "vowel", "--datasets", str(vowel.parent.parent), "--work",
              str(tmp_path / "w"), "--Cs", "1", "--losses", "hinge", "--modes", "ram,streamed",
              "--cap", "60"]
    assert main(["matrix", *common, "--solvers", "dcd,nesvm", "--json", str(grid)]) == 0
    doc = json.loads(grid.read_text())
    assert doc["datasets"]["vowel"]["rows"] == 528
    assert doc["datasets"]["vowel"]["streamed_memory"] is None     # (its rows fit 4 MB)
    by = cells(doc["runs"])
    assert list(by) == [("vowel", "hinge", 1.0, "ram")]
    for r in by[("vowel", "hinge", 1.0, "ram")].values():
        assert r["status"] == "ok" and r["gap"] <= 1e-3 and r["seconds"] > 0
    assert main(["matrix", *common, "--solvers", "auto", "--json", str(auto)]) == 0
    autos = json.loads(auto.read_text())["runs"]
    assert autos[0]["chosen"] in ("dcd", "newton", "avsf", "alm", "nesvm")
    assert "528 rows" in autos[0]["chosen_because"]
    (row,) = auto_ratios(doc["runs"], autos)
    assert row["best_solver"] in ("dcd", "nesvm") and row["ratio"] > 0
    capsys.readouterr()
    assert main(["matrix-render", str(grid), "--auto", str(auto)]) == 0
    text = capsys.readouterr().out
    assert "| vowel | hinge | 1 | ram |" in text and "worst auto ÷ fastest" in text
    pytest.importorskip("matplotlib", reason="needs the bench extra (pip install -e .[bench])")
    png = tmp_path / "m.png"
    assert main(["matrix-render", str(grid), "--auto", str(auto), "--png", str(png)]) == 0
    assert png.stat().st_size > 1000


def test_a_streamed_budget_is_a_quarter_of_the_rows_and_none_when_they_fit():
    assert streamed_memory({"decoded_bytes": 40_000_000}, 4.0) == "10MB"
    assert streamed_memory({"decoded_bytes": 10_000_000}, 4.0) == "4MB"
    assert streamed_memory({"decoded_bytes": 3_000_000}, 4.0) is None
