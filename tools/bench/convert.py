"""``tools/bench.py convert``: conversion throughput and memory, ``streamsvm convert`` against
scikit-learn's loader.

Measures, in one run on the same files:

* **End to end, one process per measurement.**  ``python -m streamsvm.cli convert IN OUT -q
  --overwrite --chunk-rows N`` and ``sklearn.datasets.load_svmlight_file(IN)`` each run in a fresh
  child process started by a tiny wrapper (:func:`tools.bench._timed.run_child`) that reports
  the child's wall time, CPU time and peak RSS (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` of the
  wrapper, whose only child is the job, so it is that one process's high-water mark; the
  child's RSS sampled every 20 ms is kept in the JSON as a cross-check).  Wall time includes
  interpreter start-up and imports, as a user sees it.
* **Where the time goes** (streamsvm, in this process): the stages of the converter timed one at
  a time on the same bytes: (1) read raw bytes with fsspec, (2) read + decompress + cut into
  line-aligned blocks (``streamsvm.io._source.iter_blocks``), (3) parse only
  (``streamsvm.io._parse.parse_block`` + the shift to 0-based indices, over blocks held in
  memory), (4) encode only (``streamsvm.io._writer.StoreWriter`` fed with pre-parsed blocks:
  dtype casts, chunk statistics, zstd compression, shard writes, ``finish``; split into (4a)
  the zarr shard writes and (4b) the rest), (5) ``convert()`` end to end, with the CPU seconds
  of each of its threads (reader, parser, writer, zarr's event loop and codec threads).  The
  converter overlaps (2), (3) and (4) in threads, so (5) is less than the sum.
* **Variants**: several ``--chunk-rows``; ``.gz`` and ``.zst`` copies of each input (made here,
  fast levels); the read speed of each store afterwards (every chunk through
  ``streamsvm.open_store(url).read_chunk(i)``).

Units: MB = 10^6 bytes.  MB/s is always **decompressed text** MB per wall second, so plain and
compressed inputs compare directly.  The page cache is warmed (every input read once) before
timing; nothing else should run on the machine meanwhile.

Examples::

    python tools/bench.py convert --quick
    python tools/bench.py convert --dataset a9a --replicate-mb 100 --repeat 3 --json a9a.json
    python tools/bench.py convert --synthetic-gb 2 --json synthetic.json

The modules: this one (settings, the run, the command line), :mod:`.convert_files` (inputs),
:mod:`.convert_process` (end to end), :mod:`.convert_stages` (in-process),
:mod:`.convert_report` (Markdown).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import sys
import time

from ._common import MB, command_line, log, write_json
from ._machine import machine_info, package_versions
from .convert_files import COMPRESSIONS, DATASETS, prepare_inputs, remove
from .convert_process import (CLI_DEFAULT_CHUNK_ROWS, TARGET_RSS_MB, TARGET_SPEEDUP,
                              bench_input, compute_targets, warmup_processes)
from .convert_report import render_markdown

__all__ = ["BenchConfig", "run_benchmark", "config_from_args", "register"]

SCHEMA = "streamsvm-bench-convert/1"
DEFAULT_CHUNK_ROWS = (4096, 65536, 262144)
#: The packages its results report.
PACKAGES = ("streamsvm", "numpy", "numba", "zarr", "numcodecs", "scikit-learn", "fsspec",
            "zstandard", "scipy")


@dataclasses.dataclass
class BenchConfig:
    """What one run measures (the command line's options; :func:`config_from_args`)."""

    inputs: list = dataclasses.field(default_factory=list)      # plain or compressed paths
    names: list = dataclasses.field(default_factory=list)       # display names (parallel)
    synthetic_gb: float | None = None
    replicate_mb: float | None = None
    chunk_rows: tuple = DEFAULT_CHUNK_ROWS
    compressions: tuple = ("gz", "zst")
    repeat: int = 1
    sklearn: bool = True
    sklearn_max_mb: float = 600.0
    prefix_mb: float = 300.0
    stages: bool = True
    store_read: bool = True
    scratch: str = ""
    keep: bool = False
    batch_mb: float = 256.0
    resume_every_mb: float = 512.0
    timeout: float = 4 * 3600.0
    warmup: bool = True
    command: str = ""
    argv: list = dataclasses.field(default_factory=list)
    mode: str = "custom"

    def default_chunk(self) -> int:
        return CLI_DEFAULT_CHUNK_ROWS if CLI_DEFAULT_CHUNK_ROWS in self.chunk_rows \
            else self.chunk_rows[0]


def run_benchmark(cfg: BenchConfig) -> dict:
    """Run everything ``cfg`` asks for; return the JSON-able result (see ``--json``)."""
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    made: list[str] = []
    t0 = time.perf_counter()
    try:
        inputs = prepare_inputs(cfg, made)
        if not inputs:
            raise SystemExit("bench.py convert: no input (give --dataset, --input or "
                             "--synthetic-gb)")
        if cfg.warmup:
            log("warm-up runs (untimed)")
            warmup_processes(inputs[0], cfg.scratch, cfg.sklearn, cfg.timeout)
        results = []
        for inp in inputs:
            log(f"== {inp.name}: {inp.path} ({inp.text_bytes / MB:,.1f} MB)")
            results.append(bench_input(inp, cfg, made))
    finally:
        for p in dict.fromkeys(made):
            remove(p, cfg.keep)
        if not cfg.keep:
            try:
                os.rmdir(cfg.scratch)      # only if empty: never remove what we did not make
            except OSError:
                pass
    settings = {k: v for k, v in dataclasses.asdict(cfg).items()
                if k not in ("command", "argv")}
    settings["chunk_rows"] = list(cfg.chunk_rows)
    settings["compressions"] = list(cfg.compressions)
    return {
        "schema": SCHEMA,
        "command": cfg.command,
        "argv": cfg.argv,
        "started": started,
        "total_seconds": time.perf_counter() - t0,
        "machine": dict(machine_info(), versions=package_versions(PACKAGES)),
        "settings": settings,
        "units": {"MB": "10^6 bytes", "MB/s": "decompressed text MB per wall second",
                  "peak_rss_mb": "getrusage ru_maxrss of the measured process, MB"},
        "targets": {"speedup_vs_sklearn": TARGET_SPEEDUP, "peak_rss_mb": TARGET_RSS_MB,
                    "results": compute_targets(results)},
        "inputs": results,
    }


def _positive_ints(text: str) -> list[int]:
    try:
        vals = [int(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return vals


def register(sub) -> None:
    """Add ``convert`` to the subcommands ``sub``."""
    p = sub.add_parser(
        "convert", help="'streamsvm convert' against scikit-learn's loader: throughput, "
        "memory, stages",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Conversion throughput and memory: 'streamsvm convert' (separate process, "
                    "wall s, MB/s of text, rows/s, peak RSS) against scikit-learn's "
                    "load_svmlight_file on the same files, plus a per-stage breakdown of where "
                    "streamsvm's time goes (read, decompress, parse, encode, end to end), "
                    "several --chunk-rows, .gz/.zst copies of each input, and the read speed "
                    "of the stores afterwards. Markdown on stdout; --json for the raw numbers.",
        epilog="targets: >= 6x sklearn's end-to-end throughput on 2 cores; peak RSS < 500 MB "
               "whatever the file size.\n\n"
               "examples:\n"
               "  python tools/bench.py convert --quick\n"
               "  python tools/bench.py convert --dataset a9a --replicate-mb 100 --repeat 3 "
               "--json a9a.json\n"
               "  python tools/bench.py convert --synthetic-gb 2 --json synthetic.json\n\n"
               "Run nothing else on the machine meanwhile: the converter uses every core.")
    g = p.add_argument_group("inputs (combine freely; default: --dataset a9a)")
    g.add_argument("--dataset", action="append", default=[], choices=sorted(DATASETS),
                   help=f"a shared dataset ({', '.join(f'{k}: {v}' for k, v in DATASETS.items())})")
    g.add_argument("--input", action="append", default=[], metavar="PATH",
                   help="any libsvm/svmlight file (a compressed one is decompressed into "
                        "--scratch first)")
    g.add_argument("--synthetic-gb", type=float, default=None, metavar="GB",
                   help="also generate (once, in --scratch) a synthetic file of about GB x 10^9 "
                        "bytes with tools/make_synthetic.py: 10^5 features, ~40 non-zeros per "
                        "row, 6-digit values")
    g.add_argument("--replicate-mb", type=float, default=None, metavar="MB",
                   help="also benchmark, for each input smaller than MB, a copy made of "
                        "concatenated copies of it (>= MB; per-process start-up dominates "
                        "small files)")
    g = p.add_argument_group("what to measure")
    g.add_argument("--chunk-rows", type=_positive_ints, default=list(DEFAULT_CHUNK_ROWS),
                   metavar="N[,N...]", help="chunk sizes for the plain input (default: "
                   f"{','.join(map(str, DEFAULT_CHUNK_ROWS))}); compressed inputs and the stage "
                   f"breakdown use {CLI_DEFAULT_CHUNK_ROWS} if listed, else the first")
    g.add_argument("--compress", nargs="*", default=["gz", "zst"], choices=sorted(COMPRESSIONS),
                   help="compressed copies to make and convert (fast levels: gzip -1, zstd -1, "
                        "bzip2 -1; default: gz zst; none: --compress with no value)")
    g.add_argument("--repeat", type=int, default=1, metavar="R",
                   help="run each end-to-end job R times; report the median wall time and the "
                        "largest peak RSS (default: 1)")
    g.add_argument("--no-sklearn", action="store_true", help="do not run scikit-learn")
    g.add_argument("--sklearn-max-mb", type=float, default=600.0, metavar="MB",
                   help="skip scikit-learn on inputs with more text than this (it needs ~5x the "
                        "file in RAM; default: %(default)s); such inputs also get a "
                        "--prefix-mb prefix that both tools convert, for a same-shape ratio")
    g.add_argument("--prefix-mb", type=float, default=300.0, metavar="MB",
                   help="size of that prefix (default: %(default)s)")
    g.add_argument("--no-stages", action="store_true", help="skip the per-stage breakdown")
    g.add_argument("--no-store-read", action="store_true",
                   help="skip reading the stores back")
    g.add_argument("--quick", action="store_true",
                   help="smoke test (< 1 minute): a9a only, --chunk-rows 65536, gz only, one "
                        "repeat")
    g = p.add_argument_group("files and output")
    g.add_argument("--scratch", default=os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "streamsvm-bench-convert"), metavar="DIR",
        help="scratch directory for generated inputs, compressed copies and stores "
             "(default: %(default)s)")
    g.add_argument("--keep", action="store_true",
                   help="keep everything made in --scratch (reused by later runs); default: "
                        "delete it at the end")
    g.add_argument("--batch-mb", type=float, default=256.0, metavar="MB",
                   help="text held in memory at once by the parse-only / encode-only stages "
                        "(default: %(default)s)")
    g.add_argument("--json", metavar="FILE", default=None,
                   help="write all raw numbers and machine information as JSON")
    g.add_argument("--timeout", type=float, default=4 * 3600.0, metavar="S",
                   help="time limit per measured process (default: %(default)s)")
    p.set_defaults(run=_convert_cmd)


def config_from_args(args, argv) -> BenchConfig:
    """The settings of ``args``; ``argv``: the command line (``convert ...``), recorded."""
    inputs, names = [], []
    datasets = args.dataset
    if args.quick:
        datasets = ["a9a"]
    elif not datasets and not args.input and not args.synthetic_gb:
        datasets = ["a9a"]
    for d in dict.fromkeys(datasets):
        inputs.append(DATASETS[d])
        names.append(d)
    if not args.quick:
        for path in args.input:
            inputs.append(path)
            names.append(os.path.basename(path))
    cfg = BenchConfig(
        inputs=inputs, names=names,
        synthetic_gb=None if args.quick else args.synthetic_gb,
        replicate_mb=None if args.quick else args.replicate_mb,
        chunk_rows=tuple([CLI_DEFAULT_CHUNK_ROWS] if args.quick else args.chunk_rows),
        compressions=tuple(["gz"] if args.quick else dict.fromkeys(args.compress)),
        repeat=1 if args.quick else max(1, args.repeat),
        sklearn=not args.no_sklearn, sklearn_max_mb=args.sklearn_max_mb,
        prefix_mb=args.prefix_mb, stages=not args.no_stages,
        store_read=not args.no_store_read, scratch=os.path.abspath(args.scratch),
        keep=args.keep, batch_mb=args.batch_mb, timeout=args.timeout,
        command=command_line(argv), argv=["tools/bench.py", *argv],
        mode="quick" if args.quick else "custom")
    return cfg


def _convert_cmd(args, argv) -> int:
    result = run_benchmark(config_from_args(args, argv))
    sys.stdout.write(render_markdown(result))
    sys.stdout.flush()
    if args.json:
        write_json(result, args.json, cleaned=False)
        log(f"wrote {args.json}")
    return 0
