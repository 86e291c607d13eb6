"""``streamsvm train STORE --cv K`` (with ``--C-path``: a cross-validated C search): the
fold models trained in shared passes (:mod:`streamsvm._cv`), each fold's held-out accuracy
and metrics, their mean and spread, and with ``-o`` the model at the (chosen) C trained on
every row."""

from __future__ import annotations

import json
import sys
import time

from ._cli_args import is_stdout, solver_args, storage_options, write_models
from .exceptions import InvalidParameterError

__all__ = ["cmd_cv"]


def cmd_cv(args) -> int:
    from ._cli_stop import graceful_stop
    from ._cv import cross_validate_path
    from ._outputs import check_writable_file
    from .io import open_store
    so = storage_options(args.storage_option)
    params = solver_args(args)
    if args.validation:
        raise InvalidParameterError("--cv chooses C on held-out folds and --validation on a "
                                    "store: give one of them")
    if args.init_model:
        raise InvalidParameterError("--cv trains every fold model from the start: drop "
                                    "--init-model")
    if args.output is not None and "{C}" in args.output:
        raise InvalidParameterError("with --cv, -o gets the model at the chosen C: drop {C} "
                                    f"from {args.output!r}")
    if args.output is not None:
        check_writable_file(args.output, what="model output (-o)", storage_options=so)
    Cs = params.pop("C_path", None)
    run = dict(memory=args.memory, seed=args.seed, storage_options=so,
               scratch_dir=args.scratch_dir, readers=args.readers, progress=not args.quiet,
               scheduler=args.scheduler)
    t0 = time.perf_counter()
    store = open_store(args.store, storage_options=so)
    try:
        with graceful_stop() as stop:
            results, best = cross_validate_path(
                store, args.cv, Cs, solver=args.solver, checkpoint=args.checkpoint,
                checkpoint_every=args.checkpoint_every,
                checkpoint_every_seconds=args.checkpoint_every_seconds, resume=args.resume,
                overwrite_checkpoint=args.overwrite_checkpoint, should_stop=stop.is_set,
                **run, **params)
            final = None
            if args.output is not None:
                from ._train import train
                chosen = dict(params, C=results[best].models[0].params["C"])
                final = train(store, solver=results[best].solver, should_stop=stop.is_set,
                              **run, **chosen)
    except KeyboardInterrupt:
        where = (f"; the same command continues from its checkpoint in {args.checkpoint}"
                 if args.checkpoint else "")
        print(f"streamsvm train: interrupted{where}", file=sys.stderr)
        return 130
    if final is not None:
        write_models([final[0]], [args.output], args, so)
    seconds = time.perf_counter() - t0
    said = sys.stderr if args.output is not None and is_stdout(args.output) else sys.stdout
    summary = _summary(results, best, Cs, final, args.output, seconds)
    if args.json:
        print(json.dumps(summary), file=said)
        return 0
    for line in _text(results, best, Cs, summary):
        print(line, file=said)
    return 0


def _summary(results, best, Cs, final, output, seconds) -> dict:
    """The ``--json`` summary: the chosen (or only) C's cross-validation, every C's with a
    path, the passes of the whole command, and the model written."""
    out = dict(results[best].summary(), seconds=seconds,
               C=float(results[best].models[0].params["C"]))
    if Cs is not None:        # (every C's models trained in the same run)
        out["C_search"] = [{"C": C, "accuracy": r.accuracy,
                            "accuracy_mean": r.summary()["accuracy_mean"],
                            "accuracy_std": r.summary()["accuracy_std"],
                            "largest_fold_gap_bound": r.summary()["largest_fold_gap_bound"]}
                           for C, r in zip(Cs, results)]
        out["chosen_C"] = out["C"]
    if final is not None:
        out["model"] = output
        out["model_passes"] = float(final[1].passes)
        out["model_converged"] = bool(final[1].converged)
    return out


def _text(results, best, Cs, summary) -> list:
    r = results[best]
    s = r.summary()
    lines = []
    if Cs is not None:
        for C, res in zip(Cs, results):
            rs = res.summary()
            lines.append(f"C={C:g}: cv accuracy {rs['accuracy_mean']:.4f} ± "
                         f"{rs['accuracy_std']:.4f}{' (chosen)' if res is r else ''}")
    for f in s["folds"]:
        if not f["rows"]:
            lines.append(f"fold {f['fold'] + 1}: no held-out rows (too few rows for the folds)")
            continue
        bal = f["balanced_accuracy"]
        lines.append(f"fold {f['fold'] + 1}: {f['rows']:,} held-out rows, accuracy "
                     f"{f['accuracy']:.4f}" + (f", balanced accuracy {bal:.4f}" if bal is not None
                                              else "") +
                     (f", ROC AUC {f['roc_auc']:.4f}" if f.get("roc_auc") is not None else "") +
                     f", certified gap <= {f['gap_bound']:.2e}")
    at = f" at C={summary['C']:g}; {len(Cs)} values of C in the same passes" \
        if Cs is not None else ""
    lines.append(f"cv {s['cv']} folds ({r.solver}{at}): accuracy {s['accuracy_mean']:.4f} ± "
                 f"{s['accuracy_std']:.4f} (mean ± std over folds), {s['accuracy']:.4f} over "
                 f"all rows; {summary['passes']:.2f} passes (1 of them scoring), "
                 f"{'converged' if r.result.converged else 'NOT converged'}, "
                 f"{summary['seconds']:.2f}s")
    if "model" in summary:
        lines.append(f"wrote {summary['model']}: {r.solver} at C={summary['C']:g} on every row, "
                     f"{summary['model_passes']:.2f} passes, "
                     f"{'converged' if summary['model_converged'] else 'NOT converged'}")
    return lines
