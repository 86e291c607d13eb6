"""``ww`` to the paper's stopping rule next to a compiled C++ reimplementation of the paper's
solver and LIBLINEAR's Crammer–Singer (``-s 4``) and one-vs-rest (``-s 3``), in RAM,
training time only (issue 13's README table).

    python tools/bench.py ww                               # dna, letter, pendigits, usps
    python tools/bench.py ww --datasets dna,letter -C 0.0625 --repeat 5 --json out.json

For each data set of ``../shared/datasets`` the training file is converted once to a store
(``bench-out/work/<name>/train.zarr``, ``--shuffle --seed 0``, reused when present). ``ww``
trains on it in this process with the paper's setting (``C`` = 2^-4, no bias, its gap-decay
rule δ = 0.0009, ``--tol 1e-12`` so that δ decides, at most ``--max-passes``); the first fit
loads the compiled kernels and is not counted, the time is the fastest of ``--repeat`` fits
(each the same run, bit for bit). LIBLINEAR (``liblinear-official``) trains on the same rows
as a scipy matrix, ``-s S -c C -q``, the fastest of ``--repeat``, problem construction not
counted. Test accuracy on the ``.t`` file when there is one. The two methods solve different
problems (Weston–Watkins and Crammer–Singer / one-vs-rest): the time is the time each takes to
its own stop, side by side.

The C++ reference (``tools/ww_ref.cpp``, compiled with ``g++ -O3 -march=native`` into the
work directory; ``--no-cpp`` skips it) is the paper authors' solver as spec_002 describes it
(their LIBLINEAR fork is not reachable from here): the same problem, C and rule, W and β in
RAM, no shrinking, a fresh permutation every epoch, Walrus with lazy heaps, and after every
epoch P, D and the gap with the timer paused. Two rows: its ``et`` (the paper's elapsed time,
training only, file parsing excluded) and its wall time with the gap evaluations; the fastest
of ``--repeat`` runs (seed 0, the same run each time). When the reference does not reach the
rule in ``--max-passes`` epochs, a row gives where ``ww`` first certified a relative gap at
least as small as the reference's last one (passes and seconds from its history, one run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import warnings

import numpy as np

from ._common import DATASETS, ROOT, print_rows
from ._table import markdown_table
from ._timed import timed
from .suite_data import REAL

__all__ = ["DATA", "measure", "compile_reference", "register"]

#: The multiclass sets of the solver suite: (training file, test file or None).
DATA = {name: REAL[name] for name in ("dna", "letter", "pendigits", "usps", "vowel")}


def _store(name: str, data_dir: str, work: str) -> str:
    from streamsvm.io import convert
    path = os.path.join(work, name, "train.zarr")
    if not os.path.exists(os.path.join(path, "zarr.json")):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        convert([os.path.join(data_dir, DATA[name][0])], path, shuffle=True, seed=0,
                progress=False)
    return path


def _best(fn, repeat: int):
    """``(fastest seconds, result)`` of ``repeat`` calls after one uncounted call."""
    out, times = timed(fn, repeat, warm=True)
    return min(times), out


def compile_reference(work: str) -> str:
    """``tools/ww_ref.cpp`` compiled into ``work`` (again when the source is newer)."""
    src = os.path.join(ROOT, "tools", "ww_ref.cpp")
    exe = os.path.join(work, "ww_ref")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        cxx = shutil.which("g++") or shutil.which("c++")
        if cxx is None:
            raise SystemExit("bench.py ww: no C++ compiler (g++) for the reference; pass "
                             "--no-cpp")
        os.makedirs(work, exist_ok=True)
        subprocess.run([cxx, "-O3", "-march=native", "-o", exe, src], check=True)
    return exe


def reference(exe: str, train_file: str, test_file, C: float, max_passes: float,
              repeat: int) -> dict:
    """The fastest (by ``et``) of ``repeat`` runs of the C++ reference."""
    runs = []
    for _ in range(repeat):
        cmd = [exe, train_file, repr(C), "0.0009", str(int(max_passes)), "0"]
        out = subprocess.run(cmd + ([test_file] if test_file else []), check=True,
                             capture_output=True, text=True).stdout
        runs.append(json.loads(out))
    return min(runs, key=lambda r: r["et"])


def measure(name: str, *, C: float = 2 ** -4, repeat: int = 3, max_passes: float = 2000,
            data_dir: str | None = None, work: str | None = None,
            cpp: str | None = None) -> list[dict]:
    """Rows (method, passes, seconds, gap, test accuracy) of one data set."""
    from liblinear import liblinearutil as lu
    from sklearn.datasets import load_svmlight_file

    from streamsvm._evaluate import evaluate
    from streamsvm._train import train
    from streamsvm.exceptions import ConvergenceWarning
    data_dir = data_dir or DATASETS
    work = work or os.path.join(ROOT, "bench-out", "work")
    store = _store(name, data_dir, work)
    test = DATA[name][1] and os.path.join(data_dir, DATA[name][1])

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return train(store, solver="ww", C=C, bias=0.0, tol=1e-12,   # (as the C++ code)
                         max_passes=max_passes)
    secs, (model, res) = _best(fit, repeat)
    acc = evaluate(model, test)["accuracy"] if test else None
    rows = [{"data": name, "method": "ww", "passes": res.passes, "seconds": secs,
             "converged": bool(res.converged), "gap": res.stop_value, "test_accuracy": acc}]
    if cpp:
        r = reference(cpp, os.path.join(data_dir, DATA[name][0]), test, C, max_passes, repeat)
        for label, secs in (("C++ reference, et", r["et"]),
                            ("C++ reference, with its gap evaluations", r["wall"])):
            rows.append({"data": name, "method": label, "passes": float(r["iterations"]),
                         "seconds": secs, "converged": r["converged"],
                         "gap": r["gap"] / abs(r["primal"]),
                         "test_accuracy": r["test_accuracy"] if test else None})
        if not r["converged"]:          # neither reaches the rule: ww to the C++'s last gap
            last = r["gap"] / abs(r["primal"])
            hit = next((e for e in res.history if e["gap"] <= last), None)
            if hit is not None:
                rows.insert(1, {"data": name, "method": "ww, to the C++ reference's last gap",
                                "passes": hit["passes"], "seconds": hit["seconds"],
                                "converged": True, "gap": hit["gap"], "test_accuracy": None})
    X, y = load_svmlight_file(os.path.join(data_dir, DATA[name][0]))
    Xt = yt = None
    if test:
        Xt, yt = load_svmlight_file(test, n_features=X.shape[1])
    prob = lu.problem(y, X)
    for s in (4, 3):
        param = lu.parameter(f"-s {s} -c {C!r} -q")
        secs, m = _best(lambda: lu.train(prob, param), repeat)
        acc = None
        if test:
            pred, _, _ = lu.predict(yt, Xt, m, "-q")
            acc = float(np.mean(np.asarray(pred) == yt))
        rows.append({"data": name, "method": f"LIBLINEAR -s {s}", "passes": None,
                     "seconds": secs, "converged": None, "gap": None, "test_accuracy": acc})
    return rows


def table(rows: list[dict]) -> str:
    """Markdown table of :func:`measure`'s rows."""
    out = []
    for r in rows:
        ww = r["converged"] is not None         # ww and the C++ reference: passes and a gap
        method = r["method"] + ("" if not ww or r["converged"] else " (not converged)")
        out.append([r["data"], method, f"{r['passes']:.1f}" if ww else "–",
                    f"{r['seconds']:.3f}", f"{r['gap']:.1e}" if ww else "–",
                    "–" if r["test_accuracy"] is None else f"{r['test_accuracy']:.4f}"])
    return markdown_table(["data", "method", "passes", "s", "certified relative gap",
                           "test accuracy"], out, "llrrrr")


