"""AVSF out of core: what chunk order costs and what the hot cache and the dual cached loops
do (spec_003 §3.4, §3.6; BENCHMARKS.md, "avsf").

    python tools/bench.py avsf order ../shared/datasets/a9a/a9a -C 1 --eps 0.01
    python tools/bench.py avsf store STORE -C 100 --memory 16MB --runs avsf,avsf:0.3,dcd

``order``: one libsvm file trained in RAM (the paper's epochs), then streamed under a small
budget with chunks of 1/10, 1/50 and 1/500 of the rows, with the hot cache and without it
(``cache=0``): epochs, passes, seconds and the dual at the paper's rule (``--eps``, confirmed
by the exact check). ``store``: runs on a converted store at one budget; ``avsf:X`` sets
``cache_visits=X`` (extra hot-row visits with each pair of blocks), ``avsf:NAME=V/NAME=V``
any of the solver's numeric parameters (``avsf:lazy=0.5``: lazy reading of cold blocks,
spec §3.7): passes, epochs, steps, the certified gap, kernel seconds and seconds spent
waiting for blocks.

    python tools/bench.py avsf store STORE -C 100 --memory 26MB --runs avsf,avsf:lazy=0.5,dcd
"""

from __future__ import annotations

import argparse

from ._table import table_head, table_row
from ._timed import timed_train

__all__ = ["register"]


def _fit(store, **kw):
    """A timed run, every warning silenced: (result, seconds)."""
    _, res, seconds = timed_train(store, quiet=(Warning,), **kw)
    return res, seconds


def _print(line: str) -> None:
    print(line, flush=True)


def order(args) -> int:
    """The ``order`` table (module doc)."""
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file

    from streamsvm.io import InMemoryStore
    X, y = load_svmlight_file(args.data)
    X = sp.csr_matrix(X)
    n = X.shape[0]
    runs = [("in RAM", "1GB", max(1, n // 8), args.cache)]
    for frac in (10, 50, 500):
        runs.append((f"chunks of 1/{frac}, hot cache", args.memory, max(1, n // frac),
                     args.cache))
    for frac in (50, 500):
        runs.append((f"chunks of 1/{frac}, no cache", args.memory, max(1, n // frac), 0.0))
    for line in table_head(["order", "epochs", "passes", "seconds", "dual",
                            "hot rows (most)"]):
        _print(line)
    for label, mem, chunk, cache in runs:
        res, sec = _fit(InMemoryStore(X, y, chunk_rows=chunk), solver="avsf", C=args.C,
                        loss=args.loss, memory=mem, max_passes=args.max_passes, eps=args.eps,
                        tol=1e-12, cache=cache)
        most = max(h["hot_rows"] for h in res.history)
        flag = "" if res.converged else " (not converged)"
        _print(table_row([label, f"{res.n_iter:,}{flag}", f"{res.passes:,.0f}", f"{sec:.1f}",
                          f"{res.dual:.4f}", f"{most:,.0f}"]))
    return 0


def store(args) -> int:
    """The ``store`` table (module doc)."""
    for line in table_head(["run", "passes", "epochs", "steps", "converged", "gap", "seconds",
                            "kernel s", "waiting s"], "lrrrlrrrr"):
        _print(line)
    for spec in args.runs.split(","):
        solver, _, opts = spec.partition(":")
        kw = {}
        for opt in filter(None, opts.split("/")):
            name, eq, value = opt.partition("=")
            if eq:
                kw[name] = float(value) if "." in value or "e" in value else int(value)
            else:
                kw["cache_visits"] = float(name)
        res, sec = _fit(args.store, solver=solver, C=args.C, loss=args.loss, memory=args.memory,
                        max_passes=args.max_passes, tol=args.tol, **kw)
        h = res.history
        steps = h[-1].get("steps", float("nan"))
        _print(table_row([spec, f"{res.passes:,.1f}", f"{res.n_iter:,}", f"{steps:,.0f}",
                          res.converged, f"{res.stop_value:.1e}", f"{sec:.1f}",
                          f"{sum(e['kernel_seconds'] for e in h):.1f}",
                          f"{sum(e['wait_seconds'] for e in h):.1f}"]))
    return 0


def register(sub) -> None:
    """Add ``avsf`` (``order``, ``store``) to the subcommands ``sub``."""
    top = sub.add_parser("avsf", help="avsf's chunk order, hot cache and lazy reading out of "
                         "core", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    cmds = top.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    o = cmds.add_parser("order", help="chunk order, hot cache (a libsvm file)")
    o.add_argument("data")
    o.add_argument("--eps", type=float, default=0.01)
    o.add_argument("--memory", default="6MB", help="budget of the streamed runs")
    o.add_argument("--cache", type=float, default=0.1)
    o.set_defaults(run=lambda args, argv: order(args))
    s = cmds.add_parser("store", help="runs on a converted store at one budget")
    s.add_argument("store")
    s.add_argument("--runs", default="avsf,avsf:0.3,dcd")
    s.add_argument("--memory", default="16MB")
    s.add_argument("--tol", type=float, default=1e-3)
    s.set_defaults(run=lambda args, argv: store(args))
    for q in (o, s):
        q.add_argument("-C", type=float, default=1.0)
        q.add_argument("--loss", default="hinge")
        q.add_argument("--max-passes", type=float, default=3000)
