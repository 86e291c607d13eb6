"""The memory rule, solver by solver: ``streamsvm train STORE --memory M`` peaks within the
runtime floor + M + the model (README), measured in fresh processes (``tools/bench.py
memory-bound STORE --memory 200MB``).

For each solver: its **runtime floor**, the peak RSS of a process that imports streamsvm,
opens the store and loads that solver's compiled kernels by training it on the store's first
2,000 rows and 1,000 features, in memory and streamed, at a 16MB budget (what a run costs
before it holds any data; measured in a second such process, once the first has compiled
the kernels into numba's cache); then the peak RSS of ``streamsvm train`` on the whole store at
``--memory M`` (the CLI, model file written), its passes, seconds and certificate, and the
model's bytes (its weights, float64). The table gives the peak against floor + M + model
and whether it is within 10 % of it.
"""

from __future__ import annotations

import json
import os
import sys

from ._common import ROOT
from ._machine import save_stamped
from ._table import markdown_table
from ._timed import run_child

__all__ = ["memory_bound", "memory_table", "solver_flags", "register"]

#: The unit of the budget's and the model's megabytes in this table (the peak RSS and the
#: floor are :func:`tools.bench._timed.run_child`'s, 10^6 bytes).
MB = 1e6
"""The unit of every column (peak RSS, floor, budget, model): 10^6 bytes, as ``--memory``'s
``MB`` and :func:`run_child`'s peak RSS."""

_FLOOR_CODE = r"""
import sys, warnings
import scipy.sparse as sp
import streamsvm, streamsvm.estimators, streamsvm.cli
from streamsvm import InMemoryStore
from streamsvm._train import train
warnings.simplefilter("ignore")
store = streamsvm.open_store(sys.argv[1])
solver, params = sys.argv[2], __import__("json").loads(sys.argv[3])
part = store.read_rows(0, min(store.n_rows, 2000))
X = sp.csr_matrix((part.data, part.indices, part.indptr), shape=(part.n_rows, store.n_features))
X = X[:, :min(store.n_features, 1000)]
for block_rows in (None, 100):          # in memory, then streamed in small blocks
    train(InMemoryStore(X, part.y, chunk_rows=500, dtype=store.dtype), solver=solver,
          memory="16MB", block_rows=block_rows, max_passes=3, tol=0.5, **params)
"""


def solver_flags(name: str, loss: str) -> list[str]:
    """``streamsvm train`` flags of solver ``name`` for the benchmark's problem (its loss
    where it takes one, a regularized bias of 1)."""
    from streamsvm.solvers import SOLVERS
    table = SOLVERS[name].param_table()
    flags = ["--solver", name]
    if "loss" in table and loss in (table["loss"].choices or ()):
        flags += ["--loss", loss]
    if "bias" in table:
        flags += ["--bias", "1"]
    return flags


def _floor_params(name: str, loss: str) -> dict:
    from streamsvm.solvers import SOLVERS
    table = SOLVERS[name].param_table()
    return {"loss": loss} if "loss" in table and loss in (table["loss"].choices or ()) else {}


def memory_bound(store_url: str, *, memory: str, solvers, out_dir: str, loss: str = "hinge",
                 max_passes=None, timeout: float = 7200.0) -> dict:
    """Floor and peak RSS of every solver in ``solvers`` on ``store_url`` at ``memory``
    (module doc)."""
    import streamsvm as ss
    from streamsvm.schedule._memory import parse_memory
    store = ss.open_store(store_url)
    budget = parse_memory(memory)
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for name in solvers:
        base = os.path.join(out_dir, name)
        # twice: the first process compiles the solver's kernels into numba's cache (a
        # fresh checkout's compiler held 30-90 MB more), the second is the floor measured
        for _ in range(2):
            floor = run_child([sys.executable, "-c", _FLOOR_CODE, store_url, name,
                               json.dumps(_floor_params(name, loss))], timeout=600,
                              stdout_path=base + "-floor.out", stderr_path=base + "-floor.err")
        model = base + "-model.json"
        argv = [sys.executable, "-m", "streamsvm.cli", "train", store_url, "-o", model,
                "--memory", memory, "--json", "-q", *solver_flags(name, loss)]
        if max_passes is not None:
            argv += ["--max-passes", str(max_passes)]
        run = run_child(argv, timeout=timeout, stdout_path=base + "-train.out",
                        stderr_path=base + "-train.err")
        row = {"solver": name, "rc": run["rc"], "floor_mb": floor["peak_rss_mb"]
               if floor["rc"] == 0 else None, "peak_rss_mb": run["peak_rss_mb"],
               "wall_s": run["wall_s"], "budget_mb": budget / MB}
        if run["rc"] == 0:
            with open(base + "-train.out") as f:
                summary = json.loads(f.read().strip().splitlines()[-1])
            m = ss.load_model(model)
            row.update(passes=summary["passes"], gap=summary["gap"],
                       converged=summary["converged"],
                       model_mb=(m.coef.nbytes + m.intercept.nbytes) / MB)
        rows.append(_bound(row))
    return {"store": store_url, "n_rows": store.n_rows, "n_features": store.n_features,
            "task": store.task, "classes": len(store.classes), "memory": memory,
            "loss": loss, "max_passes": max_passes, "units": "MB", "runs": rows}


