"""tools/bench.py convert: arithmetic, formatting, input preparation, and one small end-to-end
run of the harness (no wall-clock assertions)."""

from __future__ import annotations

import json

import pytest

from tools.bench import _table, _timed, convert, convert_files, convert_process, convert_report
from tools.bench.cli import build_parser, main
from tools.bench.convert_stages import mb_per_s, ratio, rows_per_s, stage
from tools.make_synthetic import make_synthetic


# -- arithmetic ------------------------------------------------------------------------------

def test_throughput_arithmetic():
    assert mb_per_s(3_000_000, 1.5) == pytest.approx(2.0)
    assert rows_per_s(1000, 4.0) == pytest.approx(250.0)
    for bad in [(None, 1.0), (10, None), (10, 0.0), (10, -1.0)]:
        assert mb_per_s(*bad) is None
        assert rows_per_s(*bad) is None
    assert ratio(6.0, 2.0) == pytest.approx(3.0)
    assert ratio(1.0, 0) is None and ratio(None, 1.0) is None


def test_maxrss_units():
    assert _timed.maxrss_bytes(1000, "Linux") == 1_024_000        # kibibytes
    assert _timed.maxrss_bytes(1000, "Darwin") == 1000            # bytes


def test_summarize_repeats_median_wall_max_rss():
    reps = [{"rc": 0, "wall_s": w, "user_s": w, "sys_s": 0.5, "peak_rss_bytes": r}
            for w, r in [(2.0, 100e6), (4.0, 300e6), (3.0, 200e6)]]
    s = convert_process.summarize_repeats(reps, text_bytes=30_000_000, rows=600)
    assert s["ok"]
    assert s["wall_s"] == 3.0 and s["wall_min_s"] == 2.0
    assert s["cpu_s"] == 3.5 and s["cpu_per_wall"] == pytest.approx(3.5 / 3.0)
    assert s["peak_rss_mb"] == pytest.approx(300.0)
    assert s["mb_per_s"] == pytest.approx(10.0)
    assert s["rows_per_s"] == pytest.approx(200.0)
    bad = convert_process.summarize_repeats([{"rc": 1, "stderr_tail": "boom"}], 10, None)
    assert bad == {"ok": False, "error": "boom"}


# -- formatting ------------------------------------------------------------------------------

def test_fmt_cells():
    fmt = _table.fmt
    assert fmt(None) == "–"
    assert fmt(float("nan"), "sig3") == "–"
    assert fmt(0.012345, "sig3") == "0.0123"
    assert fmt(123.4, "sig3") == "123"
    assert fmt(2.0, "sig3") == "2.00"
    assert fmt(1234.56, "mb1") == "1,235"
    assert fmt(12.34, "mb1") == "12.3"
    assert fmt(1234567.8, "int") == "1,234,568"
    assert fmt(6.04, "x1") == "6.04×"
    assert fmt(12.34, "x1") == "12.3×"


def test_markdown_table_alignment():
    t = _table.markdown_table(["name", "value"], [["a", "1"], ["long name", "22"]],
                              pad=True)
    lines = t.splitlines()
    assert lines[0] == "| name      | value |"
    assert lines[1] == "|:----------|------:|"
    assert lines[3] == "| long name |    22 |"
    assert len({len(line) for line in lines}) == 1


def test_stage_table_rows():
    stages = [stage("(3) parse only", "plain", 2.0, 1.9, 500_000_000),
              stage("(5) convert() end to end, in-process", "gz", 4.0, 6.0, 500_000_000)]
    assert stages[0]["mb_per_s"] == pytest.approx(250.0)
    rows = convert_report.stage_rows(stages)
    assert rows[0] == ["(3) parse only", "plain", "2.00", "250.0", "1.90", "0.95"]
    assert rows[1] == ["(5) convert() end to end, in-process", "gz", "4.00", "125.0", "6.00",
                       "1.50"]
    table = convert_report.stage_table(stages)
    assert table.splitlines()[0].startswith("| stage")
    assert " 250.0 | " in table and " 1.50 |" in table


# -- inputs ----------------------------------------------------------------------------------

def test_replicate_and_prefix_are_line_aligned(tmp_path):
    src = tmp_path / "s.svm"
    src.write_bytes(b"+1 1:1\n-1 2:1 3:1")             # no final newline
    dst = tmp_path / "r.svm"
    copies = convert_files.replicate_to(str(src), str(dst), 50)
    assert copies == 3
    assert dst.read_bytes() == b"+1 1:1\n-1 2:1 3:1\n" * 3
    pre = tmp_path / "p.svm"
    n = convert_files.prefix_to(str(dst), str(pre), 10)
    assert pre.read_bytes() == b"+1 1:1\n-1 2:1 3:1\n" and n == 18
    n = convert_files.prefix_to(str(dst), str(pre), 10_000)    # larger than the file: all of it
    assert pre.read_bytes() == dst.read_bytes() and n == dst.stat().st_size


