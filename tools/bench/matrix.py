"""The solver matrix (issue 37): every solver's seconds and passes to a certified gap on a grid
of data sets × C × loss × mode, from which ``--solver auto``'s rules are made and checked.

    python tools/bench.py matrix --json docs/bench/results/matrix.json       # the grid
    python tools/bench.py matrix --solvers auto --json auto.json             # auto, same grid
    python tools/bench.py matrix-render matrix.json auto.json --png docs/bench/matrix.png

The grid: the shared real data sets (binary and multiclass, dense-ish and sparse, scaled and
unscaled) and synthetic shapes (``synth-<rows>[-f<features>][-k<classes>]``,
``tools/make_synthetic.py``: tall and sparse, wide, multiclass), each converted once with
``streamsvm convert``'s defaults (what a user gets); C in ``--Cs``; the losses of
``--losses``; two modes: ``ram`` (``--memory 1GB``: every row stays in RAM) and ``streamed``
(a budget of a quarter of the store's decoded rows, at least ``--min-stream`` MB; a data set
whose rows fit that budget has no streamed cells). The solvers are the one-vs-rest ones
(``ww`` solves another objective, the Weston–Watkins one, and is not a choice auto makes).

Each data set runs in a child process (``matrix_worker.py``): see there for the warm-up and
the deadlines (a solver stops at ``--factor`` × the cell's fastest certified run, at least
``--floor`` s, at most ``--cap`` s: enough to know who is fastest and by how much, without
hours on solvers that crawl). Every run: status (``ok``: certified gap ≤ tol; ``not
certified``: stopped at max passes; ``timeout``; ``unsupported``), seconds of ``train``,
passes, gap, primal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ._common import DATASETS, log, write_json
from ._table import table_head, table_row

__all__ = ["register", "STREAM_FRACTION", "decoded_bytes", "cells"]

_HERE = Path(__file__).resolve().parent
#: name → (libsvm file under DATASETS)
REAL = {"a9a": "a9a/a9a", "mushrooms": "mushrooms/mushrooms", "dna": "dna/dna.scale",
        "letter": "letter/letter.scale", "pendigits": "pendigits/pendigits",
        "usps": "usps/usps.t", "vowel": "vowel/vowel.scale"}
DEFAULT_DATA = list(REAL) + ["synth-2e5", "synth-2e4-f1e6", "synth-1e5-k5"]
SOLVERS = ("dcd", "newton", "avsf", "alm", "nesvm")
#: The streamed budget: this fraction of the store's decoded rows.
STREAM_FRACTION = 0.25


def _synth_args(name: str) -> list[str]:
    """make_synthetic.py's arguments for ``synth-<rows>[-f<features>][-k<classes>]``."""
    parts = name.split("-")[1:]
    rows, features, classes = int(float(parts[0])), 100_000, 2
    for p in parts[1:]:
        if p[0] == "f":
            features = int(float(p[1:]))
        elif p[0] == "k":
            classes = int(p[1:])
        else:
            raise SystemExit(f"bench.py matrix: cannot read the synthetic name {name!r}")
    return ["--rows", str(rows), "--features", str(features), "--nnz-per-row", "30",
            "--classes", str(classes), "--seed", "0", "--quiet"]


def prepare(name: str, work: Path, datasets: str) -> Path:
    """The store of data set ``name`` under ``work`` (made once)."""
    store = work / f"{name}.zarr"
    if store.exists():
        return store
    if name.startswith("synth-"):
        text = work / f"{name}.svm"
        if not text.exists():
            subprocess.run([sys.executable, str(_HERE.parent / "make_synthetic.py"), str(text),
                            *_synth_args(name)], check=True, capture_output=True)
    elif name in REAL:
        text = Path(datasets) / REAL[name]
    else:
        raise SystemExit(f"bench.py matrix: unknown data set {name!r} (known: "
                         f"{', '.join(REAL)}, synth-<rows>[-f<features>][-k<classes>])")
    subprocess.run([sys.executable, "-m", "streamsvm", "convert", str(text), str(store), "-q"],
                   check=True, capture_output=True)
    return store


def decoded_bytes(meta: dict) -> int:
    """The store's rows decoded: entries (value + index) and a label and offset a row."""
    return int(meta["nnz"]) * 8 + int(meta["n_rows"]) * 16


def describe(store: Path) -> dict:
    """What auto may know of a store before its first pass (and the decoded size)."""
    from streamsvm.io import open_store
    s = open_store(str(store))
    meta = s.meta
    return {"rows": int(meta["n_rows"]), "features": int(meta["n_features"]),
            "nnz": int(meta["nnz"]), "classes": len(meta["classes"]),
            "nnz_per_row": int(meta["nnz"]) / int(meta["n_rows"]),
            "max_sq_norm": max(meta.get("chunk_max_sq_norm") or [0.0]),
            "decoded_bytes": decoded_bytes(meta)}


