"""The conversion benchmark's end-to-end measurements (``tools/bench.py convert``): each tool,
``streamsvm convert`` (the CLI) and scikit-learn's ``load_svmlight_file``, in a fresh
process of its own (:func:`tools.bench._timed.run_child`: wall time including interpreter
start-up and imports, as a user sees it, CPU time and that process's peak RSS), every input
and compressed copy in turn, and the targets judged from them.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile

from ._common import MB, ROOT, log
from ._timed import run_child, tail
from .convert_files import (COMPRESSIONS, BenchInput, compress_to, prefix_to, read_raw,
                            remove, stem)
from .convert_stages import (measure_stages, measure_store_read, mb_per_s, ratio, rows_per_s,
                             stage, warm_in_process)

__all__ = ["CLI_DEFAULT_CHUNK_ROWS", "TARGET_SPEEDUP", "TARGET_RSS_MB", "summarize_repeats",
           "measure_process", "warmup_processes", "bench_input", "compute_targets"]

CLI_DEFAULT_CHUNK_ROWS = 65536
SKLEARN_READS = ("plain", "gz", "bz2", "zst")
TARGET_SPEEDUP = 6.0
TARGET_RSS_MB = 500.0


def summarize_repeats(reps: list[dict], text_bytes: int, rows: int | None) -> dict:
    """Median wall/CPU time and maximum peak RSS over repeated measurements of one job."""
    ok = [r for r in reps if r.get("rc") == 0]
    if not ok:
        return {"ok": False, "error": (reps[-1].get("stderr_tail") if reps else "not run")}
    wall = statistics.median(r["wall_s"] for r in ok)
    cpu = statistics.median(r["user_s"] + r["sys_s"] for r in ok)
    rss = max(r["peak_rss_bytes"] for r in ok)
    return {"ok": True, "wall_s": wall, "wall_min_s": min(r["wall_s"] for r in ok),
            "cpu_s": cpu, "cpu_per_wall": ratio(cpu, wall), "peak_rss_mb": rss / MB,
            "mb_per_s": mb_per_s(text_bytes, wall), "rows_per_s": rows_per_s(rows, wall)}


def child_env() -> dict:
    """Environment for measured children: the repository first on ``PYTHONPATH``, so that
    ``-m streamsvm.cli`` runs this checkout even where the editable install is stale."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    return env


def measure_process(argv, *, timeout: float | None = None) -> dict:
    """Run ``argv`` as a child process of its own (:func:`tools.bench._timed.run_child`);
    return its wall time, CPU time (user, sys) and peak RSS (bytes), plus the tails of its
    output."""
    argv = list(map(str, argv))
    with tempfile.TemporaryDirectory(prefix="bench-convert-") as d:
        out, err = os.path.join(d, "stdout"), os.path.join(d, "stderr")
        r = run_child(argv, timeout=timeout, stdout_path=out, stderr_path=err, env=child_env())
        tails = {"stdout_tail": tail(out, 2000), "stderr_tail": tail(err, 2000)}
    if r["wall_s"] is None:                 # killed after the timeout, or the wrapper failed
        return {"rc": -1, "stderr_tail": tails["stderr_tail"]}
    return {"rc": r["rc"], "wall_s": r["wall_s"], "user_s": r["user_s"], "sys_s": r["sys_s"],
            "sampled_peak_rss_bytes": round((r["sampled_peak_rss_mb"] or 0) * MB), **tails,
            "peak_rss_bytes": round(r["peak_rss_mb"] * MB), "argv": argv}


def streamsvm_argv(inp: str, out: str, chunk_rows: int) -> list[str]:
    """``streamsvm convert`` as a user runs it (the CLI default options but these)."""
    return [sys.executable, "-m", "streamsvm.cli", "convert", inp, out, "-q", "--overwrite",
            "--chunk-rows", str(chunk_rows)]


_SKLEARN = r"""
import io, json, sys
from sklearn.datasets import load_svmlight_file
path = sys.argv[1]
if path.endswith(".zst"):
    import zstandard
    f = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")))
    X, y = load_svmlight_file(f)
else:
    X, y = load_svmlight_file(path)
print(json.dumps({"rows": X.shape[0], "features": X.shape[1], "nnz": int(X.nnz)}))
"""


def sklearn_argv(inp: str) -> list[str]:
    """scikit-learn's ``load_svmlight_file`` on one file, in a process of its own."""
    return [sys.executable, "-c", _SKLEARN, inp]


