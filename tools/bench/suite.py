"""Solver benchmark: every streamsvm solver against LIBLINEAR, scikit-learn and Vowpal Wabbit.

One run measures a matrix of (data set × method × C × loss) on the same data, and writes a JSON
results file, Markdown tables and PNG plots::

    python tools/bench.py suite --suite quick    # < 10 min on 2 cores
    python tools/bench.py suite --suite dcd      # issue 3: dcd vs LIBLINEAR, 2 GB out of core
    python tools/bench.py suite --suite full     # everything (hours)
    python tools/bench.py render bench-out/quick/results.json   # tables and plots again

Methods
    * every solver in ``streamsvm.solvers.SOLVERS`` (the registry, not a list kept here), trained
      by ``streamsvm.estimators.train`` with C, loss, tol, max_passes and bias = 1; a solver
      that rejects those parameters (``InvalidParameterError``) is reported "unsupported";
    * LIBLINEAR (``liblinear-official``): ``-s 3`` (hinge, dual CD), ``-s 1`` (squared hinge,
      dual CD), ``-s 2`` (squared hinge, primal Newton) with ``-B 1`` and a ladder of ``-e``
      (each step a separate fit; the default ``-e`` is the headline, and "to 1e-3" is the first
      step whose objective is within 1e-3 of the best known); ``-s 4`` (Crammer–Singer) on
      multiclass data, accuracy and time only (another objective);
    * scikit-learn ``LinearSVC`` (liblinear inside, ``intercept_scaling=1``: the same objective)
      and ``SGDClassifier(loss="hinge")`` trained by ``partial_fit`` over the store's chunks for
      a number of epochs, ``alpha = 1/(C·n)`` (sklearn minimizes (1/n)Σ loss + α/2‖w‖²; times
      C·n this is our objective, except that sklearn does not regularize its intercept — the
      objective here is still evaluated with ½b², b = intercept, since B = 1);
    * Vowpal Wabbit (``vowpalwabbit``): ``--loss_function hinge --l2 λ`` with ``λ = 1/(C·n)``
      (VW's per-example objective loss_i + λ/2‖w‖² averaged over n, times C·n), ``--passes P``
      from a binary cache (``--cache_file``, made once before timing), ``--holdout_off``;
      weights read from ``--readable_model`` (times VW's ``l2_state`` contraction) and graded
      like everybody else; multiclass (``--oaa k``): accuracy only.

Per run: fit seconds (in-process, around the fitting call only; fastest of up to ``--repeat``
fits when the first takes less than ``--repeat-under`` s), whole-process seconds (streamsvm: the
``streamsvm train`` CLI measured from spawn to exit; the others: the worker's start-up + data
loading + the fit), peak RSS of that process (``wait4`` rusage), passes over the data, the
primal objective ``Σ_c ½‖w_c‖² + ½b_c² + C Σ loss`` computed here from each method's weights
on the same data (``tools/bench/evaluate.py``), its relative gap to the best objective found for
(data set, C, loss), train and test accuracy. Curves of the relative objective gap against
passes and seconds: streamsvm re-run with ``max_passes`` = 1, 2, 4, ... (true objective of each
returned model) on data that fits in memory, or the solver's own certificate per sweep
(callback; approximate primal, exact at the marked checks) out of core; LIBLINEAR's ``-e``
ladder; SGD after every epoch; VW over its ``--passes`` ladder.

Every number in the tables and plots comes from the JSON this script writes; the JSON also holds
seeds, package versions, CPU model and core count.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import time

from ._common import MB, ROOT, clean, command_line, log, write_json
from ._machine import machine_info, source_digest, versions
from .store_io import io_baseline, io_rss
from .suite_data import REAL, SYNTH, Evaluator, dataset_spec, prepare_dataset
from .suite_runs import (finalize_groups, plan_methods, run_method, select_methods,
                         streamsvm_solvers)
from .suite_targets import dcd_targets
from .suites import OOC, SCHEMA, SUITES, TARGET_GAP

__all__ = ["SUITES", "SCHEMA", "run_suite", "validate_results", "make_config", "register"]


REQUIRED_RUN_KEYS = ("dataset", "task", "C", "loss", "method", "label", "family", "status",
                     "message", "steps")
STATUSES = ("ok", "unsupported", "unavailable", "skipped", "error", "timeout")


def validate_results(res: dict) -> None:
    """Raise ValueError if ``res`` is not a well-formed results document."""
    def need(d, keys, where):
        missing = [k for k in keys if k not in d]
        if missing:
            raise ValueError(f"{where}: missing {missing}")
    need(res, ("schema", "created", "command", "suite", "machine", "versions", "config",
               "datasets", "runs", "best"), "results")
    if res["schema"] != SCHEMA:
        raise ValueError(f"schema {res['schema']!r} != {SCHEMA!r}")
    need(res["machine"], ("cpu_model", "cpu_count"), "machine")
    need(res["config"], ("seed",), "config")
    for i, r in enumerate(res["runs"]):
        need(r, REQUIRED_RUN_KEYS, f"runs[{i}]")
        if r["status"] not in STATUSES:
            raise ValueError(f"runs[{i}]: status {r['status']!r} not in {STATUSES}")
        if r["status"] == "ok":
            need(r, ("fit_seconds", "passes", "primal", "rel_gap", "peak_rss_mb",
                     "process_seconds", "train_accuracy", "test_accuracy"), f"runs[{i}]")
            for j, s in enumerate(r["steps"]):
                need(s, ("role", "label", "fit_seconds", "passes"), f"runs[{i}].steps[{j}]")
                if s.get("rel_gap") is not None and s["rel_gap"] < -1e-9:
                    raise ValueError(f"runs[{i}].steps[{j}]: negative gap to the best objective")


def run_suite(cfg: dict, argv: list[str]) -> dict:
    out = cfg["out"]
    os.makedirs(out, exist_ok=True)
    res = {"schema": SCHEMA, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "command": command_line(argv), "suite": cfg["suite"],
        "machine": machine_info(), "versions": versions(),
        "config": {k: v for k, v in cfg.items() if k != "out"},
        "objective": "sum over models of 0.5||w||^2 + 0.5 b^2 + C sum loss(y (w.x + b)), "
                     "bias a regularized constant feature of value 1 (LIBLINEAR -B 1); "
                     "multiclass one-vs-rest",
        "datasets": [], "runs": [], "best": {}, "io_baseline": {}, "rss_floor": {},
        "solvers_registered": streamsvm_solvers()}
    json_path = os.path.join(out, "results.json")
    t_suite = time.perf_counter()
    for name in cfg["datasets"]:
        spec = dataset_spec(name, cfg)
        t0 = time.perf_counter()
        ds = prepare_dataset(spec, cfg["work"], need_vw=_wants(cfg, "vw"))
        ds["prep_total_s"] = time.perf_counter() - t0
        if ds["ooc"]:
            from streamsvm._units import parse_size
            ds["budget_bytes"] = (parse_size(cfg["ooc_memory"], "--ooc-memory")
                                  if cfg.get("ooc_memory")
                                  else int(ds["decoded_bytes"] * OOC["budget_fraction"]))
            ds["budget"] = str(ds["budget_bytes"])
        res["datasets"].append(dict(ds))
        log(f"{name}: {ds['n_rows']:,} rows, {ds['n_features']:,} features, {ds['task']}, "
            f"decoded {ds['decoded_bytes'] / MB:,.0f} MB"
            + (f", budget {ds['budget_bytes'] / MB:,.0f} MB" if ds["ooc"] else ""))
        if ds["ooc"] or cfg.get("io_baseline_all"):
            log(f"{name}: I/O floor (read + decompress the store, median of 3)")
            res["io_baseline"][name] = io_baseline(ds["store"], repeat=3)
            rss = io_rss(ds["store"], os.path.join(out, "io-rss", name),
                         budget=ds.get("budget_bytes", 0))
            res["io_baseline"][name]["rss"] = rss
            res["rss_floor"][name] = rss.get("runtime_mb") or rss["import_mb"]
        evaluator = Evaluator(ds)
        losses = cfg["binary_losses"] if ds["task"] == "binary" else cfg["multiclass_losses"]
        if ds["ooc"] and cfg.get("ooc_losses"):
            losses = [l for l in losses if l in cfg["ooc_losses"]]
        if cfg.get("losses"):
            losses = [l for l in losses if l in cfg["losses"]]
        for C in cfg["Cs"]:
            for loss in losses:
                methods = select_methods(plan_methods(ds["task"], loss, ooc=ds["ooc"]),
                                         cfg["methods"])
                group = []
                for m in methods:
                    t0 = time.perf_counter()
                    run = run_method(m, ds, C, loss, cfg, evaluator)
                    group.append(run)
                    res["runs"].append(run)
                    log(f"{name} C={C:g} {loss}: {m['id']}: {run['status']}"
                        + (f" ({run['message'][:120]})" if run.get("message") else "")
                        + f" [{time.perf_counter() - t0:.1f}s]")
                res["best"].update(finalize_groups(group, cfg["target_gap"]))
                write_json(res, json_path)
        del evaluator
    res["best"] = finalize_groups(res["runs"], cfg["target_gap"])
    res["targets"] = dcd_targets(res)
    res["suite_seconds"] = time.perf_counter() - t_suite
    res["streamsvm_source_sha256_at_end"] = source_digest()
    if res["streamsvm_source_sha256_at_end"] != res["versions"]["streamsvm_source_sha256"]:
        log("WARNING: streamsvm's source changed during the run; rerun for clean numbers")
    res["machine"]["loadavg_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    validate_results(clean(res))
    write_json(res, json_path)
    return res


def _wants(cfg: dict, method_id: str) -> bool:
    return not cfg["methods"] or any(p in method_id or p == method_id for p in cfg["methods"])


# -- the subcommands -------------------------------------------------------------------------

def _floats(s: str) -> list[float]:
    return [float(v) for v in s.split(",") if v.strip()]


def register(sub) -> None:
    """Add ``suite``, ``render`` and the suite's hidden ``worker`` to the subcommands ``sub``."""
    p = sub.add_parser(
        "suite", help="every solver against LIBLINEAR, scikit-learn and VW (the default "
        "subcommand)", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="\n\n".join(__doc__.split("\n\n")[:3]),
        epilog="Outputs: OUT/results.json (everything), OUT/results.md (tables), PNG plots in "
               "--plots. Data sets: " + ", ".join(REAL) + " (from ../shared/datasets) and "
               "synth-<rows>[-f<features>] (tools/make_synthetic.py, e.g. synth-1e6, or the "
               "text-like synth-1e6-f2e6: 2*10^6 features, default 10^5); data sets with at least "
               "the suite's out-of-core row count get a memory budget of 1/8 of the decoded "
               "store, and only streaming methods (streamsvm, SGD, VW) run on them.")
    p.add_argument("--suite", choices=sorted(SUITES), default="quick",
                   help="preset matrix (default quick: every real data set and synth-1e5, C=1, "
                        "all methods; < 10 min on 2 cores)")
    p.add_argument("--datasets", help="comma-separated data sets instead of the suite's")
    p.add_argument("--methods", help="comma-separated method ids or substrings (e.g. "
                                     "streamsvm,liblinear-s3,vw)")
    p.add_argument("-C", "--C", dest="Cs", type=_floats, help="comma-separated C values")
    p.add_argument("--losses", help="comma-separated losses (hinge,squared_hinge; ww: the "
                   "Weston–Watkins multiclass problem)")
    p.add_argument("--out", help="output directory (default bench-out/SUITE)")
    p.add_argument("--work", help="data directory: stores, text and VW copies, reused between "
                                  "runs (default bench-out/work)")
    _plot_options(p)
    p.add_argument("--synthetic-nnz", type=int, default=SYNTH["nnz_per_row"],
                   help="mean non-zeros per synthetic row before de-duplication (default "
                        "%(default)s)")
    p.add_argument("--ooc-rows", type=float,
                   help="data sets with at least this many rows run out of core")
    p.add_argument("--repeat", type=int, help="fits per measurement when fast (median)")
    p.add_argument("--repeat-under", type=float,
                   help="repeat only fits faster than this many seconds")
    p.add_argument("--timeout", type=float, help="seconds per child process")
    p.add_argument("--max-passes", type=float, help="streamsvm max_passes")
    p.add_argument("--tol", type=float, help="streamsvm tol (relative duality gap); also the "
                   "gap to the best objective a LIBLINEAR -e must reach (default 1e-3)")
    p.add_argument("--memory", default="1GB",
                   help="streamsvm memory budget on in-memory data sets (default 1GB)")
    p.add_argument("--ooc-memory", default=None, metavar="SIZE",
                   help="streamsvm memory budget on out-of-core data sets (default: "
                        f"{OOC['budget_fraction']:g} of the store's decoded bytes)")
    p.add_argument("--readers", type=int, default=None,
                   help="streamsvm reader threads (default: the scheduler's, one fewer than "
                        "the CPUs for a local store)")
    p.add_argument("--seed", type=int, default=0, help="seed of every method (default 0)")
    p.add_argument("--no-cli", action="store_true",
                   help="skip the 'streamsvm train' CLI runs (whole-process time, peak RSS)")
    p.add_argument("--io-baseline", action="store_true",
                   help="measure the I/O floor (tools/bench.py io-baseline) of every data set "
                        "of the suite, not only of the out-of-core ones")
    p.add_argument("--clean", action="store_true",
                   help="delete the out-of-core data sets' files from --work at the end")
    p.add_argument("--prepare-only", action="store_true",
                   help="make the suite's stores and text files, then exit")
    p.set_defaults(run=_suite_cmd)

    p = sub.add_parser("render", help="tables and plots again from a suite's results file",
                       description="Re-render the tables and plots of a results file "
                                   "(tools/bench.py suite's OUT/results.json).")
    p.add_argument("results", metavar="RESULTS_JSON")
    p.add_argument("--markdown-out", metavar="PATH",
                   help="write the Markdown here (plot links relative to it) instead of next "
                        "to the results file")
    _plot_options(p)
    p.set_defaults(run=_render_cmd)

    p = sub.add_parser("worker")       # hidden: one method's run, started by the suite
    p.add_argument("spec", metavar="SPEC_JSON")
    p.set_defaults(run=lambda args, argv: _worker_cmd(args.spec))