def streamed_memory(info: dict, min_mb: float) -> str | None:
    """The streamed cells' budget (MB), or None when the rows fit it."""
    budget = max(min_mb * 1e6, STREAM_FRACTION * info["decoded_bytes"])
    return None if budget >= info["decoded_bytes"] else f"{budget / 1e6:.0f}MB"


def cells(runs: list[dict]) -> dict:
    """The runs by cell ``(data, loss, C, mode)`` → {solver: run}."""
    out: dict = {}
    for r in runs:
        out.setdefault((r["data"], r["loss"], r["C"], r["mode"]), {})[r["solver"]] = r
    return out


def _cell_text(r: dict | None, best: float | None) -> str:
    if r is None:
        return "–"
    if r["status"] == "ok":
        rel = f" ({r['seconds'] / best:.1f}×)" if best else ""
        return f"{r['seconds']:.2f} s, {r['passes']:.0f} p{rel}"
    if r["status"] == "timeout":
        return f"> {r['seconds']:.1f} s"
    if r["status"] == "not certified":
        return f"not certified ({r['passes']:.0f} p)"
    return "unsupported"


def print_table(runs: list[dict], solvers) -> None:
    for line in table_head(["data", "loss", "C", "mode", *solvers], "lllr" + "r" * len(solvers)):
        print(line)
    for (data, loss, C, mode), by in cells(runs).items():
        oks = [r["seconds"] for r in by.values() if r["status"] == "ok" and r["solver"] != "auto"]
        best = min(oks) if oks else None
        print(table_row([data, loss, f"{C:g}", mode,
                         *(_cell_text(by.get(s), best) for s in solvers)]))


def _run(args, argv) -> int:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    solvers = args.solvers.split(",")
    doc = {"command": " ".join(argv), "tol": args.tol, "solvers": solvers, "datasets": {},
           "runs": []}
    for name in args.data.split(","):
        store = prepare(name, work, args.datasets)
        info = describe(store)
        info["streamed_memory"] = streamed_memory(info, args.min_stream)
        doc["datasets"][name] = info
        job = {"name": name, "store": str(store.resolve()), "solvers": solvers,
               "Cs": [float(c) for c in args.Cs.split(",")], "losses": args.losses.split(","),
               "modes": args.modes.split(","), "ram_memory": "1GB",
               "streamed_memory": info["streamed_memory"], "tol": args.tol,
               "max_passes": args.max_passes, "cap": args.cap, "floor": args.floor,
               "factor": args.factor}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(job, f)
        log(f"{name}: {info['rows']} rows, {info['features']} features, streamed at "
            f"{info['streamed_memory']}", "matrix")
        try:
            proc = subprocess.Popen([sys.executable, str(_HERE / "matrix_worker.py"), f.name],
                                    stdout=subprocess.PIPE, text=True, cwd=str(work))
            for line in proc.stdout:
                r = json.loads(line)
                doc["runs"].append(r)
                log(f"{name} {r['loss']} C={r['C']:g} {r['mode']} {r['solver']}: {r['status']} "
                    f"{r.get('seconds', 0):.2f}s {r.get('passes', 0):.0f}p", "matrix")
                if args.json:
                    write_json(doc, args.json)
            if proc.wait():
                raise SystemExit(f"bench.py matrix: the worker of {name} failed "
                                 f"(exit {proc.returncode})")
        finally:
            os.unlink(f.name)
    print_table(doc["runs"], solvers)
    return 0


def register(sub) -> None:
    """Add ``matrix`` and ``matrix-render`` to the subcommands ``sub``."""
    p = sub.add_parser("matrix", help="every solver's seconds to a certified gap on a grid of "
                       "data sets × C × loss × mode (--solver auto's rules)",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=",".join(DEFAULT_DATA),
                   help="comma-separated data sets (real names or synth-...)")
    p.add_argument("--datasets", default=DATASETS, help="directory of the real data sets")
    p.add_argument("--work", default="bench-out/matrix", help="where the stores go")
    p.add_argument("--solvers", default=",".join(SOLVERS), help="comma-separated, in the "
                   "order run in each cell (auto too)")
    p.add_argument("--Cs", default="0.01,1,100")
    p.add_argument("--losses", default="hinge,squared_hinge")
    p.add_argument("--modes", default="ram,streamed")
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--max-passes", type=int, default=5000)
    p.add_argument("--cap", type=float, default=120.0, help="seconds a run may take at most")
    p.add_argument("--floor", type=float, default=5.0, help="seconds a run may always take")
    p.add_argument("--factor", type=float, default=3.0, help="a run stops at this multiple "
                   "of the cell's fastest certified run so far (but --floor at least)")
    p.add_argument("--min-stream", type=float, default=4.0, help="smallest streamed budget, MB")
    p.add_argument("--json", help="write the runs here (after every run)")
    p.set_defaults(run=_run)
    from .matrix_render import register as register_render
    register_render(sub)
