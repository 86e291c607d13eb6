"""Cross-validation in shared passes (issue 38): ``--cv 5`` against one training and against
five separate trainings on the same folds, per solver; and a cross-validated C search
against one training at the chosen C and LIBLINEAR's ``-C``.

    python tools/bench.py cv                                  # a9a, letter, dna; every solver
    python tools/bench.py cv --data a9a/a9a --solvers dcd,newton --search --json out.json

Per data set and solver, in this process (numba's cache loaded by an untimed run first):

* one training on the whole store: passes and seconds;
* ``streamsvm.cross_validate(store, cv=K)``: passes (training + the scoring pass), seconds,
  the mean and spread of the held-out accuracies and the largest certified fold-gap bound;
* K separate trainings, one per fold on the rows outside it (in memory, same folds), each
  scored on its held-out rows: their passes and seconds summed, and the largest difference
  of held-out accuracy to the fold model.

``--search``: ``cross_validate_path`` over ``--Cs`` (default 2^-6 … 2^0, seven values) on
``--search-data`` (default the first data set), per solver: its passes against one training
at the chosen C, and the C LIBLINEAR picks with ``-s 2 -C -v K -c`` (the smallest C as the
start, its own folds), and with its ``-s 2 -e 1e-4`` models (near the exact optimum, as
ours) trained on the same folds as ours, each C and each fold.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

from ._common import write_json
from ._table import table_head, table_row

__all__ = ["register"]

_ROOT = Path(__file__).resolve().parents[2]
_DATA = _ROOT.parent / "shared" / "datasets"
_CS = ",".join(repr(2.0 ** k) for k in range(-6, 1))


def _store(path: Path, work: Path):
    from streamsvm import convert, open_store
    out = work / (path.name.replace(".", "_") + ".zarr")
    if not out.exists():
        convert([str(path)], str(out), overwrite=True)
    return open_store(str(out))


def _rows(store):
    import scipy.sparse as sp
    chunks = list(store.iter_chunks())
    X = sp.vstack([sp.csr_matrix((c.data, c.indices, c.indptr),
                                 shape=(c.n_rows, store.n_features)) for c in chunks]).tocsr()
    y = np.concatenate([c.y for c in chunks])
    labels = store.classes[(y > 0).astype(int)] if store.task == "binary" else store.classes[y]
    return X, labels


def _params(solver: str, args) -> dict:
    p = {"C": args.C, "loss": args.loss}
    if solver == "alm":
        p["free_bias"] = False          # (a free intercept cannot be split by fold)
    if solver == "ww":
        p.pop("loss")
    return p


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _one(store, X, labels, solver: str, args) -> dict:
    import streamsvm as ss
    from streamsvm._evaluate import evaluate
    from streamsvm.io import InMemoryStore
    from streamsvm.io import fold_of
    kw = dict(_params(solver, args), seed=args.seed, max_passes=args.max_passes)
    ss.train(store, solver=solver, **dict(kw, max_passes=1))        # numba's cache loaded
    (_, one), one_s = _timed(lambda: ss.train(store, solver=solver, **kw))
    cv, cv_s = _timed(lambda: ss.cross_validate(store, cv=args.k, solver=solver, **kw))
    folds = fold_of(0, store.n_rows, args.k, args.seed)
    sep, sep_passes, sep_s = [], [], 0.0
    for f in range(args.k):
        rows = InMemoryStore(X[folds != f], labels[folds != f], chunk_rows=store.chunk_rows)
        (m, r), secs = _timed(lambda: ss.train(rows, solver=solver, **kw))
        sep_s += secs
        sep.append(evaluate(m, InMemoryStore(X[folds == f], labels[folds == f]))["accuracy"])
        sep_passes.append(float(r.passes))
    s = cv.summary()
    acc = [f["accuracy"] for f in s["folds"]]
    return {"solver": solver, "one_passes": float(one.passes), "one_seconds": one_s,
            "one_converged": bool(one.converged), "cv_passes": cv.passes,
            "cv_seconds": cv_s, "cv_converged": s["converged"],
            "accuracy_mean": s["accuracy_mean"], "accuracy_std": s["accuracy_std"],
            "fold_accuracies": acc, "separate_accuracies": sep,
            "separate_passes": sep_passes, "separate_seconds": sep_s,
            "max_accuracy_difference": max(abs(a - b) for a, b in zip(acc, sep)),
            "largest_fold_gap_bound": s["largest_fold_gap_bound"]}


def _search(store, X, labels, solver: str, args) -> dict:
    import streamsvm as ss
    Cs = [float(c) for c in args.Cs.split(",")]
    kw = dict(_params(solver, args), seed=args.seed, max_passes=args.max_passes)
    kw.pop("C")
    (results, best), secs = _timed(lambda: ss.cross_validate_path(store, args.k, Cs,
                                                                  solver=solver, **kw))
    _, one = ss.train(store, solver=solver, C=Cs[best], **kw)
    passes = results[0].passes          # (one joint run and one scoring pass for all Cs)
    return {"solver": solver, "Cs": Cs, "accuracies": [r.accuracy for r in results],
            "chosen_C": Cs[best], "passes": passes, "seconds": secs,
            "largest_fold_gap_bound": max(r.summary()["largest_fold_gap_bound"]
                                          for r in results),
            "one_passes_at_chosen": float(one.passes), "ratio": passes / float(one.passes)}


def _liblinear_C(X, labels, args) -> dict:
    """LIBLINEAR's ``-C`` on its own folds, and its models (``-s 2 -e 1e-4``, every C) on
    ours."""
    try:
        from liblinear import liblinearutil as lu
    except ImportError:
        return {"error": "liblinear-official not installed (the bench extra)"}
    import contextlib
    import os
    from streamsvm.io import fold_of
    Cs = [float(c) for c in args.Cs.split(",")]
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        best_C, _, best_acc = lu.train(labels, X, f"-s 2 -B 1 -C -v {args.k} -c {min(Cs)!r} -q")
    folds = fold_of(0, X.shape[0], args.k, args.seed)
    acc = []
    for C in Cs:
        right = 0
        for f in range(args.k):
            m = lu.train(labels[folds != f], X[folds != f], f"-s 2 -B 1 -c {C!r} -e 1e-4 -q")
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                pred, _, _ = lu.predict(labels[folds == f], X[folds == f], m, "-q")
            right += int(np.count_nonzero(np.asarray(pred) == labels[folds == f]))
        acc.append(right / X.shape[0])
    best = max(range(len(Cs)), key=lambda j: (acc[j], -Cs[j]))
    return {"chosen_C": float(best_C), "accuracy": float(best_acc),
            "same_folds_accuracies": acc, "same_folds_chosen_C": Cs[best]}


def _run(args, argv) -> int:
    warnings.simplefilter("ignore")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    out = {"command": " ".join(argv), "k": args.k, "C": args.C, "loss": args.loss,
           "rows": [], "search": []}
    cols = ["data", "solver", "one run: passes / s", f"--cv {args.k}: passes / s",
            "passes ÷ one run", f"{args.k} separate runs: passes / s",
            "held-out accuracy (mean ± std)",
            "largest Δ to separate runs", "largest fold gap ≤"]
    for line in table_head(cols, "ll" + "r" * (len(cols) - 2)):
        print(line)
    searched = None
    for name in args.data.split(","):
        path = Path(name) if Path(name).exists() else Path(args.datasets) / name
        store = _store(path, work)
        X, labels = _rows(store)
        if name == (args.search_data or args.data.split(",")[0]):
            searched = (path.name, store, X, labels)
        for solver in args.solvers.split(","):
            if solver == "ww" and store.task == "binary" and not args.ww_binary:
                continue
            r = dict(_one(store, X, labels, solver, args), data=path.name)
            out["rows"].append(r)
            print(table_row([
                path.name, solver, f"{r['one_passes']:.1f} / {r['one_seconds']:.2f}",
                f"{r['cv_passes']:.1f} / {r['cv_seconds']:.2f}"
                + ("" if r["cv_converged"] else " (not certified)"),
                f"{r['cv_passes'] / r['one_passes']:.2f}×",
                f"{sum(r['separate_passes']):.1f} / {r['separate_seconds']:.2f}",
                f"{r['accuracy_mean']:.4f} ± {r['accuracy_std']:.4f}",
                f"{r['max_accuracy_difference']:.4f}",
                f"{r['largest_fold_gap_bound']:.1e}"]), flush=True)
    if args.search:
        name, store, X, labels = searched
        ll = _liblinear_C(X, labels, args)
        out["liblinear"] = ll
        print()
        print(f"C search on {name}, Cs {args.Cs}, --cv {args.k}: LIBLINEAR -s 2 -C -v {args.k} "
              f"picks C = {ll.get('chosen_C')} on its own folds, "
              f"{ll.get('same_folds_chosen_C')} on these folds")
        for line in table_head(["solver", "chosen C", "passes of the search",
                                "one run at that C", "ratio", "seconds",
                                "largest model gap ≤"], "lrrrrrr"):
            print(line)
        for solver in args.search_solvers.split(","):
            r = _search(store, X, labels, solver, args)
            out["search"].append(r)
            print(table_row([solver, f"{r['chosen_C']:g}", f"{r['passes']:.1f}",
                             f"{r['one_passes_at_chosen']:.1f}", f"{r['ratio']:.2f}×",
                             f"{r['seconds']:.2f}", f"{r['largest_fold_gap_bound']:.1e}"]),
                  flush=True)
    if args.json:
        write_json(out, args.json, cleaned=False)
    return 0


def register(sub) -> None:
    """Add ``cv`` to the subcommands ``sub``."""
    p = sub.add_parser("cv", help="--cv K in shared passes against one run and K separate "
                       "runs; a cross-validated C search against LIBLINEAR -C",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="a9a/a9a,letter/letter.scale,dna/dna.scale",
                   help="comma-separated libsvm files (paths, or names under --datasets)")
    p.add_argument("--datasets", default=str(_DATA), help="directory of the named data sets")
    p.add_argument("--work", default="bench-out/cv", help="where the stores go")
    p.add_argument("--solvers", default="dcd,newton,avsf,nesvm,alm,ww")
    p.add_argument("--ww-binary", action="store_true", help="ww on binary data too")
    p.add_argument("-k", "--k", type=int, default=5, help="folds")
    p.add_argument("-C", "--C", type=float, default=1.0)
    p.add_argument("--loss", default="squared_hinge")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-passes", type=float, default=1000.0)
    p.add_argument("--search", action="store_true", help="also the C search on one data set")
    p.add_argument("--search-data", help="the data set of --search, one of --data (default "
                   "the first)")
    p.add_argument("--Cs", default=_CS, help="the C values of --search")
    p.add_argument("--search-solvers", default="newton,dcd,avsf,nesvm,alm")
    p.add_argument("--json", help="also write the rows to this file")
    p.set_defaults(run=_run)
