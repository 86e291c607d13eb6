"""Walrus's cost against k (spec_002 §3: O(k log k) per subproblem), next to a generic
box-constrained QP solver (scipy's L-BFGS-B) on the same instances.

    python tools/bench.py walrus                 # k − 1 = 10 … 10,000, a table on stdout
    python tools/bench.py walrus --json out.json

For each size, random subproblems ``v ~ N(0.2, 1)``, ``C = 1`` (about half the entries
positive, some above C: every branch of the merge runs): the median microseconds per call of
the compiled kernel over many calls, the same divided by ``(k − 1)·log2(k − 1)`` (flat when
the cost is O(k log k)), and L-BFGS-B's median milliseconds with its gap in objective to
Walrus's minimizer (Walrus is exact; a generic solver stops at its tolerance).
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

from ._common import write_json
from ._table import table_head, table_row
from ._timed import timed

__all__ = ["measure", "register"]


def _objective(b, v):
    return 0.5 * b @ b + 0.5 * b.sum() ** 2 - v @ b


def measure(m: int, rng, calls: int, generic: bool) -> dict:
    """One size ``k − 1 = m``: Walrus's median microseconds per call over ``calls`` calls,
    and (``generic``) L-BFGS-B's on five of the same subproblems."""
    from streamsvm.kernels._ww import walrus
    V = rng.normal(0.2, 1.0, (64, m))
    b = np.empty(m)
    scratch = (np.empty(m), np.empty(m), np.empty(m + 1))
    walrus(V[0], 1.0, b, scratch)                     # compiled (or loaded) before timing

    def batch():
        for j in range(calls):
            walrus(V[j % 64], 1.0, b, scratch)
    _, times = timed(batch, 5)
    us = statistics.median(t / calls * 1e6 for t in times)
    out = {"k_minus_1": m, "walrus_us": us, "us_per_klogk": us / (m * math.log2(max(m, 2)))}
    if generic:
        import scipy.optimize
        gaps, ms = [], []
        for j in range(5):
            v = V[j]
            walrus(v, 1.0, b, scratch)
            res, (secs,) = timed(lambda: scipy.optimize.minimize(
                lambda x: (_objective(x, v), x + x.sum() - v), np.zeros(m), jac=True,
                method="L-BFGS-B", bounds=[(0, 1.0)] * m))
            ms.append(secs * 1e3)
            f = _objective(b, v)
            gaps.append((res.fun - f) / max(abs(f), 1e-300))
        out.update(lbfgsb_ms=statistics.median(ms), lbfgsb_rel_gap=max(gaps))
    return out


def register(sub) -> None:
    """Add ``walrus`` to the subcommands ``sub``."""
    p = sub.add_parser("walrus", help="Walrus's cost against k, next to L-BFGS-B",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10,30,100,300,1000,3000,10000",
                   help="comma-separated k − 1 values")
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=_walrus_cmd)


def _walrus_cmd(args, argv) -> int:
    rng = np.random.default_rng(args.seed)
    rows = []
    for line in table_head(["k − 1", "Walrus µs/call", "µs / ((k−1) log2(k−1))",
                            "L-BFGS-B ms/call", "L-BFGS-B rel. objective gap"], "r" * 5):
        print(line)
    for m in (int(s) for s in args.sizes.split(",")):
        r = measure(m, rng, calls=max(200, 200_000 // m), generic=m <= 3000)
        rows.append(r)
        lb = ([f"{r['lbfgsb_ms']:.2f}", f"{r['lbfgsb_rel_gap']:.1e}"] if "lbfgsb_ms" in r
              else ["–", "–"])
        print(table_row([f"{m:,}", f"{r['walrus_us']:.2f}", f"{r['us_per_klogk']:.4f}", *lb]),
              flush=True)
    if args.json:
        write_json(rows, args.json, cleaned=False)
    return 0
