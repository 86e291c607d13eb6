"""tools/bench.py ww: ww to the paper's rule next to the C++ reference (tools/ww_ref.cpp) and
LIBLINEAR -s 4 / -s 3, from real runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings

import pytest

from tools.bench import ww as bench_ww
from tools.bench.cli import main

from ..conftest import data_file

pytest.importorskip("liblinear")


def test_rows_come_from_real_runs(tmp_path, capsys):
    data_dir = os.path.dirname(os.path.dirname(str(data_file("vowel/vowel.scale"))))
    rows = bench_ww.measure("vowel", repeat=1, data_dir=data_dir, work=str(tmp_path))
    assert [r["method"] for r in rows] == ["ww", "LIBLINEAR -s 4", "LIBLINEAR -s 3"]
    ww = rows[0]
    assert ww["converged"] and ww["passes"] > 1 and ww["seconds"] > 0
    assert (tmp_path / "vowel" / "train.zarr" / "zarr.json").exists()   # converted once
    assert all(r["seconds"] > 0 and r["test_accuracy"] is None for r in rows)   # no .t file
    assert "| vowel | ww |" in bench_ww.table(rows)
    out = tmp_path / "r.json"
    assert main(["ww", "--datasets", "vowel", "--repeat", "1", "--data-dir", data_dir,
                 "--work", str(tmp_path), "--json", str(out), "--no-cpp"]) == 0
    assert json.loads(out.read_text())["rows"][0]["method"] == "ww"
    assert "LIBLINEAR -s 4" in capsys.readouterr().out


def test_bad_arguments_are_refused_by_name(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["ww", "--datasets", "iris"])
    assert exc.value.code == 2 and "unknown data set 'iris'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["ww", "--repeat", "0"])
    assert exc.value.code == 2 and "--repeat must be >= 1" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="no C++ compiler")
def test_the_cpp_reference_solves_the_same_problem(tmp_path):
    from streamsvm._train import train
    from streamsvm.exceptions import ConvergenceWarning
    train_file = str(data_file("vowel/vowel.scale"))
    data_dir = os.path.dirname(os.path.dirname(train_file))
    exe = bench_ww.compile_reference(str(tmp_path))
    # to a tiny share of its first gap: the optimum ww certifies
    ref = json.loads(subprocess.run([exe, train_file, "1", "1e-7", "100000", "0"], check=True,
                                    capture_output=True, text=True).stdout)
    assert ref["converged"] and ref["k"] == 11 and ref["n"] == 528
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, res = train(bench_ww._store("vowel", data_dir, str(tmp_path)), solver="ww", C=1.0,
                       bias=0.0, tol=1e-9, gap_decay=0.0, max_passes=20000)
    # (the store holds float32 values, the reference parses doubles: 1e-8 apart)
    assert ref["dual"] <= res.primal * (1 + 1e-8) and res.dual <= ref["primal"] * (1 + 1e-8)
    assert ref["primal"] == pytest.approx(res.primal, rel=1e-6)
    # in the benchmark: its et and its wall time with the gap evaluations, same run
    rows = bench_ww.measure("vowel", repeat=1, data_dir=data_dir, work=str(tmp_path), cpp=exe)
    cpp = [r for r in rows if r["method"].startswith("C++ reference")]
    assert len(cpp) == 2 and cpp[0]["passes"] == cpp[1]["passes"] >= 2
    assert 0 < cpp[0]["seconds"] <= cpp[1]["seconds"] and cpp[0]["converged"]
    assert "| vowel | C++ reference, et |" in bench_ww.table(rows)
    # a file it cannot read: exit 2 naming it
    bad = subprocess.run([exe, str(tmp_path / "missing.svm"), "1", "0.0009", "10", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "missing.svm" in bad.stderr
