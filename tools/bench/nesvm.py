"""nesvm's own experiments (issue 15), next to the solver suite's tables.

Two commands, each printing a Markdown table and (``--json``) writing its rows::

    python tools/bench.py nesvm homotopy STORE -C 1        # homotopy modes, passes to 1e-3
    python tools/bench.py nesvm path STORE                  # a C path vs separate runs

``homotopy`` trains ``nesvm`` with ``homotopy=auto`` (the default), ``geometric``, and without
homotopy (``none``, one stage at the smallest μ the auto run reached, so that its smoothing
permits the tolerance), plus ``dcd`` (hinge) for reference: passes, seconds, the certified
gap and the primal. ``path`` trains the 7 C values of the paper's experiments (1e-3 … 1e3)
in one run (``--C-path``) and one by one: passes and seconds of each. STORE is a store
path (``streamsvm convert``); the Lipschitz constant is computed once and cached in it
before anything is timed, so every run is charged the same (zero) passes for it.
"""

from __future__ import annotations

import argparse

from ._common import print_rows
from ._table import markdown_table
from ._timed import timed_train

__all__ = ["PAPER_CS", "register"]

PAPER_CS = [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0]


def fit(store, **kw) -> dict:
    """One timed run and its row."""
    _, res, seconds = timed_train(store, **kw)
    h = res.history
    return {"params": {k: v for k, v in kw.items() if k != "solver"}, "solver": kw["solver"],
            "passes": res.passes, "seconds": round(seconds, 3),
            "gap": res.stop_value, "primal": res.primal, "converged": res.converged,
            "mu_last": h[-1].get("mu"), "lipschitz_passes": sum(e["kind"] == "lipschitz"
                                                               for e in h)}


def warm_cache(store, **kw) -> None:
    """nesvm's Lipschitz constant computed and cached in the store before anything is timed."""
    from streamsvm.solvers._nesvm_lipschitz import POWER_PASSES as _POWER_PASSES
    timed_train(store, solver="nesvm", max_passes=_POWER_PASSES + 1, **kw)


def cmd_homotopy(args) -> list:
    from streamsvm.io import open_store
    store = open_store(args.store)
    common = dict(C=args.C, loss="hinge", tol=args.tol, max_passes=args.max_passes,
                  memory=args.memory)
    warm_cache(store, C=args.C, loss="hinge")
    rows = [fit(store, solver="nesvm", **common)]
    rows.append(fit(store, solver="nesvm", homotopy="geometric", rho=0.2, **common))
    rows.append(fit(store, solver="nesvm", homotopy="none", mu=rows[0]["mu_last"], **common))
    rows.append(fit(store, solver="dcd", **common))
    return rows


def cmd_path(args) -> list:
    from streamsvm.io import open_store
    store = open_store(args.store)
    common = dict(loss="hinge", tol=args.tol, max_passes=args.max_passes, memory=args.memory)
    warm_cache(store, loss="hinge")
    rows = [fit(store, solver="nesvm", C_path=PAPER_CS, **common)]
    rows += [fit(store, solver="nesvm", C=C, **common) for C in PAPER_CS]
    return rows


def table(rows: list) -> str:
    """Markdown table of the rows."""
    out = []
    for r in rows:
        name = r["solver"] + " " + " ".join(f"{k}={v}" for k, v in r["params"].items()
                                             if k not in ("tol", "max_passes", "memory"))
        out.append([name, f"{r['passes']:.0f}", f"{r['seconds']:.2f}", f"{r['gap']:.2e}",
                    f"{r['primal']:.6g}", r["converged"]])
    return markdown_table(["run", "passes", "seconds", "gap", "primal", "converged"], out,
                          "lrrrrl")


# -- the subcommand --------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``nesvm`` (``homotopy``, ``path``) to the subcommands ``sub``."""
    top = sub.add_parser("nesvm", help="nesvm's homotopy modes and C paths",
                         description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    cmds = top.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    for name, fn, what in (("homotopy", cmd_homotopy, "homotopy modes, passes to the gap"),
                           ("path", cmd_path, "the paper's 7 C values in one run and apart")):
        p = cmds.add_parser(name, help=what)
        p.add_argument("store")
        p.add_argument("-C", type=float, default=1.0)
        p.add_argument("--tol", type=float, default=1e-3)
        p.add_argument("--max-passes", type=float, default=3000)
        p.add_argument("--memory", default="2GB")
        p.add_argument("--json", help="write the rows here")
        p.set_defaults(run=lambda args, argv, fn=fn: _run(fn, args))


def _run(fn, args) -> int:
    rows = fn(args)
    return print_rows(table(rows), rows, args.json)
