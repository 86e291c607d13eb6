"""The one-model row kernels on a block of a real store: seconds per call, this checkout
beside an earlier one in the same run.

    python tools/bench.py kernels STORE
    python tools/bench.py kernels STORE --before ../old-checkout --rounds 3 --json out.json

The first ``--rows`` rows of STORE are read once per round in a child process (the package
of this checkout, or of ``--before``'s, imported first), and each kernel is timed on them,
the best of ``--repeat`` calls after one untimed call (numba's cache): ``csr_matmat`` and
``csr_rmatmat_add`` of one model (every binary solver's products), newton's
``newton_margins`` (``W``, the direction and the first trial side by side, and with the
polish's candidate as a fourth column), ``newton_rows`` (the per-row terms of a trying pass:
8 Armijo trials and 3 points at one smoothing level, from the rows' margins) and
``newton_scatter`` (three slots' gradients, the Hessian's diagonal over every row, the
polish's sum over one row in five). The weights and
coefficients are random (seed 0), the same in every child. Rounds alternate the checkouts,
so that a machine whose speed drifts (this one's does) moves both alike.
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

KERNELS = ("csr_matmat", "csr_rmatmat_add", "newton_margins (3 columns)",
           "newton_margins (4 columns)", "newton_rows", "newton_scatter")

_WORKER = r"""
import json, sys, time
import numpy as np
import streamsvm
from streamsvm.io import open_store
from streamsvm.kernels import csr_matmat, csr_rmatmat_add
from streamsvm.kernels._costs import Costs
from streamsvm.kernels._newton import newton_margins, newton_rows, newton_scatter
store, rows, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = open_store(store)
ch = s.read_rows(0, min(rows, s.n_rows))
X = (ch.indptr, ch.indices, ch.data)
n, d = len(ch.indptr) - 1, s.n_features
rng = np.random.default_rng(0)
W = rng.standard_normal((d + 1, 4))
coef = rng.standard_normal((3, n, 1))
h = rng.random((n, 1))
cu = np.where(rng.random((n, 1)) < 0.2, rng.standard_normal((n, 1)), 0.0)
V = rng.standard_normal((n, 1))
W1 = np.ascontiguousarray(W[:, :1])
W3 = np.ascontiguousarray(W[:, :3])
M = tuple(np.empty((n, 1)) for _ in range(4))
try:                                 # (before the candidate's column: three outputs)
    newton_margins(X, W3, (M[0], M[1], M[2], np.empty((0, 1))))
    m3 = lambda: newton_margins(X, W3, (M[0], M[1], M[2], np.empty((0, 1))))
    m4 = lambda: newton_margins(X, W, M)
except Exception:
    m3 = lambda: newton_margins(X, W3, M[:3])
    m4 = lambda: (newton_margins(X, W3, M[:3]), csr_matmat(X, W1, M[3]))
G, S = np.zeros((d + 1, 1)), np.zeros((d + 1, 5))
y = ch.y.astype(np.int32)                 # (binary stores: ±1)
U = np.empty((n, 1))
csr_matmat(X, W1 / np.sqrt(max(1, len(ch.indices) // max(n, 1))), U)   # margins of O(1)
Vd = 0.1 * rng.standard_normal((n, 1))
E = np.stack([U + t * Vd for t in (1.0, 0.5, 0.25)])
prob = Costs(np.array([1], np.int32), np.ones(1), np.ones(1), False, 1.0)
plan = (np.ones(1, bool), 0.5 ** np.arange(8.0)[None, :], np.array([8]), np.full((1, 3), 0.05),
        np.array([3]))
terms = (np.empty((3, n, 1)), np.empty((3, n, 1)))
rows = lambda: newton_rows(y, (U, Vd, E), prob, plan, tuple(np.zeros(a) for a in
                           ((1, 8), (1, 3), (1, 3), (1, 3), (1, 3), 1)), terms)
calls = {"csr_matmat": lambda: csr_matmat(X, W1, M[0]),
         "csr_rmatmat_add": lambda: csr_rmatmat_add(X, V, G),
         "newton_margins (3 columns)": m3, "newton_margins (4 columns)": m4,
         "newton_rows": rows,
         "newton_scatter": lambda: newton_scatter(X, coef, h, cu, S)}
out = {"package": streamsvm.__file__, "rows": n, "nnz": int(len(ch.indices))}
for name, f in calls.items():
    f()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    out[name] = best
print(json.dumps(out))
"""


def _measure(store: str, rows: int, repeat: int, package: str | None) -> dict:
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(package).resolve()) if package else here, env.get("PYTHONPATH"))
        if p)
    out = subprocess.run([sys.executable, "-c", _WORKER, str(Path(store).resolve()), str(rows),
                          str(repeat)], env=env, check=True, capture_output=True, text=True,
                         cwd="/")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.4f}" if len(values) == 1 else f"{lo:.4f}–{hi:.4f}"


def _run(args, argv) -> int:
    import streamsvm
    from streamsvm.exceptions import StreamSVMError
    try:
        streamsvm.open_store(args.store)          # a bad store: one line, before any run
    except StreamSVMError as exc:
        print(f"bench.py kernels: error: {exc}", file=sys.stderr)
        return 2
    if args.before and not (Path(args.before) / "streamsvm" / "__init__.py").is_file():
        print(f"bench.py kernels: error: --before {args.before}: no streamsvm/ package there",
              file=sys.stderr)
        return 2
    sides = [("this checkout", None)] + ([("before", args.before)] if args.before else [])
    runs: dict = {name: [] for name, _ in sides}
    for rnd in range(args.rounds):
        for name, package in (sides if rnd % 2 == 0 else sides[::-1]):
            runs[name].append(_measure(args.store, args.rows, args.repeat, package))
            print(f"round {rnd + 1}, {name}: {runs[name][-1]}", file=sys.stderr)
    first = runs["this checkout"][0]
    print(f"{first['rows']:,} rows, {first['nnz']:,} non-zeros of {args.store}; seconds a "
          f"call, the best of {args.repeat}, over {args.rounds} round(s):\n")
    cols = ["kernel"] + (["before s", "this checkout s", "before ÷ this"] if args.before
                         else ["s"])
    for line in table_head(cols, "l" + "r" * (len(cols) - 1)):
        print(line)
    for k in KERNELS:
        now = [r[k] for r in runs["this checkout"]]
        cells = [k]
        if args.before:
            old = [r[k] for r in runs["before"]]
            cells += [_span(old), _span(now), f"{min(old) / min(now):.2f}"]
        else:
            cells.append(_span(now))
        print(table_row(cells))
    if args.json:
        write_json({"command": " ".join(argv), "runs": runs}, args.json, cleaned=False)
    return 0


def register(sub) -> None:
    """Add ``kernels`` to the subcommands ``sub``."""
    p = sub.add_parser("kernels", help="the one-model row kernels' seconds on a block of a "
                       "store (and an earlier checkout's)",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("store", help="a streamsvm store (its first --rows rows are read)")
    p.add_argument("--rows", type=int, default=200_000, help="rows of the block (200,000)")
    p.add_argument("--repeat", type=int, default=25, help="calls per kernel (the best)")
    p.add_argument("--rounds", type=int, default=3, help="child processes per checkout, "
                   "alternating")
    p.add_argument("--before", help="a checkout of an earlier streamsvm: its kernels too")
    p.add_argument("--json", help="also write every round to this file")
    p.set_defaults(run=_run)
