"""alm's own experiments (issue 16), next to the solver suite's tables.

Three commands, each printing a Markdown table and (``--json``) writing its rows::

    python tools/bench.py alm optima                      # spec_004 §7's reference optima
    python tools/bench.py alm race STORE --libsvm FILE -C 1 --loss hinge [--reference OBJ]
    python tools/bench.py alm variants STORE -C 1 --loss hinge [--reference OBJ]

``optima`` trains ``alm`` (free bias) on the shared a9a (C = 0.01, 1, 100) and mushrooms
(C = 1), L1 and L2, to a certified relative gap of 1e-5, and prints its objective next to the
spec's reference (spec §7 table) with their relative difference. The stores are
``bench-out/work/<name>/train.zarr`` (``tools/bench.py suite`` makes them; ``--stores``).

``race`` measures passes and seconds to 1% and 0.1% of the free-bias optimum ``OBJ`` (default:
the spec's value when known, else the best objective any run reached) for ``alm`` (its default:
the Gram path when n_features + 1 <= 4096, else CG-3), ``alm inner=cg``, ``newton
free_bias=True`` (the same problem), ``dcd`` (LIBLINEAR's problem, bias a regularized feature:
its objective, evaluated without the ½b² term, is an upper bound of the free-bias objective of
its point, so the comparison is conservative for dcd; passes from its history, per sweep) and, with ``--libsvm``, LIBLINEAR ``-s
2`` (L2) or ``-s 3`` (L1) over a ladder of ``-e`` (each step a separate fit, its (w, b)
evaluated on the free-bias objective here). streamsvm's numbers come from each run's history
(the true objective of the best point so far, the cumulative passes and seconds).

``variants`` compares the inner solvers and the paper's settings on one store: the paper's
Algorithm 2 taken literally (``mode=paper``: w0 = 1, one gradient step, μ = 0.1, ρ = 1 and
its stopping rules), the single step with the practical defaults (μ = 0.1·C, w0 = 0), CG with
2, 3 and 5 steps (Jacobi-preconditioned, and 3 steps without), and the exact Gram path.
"""

from __future__ import annotations

import argparse
import math
import os

import numpy as np

from ._common import DATASETS, ROOT, print_rows
from ._table import markdown_table
from ._timed import timed, timed_train

__all__ = ["SPEC_OPTIMA", "register"]

#: spec_004 §7: the free-bias optima (data set, C) -> (L1, L2)
SPEC_OPTIMA = {("a9a", 0.01): (118.29144605, 138.83428786),
               ("a9a", 1.0): (11433.38723662, 13742.30343973),
               ("a9a", 100.0): (1142271.3, 1373916.92959350),
               ("mushrooms", 1.0): (7.57260936, 7.28108138)}
TARGETS = (1e-2, 1e-3)


def _quiet_train(store, **kw):
    """A timed run, its convergence and user warnings silenced: (model, result, seconds)."""
    from streamsvm.exceptions import ConvergenceWarning
    return timed_train(store, quiet=(ConvergenceWarning, UserWarning), **kw)


def _first(history, ref, target):
    """(passes, seconds) of the first history entry within ``target`` of ``ref``."""
    for h in history:
        P = h["primal"]
        if math.isfinite(P) and (P - ref) / abs(ref) <= target:
            return h["passes"], h["seconds"]
    return None, None


def _warm(loss) -> None:
    """Load every kernel the runs use (numba's cache) before anything is timed."""
    import scipy.sparse as sp
    from streamsvm.io import InMemoryStore
    X = sp.random(64, 8, density=0.5, format="csr", random_state=0)
    small = InMemoryStore(X, np.where(np.arange(64) % 2, 1.0, -1.0), chunk_rows=32)
    for kw in (dict(solver="alm"), dict(solver="alm", inner="cg"),
               dict(solver="alm", mode="paper", mu=0.1, rho=1.0),
               dict(solver="newton", free_bias=True), dict(solver="dcd")):
        _quiet_train(small, loss=loss, max_passes=3, **kw)


def _streamsvm_row(label, store, **kw) -> dict:
    model, res, secs = _quiet_train(store, **kw)
    return {"method": label, "history": [{k: h[k] for k in ("passes", "seconds", "primal",
                                                             "exact")}
                                         for h in res.history],
            "passes": res.passes, "seconds": secs, "gap": res.stop_value,
            "primal": res.primal, "converged": res.converged}


