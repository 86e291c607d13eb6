"""tools/bench.py alm: its tables come from real runs on the store it is given."""

from __future__ import annotations

import json

from tools.bench import worker
from tools.bench.cli import main


def test_race_measures_passes_to_each_target(tmp_path, linear_store, capsys):
    path = linear_store
    out = tmp_path / "r.json"
    assert main(["alm", "race", str(path), "--loss", "squared_hinge", "-C", "0.5",
                 "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["method"] for r in rows] == ["alm", "alm inner=cg", "newton free_bias",
                                           "dcd (-B 1 problem)"]
    ref = rows[0]["reference"]
    assert ref == min(r["primal"] for r in rows)            # the best objective reached
    for r in rows[:3]:                                      # the free-bias problem: all reach it
        assert r["converged"] and r["passes@0.01"] <= r["passes@0.001"] <= r["passes"]
        hit = next(h for h in r["history"] if h["passes"] == r["passes@0.001"])
        assert (hit["primal"] - ref) / ref <= 1e-3
    assert "| alm inner=cg |" in capsys.readouterr().out


def test_variants_include_the_papers_literal_settings(tmp_path, linear_store):
    path = linear_store
    out = tmp_path / "v.json"
    assert main(["alm", "variants", str(path), "--max-passes", "400", "--json",
                 str(out)]) == 0
    rows = json.loads(out.read_text())
    assert rows[0]["method"].startswith("paper Algorithm 2") and rows[-1]["method"].startswith(
        "Gram")
    assert len(rows) == 7 and all(r["passes"] > 0 for r in rows)


def test_main_benchmark_gives_alm_liblinears_problem():
    assert worker.solver_params("alm", C=1.0, loss="hinge", tol=1e-3, max_passes=9) == dict(
        C=1.0, tol=1e-3, max_passes=9, bias=1.0, loss="hinge", free_bias=False)
