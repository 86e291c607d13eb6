"""tools/bench_ww.py: ww to the paper's rule next to LIBLINEAR -s 4 / -s 3, from real runs."""

from __future__ import annotations

import json
import os

import pytest

from tools import bench_ww

from ..conftest import shared_dataset

pytest.importorskip("liblinear")


def test_rows_come_from_real_runs(tmp_path, capsys):
    data_dir = os.path.dirname(os.path.dirname(str(shared_dataset("vowel/vowel.scale"))))
    rows = bench_ww.measure("vowel", repeat=1, data_dir=data_dir, work=str(tmp_path))
    assert [r["method"] for r in rows] == ["ww", "LIBLINEAR -s 4", "LIBLINEAR -s 3"]
    ww = rows[0]
    assert ww["converged"] and ww["passes"] > 1 and ww["seconds"] > 0
    assert (tmp_path / "vowel" / "train.zarr" / "zarr.json").exists()   # converted once
    assert all(r["seconds"] > 0 and r["test_accuracy"] is None for r in rows)   # no .t file
    assert "| vowel | ww |" in bench_ww.table(rows)
    out = tmp_path / "r.json"
    assert bench_ww.main(["--datasets", "vowel", "--repeat", "1", "--data-dir", data_dir,
                          "--work", str(tmp_path), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"][0]["method"] == "ww"
    assert "LIBLINEAR -s 4" in capsys.readouterr().out


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(SystemExit) as exc:
        bench_ww.main(["--datasets", "iris"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        bench_ww.main(["--repeat", "0"])