def _liblinear_rows(path, C, loss, n_features) -> list:
    from liblinear import liblinear as ll
    from liblinear import liblinearutil as lu
    from sklearn.datasets import load_svmlight_file
    from .peers import liblinear_weights, parse_liblinear_output
    X, y = load_svmlight_file(path, n_features=n_features)
    y = np.where(y > y.min(), 1.0, -1.0) if len(np.unique(y)) == 2 else y
    prob = ll.problem(y, X.tocsr())
    prob.set_bias(1.0)
    s = 2 if loss == "squared_hinge" else 3
    p = 2.0 if loss == "squared_hinge" else 1.0
    rows = []
    for e in (0.1, 0.01, 0.001, 1e-4, 1e-5):
        lines = []
        param = ll.parameter(f"-s {s} -c {C!r} -B 1 -e {e!r} -q")
        param.print_func = ll.PRINT_STRING_FUN(lambda m: lines.append(m.decode(errors="replace")))
        model, (secs,) = timed(lambda: lu.train(prob, param))
        info = parse_liblinear_output("".join(lines), s)
        W, b = liblinear_weights(model, n_features, "binary", 2)
        xi = np.maximum(1.0 - y * (X @ W[0] + b[0]), 0.0)
        rows.append({"e": e, "seconds": secs, "passes": info.get("passes"),
                     "primal": 0.5 * float(W[0] @ W[0]) + C * float((xi ** p).sum())})
    return rows


def cmd_optima(args) -> list:
    from streamsvm.io import open_store
    out = []
    for (name, C), refs in SPEC_OPTIMA.items():
        path = os.path.join(args.stores, name, "train.zarr")
        if not os.path.exists(path):
            raise SystemExit(f"bench.py alm: no store {path}; make it with: streamsvm convert "
                             f"{os.path.join(DATASETS, name, name)} {path}")
        store = open_store(path)
        for loss, ref in zip(("hinge", "squared_hinge"), refs):
            _, res, secs = _quiet_train(store, solver="alm", C=C, loss=loss, tol=args.tol,
                                        max_passes=args.max_passes)
            out.append({"data": name, "C": C, "loss": loss, "reference": ref,
                        "alm": res.primal, "rel_diff": (res.primal - ref) / ref,
                        "gap": res.stop_value, "passes": res.passes, "seconds": round(secs, 2),
                        "converged": res.converged})
    return out


def _reference(args, store) -> float | None:
    if args.reference:
        return args.reference
    name = os.path.basename(os.path.dirname(os.path.abspath(args.store)))
    refs = SPEC_OPTIMA.get((name, args.C))
    return refs[0 if args.loss == "hinge" else 1] if refs else None


def cmd_race(args) -> list:
    from streamsvm.io import open_store
    store = open_store(args.store)
    _warm(args.loss)
    common = dict(C=args.C, loss=args.loss, tol=args.tol, max_passes=args.max_passes,
                  memory=args.memory)
    rows = [_streamsvm_row("alm", store, solver="alm", **common),
            _streamsvm_row("alm inner=cg", store, solver="alm", inner="cg", **common),
            _streamsvm_row("newton free_bias", store, solver="newton", free_bias=True,
                           **common),
            _streamsvm_row("dcd (-B 1 problem)", store, solver="dcd", **common)]
    if args.libsvm:
        ll = _liblinear_rows(args.libsvm, args.C, args.loss, store.n_features)
        rows.append({"method": f"LIBLINEAR -s {2 if args.loss == 'squared_hinge' else 3} "
                               f"(-B 1 problem)", "ladder": ll})
    return _finish(args, store, rows)


def cmd_variants(args) -> list:
    from streamsvm.io import open_store
    store = open_store(args.store)
    _warm(args.loss)
    common = dict(C=args.C, loss=args.loss, tol=args.tol, max_passes=args.max_passes,
                  memory=args.memory)
    runs = [("paper Algorithm 2 (w0=1, mu=0.1, rho=1, its stops)",
             dict(mode="paper", mu=0.1, rho=1.0)),
            ("single step, mu=0.1C, w0=0", dict(inner="cg", cg_steps=1, precondition=False)),
            ("CG-2 (Jacobi)", dict(inner="cg", cg_steps=2)),
            ("CG-3 (Jacobi)", dict(inner="cg", cg_steps=3)),
            ("CG-3 (no preconditioner)", dict(inner="cg", cg_steps=3, precondition=False)),
            ("CG-5 (Jacobi)", dict(inner="cg", cg_steps=5)),
            ("Gram + Cholesky (exact)", dict(inner="gram"))]
    rows = []
    for label, kw in runs:
        if kw.get("inner") == "gram" and store.n_features + 1 > 4096:
            continue
        rows.append(_streamsvm_row(label, store, solver="alm", **common, **kw))
    return _finish(args, store, rows)