def test_quick_flag_configures_a_smoke_run(capsys):
    argv = ["convert", "--quick", "--synthetic-gb", "2", "--chunk-rows", "4096,8192"]
    cfg = convert.config_from_args(build_parser().parse_args(argv), argv)
    assert cfg.names == ["a9a"] and cfg.synthetic_gb is None and cfg.replicate_mb is None
    assert cfg.chunk_rows == (65536,) and cfg.compressions == ("gz",) and cfg.repeat == 1
    assert cfg.command == ("python tools/bench.py convert --quick --synthetic-gb 2 "
                           "--chunk-rows 4096,8192")
    assert cfg.argv == ["tools/bench.py", *argv]
    with pytest.raises(SystemExit) as exc:
        main(["convert", "--help"])
    help_text = capsys.readouterr().out
    assert exc.value.code == 0
    for flag in ("--sklearn-max-mb", "--synthetic-gb", "--chunk-rows", "--keep", "--json"):
        assert flag in help_text


# -- one small run end to end ----------------------------------------------------------------

@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    src = d / "tiny.svm"
    make_synthetic(str(src), rows=3000, features=500, nnz_per_row=8, seed=1, progress=False)
    scratch = d / "scratch"
    size_mb = src.stat().st_size / 1e6
    cfg = convert.BenchConfig(inputs=[str(src)], names=["tiny"], chunk_rows=(1024,),
                         compressions=("gz",), scratch=str(scratch), warmup=False,
                         # sklearn "too big" for the main file: skipped there, and a prefix
                         # of the same shape is converted by both tools instead
                         sklearn_max_mb=size_mb * 0.6, prefix_mb=size_mb * 0.3,
                         batch_mb=0.05, command="python tools/bench.py convert --test",
                         argv=["tools/bench.py", "convert", "--test"])
    result = convert.run_benchmark(cfg)
    return result, src, scratch


def test_run_produces_the_json_schema(small_run):
    result, src, scratch = small_run
    json.loads(json.dumps(result))                                  # JSON-able
    for key in ("schema", "command", "argv", "started", "machine", "settings", "units",
                "targets", "inputs"):
        assert key in result
    m = result["machine"]
    for key in ("cpu_model", "cpu_count", "cpus_usable", "python", "versions"):
        assert key in m
    for dist in ("numpy", "numba", "zarr", "scikit-learn"):
        assert dist in m["versions"]
    main, prefix = result["inputs"]
    assert main["rows"] == 3000 and main["text_bytes"] == src.stat().st_size
    assert {(r["tool"], r["compression"], r["chunk_rows"]) for r in main["runs"]} == {
        ("streamsvm", "plain", 1024), ("streamsvm", "gz", 1024)}
    for r in main["runs"]:
        assert r["ok"], r
        for key in ("wall_s", "mb_per_s", "rows_per_s", "peak_rss_mb", "cpu_s", "store_bytes",
                    "repeats"):
            assert r[key] is not None
        assert r["peak_rss_mb"] > 1
    assert [s["tool"] for s in main["skipped"]] == ["sklearn", "sklearn"]
    stages = {(s["stage"][:3], s["input"]) for s in main["stages"]}
    for st in ("(1)", "(2)", "(5)"):
        assert {(st, "plain"), (st, "gz")} <= stages
    assert ("(3)", "plain") in stages and ("(4)", "plain") in stages
    parse = next(s for s in main["stages"] if s["stage"].startswith("(3)"))
    assert parse["rows"] == 3000
    assert [r["chunks"] for r in main["store_read"]] == [3]
    assert prefix["role"] == "compare" and prefix["rows"] < 3000
    assert {r["tool"] for r in prefix["runs"]} == {"streamsvm", "sklearn"}
    assert all(r["ok"] for r in prefix["runs"])
    targets = result["targets"]["results"]
    assert {(t["input"], t["compression"]) for t in targets} == {
        ("tiny", "plain"), ("tiny", "gz"), (prefix["name"], "plain")}
    pt = next(t for t in targets if t["input"] == prefix["name"])
    assert pt["speedup"] is not None and pt["rss_ok"] is not None
    # the main file, too big for sklearn, is compared with sklearn on its prefix (plain only)
    mt = {t["compression"]: t for t in targets if t["input"] == "tiny"}
    assert mt["plain"]["sklearn_reference"] == prefix["name"] == pt["sklearn_reference"]
    assert mt["plain"]["speedup"] == pytest.approx(
        mt["plain"]["streamsvm_mb_per_s"] / mt["plain"]["sklearn_mb_per_s"])
    assert mt["gz"]["speedup"] is None and mt["gz"]["sklearn_reference"] is None


def test_run_renders_markdown_and_cleans_scratch(small_run):
    result, src, scratch = small_run
    text = convert_report.render_markdown(result)
    assert "python tools/bench.py convert --test" in text
    assert "## tiny" in text and "## Targets" in text
    assert "sklearn (plain) skipped" in text
    assert "¹ sklearn measured on" in text
    assert "| (4) encode only" in text
    assert src.exists()                      # the input is never deleted ...
    assert not scratch.exists()              # ... everything made in scratch is
