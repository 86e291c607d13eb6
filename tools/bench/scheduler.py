"""``tools/bench.py scheduler STORE``: passes per second on a dask ``LocalCluster`` of 1 and
2 worker processes (one thread each) against the local backend, and the scaling efficiency.

Each run trains a solver for a fixed number of passes (``tol`` out of reach) with
``memory`` per worker, so after the first pass every worker serves its blocks from its own
cache: the rate measures the kernels, the task round trips and the reductions. The rate is
taken over the passes after the first (from the run's history), and the efficiency of 2
workers is ``rate(2) / (2 · rate(1))``.

With ``--tol``, every run goes to that certified gap instead (``--max-passes`` its cap):
the passes and seconds a solver needs on the cluster next to the local backend (for the
dual solvers: their distributed loop against the local solver's own, shrinking and RAM
slab included), and the ratio of the passes to the local run's. ``--workers`` sets the
cluster sizes (default 1,2), ``--loss`` the loss of the solvers that take one.
"""

from __future__ import annotations

import os
import sys
import warnings

from ._common import ROOT
from ._machine import save_stamped
from ._table import markdown_table
from ._timed import timed_train

__all__ = ["DASK_SOLVERS", "scheduler_scaling", "scaling_table", "register"]


def _rate(history) -> tuple:
    """Passes per second after the first iteration (passes, seconds)."""
    first = history[0]
    last = history[-1]
    passes = last["passes"] - first["passes"]
    secs = last["seconds"] - first["seconds"]
    return (passes / secs if secs > 0 else float("nan")), passes, secs


# nesvm and newton on the hinge, ww without a bias (--loss still chooses for newton): the
# problems BENCHMARKS' tables were measured on
# (before the shared defaults became squared hinge and bias 1)
_PARAMS = {"alm": dict(solver="alm", inner="cg"), "dcd": dict(solver="dcd"),
           "nesvm": dict(solver="nesvm", loss="hinge", lipschitz="trace"),
           "newton": dict(solver="newton", loss="hinge"),
           "ww": dict(solver="ww", bias=0.0, gap_decay=0.0)}
_TAKES_LOSS = ("alm", "dcd", "newton")


#: The solvers it measures.
DASK_SOLVERS = tuple(_PARAMS)


def _run(store, solver, passes, memory, scheduler=None, tol=None, C=1.0, loss=None) -> dict:
    params = dict(_PARAMS[solver], tol=tol or 1e-12, C=C)
    if loss is not None and solver in _TAKES_LOSS:
        params["loss"] = loss
    _, res, seconds = timed_train(store, max_passes=passes, memory=memory, scheduler=scheduler,
                                  **params)
    rate, p, s = _rate(res.history)
    return {"solver": solver, "seconds": seconds, "passes": res.passes,
            "passes_per_s": rate, "timed_passes": p, "timed_seconds": s,
            "primal": res.primal, "gap": res.stop_value, "converged": res.converged,
            "kind": res.history[-1]["kind"], "iterations": len(res.history),
            "loss": params.get("loss")}


def _said(row: dict) -> dict:
    """``row``, told on stderr as it is measured (a run of many solvers takes long)."""
    print(f"scheduler: {row['solver']} on {row['backend']}: {row['passes']:.1f} passes in "
          f"{row['seconds']:.1f} s, {row['passes_per_s']:.3f} passes/s after the first, gap "
          f"{row['gap']:.2e}", file=sys.stderr, flush=True)
    return row


def scheduler_scaling(store_url: str, solvers=("alm", "dcd"), workers=(1, 2), passes=8,
                      memory="4GB", tol=None, C=1.0, loss=None, with_local=True) -> dict:
    """Rows of (solver, backend): passes/s and the efficiency of the largest cluster (with
    ``tol``: the passes and seconds to that gap). ``with_local=False``: no local run (the
    throughput's efficiency compares cluster sizes only)."""
    bad = [s for s in solvers if s not in DASK_SOLVERS]
    if bad:
        raise SystemExit(f"--dask-solvers: unknown solver {bad[0]!r} (choose from "
                         f"{', '.join(DASK_SOLVERS)})")
    import distributed
    from streamsvm.io import open_store
    store = open_store(store_url)
    rows = []
    for solver in solvers:
        # the dual solvers' local backend runs their own solver, not CoCoA+: only to a tol
        if (tol is not None or solver not in ("dcd", "ww")) and with_local:
            rows.append(_said(dict(_run(store, solver, passes, memory, None, tol, C, loss),
                                   backend="local")))
        for n in workers:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1,
                                                   processes=True, dashboard_address=None,
                                                   worker_dashboard_address=None,
                                                   memory_limit=0)
            try:
                with distributed.Client(cluster) as client:
                    rows.append(_said(dict(
                        _run(store, solver, passes, memory, client, tol, C, loss),
                        backend=f"dask, {n} worker{'s' if n > 1 else ''}", workers=n)))
            finally:
                cluster.close()
    for solver in solvers:
        local = [r for r in rows if r["solver"] == solver and r["backend"] == "local"]
        for r in rows:
            if r["solver"] == solver and local and tol is not None:
                r["vs_local"] = r["passes"] / local[0]["passes"]
        by = {r.get("workers"): r for r in rows if r["solver"] == solver and "workers" in r}
        if 1 in by and max(workers) in by and max(workers) > 1:
            n = max(workers)
            by[n]["efficiency"] = by[n]["passes_per_s"] / (n * by[1]["passes_per_s"])
    return {"store": store_url, "n_rows": store.n_rows, "memory": memory, "passes": passes,
            "tol": tol, "C": C, "loss": loss, "rows": rows}