def _finish(args, store, rows) -> list:
    ref = _reference(args, store)
    if ref is None:                 # the best objective any run reached
        cands = [r["primal"] for r in rows if "primal" in r] + \
            [s["primal"] for r in rows for s in r.get("ladder", ())]
        ref = min(c for c in cands if math.isfinite(c))
    for r in rows:
        r["reference"] = ref
        for t in TARGETS:
            key = f"{t:g}"
            if "ladder" in r:
                hit = next((s for s in r["ladder"] if (s["primal"] - ref) / abs(ref) <= t), None)
                r[f"passes@{key}"] = hit["passes"] if hit else None
                r[f"seconds@{key}"] = hit["seconds"] if hit else None
                r[f"e@{key}"] = hit["e"] if hit else None
            else:
                r[f"passes@{key}"], r[f"seconds@{key}"] = _first(r["history"], ref, t)
    return rows


def _fmt(v, f):
    return "—" if v is None else format(v, f)


def table(cmd, rows) -> str:
    """Markdown table of the rows of ``cmd``."""
    if cmd == "optima":
        return markdown_table(
            ["data", "C", "loss", "spec optimum", "alm", "rel. diff", "gap", "passes", "s"],
            [[r["data"], f"{r['C']:g}", r["loss"], f"{r['reference']:.10g}",
              f"{r['alm']:.10g}", f"{r['rel_diff']:.1e}", f"{r['gap']:.1e}",
              f"{r['passes']:.0f}", f"{r['seconds']:.2f}"] for r in rows], "lrlrrrrrr")
    out = []
    for r in rows:
        to = [_fmt(r["passes@0.01"], ".0f"), _fmt(r["seconds@0.01"], ".2f"),
              _fmt(r["passes@0.001"], ".0f"), _fmt(r["seconds@0.001"], ".2f")]
        if "ladder" in r:
            to[1] += f" (-e {_fmt(r['e@0.01'], 'g')})"
            to[3] += f" (-e {_fmt(r['e@0.001'], 'g')})"
            out.append([r["method"], *to, "—", "—", "—"])
        else:
            out.append([r["method"], *to, f"{r['passes']:.0f}", f"{r['seconds']:.2f}",
                        f"{r['gap']:.1e}"])
    return f"reference objective {rows[0]['reference']:.10g}\n\n" + markdown_table(
        ["method", "passes to 1%", "s to 1%", "passes to 0.1%", "s to 0.1%", "end: passes", "s",
         "certified gap"], out)


# -- the subcommand --------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``alm`` (``optima``, ``race``, ``variants``) to the subcommands ``sub``."""
    top = sub.add_parser("alm", help="alm's optima, race to the optimum and inner solvers",
                         description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    cmds = top.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    p = cmds.add_parser("optima", help="alm against spec_004 §7's reference optima")
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--max-passes", type=float, default=20_000)
    p.add_argument("--stores", default=os.path.join(ROOT, "bench-out", "work"),
                   help="where <name>/train.zarr are (tools/bench.py suite's work directory)")
    p.add_argument("--json", help="write the rows here")
    p.set_defaults(run=_runner("optima", cmd_optima))
    for name, fn, what in (("race", cmd_race, "passes and seconds to 1%% and 0.1%% of the "
                            "optimum, alm against newton, dcd and LIBLINEAR"),
                           ("variants", cmd_variants, "alm's inner solvers and the paper's "
                            "settings")):
        p = cmds.add_parser(name, help=what)
        p.add_argument("store")
        p.add_argument("--libsvm", help="the LIBSVM file of the store (LIBLINEAR's run)")
        p.add_argument("-C", type=float, default=1.0)
        p.add_argument("--loss", choices=("hinge", "squared_hinge"), default="hinge")
        p.add_argument("--reference", type=float, help="the free-bias optimum")
        p.add_argument("--tol", type=float, default=1e-3)
        p.add_argument("--max-passes", type=float, default=3000)
        p.add_argument("--memory", default="2GB")
        p.add_argument("--json", help="write the rows here")
        p.set_defaults(run=_runner(name, fn))


def _runner(name: str, fn):
    def run(args, argv) -> int:
        rows = fn(args)
        return print_rows(table(name, rows), rows, args.json)
    return run
