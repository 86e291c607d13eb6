"""``tools/bench.py codecs``: the store's compression (``streamsvm convert --compression``)
against its size, its conversion time and the time of a read pass, on one libsvm file::

    python tools/bench.py codecs --rows 1000000 --features 100000 --nnz-per-row 30 \\
        --json docs/bench/results/codecs-synth-1e6.json

The file is a synthetic one (``tools/make_synthetic.py``, made in ``--scratch`` and deleted
after) or any ``--input``. For each form of ``--codecs``: ``streamsvm convert`` in a process of
its own (:func:`tools.bench.convert_process.measure_process`), the store's bytes on disk and
its compression ratio (decoded CSR bytes ÷ bytes on disk, as ``streamsvm info`` reports),
then the read passes of :func:`tools.bench.store_io.io_baseline` (every chunk through
``read_chunk``, and a scheduler pass with no compute with two read-ahead threads and with
one); each the fastest of ``--repeat``. The store is read right after it was written: the
page cache holds it, so these are the page-cached passes, where the CPU's decoding is the
whole cost; a disk-bound pass also pays the store's bytes over the disk's bandwidth.
"""

from __future__ import annotations

import os

from ._common import MB, ROOT, log
from ._machine import save_stamped
from ._table import fmt, markdown_table
from .convert_files import SYNTH, BenchInput, remove
from .convert_process import measure_process, streamsvm_argv, warm_page_cache, warmup_processes
from .store_io import io_baseline

__all__ = ["bench_codecs", "codecs_table", "register"]

DEFAULT_CODECS = "lz4,zstd,zstd:3,blosclz:5,none"


def _synthetic(scratch: str, rows: int, features: int, nnz_per_row: int) -> str:
    """The synthetic file of that shape (the shape of ``convert_files.SYNTH`` otherwise)."""
    from tools.make_synthetic import make_synthetic
    path = os.path.join(scratch, f"codecs-{rows}r-{features}f-{nnz_per_row}k.svm")
    log(f"generating {path}")
    info = make_synthetic(path, **dict(SYNTH, rows=rows, features=features,
                                       nnz_per_row=nnz_per_row), progress=False)
    log(f"generated {info['text_bytes'] / MB:,.0f} MB in {info['seconds']:.1f} s")
    return path


def bench_one(path: str, spec: str, store: str, *, chunk_rows: int, repeat: int,
              timeout: float) -> dict:
    """Convert ``path`` into ``store`` with ``--compression spec`` ``repeat`` times, then
    read the store back ``repeat`` times (module doc); fastest of each."""
    import streamsvm as ss
    argv = streamsvm_argv(path, store, chunk_rows) + ["--compression", spec]
    runs = []
    for _ in range(repeat):
        runs.append(measure_process(argv, timeout=timeout))
        if runs[-1]["rc"] != 0:
            return {"codec": spec, "ok": False, "error": runs[-1].get("stderr_tail")}
    info = ss.open_store(store).info()
    read = io_baseline(store, repeat=repeat)
    return {"codec": spec, "ok": True, "recorded": info["compression"],
            "bytes_on_disk": info["bytes_on_disk"], "decoded_bytes": info["bytes_uncompressed"],
            "compression_ratio": info["compression_ratio"],
            "convert_s": min(r["wall_s"] for r in runs),
            "convert_all_s": [r["wall_s"] for r in runs],
            "convert_peak_rss_mb": max(r["peak_rss_bytes"] for r in runs) / MB,
            "read_chunk_loop_s": min(read["read_chunk_loop_all_s"]),
            "scheduler_pass_s": min(read["scheduler_pass_all_s"]),
            "one_reader_pass_s": min(read["one_reader_pass_all_s"]),
            "read": read, "loadavg": os.getloadavg()}


