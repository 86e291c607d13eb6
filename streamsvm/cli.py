"""The ``streamsvm`` command line: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from .exceptions import StreamSVMError

__all__ = ["main", "build_parser"]

EPILOG = """\
examples:
  streamsvm convert train.svm.bz2 train.zarr --chunk-rows 65536 --shuffle --seed 0
  streamsvm convert s3://bucket/part-*.svm.gz s3://bucket/train.zarr
  streamsvm info train.zarr --json
  streamsvm quickstart          # convert, inspect the bundled a9a sample
"""


def _storage_options(pairs) -> dict:
    out = {}
    for item in pairs or []:
        if "=" not in item:
            raise SystemExit(f"streamsvm: error: --storage-option expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            value = json.loads(value)
        except ValueError:
            pass
        cur = out
        parts = key.split(".")
        for p in parts[:-1]:  # client_kwargs.endpoint_url=... → nested dicts
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = value
    return out


def _add_storage(p):
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", default=[],
                   help="fsspec option for remote URLs, repeatable; dotted keys nest "
                        "(e.g. client_kwargs.endpoint_url=http://127.0.0.1:9000, anon=false)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamsvm", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Exact linear SVMs on libsvm/svmlight files far larger than memory: "
                    "convert once into a chunked Zarr v3 CSR store, then train by streaming.",
        epilog=EPILOG)
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging (-v: one line per step, -vv: debug)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    c = sub.add_parser("convert", help="convert libsvm/svmlight text into a store",
                       description="Stream libsvm/svmlight text (local or URL; .gz/.bz2/.xz/.zst "
                                   "decompressed by extension; several inputs concatenated) into "
                                   "a chunked Zarr v3 CSR store with bounded memory. Bad input "
                                   "stops with an error naming file, line and column (exit 2) "
                                   "and leaves no store that opens as complete.")
    c.add_argument("inputs", nargs="+", metavar="INPUT", help="input files (last positional "
                   "argument is the OUTPUT store)")
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
                   help="largest shuffle bucket held in memory (default 256MB)")
    c.add_argument("--resume-every", default="512MB",
                   help="text between resume points that --resume continues from (default "
                        "512MB; each costs one flush of partial shards)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _add_storage(c)

    i = sub.add_parser("info", help="describe a store",
                       description="Rows, features, non-zeros, density, chunks, labels, bytes "
                                   "on disk, compression ratio and source of a store.")
    i.add_argument("store", help="store path or URL")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    _add_storage(i)

    q = sub.add_parser("quickstart", help="run the main job on the bundled a9a sample",
                       description="Convert the bundled a9a sample (LIBSVM's adult data) into a "
                                   "store in a work directory and describe it.")
    q.add_argument("--workdir", default="streamsvm-quickstart",
                   help="directory for the stores (default ./streamsvm-quickstart)")
    return parser


def _version() -> str:
    from . import __version__
    return __version__


def _cmd_convert(args) -> int:
    from .io import convert
    from ._units import parse_size
    if len(args.inputs) < 2:
        raise SystemExit("streamsvm convert: error: give at least one INPUT and the OUTPUT store")
    *inputs, output = args.inputs
    store = convert(inputs, output, chunk_rows=args.chunk_rows, shuffle=args.shuffle,
                    seed=args.seed, n_features=args.n_features, zero_based=args.zero_based,
                    dtype=args.dtype, task=args.task, sort_indices=args.sort_indices,
                    overwrite=args.overwrite, resume=args.resume,
                    storage_options=_storage_options(args.storage_option),
                    scratch_dir=args.scratch_dir,
                    shuffle_memory=parse_size(args.shuffle_memory, "--shuffle-memory"),
                    progress_bytes=max(1, parse_size(args.resume_every, "--resume-every")),
                    progress=not args.quiet)
    if not args.quiet:
        print(f"wrote {store.url}: {store.n_rows:,} rows, {store.n_features:,} features, "
              f"{store.nnz:,} non-zeros, {store.n_chunks} chunks, task {store.task}")
    return 0


def _cmd_info(args) -> int:
    from .io import open_store
    info = open_store(args.store, storage_options=_storage_options(args.storage_option)).info()
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
          f"source       " + ", ".join(f["url"] for f in info["source"]["files"]))
    return 0


def _cmd_quickstart(args) -> int:
    import pathlib
    from .data import sample_path
    from .io import convert
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    train, test = sample_path("a9a"), sample_path("a9a.t")
    print(f"[1/2] convert {train.name} and {test.name} (bundled a9a sample) into {work}/")
    tr = convert([str(train)], str(work / "a9a.zarr"), chunk_rows=4096, overwrite=True,
                 progress=False)
    te = convert([str(test)], str(work / "a9a.t.zarr"), chunk_rows=4096, overwrite=True,
                 n_features=tr.n_features, progress=False)
    print(f"      train: {tr.n_rows:,} rows, {tr.n_features} features, {tr.nnz:,} non-zeros")
    print(f"      test:  {te.n_rows:,} rows")
    print(f"[2/2] streamsvm info {work / 'a9a.zarr'}")
    return _cmd_info(argparse.Namespace(store=str(work / "a9a.zarr"), json=False,
                                        storage_option=[]))


COMMANDS = {"convert": _cmd_convert, "info": _cmd_info, "quickstart": _cmd_quickstart}


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except StreamSVMError as exc:
        print(f"streamsvm {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"streamsvm {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