def _plot_options(p) -> None:
    p.add_argument("--plots", default=os.path.join(ROOT, "docs", "bench"),
                   help="directory for PNG plots (default docs/bench)")
    p.add_argument("--no-plots", action="store_true")


def _worker_cmd(spec_path: str) -> int:
    from .worker import run_worker
    return run_worker(spec_path)


def _render_cmd(args, argv) -> int:
    from . import report
    with open(args.results) as f:
        res = json.load(f)
    out = os.path.dirname(os.path.abspath(args.results))
    md = report.render(res, out, None if args.no_plots else os.path.abspath(args.plots),
                       md_path=args.markdown_out)
    with open(md) as f:
        print(f.read())
    return 0


def _suite_cmd(args, argv) -> int:
    from . import report
    cfg = make_config(args)
    if args.prepare_only:
        for name in cfg["datasets"]:
            ds = prepare_dataset(dataset_spec(name, cfg), cfg["work"], need_vw=_wants(cfg, "vw"))
            log(f"{name}: ready ({ds['n_rows']:,} rows, decoded {ds['decoded_bytes'] / MB:,.0f} "
                f"MB, on disk {ds['store_bytes_on_disk'] / MB:,.0f} MB) {ds['prep']}")
        return 0
    log(f"suite {cfg['suite']}: data sets {', '.join(cfg['datasets'])}; C {cfg['Cs']}; "
        f"output {cfg['out']}")
    res = run_suite(cfg, argv)
    report.render(res, cfg["out"], None if args.no_plots else cfg["plots"])
    with open(os.path.join(cfg["out"], "results.md")) as f:
        print(f.read())
    if args.clean:
        for d in res["datasets"]:
            if d.get("ooc"):
                shutil.rmtree(os.path.join(cfg["work"], d["name"]), ignore_errors=True)
                log(f"removed {os.path.join(cfg['work'], d['name'])}")
    log(f"done in {res['suite_seconds']:.0f} s: {os.path.join(cfg['out'], 'results.json')}")
    return 0