def scaling_table(r: dict) -> str:
    """Markdown table of :func:`scheduler_scaling`."""
    if r.get("tol") is not None:
        return markdown_table(
            ["solver", "backend", f"passes to gap {r['tol']:g}", "× local", "rounds", "gap",
             "s total", "primal"],
            [[f"{row['solver']}{'' if not row.get('loss') else ' ' + row['loss']}",
              row["backend"],
              f"{row['passes']:.1f}{'' if row['converged'] else ' (cap)'}",
              "" if row.get("vs_local") is None else f"{row['vs_local']:.2f}",
              f"{row.get('iterations', '')}", f"{row['gap']:.2e}", f"{row['seconds']:.1f}",
              f"{row['primal']:.6f}"]
             for row in r["rows"]], "llrrrrrr")
    rows = []
    for row in r["rows"]:
        eff = row.get("efficiency")
        rows.append([f"{row['solver']} ({row['kind']})", row["backend"], f"{row['passes']:.0f}",
                     f"{row['passes_per_s']:.3f}", "" if eff is None else f"{100 * eff:.0f} %",
                     f"{row['seconds']:.1f}"])
    return markdown_table(["solver", "backend", "passes", "passes/s (after the first)",
                           "efficiency", "s total"], rows, "llrrrr")


# -- the subcommand --------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``scheduler`` to the subcommands ``sub``."""
    p = sub.add_parser("scheduler", help="passes/s on a dask LocalCluster of 1 and 2 workers "
                       "against the local backend", description=__doc__.split("\n\n")[0])
    p.add_argument("store", metavar="STORE")
    p.add_argument("--max-passes", type=float, help="passes of every run (default 8); with "
                   "--tol, their cap")
    p.add_argument("--memory", default="1GB", help="budget per worker (default 1GB)")
    p.add_argument("--tol", type=float, help="the passes and seconds to this gap instead")
    p.add_argument("--dask-solvers", default="alm,dcd", metavar="LIST",
                   help="the solvers to run, comma-separated (alm, dcd, nesvm, newton, ww; "
                        "default alm,dcd)")
    p.add_argument("--workers", default="1,2", metavar="LIST",
                   help="the cluster sizes, comma-separated (default 1,2)")
    p.add_argument("--loss", choices=("hinge", "squared_hinge"),
                   help="the loss of alm, dcd and newton (default: each solver's own)")
    p.add_argument("--dask-C", type=float, default=1.0, metavar="C",
                   help="the cost C of every run (default 1)")
    p.add_argument("--no-local", action="store_true",
                   help="no run on the local backend (without --tol it only gives a rate "
                        "beside the clusters')")
    p.add_argument("--out", help="output directory (default bench-out/scheduler)")
    p.set_defaults(run=_scheduler_cmd, parser=p)


def _scheduler_cmd(args, argv) -> int:
    solvers = tuple(s.strip() for s in args.dask_solvers.split(",") if s.strip())
    bad = [s for s in solvers if s not in DASK_SOLVERS] or ([] if solvers else [""])
    if bad:
        args.parser.error(f"--dask-solvers: unknown solver {bad[0]!r} (choose from "
                          f"{', '.join(DASK_SOLVERS)})")
    try:
        workers = tuple(int(w) for w in args.workers.split(",") if w.strip())
    except ValueError:
        workers = ()
    if not workers or min(workers) < 1:
        args.parser.error(f"--workers: a comma-separated list of cluster sizes ≥ 1, not "
                          f"{args.workers!r}")
    r = scheduler_scaling(args.store, passes=int(args.max_passes or 8), memory=args.memory,
                          tol=args.tol, C=args.dask_C, solvers=solvers, workers=workers,
                          loss=args.loss, with_local=not args.no_local)
    save_stamped(r, argv, args.out or os.path.join(ROOT, "bench-out", "scheduler"),
                 "scheduler.json")
    print(scaling_table(r))
    return 0