def warm_page_cache(paths) -> None:
    """Read every file once (what is timed then reads from the page cache)."""
    for p in paths:
        read_raw(p, 8 << 20)


def warmup_processes(inp: BenchInput, scratch: str, do_sklearn: bool, timeout) -> None:
    """One untimed run of each tool on a small prefix: numba's on-disk cache written, the
    shared libraries in the page cache."""
    small = os.path.join(scratch, "warmup.svm")
    prefix_to(inp.path, small, 200_000)
    store = os.path.join(scratch, "warmup.zarr")
    r = measure_process(streamsvm_argv(small, store, 4096), timeout=timeout)
    if r.get("rc") != 0:
        raise SystemExit(f"bench.py convert: warm-up 'streamsvm convert' failed:\n"
                         f"{r.get('stderr_tail')}")
    if do_sklearn:
        measure_process(sklearn_argv(small), timeout=timeout)
    remove(store, False)
    remove(small, False)


def _run_tool(argv, cfg, text_bytes, rows):
    """``cfg.repeat`` measurements of one job and their summary."""
    reps = [measure_process(argv, timeout=cfg.timeout) for _ in range(cfg.repeat)]
    return reps, summarize_repeats(reps, text_bytes, rows)


def bench_input(inp: BenchInput, cfg, made: list) -> dict:
    """Every measurement ``cfg`` asks for on one input: end to end (each tool in its own
    process, ``cfg.repeat`` times), the stages and the store read-back."""
    text = inp.text_bytes
    res = {"name": inp.name, "path": inp.path, "kind": inp.kind, "role": inp.role,
           "note": inp.note, "parent": inp.parent, "text_bytes": text,
           "files": {"plain": {"path": inp.path, "bytes": text}},
           "rows": None, "nnz": None, "n_features": None, "binary_values": None,
           "runs": [], "skipped": [], "stages": [], "stage_chunk_rows": None,
           "store_read": []}
    compressed = {}
    if inp.role == "main":
        for kind in cfg.compressions:
            dst = os.path.join(cfg.scratch, os.path.basename(inp.path) + COMPRESSIONS[kind])
            if not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(inp.path):
                log(f"compressing {inp.path} -> {dst}")
                secs = compress_to(inp.path, dst, kind)
            else:
                secs = None
            made.append(dst)
            compressed[kind] = dst
            res["files"][kind] = {"path": dst, "bytes": os.path.getsize(dst),
                                  "compress_s": secs}
    warm_page_cache([inp.path] + list(compressed.values()))

    chunk_list = list(cfg.chunk_rows) if inp.role == "main" else [cfg.default_chunk()]
    jobs = [("plain", inp.path, c) for c in chunk_list]
    jobs += [(k, p, cfg.default_chunk()) for k, p in sorted(compressed.items())]
    for comp, path, chunk in jobs:
        store = os.path.join(cfg.scratch, f"{stem(inp.path)}-{comp}-c{chunk}.zarr")
        log(f"{inp.name}: streamsvm convert ({comp}, --chunk-rows {chunk})")
        reps, summ = _run_tool(streamsvm_argv(path, store, chunk), cfg, text, None)
        run = {"tool": "streamsvm", "compression": comp, "chunk_rows": chunk, **summ,
               "repeats": reps}
        if summ["ok"]:
            from streamsvm import open_store
            st = open_store(store)
            if res["rows"] is None:
                res.update(rows=st.n_rows, nnz=st.nnz, n_features=st.n_features,
                           binary_values=st.binary_values)
            run["rows_per_s"] = rows_per_s(st.n_rows, summ["wall_s"])
            run["store_bytes"] = st.bytes_on_disk()
            if cfg.store_read and comp == "plain" and inp.role == "main":
                log(f"{inp.name}: reading every chunk of {store}")
                res["store_read"].append(measure_store_read(store))
        else:
            log(f"  FAILED: {summ.get('error')}")
        res["runs"].append(run)
        remove(store, cfg.keep)

    if cfg.sklearn:
        reads = [("plain", inp.path)] + [(k, p) for k, p in sorted(compressed.items())
                                         if k in SKLEARN_READS]
        for comp, path in reads:
            if text > cfg.sklearn_max_mb * MB:
                res["skipped"].append({"tool": "sklearn", "compression": comp, "reason": (
                    f"text {text / MB:,.0f} MB > --sklearn-max-mb {cfg.sklearn_max_mb:g} "
                    f"(load_svmlight_file needs ~5x the file in RAM)")})
                continue
            log(f"{inp.name}: sklearn load_svmlight_file ({comp})")
            reps, summ = _run_tool(sklearn_argv(path), cfg, text, res["rows"])
            run = {"tool": "sklearn", "compression": comp, "chunk_rows": None, **summ,
                   "repeats": reps}
            if summ["ok"] and res["rows"] is None:
                try:
                    info = json.loads(reps[0]["stdout_tail"].strip().splitlines()[-1])
                    res.update(rows=info["rows"], nnz=info["nnz"])
                    run["rows_per_s"] = rows_per_s(info["rows"], summ["wall_s"])
                except (ValueError, KeyError, IndexError):
                    pass
            res["runs"].append(run)
    else:
        res["skipped"].append({"tool": "sklearn", "compression": "all",
                               "reason": "--no-sklearn"})

    if cfg.stages and inp.role == "main":
        log(f"{inp.name}: stage breakdown (in-process)")
        warm_in_process()
        res["stage_chunk_rows"] = cfg.default_chunk()
        res["stages"] = measure_stages(inp.path, compressed, cfg.scratch,
                                       chunk_rows=cfg.default_chunk(),
                                       batch_bytes=int(cfg.batch_mb * MB),
                                       resume_every=int(cfg.resume_every_mb * MB),
                                       keep=cfg.keep)
        e2e = {r["compression"]: r for r in res["runs"]
               if r["tool"] == "streamsvm" and r.get("ok") and
               r["chunk_rows"] == cfg.default_chunk()}
        for comp in ["plain"] + sorted(compressed):
            if comp in e2e:
                r = e2e[comp]
                res["stages"].append(stage("(5') streamsvm convert CLI, separate process",
                                            comp, r["wall_s"], r["cpu_s"], text))
    return res


