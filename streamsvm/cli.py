"""The ``streamsvm`` command line: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import logging
import os
import select
import sys
import warnings

from ._cli_args import (QUIET_HELP, add_storage, add_train, is_model_file, is_stdout,
                        path_outputs, solver_args, storage_options, write_models)
from ._cli_words import cli_words, warning_line
from .exceptions import InvalidParameterError, StreamSVMError

__all__ = ["main", "build_parser"]

EPILOG = """\
examples:
  streamsvm convert train.svm.bz2 train.zarr --chunk-rows 65536 --shuffle --seed 0
  streamsvm convert s3://bucket/part-*.svm.gz s3://bucket/train.zarr
  streamsvm info train.zarr --json
  streamsvm verify train.zarr   # every checksum and invariant of the store
  streamsvm train train.zarr -o model.json -C 1 --loss hinge --memory 2GB --checkpoint ckpt/
  streamsvm evaluate model.json test.zarr --json
  streamsvm quickstart          # convert, train and evaluate on the bundled a9a sample
"""


def _add_global_options(p, dest: str):
    """Add the options accepted both before and after the subcommand to ``p``.

    ``streamsvm -v convert -v ...``: a subcommand parses into a fresh namespace whose
    values replace those given before it, so each position counts into its own ``dest``
    (``verbose`` before, ``verbose_after`` after) and :func:`main` adds them up.
    """
    p.add_argument("-v", "--verbose", action="count", default=0, dest=dest,
                   help="more logging (-v: one line per step, -vv: debug)")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamsvm", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Exact linear SVMs on libsvm/svmlight files far larger than memory: "
                    "convert once into a chunked Zarr v3 CSR store, then train by streaming.",
        epilog=EPILOG)
    _add_global_options(parser, "verbose")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    c = sub.add_parser("convert", help="convert libsvm/svmlight text into a store",
                       description="Stream libsvm/svmlight text (local or URL; .gz/.bz2/.xz/.zst "
                                   "decompressed by extension; several inputs concatenated) into "
                                   "a chunked Zarr v3 CSR store with bounded memory. Bad input "
                                   "stops with an error naming file, line and column (exit 2) "
                                   "and leaves no store that opens as complete.")
    c.add_argument("inputs", nargs="+", metavar="INPUT", help="input files or glob patterns "
                   "(quote them for remote URLs); the last positional argument is the OUTPUT "
                   "store")
    c.add_argument("--chunk-rows", type=int, default=65536,
                   help="rows per row chunk, the unit the trainer streams (default 65536)")
    c.add_argument("--shuffle", action="store_true",
                   help="external shuffle of the rows (random buckets on local scratch disk, "
                        "each shuffled in memory); sorted files ruin block methods")
    c.add_argument("--seed", type=int, default=0, help="seed of --shuffle (default 0)")
    c.add_argument("--n-features", type=int, default=None,
                   help="number of features; larger indices are an error (default: the "
                        "largest index seen)")
    c.add_argument("--zero-based", choices=["yes", "no", "auto"], default="no",
                   help="index base: 'no' = one-based libsvm (default), 'yes' = zero-based, "
                        "'auto' = zero-based if the first block has an index 0")
    c.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="value dtype (default float32)")
    c.add_argument("--task", choices=["auto", "binary", "multiclass"], default="auto",
                   help="auto: two distinct labels → binary (stored ±1, larger label +1), "
                        "more → multiclass")
    c.add_argument("--sort-indices", action="store_true",
                   help="repair lines whose indices are not increasing (duplicates stay errors)")
    c.add_argument("--overwrite", action="store_true", help="replace an existing store")
    c.add_argument("--resume", action="store_true",
                   help="continue an interrupted conversion from its last resume point")
    c.add_argument("--scratch-dir", default=None,
                   help="local directory for --shuffle buckets (default: system temp dir)")
    c.add_argument("--shuffle-memory", default="256MB",
                   help="memory the shuffle holds: one bucket and the pieces cut from it "
                        "(default 256MB; smaller means more scratch files)")
    c.add_argument("--resume-every", default="512MB",
                   help="text between resume points that --resume continues from (default "
                        "512MB; each costs one flush of partial shards)")
    c.add_argument("--compression", default="lz4", metavar="SPEC",
                   help="compressor of the store's chunks: lz4 (default, level 5), lz4:N, "
                        "zstd (level 4), zstd:N, blosclz, blosclz:N (Blosc, level N 1-9) or "
                        "none. zstd makes the smallest store but decodes at half lz4's speed; "
                        "none is the largest and needs no decoding: fewer bytes pay where the "
                        "disk, not the CPU, bounds a pass. Training results do not depend on "
                        "it")
    c.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    add_storage(c)

    i = sub.add_parser("info", help="describe a store or a model",
                       description="A store: rows, features, non-zeros, density, chunks, "
                                   "labels, bytes on disk, compression ratio, compression "
                                   "(convert --compression) and source. A model (streamsvm "
                                   "JSON or LIBLINEAR text): task, classes, features, non-zero "
                                   "weights, intercepts, the largest weights by magnitude "
                                   "(libsvm feature ids), and how it was trained (solver, "
                                   "parameters, passes, objectives, relative gap, certified or "
                                   "not, the store it was trained on).")
    i.add_argument("store", metavar="STORE_OR_MODEL", help="store or model path or URL")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    add_storage(i)

    v = sub.add_parser("verify", help="check a store's checksums and structure",
                       description="Read the whole store once and check every checksum (the "
                                   "attributes, each array's metadata, every shard index and "
                                   "inner chunk), that no chunk file is missing, and the CSR "
                                   "structure, values, labels and recorded statistics. Prints "
                                   "every problem found (exit 2) or that the store is sound "
                                   "(exit 0). Training checks the chunks it reads as well, and "
                                   "stops at the first damaged one.")
    v.add_argument("store", help="store path or URL")
    v.add_argument("--json", action="store_true", help="print one JSON object")
    v.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    add_storage(v)

    add_train(sub)

    for name, helptext in (("predict", "write one predicted label per row"),
                           ("evaluate", "accuracy (and objective) of a model on data")):
        e = sub.add_parser(name, help=helptext,
                           description=f"{helptext.capitalize()}. DATA is a store or a "
                                       "libsvm/svmlight file (local or URL, compressed or not).")
        e.add_argument("model", help="model file from 'streamsvm train'")
        e.add_argument("data", help="store or libsvm file")
        if name == "predict":
            e.add_argument("-o", "--output", required=True,
                           help="output text file ('-': standard output); a symbolic link, "
                                "device or FIFO is written through, a file replaced whole "
                                "(its directory must exist)")
            e.add_argument("--scores", action="store_true",
                           help="write decision values instead of labels")
        else:
            e.add_argument("--json", action="store_true", help="print one JSON object")
        e.add_argument("--zero-based", choices=["yes", "no"], default="no",
                       help="index base of a libsvm DATA file (default no)")
        add_storage(e)

    q = sub.add_parser("quickstart", help="run the main job on the bundled a9a sample",
                       description="Convert the bundled a9a sample (LIBSVM's adult data) into "
                                   "stores in a work directory, train a linear SVM and "
                                   "evaluate it on the test split.")
    q.add_argument("--workdir", default="streamsvm-quickstart",
                   help="directory for the stores, created if missing (its parent must "
                        "exist; default ./streamsvm-quickstart)")
    for p in sub.choices.values():
        _add_global_options(p, "verbose_after")
    return parser


def _version() -> str:
    from . import __version__
    return __version__


def _cmd_convert(args) -> int:
    from .io import convert, parse_compression
    from ._units import parse_size
    if len(args.inputs) < 2:
        raise InvalidParameterError("give at least one INPUT and the OUTPUT store")
    *inputs, output = args.inputs
    compression = parse_compression(args.compression, "--compression")
    store = convert(inputs, output, chunk_rows=args.chunk_rows, shuffle=args.shuffle,
                    seed=args.seed, n_features=args.n_features, zero_based=args.zero_based,
                    dtype=args.dtype, task=args.task, sort_indices=args.sort_indices,
                    overwrite=args.overwrite, resume=args.resume,
                    storage_options=storage_options(args.storage_option),
                    scratch_dir=args.scratch_dir,
                    shuffle_memory=parse_size(args.shuffle_memory, "--shuffle-memory"),
                    progress_bytes=max(1, parse_size(args.resume_every, "--resume-every")),
                    progress=not args.quiet, compression=compression)
    # -q removes the progress display only: the result is always said
    print(f"wrote {store.url}: {store.n_rows:,} rows, {store.n_features:,} features, "
          f"{store.nnz:,} non-zeros, {store.n_chunks} chunks, task {store.task}")
    return 0


def _cmd_info(args) -> int:
    from .io import open_store
    so = storage_options(args.storage_option)
    if is_model_file(args.store, so):
        from ._model_info import model_info, model_info_text
        info = model_info(_load_model(args.store, so), args.store)
        print(json.dumps(info) if args.json else model_info_text(info))
        return 0
    info = open_store(args.store, storage_options=so).info()
    if args.json:
        print(json.dumps(info, indent=None, sort_keys=True))
        return 0
    ratio = info["compression_ratio"]
    print(f"store        {info['url']}\n"
          f"rows         {info['n_rows']:,}\n"
          f"features     {info['n_features']:,}\n"
          f"non-zeros    {info['nnz']:,} (density {info['density']:.3g})\n"
          f"chunks       {info['n_chunks']} of {info['chunk_rows']:,} rows\n"
          f"task         {info['task']}\n"
          f"labels       " + ", ".join(f"{k}: {v:,}" for k, v in info["labels"].items()) + "\n"
          f"values       {'binary (data omitted)' if info['binary_values'] else info['dtype']}\n"
          f"on disk      {info['bytes_on_disk'] / 2**20:.2f} MiB "
          f"(compression ratio {ratio:.2f})\n"
          f"compression  {info['compression']}\n"
          f"source       " + ", ".join(f["url"] for f in info["source"]["files"]))
    return 0


def _cmd_verify(args) -> int:
    from .io import verify_store
    rep = verify_store(args.store, storage_options=storage_options(args.storage_option),
                       progress=not (args.quiet or args.json))
    if args.json:
        print(json.dumps(rep))
    elif rep["ok"]:
        print(f"store {rep['url']}: sound ({rep['n_rows']:,} rows, {rep['nnz']:,} non-zeros, "
              f"{rep['n_chunks']} chunk{'s' if rep['n_chunks'] != 1 else ''}, "
              f"{rep['bytes_checked'] / 1e6:,.1f} MB decoded and "
              f"checked)")
    else:
        more = rep["n_problems"] - len(rep["problems"])
        print(f"streamsvm verify: store {rep['url']}: {rep['n_problems']} problem(s) found",
              file=sys.stderr)
        for p in rep["problems"]:
            print(f"  - {p}", file=sys.stderr)
        if more:
            print(f"  ... and {more} more", file=sys.stderr)
    return 0 if rep["ok"] else 2


def _cmd_quickstart(args) -> int:
    import pathlib
    from ._outputs import check_writable_dir
    from .data import sample_path
    from .io import convert
    work = pathlib.Path(args.workdir)
    check_writable_dir(work, what="work directory (--workdir)")
    train, test = sample_path("a9a"), sample_path("a9a.t")
    print(f"[1/3] convert the bundled a9a sample ({train.name}, {test.name}) into {work}/")
    tr = convert([str(train)], str(work / "a9a.zarr"), chunk_rows=4096, overwrite=True,
                 shuffle=True, seed=0)
    te = convert([str(test)], str(work / "a9a.t.zarr"), chunk_rows=4096, overwrite=True,
                 n_features=tr.n_features)
    print(f"      train: {tr.n_rows:,} rows, {tr.n_features} features, {tr.nnz:,} non-zeros; "
          f"test: {te.n_rows:,} rows")
    model_path = work / "a9a.model.json"
    print(f"[2/3] train: streamsvm train {work / 'a9a.zarr'} -o {model_path} -C 1 "
          f"--loss hinge")
    rc = _cmd_train(build_parser().parse_args(
        ["train", str(work / "a9a.zarr"), "-o", str(model_path), "-C", "1", "--loss", "hinge"]))
    if rc:
        return rc
    print(f"[3/3] evaluate: streamsvm evaluate {model_path} {work / 'a9a.t.zarr'}")
    return _cmd_evaluate(build_parser().parse_args(
        ["evaluate", str(model_path), str(work / "a9a.t.zarr")]))


def _cmd_train(args) -> int:
    import time
    from ._cli_stop import graceful_stop
    from ._outputs import check_writable_file
    from ._train import train
    from .io import STDOUT, open_store
    if args.cv is not None:
        from ._cli_cv import cmd_cv
        return cmd_cv(args)
    so = storage_options(args.storage_option)
    params = solver_args(args)
    # the model's location first: a run that cannot save its model does not start
    if args.validation and not params.get("C_path"):
        raise InvalidParameterError("--validation chooses a C of --C-path: give --C-path")
    outputs = path_outputs(args.output, params.get("C_path"), args.validation)
    for out in outputs.values():
        check_writable_file(out, what="model output (-o)", storage_options=so)
    t_start = time.perf_counter()
    store = open_store(args.store, storage_options=so)
    try:
        with graceful_stop() as stop:
            model, result = train(
                store, solver=args.solver, memory=args.memory, seed=args.seed,
                checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
                checkpoint_every_seconds=args.checkpoint_every_seconds, resume=args.resume,
                overwrite_checkpoint=args.overwrite_checkpoint, init_model=args.init_model,
                storage_options=so, should_stop=stop.is_set, scratch_dir=args.scratch_dir,
                readers=args.readers, progress=not args.quiet, scheduler=args.scheduler, **params)
    except KeyboardInterrupt:
        where = (f"; the same command continues from its checkpoint in {args.checkpoint}"
                 if args.checkpoint else "")
        print(f"streamsvm train: interrupted{where}", file=sys.stderr)
        return 130
    models = model if isinstance(model, list) else [model]
    search = None
    if args.validation:
        from ._c_search import choose_C
        best, search = choose_C(models, args.validation, so)
        if len(outputs) == 1:
            models = [models[best]]
    write_models(models, outputs.values(), args, so)
    seconds = time.perf_counter() - t_start
    summary = {"solver": models[0].params["solver"], **{  # (--solver auto: why that one)
        k: v for k, v in models[0].summary.items() if k == "chosen_because"},
        "passes": result.passes, "n_iter": result.n_iter, "primal": result.primal,
        "dual": result.dual, "gap": result.stop_value, "converged": result.converged,
        "seconds": seconds, "history": result.history,
        "model": args.output if len(outputs) == 1 else list(outputs.values())}
    if search is not None:
        summary.update(C_search=search, chosen_C=search[best]["C"])
    # -o - (or /dev/stdout): standard output carries the model, the summary goes to stderr
    said = sys.stderr if any(is_stdout(o) for o in outputs.values()) else sys.stdout
    for row in search if search is not None and not args.json else ():
        print(f"C={row['C']:g}: validation accuracy {row['accuracy']:.4f}, {row['passes']:.2f} "
              f"passes{'' if row['C'] != summary['chosen_C'] else ' (chosen)'}", file=said)
    if args.json:
        print(json.dumps(summary), file=said)
    else:                       # -q removes the progress display only
        names = ("standard output" if o == STDOUT else o for o in outputs.values())
        print(f"wrote {', '.join(names)}: {summary['solver']}, {result.n_iter} iterations, "
              f"{result.passes:.2f} passes, primal {result.primal:.6f}, dual {result.dual:.6f}, "
              f"relative gap {result.stop_value:.2e}, "
              f"{'converged' if result.converged else 'NOT converged'}, {seconds:.2f}s", file=said)
    return 0


def _load_model(path: str, so: dict):
    """The model at ``path``; a path that cannot be read (a directory, no permission, no
    credentials) is an error naming it."""
    from ._outputs import _reason
    from .exceptions import StoreNotFoundError
    from .io import remote_errors
    from .model import load_model
    try:
        with remote_errors(path):
            return load_model(path, storage_options=so)
    except StreamSVMError:
        raise
    except OSError as exc:
        raise StoreNotFoundError(f"cannot read the model file {path!r}: {_reason(exc)}") \
            from exc


def _cmd_predict(args) -> int:
    from ._evaluate import predict_to_file
    from ._outputs import check_not_an_input, check_writable_file
    from .io import STDOUT
    so = storage_options(args.storage_option)
    # the output first: nothing is read when the predictions could not be written
    what = "prediction output (-o)"
    check_not_an_input(args.output, (args.model, args.data), what=what)
    check_writable_file(args.output, what=what, storage_options=so)
    n = predict_to_file(_load_model(args.model, so), args.data, args.output,
                        storage_options=so, zero_based=args.zero_based, scores=args.scores)
    where = "standard output" if args.output == STDOUT else args.output
    print(f"wrote {n:,} predictions to {where}", file=sys.stderr)
    return 0


def _cmd_evaluate(args) -> int:
    from ._evaluate import evaluate
    so = storage_options(args.storage_option)
    res = evaluate(_load_model(args.model, so), args.data, storage_options=so,
                   zero_based=args.zero_based)
    if args.json:
        print(json.dumps(res))
    else:
        line = f"accuracy {res['accuracy']:.4f} ({res['correct']:,}/{res['n_rows']:,})"
        if "objective" in res:
            line += f", objective {res['objective']:.6f} (C={res['C']:g}, {res['loss']})"
        print(line)
        from ._metrics import metrics_text
        print("\n".join(metrics_text(res)))
    return 0


COMMANDS = {"convert": _cmd_convert, "info": _cmd_info, "verify": _cmd_verify,
            "train": _cmd_train,
            "predict": _cmd_predict, "evaluate": _cmd_evaluate, "quickstart": _cmd_quickstart}


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = args.verbose + getattr(args, "verbose_after", 0)
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm
    term = _sigterm_interrupts()
    formatted = warnings.formatwarning
    warnings.formatwarning = warning_line(parser, args.command)
    try:
        # log lines through tqdm.write: on their own lines above a progress bar, not glued to it
        with logging_redirect_tqdm(tqdm_class=tqdm):
            rc = COMMANDS[args.command](args)
        sys.stdout.flush()      # a closed pipe shows here, not in the interpreter's last flush
        return rc
    except StreamSVMError as exc:
        print(f"streamsvm {args.command}: error: {cli_words(str(exc), parser, args.command)}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"streamsvm {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_gone():
            raise
        # as the Python docs recommend: stdout to devnull, so the final flush is quiet too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + 13         # like a process killed by SIGPIPE (streamsvm info s | head)
    except Exception as exc:    # last resort: a file or remote error no command named
        why = _environment_error(exc)
        if why is None:
            raise
        logging.getLogger(__name__).debug("%s", why, exc_info=exc)     # -vv: the traceback
        print(f"streamsvm {args.command}: error: {why}", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = formatted
        term()


def _environment_error(exc: Exception) -> str | None:
    """One line for an ``OSError`` (``strerror: 'path'``) or an error of remote access
    (:func:`streamsvm.io.access_error`); None for anything else (a bug: its traceback)."""
    from ._outputs import _reason
    from .io import access_error
    why = access_error(exc)
    if why is None and isinstance(exc, OSError):
        why = _reason(exc)
    return why


def _sigterm_interrupts():
    """Make SIGTERM raise ``KeyboardInterrupt`` like SIGINT (when it has its default action
    and this is the main thread), so that ``finally`` clauses run and scratch folders are
    removed; returns the function that restores the previous handler."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stdout_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone.

    Tells ``streamsvm info s | head -3`` apart from a broken connection elsewhere (which
    must not pass silently). Without ``select.poll`` (Windows) any broken pipe counts.
    """
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):     # replaced stdout (tests, embedding): not a pipe
        return False
    if not hasattr(select, "poll"):
        return True
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))


if __name__ == "__main__":
    sys.exit(main())
