"""tools/bench.py kernels: one real run on a small store (this checkout against itself as
--before), and bad input as one line and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from tools.bench.cli import main
from tools.bench.kernels import KERNELS

ROOT = Path(__file__).resolve().parents[2]


def test_times_every_kernel_for_both_checkouts(tmp_path, capsys):
    from streamsvm.io import write_store
    X = sp.random(400, 30, density=0.2, format="csr", random_state=0)
    write_store(tmp_path / "s.zarr", X, np.where(np.arange(400) % 3, 1.0, -1.0))
    assert main(["kernels", str(tmp_path / "s.zarr"), "--rows", "300", "--repeat", "2",
                 "--rounds", "2", "--before", str(ROOT), "--json",
                 str(tmp_path / "k.json")]) == 0
    out = capsys.readouterr().out
    assert "300 rows" in out
    for k in KERNELS:
        assert f"| {k} |" in out
    runs = json.loads((tmp_path / "k.json").read_text())["runs"]
    assert len(runs["this checkout"]) == len(runs["before"]) == 2
    assert all(r[k] > 0 for r in runs["before"] for k in KERNELS)


def test_no_store_or_no_checkout_is_one_line_and_exit_2(tmp_path, capsys):
    from streamsvm.io import write_store
    assert main(["kernels", str(tmp_path / "none.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no streamsvm store" in err[0] and "none.zarr" in err[0]
    X = sp.random(50, 5, density=0.5, format="csr", random_state=0)
    write_store(tmp_path / "s.zarr", X, np.where(np.arange(50) % 2, 1.0, -1.0))
    assert main(["kernels", str(tmp_path / "s.zarr"), "--before", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--before" in err[0] and "no streamsvm/ package" in err[0]
