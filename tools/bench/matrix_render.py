"""The solver matrix as a picture and a table (``tools/bench.py matrix-render``): each solver's
seconds to a certified gap relative to the fastest solver of its cell, as a heat map with
``--solver auto``'s pick marked, and auto's time against the best per cell.

    python tools/bench.py matrix-render docs/bench/results/matrix.json \\
        --auto docs/bench/results/matrix-auto.json --png docs/bench/matrix.png
        # (several files: a later one's runs replace an earlier one's of the same cell)

Every number comes from the JSON of ``tools/bench.py matrix`` (the solvers' runs, and with
``--auto`` a run of ``--solvers auto`` on the same grid).
"""

from __future__ import annotations

import argparse
import json
import math

from ._table import table_head, table_row
from .matrix import cells

__all__ = ["register", "auto_ratios", "heat_map", "load_runs"]

#: The heat map's scale: 1 (the fastest) to this multiple, and beyond (timeouts, failures).
CAP = 10.0


def _measured(runs: list[dict]) -> dict:
    """The cells of ``runs`` where some solver ran (a streamed budget no solver accepts,
    every run "unsupported", is not a cell)."""
    return {k: by for k, by in cells(runs).items()
            if any(r["status"] != "unsupported" for r in by.values())}


def _best(by: dict) -> float | None:
    oks = [r["seconds"] for s, r in by.items() if s != "auto" and r["status"] == "ok"]
    return min(oks) if oks else None


def auto_ratios(runs: list[dict], auto_runs: list[dict]) -> list[dict]:
    """Per cell: the best solver and its seconds, auto's pick, seconds and ratio to the best
    (None where auto did not certify; ``"no solver"`` cells have best None)."""
    grid, autos = _measured(runs), cells(auto_runs)
    out = []
    for key, by in grid.items():
        best = _best(by)
        a = autos.get(key, {}).get("auto")
        winner = min((r for s, r in by.items() if r["status"] == "ok" and s != "auto"),
                     key=lambda r: r["seconds"], default=None)
        row = {"data": key[0], "loss": key[1], "C": key[2], "mode": key[3], "best": best,
               "best_solver": winner["solver"] if winner else None,
               "auto": a and a.get("chosen"), "auto_status": a and a["status"],
               "auto_seconds": a and a.get("seconds"), "because": a and a.get("chosen_because")}
        row["ratio"] = (a["seconds"] / best if a and a["status"] == "ok" and best else None)
        out.append(row)
    return out


def heat_map(runs: list[dict], auto_runs: list[dict], solvers, png: str) -> None:
    """The heat map: a row per cell, a column per solver, log-scaled colour of seconds ÷
    the cell's best (grey: no certified run), auto's pick outlined."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    grid = _measured(runs)
    picks = {(r["data"], r["loss"], r["C"], r["mode"]): r["auto"]
             for r in auto_ratios(runs, auto_runs)}
    keys = list(grid)
    values = [[math.nan] * len(solvers) for _ in keys]
    for i, key in enumerate(keys):
        best = _best(grid[key])
        for j, s in enumerate(solvers):
            r = grid[key].get(s)
            if r and best and r["status"] == "ok":
                values[i][j] = min(r["seconds"] / best, CAP)
            elif r and best:
                values[i][j] = CAP
    fig, ax = plt.subplots(figsize=(2.0 + 1.1 * len(solvers), 0.9 + 0.22 * len(keys)))
    cmap = matplotlib.colormaps["viridis_r"].with_extremes(bad="#dddddd")
    im = ax.imshow(values, aspect="auto", cmap=cmap, norm=LogNorm(1.0, CAP))
    for i, key in enumerate(keys):
        for j, s in enumerate(solvers):
            v = values[i][j]
            text = "" if math.isnan(v) else (f"{v:.1f}" if v < CAP else "≥10")
            ax.text(j, i, text, ha="center", va="center", fontsize=6,
                    color="white" if not math.isnan(v) and v > 3 else "black")
            if picks.get(key) == s:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.5,
                                           ec="red"))
    ax.set_xticks(range(len(solvers)), solvers)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(keys)), [f"{d} {'sq' if l == 'squared_hinge' else l} C={C:g} {m}"
                                     for d, l, C, m in keys], fontsize=6)
    fig.colorbar(im, ax=ax, label="seconds ÷ the cell's fastest (≥10: slower, timed out or "
                 "not certified)", shrink=0.5)
    ax.set_title("seconds to a certified 1e-3, relative to the fastest; red: --solver auto",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=130)
    plt.close(fig)


def load_runs(paths) -> tuple[list[dict], list[str]]:
    """The runs of several ``matrix`` JSON files, a later file's run of a (cell, solver)
    replacing an earlier one's (a cell measured again), and their solvers in order."""
    runs: dict = {}
    solvers: list[str] = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for r in doc["runs"]:
            runs[(r["data"], r["loss"], r["C"], r["mode"], r["solver"])] = r
        solvers += [s for s in doc["solvers"] if s not in solvers and s != "auto"]
    return list(runs.values()), solvers


def _run(args, argv) -> int:
    runs, solvers = load_runs(args.matrix)
    auto_runs = load_runs(args.auto)[0] if args.auto else []
    if args.png:
        heat_map(runs, auto_runs, solvers, args.png)
    if auto_runs:
        for line in table_head(["data", "loss", "C", "mode", "fastest", "auto's pick",
                                "auto ÷ fastest"], "llllllr"):
            print(line)
        worst = 0.0
        for r in auto_ratios(runs, auto_runs):
            best = f"{r['best_solver']} {r['best']:.2f} s" if r["best"] else "none certifies"
            pick = f"{r['auto']} {r['auto_seconds']:.2f} s" if r["auto"] else "–"
            if r["auto_status"] not in (None, "ok"):
                pick += f" ({r['auto_status']})"
            ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "–"
            worst = max(worst, r["ratio"] or (math.inf if r["best"] else 0.0))
            print(table_row([r["data"], r["loss"], f"{r['C']:g}", r["mode"], best, pick,
                             ratio]))
        print(f"\nworst auto ÷ fastest: {worst:.2f}")
    return 0


def register(sub) -> None:
    """Add ``matrix-render`` to the subcommands ``sub``."""
    p = sub.add_parser("matrix-render", help="the solver matrix's heat map and auto's table "
                       "from its JSON", description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("matrix", nargs="+", help="JSON of 'tools/bench.py matrix' (several: a "
                   "later file's runs replace an earlier one's of the same cell and solver)")
    p.add_argument("--auto", nargs="+", help="JSON of 'tools/bench.py matrix --solvers auto' "
                   "(the same grid)")
    p.add_argument("--png", help="write the heat map here (needs matplotlib: the bench extra)")
    p.set_defaults(run=_run)