def compute_targets(inputs: list[dict]) -> list[dict]:
    """Per input and compression: streamsvm (CLI default chunk size) vs sklearn, and peak RSS.

    The speed-up is sklearn wall / streamsvm wall on the same file.  For an input too big for
    sklearn, the reference is sklearn's MB/s on its same-shape prefix (plain text only), and
    the speed-up the ratio of MB/s (``sklearn_reference`` names the file it comes from).
    """
    out = []
    by_parent = {r["parent"]: r for r in inputs if r.get("parent")}
    for res in inputs:
        ss = {r["compression"]: r for r in res["runs"] if r["tool"] == "streamsvm"
              and r.get("ok") and r["chunk_rows"] == CLI_DEFAULT_CHUNK_ROWS}
        if not ss:   # no run at the CLI default: use the first chunk size measured
            first = next((r["chunk_rows"] for r in res["runs"] if r["tool"] == "streamsvm"
                          and r.get("ok")), None)
            ss = {r["compression"]: r for r in res["runs"] if r["tool"] == "streamsvm"
                  and r.get("ok") and r["chunk_rows"] == first}
        sk = {r["compression"]: r for r in res["runs"] if r["tool"] == "sklearn" and r.get("ok")}
        all_rss = [r["peak_rss_mb"] for r in res["runs"] if r["tool"] == "streamsvm"
                   and r.get("ok")]
        proxy = by_parent.get(res["name"])
        proxy_sk = {r["compression"]: r for r in (proxy or {}).get("runs", [])
                    if r["tool"] == "sklearn" and r.get("ok")}
        for comp, r in ss.items():
            s, ref = sk.get(comp), res["name"]
            if s is not None:
                speed = ratio(s["wall_s"], r["wall_s"])
            elif comp in proxy_sk:
                s, ref = proxy_sk[comp], proxy["name"]
                speed = ratio(r["mb_per_s"], s["mb_per_s"])
            else:
                speed = None
            out.append({"input": res["name"], "compression": comp, "chunk_rows": r["chunk_rows"],
                        "streamsvm_mb_per_s": r["mb_per_s"],
                        "sklearn_mb_per_s": s["mb_per_s"] if s else None,
                        "sklearn_reference": ref if s else None,
                        "speedup": speed, "speedup_ok": None if speed is None
                        else speed >= TARGET_SPEEDUP,
                        "streamsvm_peak_rss_mb": r["peak_rss_mb"],
                        "max_peak_rss_mb_any_chunk_rows": max(all_rss) if all_rss else None,
                        "sklearn_peak_rss_mb": s["peak_rss_mb"] if s else None,
                        "rss_ok": max(all_rss) < TARGET_RSS_MB if all_rss else None})
    return out
