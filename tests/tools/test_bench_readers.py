"""tools/bench.py readers: settings parsing, summaries, and one real run on a small store."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from tools.bench import readers as br
from tools.bench.cli import main


def test_parse_settings():
    assert br.parse_settings("2:2, 4:1") == [(2, 2), (4, 1)]
    with pytest.raises(ValueError):
        br.parse_settings("4")


def test_summarize_takes_the_first_sweep_apart():
    sweeps = [{"sweep_seconds": 3.0, "kernel_seconds": 2.0, "wait_seconds": 0.5},
              {"sweep_seconds": 1.0, "kernel_seconds": 0.8, "wait_seconds": 0.1},
              {"sweep_seconds": 2.0, "kernel_seconds": 0.6, "wait_seconds": 0.3},
              {"sweep_seconds": 1.5, "kernel_seconds": 0.7, "wait_seconds": 0.2}]
    assert br.summarize(sweeps) == {"first_s": 3.0, "sweep_s": 1.5, "kernel_s": 0.7,
                                    "wait_s": 0.2}


def test_main_runs_every_setting_in_turn(tmp_path, capsys, monkeypatch):
    from streamsvm.io import _writer, write_store
    monkeypatch.setattr(_writer, "INNER_ELEMS", 4096)   # inner chunks to scale with the store
    X = sp.random(3000, 40, density=0.2, format="csr", random_state=0)
    y = np.where(np.arange(3000) % 3, 1.0, -1.0)
    write_store(tmp_path / "s.zarr", X, y, chunk_rows=500)
    assert main(["readers", str(tmp_path / "s.zarr"), "--memory", "200000", "--passes", "3",
                 "--repeat", "1", "--settings", "2:2,4:1"]) == 0
    out = capsys.readouterr().out
    assert "| 2 | 2 | 1 |" in out and "| 4 | 1 | 1 |" in out


def test_no_store_or_a_bad_limit_is_one_line_and_exit_2(tmp_path, capsys):
    from streamsvm.io import write_store
    assert main(["readers", str(tmp_path / "none.zarr"), "--memory", "200000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no streamsvm store" in err[0] and "none.zarr" in err[0]
    X = sp.random(50, 5, density=0.5, format="csr", random_state=0)
    write_store(tmp_path / "s.zarr", X, np.where(np.arange(50) % 2, 1.0, -1.0))
    assert main(["readers", str(tmp_path / "s.zarr"), "--memory", "200000",
                 "--limit", "lots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'--limit'" in err[0] and "'lots'" in err[0]