def make_config(args) -> dict:
    """The run's settings: the suite's preset, overridden by the options given."""
    cfg = dict(SUITES[args.suite])
    cfg["suite"] = args.suite
    if args.datasets:
        cfg["datasets"] = [d.strip() for d in args.datasets.split(",") if d.strip()]
    if args.methods:
        cfg["methods"] = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.Cs:
        cfg["Cs"] = args.Cs
    cfg["losses"] = [l.strip() for l in args.losses.split(",")] if args.losses else None
    for k in ("repeat", "repeat_under", "timeout", "max_passes", "tol"):
        if getattr(args, k) is not None:
            cfg[k] = getattr(args, k)
    if args.ooc_rows is not None:
        cfg["ooc_rows"] = int(args.ooc_rows)
    cfg.update(seed=args.seed, memory=args.memory, ooc_memory=args.ooc_memory,
               readers=args.readers, cli=not args.no_cli,
               synthetic_nnz=args.synthetic_nnz,
               target_gap=TARGET_GAP if args.tol is None else args.tol,
               io_baseline_all=args.io_baseline, ooc=dict(OOC))
    cfg["out"] = os.path.abspath(args.out or os.path.join(ROOT, "bench-out", args.suite))
    cfg["work"] = os.path.abspath(args.work or os.path.join(ROOT, "bench-out", "work"))
    cfg["plots"] = os.path.abspath(args.plots)
    return cfg