def bench_codecs(path: str, specs: list[str], *, scratch: str, chunk_rows: int = 65536,
                 repeat: int = 3, keep: bool = False, timeout: float = 3600.0) -> dict:
    """Every form of ``specs`` on the file ``path`` (module doc)."""
    warm_page_cache([path])
    warmup_processes(BenchInput("warm-up", path, "file"), scratch, False, timeout)
    out = {"input": path, "text_bytes": os.path.getsize(path), "chunk_rows": chunk_rows,
           "repeat": repeat, "loadavg_start": os.getloadavg(), "codecs": []}
    for spec in specs:
        store = os.path.join(scratch, f"codecs-{spec.replace(':', '-')}.zarr")
        log(f"--compression {spec}: convert x{repeat}, then read x{repeat}")
        r = bench_one(path, spec, store, chunk_rows=chunk_rows, repeat=repeat, timeout=timeout)
        out["codecs"].append(r)
        if r["ok"]:
            log(f"  {r['bytes_on_disk'] / MB:,.1f} MB, convert {r['convert_s']:.2f} s, "
                f"read pass {r['scheduler_pass_s']:.3f} s")
        remove(store, keep)
    out["loadavg_end"] = os.getloadavg()
    return out


def codecs_table(r: dict) -> str:
    """Markdown table of :func:`bench_codecs`: one row per codec."""
    rows = []
    for c in r["codecs"]:
        if not c["ok"]:
            rows.append([c["codec"]] + ["–"] * 7)
            continue
        rows.append([c["recorded"], fmt(c["bytes_on_disk"] / MB, "mb1"),
                     fmt(c["compression_ratio"], "x1"), fmt(c["convert_s"], "s"),
                     fmt(c["read_chunk_loop_s"], "s"), fmt(c["scheduler_pass_s"], "s"),
                     fmt(c["one_reader_pass_s"], "s"),
                     fmt(c["decoded_bytes"] / MB / c["one_reader_pass_s"], "int")])
    return markdown_table(["--compression", "on disk MB", "ratio", "convert s",
                           "read_chunk loop s", "pass s, 2 readers", "pass s, 1 reader",
                           "decoded MB/s, 1 reader"], rows)


# -- the subcommand --------------------------------------------------------------------------

def register(sub) -> None:
    """Add ``codecs`` to the subcommands ``sub``."""
    p = sub.add_parser("codecs", help="store size, convert and read-pass seconds per "
                       "'convert --compression'",
                       description=__doc__.split("\n\n")[0].replace("``", "'"))
    p.add_argument("--input", metavar="PATH",
                   help="a plain libsvm file (default: a synthetic one, made and deleted)")
    p.add_argument("--rows", type=int, default=1_000_000, help="synthetic rows (10^6)")
    p.add_argument("--features", type=int, default=100_000, help="synthetic features (10^5)")
    p.add_argument("--nnz-per-row", type=int, default=30, help="synthetic non-zeros a row (30)")
    p.add_argument("--codecs", default=DEFAULT_CODECS,
                   help=f"comma-separated --compression forms (default {DEFAULT_CODECS})")
    p.add_argument("--chunk-rows", type=int, default=65536, help="convert --chunk-rows")
    p.add_argument("--repeat", type=int, default=3, help="runs of each, the fastest kept (3)")
    p.add_argument("--scratch", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                     "streamsvm-bench-codecs"),
                   help="directory for the synthetic file and the stores (default %(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the stores and the file made")
    p.add_argument("--json", metavar="FILE",
                   help="write the results there (default bench-out/codecs/codecs.json)")
    p.set_defaults(run=_codecs_cmd)


def _codecs_cmd(args, argv) -> int:
    os.makedirs(args.scratch, exist_ok=True)
    made = None
    try:
        path = args.input or (made := _synthetic(args.scratch, args.rows, args.features,
                                                  args.nnz_per_row))
        r = bench_codecs(path, [s.strip() for s in args.codecs.split(",") if s.strip()],
                         scratch=args.scratch, chunk_rows=args.chunk_rows,
                         repeat=max(1, args.repeat), keep=args.keep)
    finally:
        if made is not None:
            remove(made, args.keep)
        if not args.keep:
            try:
                os.rmdir(args.scratch)      # only if empty: never what we did not make
            except OSError:
                pass
    if made is not None:
        r["synthetic"] = dict(SYNTH, rows=args.rows, features=args.features,
                              nnz_per_row=args.nnz_per_row)
    out = args.json or os.path.join(ROOT, "bench-out", "codecs", "codecs.json")
    save_stamped(r, argv, os.path.dirname(os.path.abspath(out)), os.path.basename(out))
    print(codecs_table(r))
    return 0