def _bound(row: dict) -> dict:
    """The row with floor + budget + model, the peak's ratio to it and the 10 % verdict."""
    if row["rc"] == 0 and row["floor_mb"] is not None:
        row["bound_mb"] = row["floor_mb"] + row["budget_mb"] + row["model_mb"]
        row["ratio"] = row["peak_rss_mb"] / row["bound_mb"]
        row["within"] = row["ratio"] <= 1.10
    return row


def _in_mb(r: dict) -> dict:
    """A result written before every column was in 10^6 bytes (budget and model were in
    2^20 bytes, ``units`` absent) with its budget and model in MB and its bounds again."""
    if r.get("units") == "MB":
        return r
    scale = (1 << 20) / MB
    runs = []
    for row in r["runs"]:
        row = dict(row, budget_mb=row["budget_mb"] * scale)
        if "model_mb" in row:
            row["model_mb"] *= scale
        runs.append(_bound(row))
    return dict(r, runs=runs, units="MB")


def memory_table(r: dict) -> str:
    """Markdown table of :func:`memory_bound` (also of a result written by an older
    version: :func:`_in_mb`)."""
    fmt = (lambda v, spec: "—" if v is None else format(v, spec))  # noqa: E731
    r = _in_mb(r)
    rows = []
    for row in r["runs"]:
        if row["rc"] != 0:
            rows.append([row["solver"], f"exit {row['rc']}"] + [""] * 7)
            continue
        rows.append([row["solver"], f"{row['passes']:.1f}",
                     f"{row['gap']:.2e}{'' if row['converged'] else ' (not converged)'}",
                     f"{row['peak_rss_mb']:.0f}", fmt(row["floor_mb"], ".0f"),
                     f"{row['model_mb']:.2f}", fmt(row.get("bound_mb"), ".0f"),
                     fmt(row.get("ratio"), ".2f"), "yes" if row.get("within") else "NO"])
    return "\n".join([
        f"`--memory {r['memory']}` on {r['n_rows']:,} rows × {r['n_features']:,} features "
        f"({r['task']}, {r['classes']} classes), loss {r['loss']}:", "",
        markdown_table(["solver", "passes", "certified gap", "peak RSS MB", "floor MB",
                        "model MB", "floor + budget + model MB", "peak / that",
                        "within 10 %"], rows, "lrrrrrrrl")])


# -- the subcommand --------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``memory-bound`` to the subcommands ``sub``."""
    p = sub.add_parser("memory-bound", help="every solver's peak RSS against its runtime "
                       "floor + budget + model", description=__doc__.split("\n\n")[0])
    p.add_argument("store", metavar="STORE", help="the store; with --render, a "
                   "memory-bound.json to print again")
    p.add_argument("--render", action="store_true", help="print the table of a saved "
                   "result (STORE is its memory-bound.json) instead of measuring")
    p.add_argument("--memory", default="1GB", help="the budget M (default 1GB)")
    p.add_argument("--methods", help="comma-separated solver names or substrings (default "
                   "every registered solver)")
    p.add_argument("--losses", default="hinge", help="the loss (the first of a comma-"
                   "separated list; default hinge)")
    p.add_argument("--max-passes", type=float, help="caps each run (default the solver's)")
    p.add_argument("--out", help="output directory (default bench-out/memory-bound)")
    p.set_defaults(run=_memory_bound_cmd)


def _memory_bound_cmd(args, argv) -> int:
    if args.render:
        with open(args.store) as f:
            print(memory_table(json.load(f)))
        return 0
    from streamsvm.solvers import SOLVERS
    solvers = [n for n in sorted(SOLVERS) if not args.methods or any(
        m.strip() in n for m in args.methods.split(","))]
    out_dir = args.out or os.path.join(ROOT, "bench-out", "memory-bound")
    r = memory_bound(args.store, memory=args.memory, solvers=solvers, out_dir=out_dir,
                     loss=args.losses.split(",")[0], max_passes=args.max_passes)
    save_stamped(r, argv, out_dir, "memory-bound.json")
    print(memory_table(r))
    return 0
