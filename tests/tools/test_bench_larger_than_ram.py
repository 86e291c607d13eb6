"""tools/bench.py larger-than-ram: its pure helpers (LIBLINEAR's memory, the default budget,
the passes' read rates, /proc and cgroup files parsed, the disk read), VW's holdout stop from
a cache built beforehand, and its tables from a saved result. No cgroup is made here."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tools.bench import cgroup, disk, peers
from tools.bench import larger_than_ram as ltr
from tools.bench.cli import main


def test_liblinear_bytes_counts_a_node_per_nonzero_and_two_per_row():
    need = ltr.liblinear_bytes(nnz=1000, n_rows=10, n_features=50)
    assert need["feature_nodes"] == 16 * (1000 + 2 * 10)
    assert need["problem"] == 16 * 10
    assert need["solver"] == 21 * 10 + 8 * 51
    assert need["total"] == need["feature_nodes"] + need["problem"] + need["solver"]


def test_default_budget_is_half_of_what_the_limit_leaves_above_the_floor():
    assert ltr.default_budget(2_000_000_000, 200_000_000) == 900_000_000
    with pytest.raises(ValueError, match="--floor"):
        ltr.default_budget(150_000_000, 200_000_000)


def _history():
    return [{"iteration": 1, "kind": "stream", "passes": 1.0, "seconds": 2.0, "mb_read": 300.0,
             "kernel_seconds": 0.5},
            {"iteration": 2, "kind": "slab", "passes": 1.5, "seconds": 2.2, "mb_read": 0.0},
            {"iteration": 3, "kind": "try", "passes": 2.5, "seconds": 3.2, "mb_read": 300.0,
             "kernel_seconds": 0.9},
            {"iteration": 4, "kind": "check", "passes": 4.5, "seconds": 5.2, "mb_read": 600.0,
             "kernel_seconds": 0.2}]


def test_pass_rates_keep_the_store_passes_and_scale_to_bytes_on_disk():
    rates = ltr.pass_rates(_history(), 0.5, 100.0)
    assert [r["iteration"] for r in rates] == [1, 3, 4]          # not dcd's RAM slab
    first, _, check = rates
    assert first["disk_mb"] == 150.0 and first["disk_mb_per_s"] == 75.0
    assert first["vs_disk"] == 0.75 and first["kernel_s_per_pass"] == 0.5
    assert check["passes"] == 2.0 and check["s_per_pass"] == 1.0
    assert check["kernel_s_per_pass"] == 0.1
    assert ltr.pass_rates(_history(), 0.5, None)[0]["vs_disk"] is None


def test_streamed_summary_against_the_disk_and_the_cpu_bounds():
    store = {"bytes_on_disk": 200e6, "decoded_bytes": 400e6}
    s = ltr.streamed_summary(_history(), store, 100.0, None)
    assert s["store_passes"] == 4.0 and s["first_sweep_s"] == 2.0
    assert s["stream_s_per_pass"] == 1.0                      # median of 2, 1, 1
    assert s["disk_bound_s"] == 2.0 and s["bound_s"] == 2.0 and s["vs_bound"] == 0.5
    # the decompression's 3 CPU s over 2 cores with 0.5 s of kernel: 1.75 s > 0.5 s
    c = ltr.streamed_summary(_history(), store, 1000.0, {"decode_cpu_s": 3.0, "cores": 2,
                                                         "floor_s": 1.0})
    assert c["disk_bound_s"] == pytest.approx(0.2)
    assert c["cpu_bound_s"] == pytest.approx(1.75) and c["bound_s"] == pytest.approx(1.75)


def test_own_cgroup_and_keyed_files():
    text = "9:name=systemd:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/x\n0::/\n"
    assert cgroup.own_cgroup(text) == "/process_api/abc"
    assert cgroup.own_cgroup(text, "cpuacct") == "/x"
    assert cgroup.own_cgroup("0::/\n") is None
    assert cgroup.parse_keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n") == {
        "oom_kill_disable": 0, "under_oom": 0, "oom_kill": 2}
    assert cgroup.mapped_file_bytes("VmRSS:\t 300 kB\nRssFile:\t  120 kB\n") == 120 * 1024
    assert cgroup.mapped_file_bytes("VmRSS:\t 300 kB\n") is None


def test_isolation_problem_names_a_missing_controller(tmp_path):
    why = cgroup.isolation_problem(10**8, root=str(tmp_path / "none"))
    assert why == f"no cgroup v1 memory controller at {tmp_path / 'none'}"


def test_disk_reads_the_largest_files_first_and_again_until_enough(tmp_path):
    (tmp_path / "c").mkdir()
    for name, size in (("a", 3 << 20), ("c/b", 1 << 20), ("z", 0)):
        (tmp_path / name).write_bytes(os.urandom(size))
    files = disk.store_files(str(tmp_path))
    assert [os.path.relpath(p, tmp_path) for p, _ in files] == ["a", "c/b", "z"]
    try:
        r = disk.read_bandwidth(files, min_bytes=6 << 20, block=1 << 20)
    except OSError as exc:          # a file system without O_DIRECT (tmpfs)
        pytest.skip(str(exc))
    assert r["bytes"] >= 6 << 20 and r["cycles"] == 2 and r["files"] == 2
    assert r["distinct_bytes"] == 4 << 20 and r["mb_per_s"] > 0


def test_vw_stops_on_its_holdout_from_a_cache_built_beforehand(tmp_path):
    pytest.importorskip("vowpalwabbit",
                        reason="needs the bench extra (pip install -e .[bench])")
    from tools.bench.suite_data import libsvm_to_vw
    from tools.bench.worker import _Out
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(400):
        x = rng.normal(size=5)
        feats = " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x))
        lines.append(f"{1 if x[0] + 0.5 * x[1] > 0 else -1} {feats}")
    (tmp_path / "t.svm").write_text("\n".join(lines) + "\n")
    libsvm_to_vw(str(tmp_path / "t.svm"), str(tmp_path / "t.vw"), [-1.0, 1.0], "binary")
    cache = str(tmp_path / "t.cache")
    peers.vw_cache(str(tmp_path / "t.vw"), cache, peers.vw_bits(5))
    os.remove(tmp_path / "t.vw")                    # the cache alone is read
    spec = {"C": 1.0, "repeat": 1, "repeat_under": 0.0, "passes": [40], "holdout": True,
            "cache": cache, "workdir": str(tmp_path / "w"),
            "dataset": {"n_rows": 400, "n_features": 5, "task": "binary",
                        "classes": [-1.0, 1.0]}}
    out = _Out(spec)
    assert peers.m_vw(spec, out) == ("ok", None)
    step = out.steps[-1]
    assert 1 <= step["passes"] < 40                 # its holdout stopped it
    assert os.path.exists(cache) and out.extra["holdout"]
    assert peers.vw_passes_used("number of examples per pass = 9\npasses used = 7\n") == 7
    assert peers.vw_passes_used("finished run") is None


def _result(limited=True):
    store = {"url": "s.zarr", "n_rows": 10, "n_features": 3, "nnz": 20, "task": "binary",
             "bytes_on_disk": 2e6, "decoded_bytes": 4e6}
    dcd = {"method": "streamsvm dcd", "status": "ok", "passes": 3.0, "fit_s": 1.5,
           "objective": 10.0, "dual": 9.99, "certificate": 1e-3, "converged": True,
           "gap_to_best_dual": 1e-3, "read_vs_data": 1.02, "read_mb_per_s": 4.0,
           "child": {"wall_s": 2.0, "peak_rss_mb": 300.0, "read_bytes": 6.1e6},
           "cgroup": {"max_usage_bytes": 2.5e8, "harness_mapped_file_bytes": 1e8},
           "streamed": ltr.streamed_summary(_history(), store, 100.0, None)}
    return {"store": store, "C": 1.0, "tol": 1e-3, "max_passes": 5, "memory_bytes": 5e7,
            "limit_bytes": 3e8, "limited": limited,
            "isolation_problem": None if limited else "no cgroup v1 memory controller at x",
            "disk": {"mb_per_s": 100.0, "method": "O_DIRECT", "bytes": 1e9, "cycles": 1,
                     "first_cycle_mb_per_s": 100.0},
            "runs": [dcd, ltr.liblinear_row(store, 3e8)], "command": "python tools/bench.py",
            "machine": {"cpu_model": "cpu", "cpus_usable": 2, "memory_bytes": 4e9}}


def test_render_prints_the_runs_and_the_passes(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_result()))
    assert main(["larger-than-ram", "--store", str(path), "--render"]) == 0
    out = capsys.readouterr().out
    assert "| streamsvm dcd | ok | 3 | 2.00 | 1.50 | 0.500 | 10 | 1.0e-03 | 1.0e-03 | 300 | " \
           "250 | 6 | 1.02× | 4 |" in out
    assert "| LIBLINEAR -s 3 | *not run*: needs ≥ 0 MB" in out
    assert ("| streamsvm dcd | 4 | 2.00 | 1.00 | 0.500 | 0.020 | – | 50.00× | 150 | 1.50× |"
            in out)
    assert "memory cgroup of 300 MB" in out and "NO MEMORY LIMIT" not in out
    assert "(up to 100 MB)" in out


def test_tables_say_loudly_when_nothing_was_limited():
    text = ltr.ltr_tables(_result(limited=False))
    assert "**NO MEMORY LIMIT** (no cgroup v1 memory controller at x)" in text
