"""tools/bench.py nesvm: its tables come from real runs on the store it is given."""

from __future__ import annotations

import json

from tools.bench import nesvm
from tools.bench.cli import main


def test_homotopy_rows_are_real_runs(tmp_path, linear_store, capsys):
    path = linear_store
    out = tmp_path / "h.json"
    assert main(["nesvm", "homotopy", str(path), "-C", "0.1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["solver"] for r in rows] == ["nesvm"] * 3 + ["dcd"]
    assert [r["params"].get("homotopy", "auto") for r in rows[:3]] == ["auto", "geometric", "none"]
    assert all(r["lipschitz_passes"] == 0 for r in rows[:3])      # cached before timing
    assert rows[0]["converged"] and rows[0]["gap"] <= 1e-3
    assert capsys.readouterr().out.count("| nesvm") == 3


def test_path_runs_the_seven_cs_together_and_apart(tmp_path, linear_store):
    path = linear_store
    out = tmp_path / "p.json"
    assert main(["nesvm", "path", str(path), "--max-passes", "200", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert len(rows) == 8 and rows[0]["params"]["C_path"] == nesvm.PAPER_CS
    assert [r["params"]["C"] for r in rows[1:]] == nesvm.PAPER_CS