# -- the subcommand --------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``ww`` to the subcommands ``sub``."""
    p = sub.add_parser("ww", help="ww against a C++ reference and LIBLINEAR -s 4 / -s 3, "
                       "in RAM", description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="dna,letter,pendigits,usps",
                   help=f"comma-separated, from {', '.join(DATA)}")
    p.add_argument("-C", type=float, default=2 ** -4, help="the cost C (default 2^-4, the "
                   "paper's Table 6)")
    p.add_argument("--repeat", type=int, default=3, help="timed fits per method (fastest)")
    p.add_argument("--max-passes", type=float, default=2000)
    p.add_argument("--data-dir", default=None, help="default ../shared/datasets")
    p.add_argument("--work", default=None, help="where the stores are converted (default "
                   "bench-out/work)")
    p.add_argument("--no-cpp", action="store_true", help="skip the C++ reference "
                   "(tools/ww_ref.cpp, compiled with g++ into the work directory)")
    p.add_argument("--json", metavar="OUT", help="also write the rows as JSON")
    p.set_defaults(run=_ww_cmd, parser=p)


def _ww_cmd(args, argv) -> int:
    names = [s.strip() for s in args.datasets.split(",") if s.strip()]
    bad = [n for n in names if n not in DATA]
    if bad:
        args.parser.error(f"--datasets: unknown data set {bad[0]!r} (choose from "
                          f"{', '.join(DATA)})")
    if args.repeat < 1:
        args.parser.error(f"--repeat must be >= 1, got {args.repeat}")
    cpp = None if args.no_cpp else compile_reference(
        args.work or os.path.join(ROOT, "bench-out", "work"))
    rows = []
    for n in names:
        rows += measure(n, C=args.C, repeat=args.repeat, max_passes=args.max_passes,
                        data_dir=args.data_dir, work=args.work, cpp=cpp)
    return print_rows(table(rows), {"C": args.C, "repeat": args.repeat, "rows": rows},
                      args.json)
