"""newton against dcd in memory (issue 35): seconds and passes to a certified gap, the hinge,
each data set's store small enough for RAM, and newton of an earlier checkout beside it in
the same run.

    python tools/bench.py newton-in-ram                       # the shared data sets
    python tools/bench.py newton-in-ram --before ../old/streamsvm-checkout --json out.json

Each measurement runs in a child process (``streamsvm._train.train`` on the store, after one
untimed one-pass run so that numba's cache is loaded), the best of ``--repeat`` runs: the
seconds of ``train`` alone, its passes, its certified relative gap and its primal
objective; for newton also the polish's seconds per pass against the pass's own work's (the
pass and the Hessians summed after it from the rows in RAM: issue 35 asks the first to be
at most the second), timed around those functions. ``--before DIR`` runs newton again from the package in ``DIR`` (a checkout whose
``streamsvm/`` is imported first), on the same stores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from ._common import write_json
from ._table import table_head, table_row

__all__ = ["register"]

_ROOT = Path(__file__).resolve().parents[2]
_DATA = _ROOT.parent / "shared" / "datasets"
_DEFAULT = ("usps/usps.t,pendigits/pendigits,letter/letter.scale,dna/dna.scale,vowel/vowel.scale,"
            "mushrooms/mushrooms,a9a/a9a")

_WORKER = r"""
import json, sys, time
import streamsvm
from streamsvm._train import train
store, solver, C, tol, repeat, cap = sys.argv[1:7]
kw = dict(solver=solver, C=float(C), loss="hinge", tol=float(tol), max_passes=int(cap),
          resume=False)
spent = {"polish": 0.0, "work": 0.0}
if solver == "newton":      # the polish's seconds, and the passes' own work (the pass and
    # the Hessians summed after it from the rows in RAM), timed around their functions
    from streamsvm.solvers import _newton_certificate as nc, _newton_hessian as nh, newton as nw
    def timed(key, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[key] += time.perf_counter() - t
        return run
    nc.polish = timed("polish", nc.polish)
    nw.NewtonSolver._pass = timed("work", nw.NewtonSolver._pass)
    if hasattr(nh, "_sum_slots"):
        nh._sum_slots = timed("work", nh._sum_slots)
    else:                                         # (an earlier checkout's)
        nw.hessians_at_accepted = timed("work", nw.hessians_at_accepted)
train(store, **dict(kw, max_passes=1))           # numba's cache loaded (or compiled) first
best = None
for _ in range(int(repeat)):
    spent.update(polish=0.0, work=0.0)
    t0 = time.perf_counter()
    model, res = train(store, **kw)
    secs = time.perf_counter() - t0
    if best is None or secs < best["seconds"]:
        n = max(float(res.passes), 1.0)
        best = {"seconds": secs, "passes": float(res.passes), "gap": float(res.stop_value),
                "converged": bool(res.converged), "primal": float(res.history[-1]["primal"]),
                "polish_s_per_pass": spent["polish"] / n, "work_s_per_pass": spent["work"] / n}
best["package"] = streamsvm.__file__
print(json.dumps(best))
"""


def _store(path: Path, work: Path) -> Path:
    """The store of the libsvm file ``path`` under ``work`` (converted once)."""
    out = work / (path.name.replace(".", "_") + ".zarr")
    if not out.exists():
        subprocess.run([sys.executable, "-m", "streamsvm", "convert", str(path), str(out), "-q"],
                       check=True, capture_output=True)
    return out


def _measure(store: Path, solver: str, args, package: str | None) -> dict:
    env = dict(os.environ)
    if package:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(package).resolve()), env.get("PYTHONPATH")) if p)
    # (run from the stores' directory: from the checkout's, ``-c`` would import its
    # streamsvm before --before's)
    out = subprocess.run([sys.executable, "-c", _WORKER, str(store.resolve()), solver,
                          str(args.C), str(args.tol), str(args.repeat), str(args.max_passes)],
                         env=env, check=True, capture_output=True, text=True, cwd=store.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cell(r: dict) -> str:
    mark = "" if r["converged"] else ", not certified"
    passes = f"{r['passes']:.0f}" if r["passes"] == int(r["passes"]) else f"{r['passes']:.1f}"
    return f"{passes} / {r['seconds']:.2f} (gap {r['gap']:.1e}{mark})"


def _polish(r: dict) -> str:
    """The polish's seconds per pass against the pass's own work's (the pass and the
    Hessians summed after it from the rows in RAM)."""
    return f"{r['polish_s_per_pass']:.3f} ÷ {r['work_s_per_pass']:.3f}"


def _run(args, argv) -> int:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    cols = ["data", "dcd: passes / s", "newton: passes / s"]
    if args.before:
        cols.insert(2, "newton before: passes / s")
    cols += ["newton s ÷ dcd s", "polish ÷ pass s (before)" if args.before else "",
             "polish ÷ pass s"]
    cols = [c for c in cols if c]
    for line in table_head(cols, "l" + "r" * (len(cols) - 1)):
        print(line)
    rows = []
    for name in args.data.split(","):
        path = Path(name) if Path(name).exists() else Path(args.datasets) / name
        store = _store(path, work)
        row = {"data": path.name, "dcd": _measure(store, "dcd", args, None),
               "newton": _measure(store, "newton", args, None)}
        if args.before:
            row["newton_before"] = _measure(store, "newton", args, args.before)
        rows.append(row)
        cells = [row["data"], _cell(row["dcd"])]
        if args.before:
            cells.append(_cell(row["newton_before"]))
        cells += [_cell(row["newton"]), f"{row['newton']['seconds'] / row['dcd']['seconds']:.2f}"]
        if args.before:
            cells.append(_polish(row["newton_before"]))
        cells.append(_polish(row["newton"]))
        print(table_row(cells), flush=True)
    if args.json:
        write_json({"command": " ".join(argv), "C": args.C, "tol": args.tol, "rows": rows},
                   args.json, cleaned=False)
    return 0


def register(sub) -> None:
    """Add ``newton-in-ram`` to the subcommands ``sub``."""
    p = sub.add_parser("newton-in-ram", help="newton against dcd in memory, hinge, to a "
                       "certified gap (and an earlier checkout's newton)",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=_DEFAULT, help="comma-separated libsvm files (paths, or "
                   "names under --datasets)")
    p.add_argument("--datasets", default=str(_DATA), help="directory of the named data sets")
    p.add_argument("--work", default="bench-out/newton-in-ram", help="where the stores go")
    p.add_argument("--before", help="a checkout of an earlier streamsvm: its newton too")
    p.add_argument("-C", "--C", type=float, default=1.0)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--max-passes", type=int, default=300)
    p.add_argument("--repeat", type=int, default=2, help="runs per measurement (the best)")
    p.add_argument("--json", help="also write the rows to this file")
    p.set_defaults(run=_run)
