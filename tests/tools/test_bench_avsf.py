"""tools/bench.py avsf: its tables come from real runs on the store and file it is given."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from streamsvm.io import write_store
from tools.bench.cli import main


def _data(n=400, d=30, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=seed, format="csr")
    y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    return X, y


def test_store_runs_print_one_row_per_run(tmp_path, capsys):
    X, y = _data(2000)          # at 3 MB streamed: 40 blocks, the hot cache a tenth
    store = tmp_path / "s.zarr"
    write_store(store, X, y, chunk_rows=50)
    assert main(["avsf", "store", str(store), "--runs",
                 "avsf,avsf:0.5,avsf:lazy=0.6/lazy_max_skip=4,dcd",
                 "--memory", "3MB", "-C", "1", "--max-passes", "300"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| avsf") or
             ln.startswith("| dcd")]
    assert [ln.split("|")[1].strip() for ln in lines] == [
        "avsf", "avsf:0.5", "avsf:lazy=0.6/lazy_max_skip=4", "dcd"]
    assert all(" True " in ln for ln in lines)
    passes = [float(ln.split("|")[2].replace(",", "")) for ln in lines]
    assert passes[2] < passes[0]            # the lazy run skipped blocks


def test_order_compares_streamed_chunks_with_ram(tmp_path, capsys):
    from sklearn.datasets import dump_svmlight_file
    X, y = _data(1000)
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path))
    assert main(["avsf", "order", str(path), "--memory", "200KB", "--max-passes", "300"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ") and
            not ln.startswith("| order") and not ln.startswith("| :")]
    assert len(rows) == 6 and rows[0].startswith("| in RAM")
    assert rows[-1].split("|")[-2].strip() == "0"          # no cache: no hot rows
