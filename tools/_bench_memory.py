"""The memory rule, solver by solver: ``streamsvm train STORE --memory M`` peaks within the
runtime floor + M + the model (README), measured in fresh processes (``tools/bench.py
--memory-bound STORE --memory 200MB``).

For each solver: its **runtime floor**, the peak RSS of a process that imports streamsvm,
opens the store and loads that solver's compiled kernels by training it on the store's first
2,000 rows and 1,000 features, in memory and streamed, at a 16MB budget (what a run costs
before it holds any data); then the peak RSS of ``streamsvm train`` on the whole store at
``--memory M`` (the CLI, model file written), its passes, seconds and certificate, and the
model's bytes (its weights, float64). The table gives the peak against floor + M + model
and whether it is within 10 % of it.
"""

from __future__ import annotations

import json
import os
import sys

__all__ = ["memory_bound", "memory_table", "solver_flags"]

MB = 1 << 20

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


def memory_bound(store_url: str, *, memory: str, solvers, out_dir: str, run_child,
                 loss: str = "hinge", max_passes=None, timeout: float = 7200.0) -> dict:
    """Floor and peak RSS of every solver in ``solvers`` on ``store_url`` at ``memory``
    (module doc); ``run_child`` is :func:`tools.bench.run_child`."""
    import streamsvm as ss
    from streamsvm.schedule._memory import parse_memory
    store = ss.open_store(store_url)
    budget = parse_memory(memory)
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for name in solvers:
        base = os.path.join(out_dir, name)
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
            if row["floor_mb"] is not None:
                row["bound_mb"] = row["floor_mb"] + row["budget_mb"] + row["model_mb"]
                row["ratio"] = row["peak_rss_mb"] / row["bound_mb"]
                row["within"] = row["ratio"] <= 1.10
        rows.append(row)
    return {"store": store_url, "n_rows": store.n_rows, "n_features": store.n_features,
            "task": store.task, "classes": len(store.classes), "memory": memory,
            "loss": loss, "max_passes": max_passes, "runs": rows}


def memory_table(r: dict) -> str:
    """Markdown table of :func:`memory_bound`."""
    lines = [f"`--memory {r['memory']}` on {r['n_rows']:,} rows × {r['n_features']:,} features "
             f"({r['task']}, {r['classes']} classes), loss {r['loss']}:", "",
             "| solver | passes | certified gap | peak RSS MB | floor MB | model MB | "
             "floor + budget + model MB | peak / that | within 10 % |",
             "| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :--- |"]
    for row in r["runs"]:
        if row["rc"] != 0:
            lines.append(f"| {row['solver']} | exit {row['rc']} | | | | | | | |")
            continue
        fmt = (lambda v, spec: "—" if v is None else format(v, spec))  # noqa: E731
        lines.append(
            f"| {row['solver']} | {row['passes']:.1f} | {row['gap']:.2e}"
            f"{'' if row['converged'] else ' (not converged)'} | {row['peak_rss_mb']:.0f} | "
            f"{fmt(row['floor_mb'], '.0f')} | {row['model_mb']:.2f} | "
            f"{fmt(row.get('bound_mb'), '.0f')} | {fmt(row.get('ratio'), '.2f')} | "
            f"{'yes' if row.get('within') else 'NO'} |")
    return "\n".join(lines)
