"""nesvm's own experiments (issue 15), next to ``tools/bench.py``'s solver tables.

Two commands, each printing a Markdown table and writing JSON::

    python tools/bench_nesvm.py homotopy STORE -C 1        # homotopy modes, passes to 1e-3
    python tools/bench_nesvm.py path STORE                  # a C path vs separate runs

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
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streamsvm._train import train  # noqa: E402
from streamsvm.exceptions import ConvergenceWarning  # noqa: E402
from streamsvm.io import open_store  # noqa: E402
from streamsvm.solvers.nesvm import _POWER_PASSES  # noqa: E402

PAPER_CS = [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0]


def fit(store, **kw) -> dict:
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, res = train(store, **kw)
    h = res.history
    return {"params": {k: v for k, v in kw.items() if k != "solver"}, "solver": kw["solver"],
            "passes": res.passes, "seconds": round(time.perf_counter() - t, 3),
            "gap": res.stop_value, "primal": res.primal, "converged": res.converged,
            "mu_last": h[-1].get("mu"), "lipschitz_passes": sum(e["kind"] == "lipschitz"
                                                               for e in h)}


def warm_cache(store, **kw) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        train(store, solver="nesvm", max_passes=_POWER_PASSES + 1, **kw)


def cmd_homotopy(args) -> list:
    store = open_store(args.store)
    common = dict(C=args.C, tol=args.tol, max_passes=args.max_passes, memory=args.memory)
    warm_cache(store, C=args.C)
    rows = [fit(store, solver="nesvm", **common)]
    rows.append(fit(store, solver="nesvm", homotopy="geometric", rho=0.2, **common))
    rows.append(fit(store, solver="nesvm", homotopy="none", mu=rows[0]["mu_last"], **common))
    rows.append(fit(store, solver="dcd", loss="hinge", **common))
    return rows


def cmd_path(args) -> list:
    store = open_store(args.store)
    common = dict(tol=args.tol, max_passes=args.max_passes, memory=args.memory)
    warm_cache(store)
    rows = [fit(store, solver="nesvm", C_path=PAPER_CS, **common)]
    rows += [fit(store, solver="nesvm", C=C, **common) for C in PAPER_CS]
    return rows


def table(rows: list) -> str:
    out = ["| run | passes | seconds | gap | primal | converged |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        p = r["params"]
        name = r["solver"] + " " + " ".join(f"{k}={v}" for k, v in p.items()
                                             if k not in ("tol", "max_passes", "memory"))
        out.append(f"| {name} | {r['passes']:.0f} | {r['seconds']:.2f} | {r['gap']:.2e} | "
                   f"{r['primal']:.6g} | {r['converged']} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("homotopy", "path"):
        p = sub.add_parser(name)
        p.add_argument("store")
        p.add_argument("-C", type=float, default=1.0)
        p.add_argument("--tol", type=float, default=1e-3)
        p.add_argument("--max-passes", type=float, default=3000)
        p.add_argument("--memory", default="2GB")
        p.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    rows = cmd_homotopy(args) if args.cmd == "homotopy" else cmd_path(args)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
