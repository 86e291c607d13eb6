#!/usr/bin/env python
"""Conversion throughput and memory: ``streamsvm convert`` against scikit-learn's loader.

Measures, in one run on the same files:

* **End to end, one process per measurement.**  ``python -m streamsvm.cli convert IN OUT -q
  --overwrite --chunk-rows N`` and ``sklearn.datasets.load_svmlight_file(IN)`` each run in a fresh
  child process started by a tiny wrapper (``python -c``) that reports the child's wall time,
  CPU time and peak RSS (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` of the wrapper, whose only
  child is the job, so it is that one process's high-water mark; a 20 ms ``psutil`` poll of the
  child is kept in the JSON as a cross-check).  Wall time includes interpreter start-up and
  imports, as a user sees it.
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

    python tools/bench_convert.py --quick
    python tools/bench_convert.py --dataset a9a --replicate-mb 100 --repeat 3 --json a9a.json
    python tools/bench_convert.py --synthetic-gb 2 --json synthetic.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gzip
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__" and ROOT not in sys.path:
    sys.path.insert(0, ROOT)

__all__ = ["BenchConfig", "run_benchmark", "render_markdown", "main", "markdown_table",
           "stage_rows", "mb_per_s", "rows_per_s", "maxrss_bytes", "measure_process"]

MB = 1e6
SCHEMA = "streamsvm-bench-convert/1"
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "datasets")
DATASETS = {"a9a": os.path.join(SHARED, "a9a", "a9a"),
            "a9a.t": os.path.join(SHARED, "a9a", "a9a.t")}
DEFAULT_CHUNK_ROWS = (4096, 65536, 262144)
CLI_DEFAULT_CHUNK_ROWS = 65536
COMPRESSIONS = {"gz": ".gz", "zst": ".zst", "bz2": ".bz2"}
SKLEARN_READS = ("plain", "gz", "bz2", "zst")
TARGET_SPEEDUP = 6.0
TARGET_RSS_MB = 500.0
POLL_SECONDS = 0.02
# The synthetic shape of the issue: 10^5 features, ~40 non-zeros per row, 6-digit values.
SYNTH = dict(features=100_000, nnz_per_row=40, classes=2, noise=0.05, zipf=1.1,
             binary_values=False, seed=0, zero_based=False)
SYNTH_SAMPLE_ROWS = 20_000


def log(msg: str) -> None:
    print(f"[bench_convert {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# arithmetic and formatting (pure)
# --------------------------------------------------------------------------------------------

def mb_per_s(nbytes, seconds):
    """``nbytes`` / 10^6 / ``seconds``; None when either is missing or seconds <= 0."""
    if nbytes is None or seconds is None or seconds <= 0:
        return None
    return nbytes / MB / seconds


def rows_per_s(rows, seconds):
    if rows is None or seconds is None or seconds <= 0:
        return None
    return rows / seconds


def maxrss_bytes(ru_maxrss: int, system: str | None = None) -> int:
    """``ru_maxrss`` in bytes: kibibytes on Linux and the BSDs, bytes on macOS."""
    system = system or platform.system()
    return int(ru_maxrss) if system == "Darwin" else int(ru_maxrss) * 1024


def ratio(a, b):
    """a / b, or None."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(x, kind: str = "g") -> str:
    """Table cell: ``s`` seconds (3 significant digits), ``mb`` (1 decimal), ``int``
    (thousands separators), ``x`` (ratio, 1 decimal + '×'), ``pct``; '–' for None."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if kind == "s":
        return f"{x:#.3g}" if x < 100 else f"{x:.0f}"
    if kind == "mb":
        return f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"
    if kind == "int":
        return f"{int(round(x)):,}"
    if kind == "x":
        return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"
    if kind == "cpu":
        return f"{x:.2f}"
    return str(x)


def markdown_table(headers, rows, align=None) -> str:
    """A GitHub Markdown table; ``align`` is a string of 'l'/'r' per column (default: first
    column left, the rest right)."""
    align = align or ("l" + "r" * (len(headers) - 1))
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(str(h))] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(vals):
        out = []
        for v, w, a in zip(vals, widths, align):
            out.append(v.ljust(w) if a == "l" else v.rjust(w))
        return "| " + " | ".join(out) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":" if a == "r" else ":" + "-" * (w + 1))
                         for w, a in zip(widths, align)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in cells])


STAGE_HEADERS = ["stage", "input", "s", "MB/s (text)", "CPU s", "CPU/wall"]


def stage_rows(stages) -> list[list[str]]:
    """Rows of the stage table (see :data:`STAGE_HEADERS`) from stage dicts."""
    out = []
    for st in stages:
        out.append([st["stage"], st["input"], fmt(st["seconds"], "s"),
                    fmt(st.get("mb_per_s"), "mb"), fmt(st.get("cpu_s"), "s"),
                    fmt(ratio(st.get("cpu_s"), st["seconds"]), "cpu")])
    return out


def stage_table(stages) -> str:
    return markdown_table(STAGE_HEADERS, stage_rows(stages), "llrrrr")


def summarize_repeats(reps: list[dict], text_bytes: int, rows: int | None) -> dict:
    """Median wall/CPU time and maximum peak RSS over repeated measurements of one job."""
    ok = [r for r in reps if r.get("rc") == 0]
    if not ok:
        return {"ok": False, "error": (reps[-1].get("stderr_tail") if reps else "not run")}
    wall = statistics.median(r["wall_s"] for r in ok)
    cpu = statistics.median(r["user_s"] + r["sys_s"] for r in ok)
    rss = max(r["peak_rss_bytes"] for r in ok)
    return {"ok": True, "wall_s": wall, "wall_min_s": min(r["wall_s"] for r in ok),
            "cpu_s": cpu, "cpu_per_wall": ratio(cpu, wall), "peak_rss_mb": rss / MB,
            "mb_per_s": mb_per_s(text_bytes, wall), "rows_per_s": rows_per_s(rows, wall)}


# --------------------------------------------------------------------------------------------
# measuring one process
# --------------------------------------------------------------------------------------------

_WRAPPER = r"""
import json, resource, subprocess, sys, threading, time
argv = json.loads(sys.argv[1]); interval = float(sys.argv[2])
t0 = time.perf_counter()
proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
peak = [0]
done = threading.Event()
def poll():
    try:
        import psutil
        p = psutil.Process(proc.pid)
        while not done.is_set():
            peak[0] = max(peak[0], p.memory_info().rss)
            done.wait(interval)
    except Exception:
        pass
th = threading.Thread(target=poll, daemon=True)
th.start()
out, err = proc.communicate()
wall = time.perf_counter() - t0
done.set()
th.join()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"rc": proc.returncode, "wall_s": wall, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
           "ru_maxrss": ru.ru_maxrss, "sampled_peak_rss_bytes": peak[0],
           "stdout_tail": out.decode(errors="replace")[-2000:],
           "stderr_tail": err.decode(errors="replace")[-2000:]}, sys.stdout)
"""


def child_env() -> dict:
    """Environment for measured children: the repository first on ``PYTHONPATH``, so that
    ``-m streamsvm.cli`` runs this checkout even where the editable install is stale."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    return env


def measure_process(argv, *, timeout: float | None = None, poll: float = POLL_SECONDS) -> dict:
    """Run ``argv`` as the only child of a fresh wrapper process; return its wall time, CPU
    time (user, sys) and peak RSS (bytes), plus the tails of its output."""
    cmd = [sys.executable, "-c", _WRAPPER, json.dumps(list(map(str, argv))), str(poll)]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                         env=child_env(), cwd=ROOT)
    if res.returncode != 0:
        return {"rc": -1, "stderr_tail": res.stderr.decode(errors="replace")[-2000:]}
    out = json.loads(res.stdout)
    out["peak_rss_bytes"] = maxrss_bytes(out.pop("ru_maxrss"))
    out["argv"] = list(map(str, argv))
    return out


def streamsvm_argv(inp: str, out: str, chunk_rows: int) -> list[str]:
    return [sys.executable, "-m", "streamsvm.cli", "convert", inp, out, "-q", "--overwrite",
            "--chunk-rows", str(chunk_rows)]


_SKLEARN = r"""
import io, json, sys
from sklearn.datasets import load_svmlight_file
path = sys.argv[1]
if path.endswith(".zst"):
    import zstandard
    f = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")))
    X, y = load_svmlight_file(f)
else:
    X, y = load_svmlight_file(path)
print(json.dumps({"rows": X.shape[0], "features": X.shape[1], "nnz": int(X.nnz)}))
"""


def sklearn_argv(inp: str) -> list[str]:
    return [sys.executable, "-c", _SKLEARN, inp]


# --------------------------------------------------------------------------------------------
# machine
# --------------------------------------------------------------------------------------------

def _version(dist: str):
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict:
    from tools.bench._machine import machine_info as base
    return dict(base(), versions={d: _version(d) for d in (
        "streamsvm", "numpy", "numba", "zarr", "numcodecs", "scikit-learn", "fsspec",
        "zstandard", "scipy")})


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class BenchInput:
    name: str
    path: str                  # plain text
    kind: str                  # dataset | file | synthetic | replicated | prefix
    made: bool = False         # created by this run in scratch (deleted unless --keep)
    role: str = "main"         # main: full matrix; compare: plain + sklearn only
    note: str = ""
    parent: str | None = None  # for a prefix: the input it stands in for against sklearn

    @property
    def text_bytes(self) -> int:
        return os.path.getsize(self.path)


def _stem(path: str) -> str:
    base = os.path.basename(path)
    for ext in (".gz", ".bz2", ".xz", ".zst", ".svm", ".libsvm", ".txt"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


def _tmp_name(path: str) -> str:
    return f"{path}.partial-{os.getpid()}"


def decompress_to(src: str, dst: str) -> None:
    """Decompress ``src`` (compression by extension, via fsspec) to plain ``dst``."""
    import fsspec
    from streamsvm.io._source import compression_of
    comp = compression_of(src)
    tmp = _tmp_name(dst)
    if comp == "zstd":
        import zstandard
        with open(src, "rb") as f, open(tmp, "wb") as g:
            zstandard.ZstdDecompressor().copy_stream(f, g)
    else:
        with fsspec.open(src, "rb", compression=comp) as f, open(tmp, "wb") as g:
            shutil.copyfileobj(f, g, 8 << 20)
    os.replace(tmp, dst)


def compress_to(src: str, dst: str, kind: str) -> float:
    """Write a compressed copy of ``src`` (fast levels: gzip 1, zstd 1, bz2 1); seconds."""
    t0 = time.perf_counter()
    tmp = _tmp_name(dst)
    with open(src, "rb") as f:
        if kind == "gz":
            with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1,
                                                       mtime=0, filename="") as g:
                shutil.copyfileobj(f, g, 8 << 20)
        elif kind == "zst":
            import zstandard
            with open(tmp, "wb") as g:
                zstandard.ZstdCompressor(level=1, threads=-1).copy_stream(f, g)
        elif kind == "bz2":
            import bz2
            with bz2.open(tmp, "wb", compresslevel=1) as g:
                shutil.copyfileobj(f, g, 8 << 20)
        else:
            raise ValueError(f"unknown compression {kind!r}")
    os.replace(tmp, dst)
    return time.perf_counter() - t0


def replicate_to(src: str, dst: str, target_bytes: int) -> int:
    """Concatenate copies of ``src`` into ``dst`` until it holds >= ``target_bytes``; copies."""
    size = os.path.getsize(src)
    copies = max(1, math.ceil(target_bytes / max(size, 1)))
    with open(src, "rb") as f:
        data = f.read()
    if not data.endswith(b"\n"):
        data += b"\n"
    tmp = _tmp_name(dst)
    with open(tmp, "wb") as g:
        for _ in range(copies):
            g.write(data)
    os.replace(tmp, dst)
    return copies


def prefix_to(src: str, dst: str, target_bytes: int) -> int:
    """The first whole lines of ``src`` holding at least ``target_bytes`` (or all of it) into
    ``dst``; returns the bytes written."""
    tmp = _tmp_name(dst)
    done = 0
    last = b"\n"
    with open(src, "rb") as f, open(tmp, "wb") as g:
        while done < target_bytes:
            buf = f.read(min(8 << 20, target_bytes - done))
            if not buf:
                break
            g.write(buf)
            done += len(buf)
            last = buf[-1:]
        if last != b"\n":                      # finish the line we stopped in
            rest = f.readline()
            g.write(rest)
            done += len(rest)
    os.replace(tmp, dst)
    return done


def synthetic_rows_for(target_bytes: int, scratch: str) -> tuple[int, float]:
    """Rows of the synthetic shape giving about ``target_bytes`` of text (rounded up), from a
    sample of the same generator (its files for fewer rows are prefixes of bigger ones)."""
    from tools.make_synthetic import make_synthetic
    sample = os.path.join(scratch, f"synthetic-sample-{SYNTH_SAMPLE_ROWS}.svm")
    info = make_synthetic(sample, rows=SYNTH_SAMPLE_ROWS, progress=False, **SYNTH)
    os.remove(sample)
    per_row = info["text_bytes"] / SYNTH_SAMPLE_ROWS
    return int(math.ceil(target_bytes / per_row)), per_row


def make_synthetic_input(gb: float, scratch: str) -> BenchInput:
    from tools.make_synthetic import make_synthetic
    rows, per_row = synthetic_rows_for(int(gb * 1e9), scratch)
    path = os.path.join(scratch, f"synthetic-{rows}r-{SYNTH['features']}f-"
                                 f"{SYNTH['nnz_per_row']}k-s{SYNTH['seed']}.svm")
    if os.path.exists(path):
        log(f"reusing cached synthetic file {path}")
    else:
        log(f"generating {path}: {rows:,} rows (~{per_row:.0f} bytes/row, ~{gb:g} GB)")
        info = make_synthetic(path, rows=rows, progress=sys.stderr.isatty(), **SYNTH)
        log(f"generated {info['text_bytes'] / MB:,.0f} MB in {info['seconds']:.1f} s")
    return BenchInput(f"synthetic {gb:g} GB", path, "synthetic", made=True,
                      note=(f"make_synthetic: {rows:,} rows, {SYNTH['features']:,} features, "
                            f"K={SYNTH['nnz_per_row']} (1+Poisson, Zipf {SYNTH['zipf']}, "
                            f"duplicates merged), 6-significant-digit values, seed "
                            f"{SYNTH['seed']}"))


# --------------------------------------------------------------------------------------------
# in-process measurements: stages and store reading
# --------------------------------------------------------------------------------------------

class _Clock:
    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.c0


def _stage(name, inp, seconds, cpu, text_bytes, **extra) -> dict:
    d = {"stage": name, "input": inp, "seconds": seconds, "cpu_s": cpu,
         "text_bytes": text_bytes, "mb_per_s": mb_per_s(text_bytes, seconds)}
    d.update(extra)
    return d


def _read_raw(path: str, block: int) -> int:
    import fsspec
    n = 0
    with fsspec.open(path, "rb") as f:
        while True:
            b = f.read(block)
            if not b:
                return n
            n += len(b)


def _index_limits():
    """The (min, max) raw index ``convert`` parses one-based int32 files with."""
    from streamsvm.io._convert import _Bounds
    return _Bounds("no", None, "int32").limits()


def warm_in_process() -> None:
    """Load the numba kernels (from the on-disk cache) and zarr before any timing."""
    from streamsvm.io._parse import parse_block
    lo, hi = _index_limits()
    parse_block(b"+1 1:0.5 3:1\n-1 2:2\n", file="warm", first_line=1, min_index=lo,
                max_index=hi)
    import zarr  # noqa: F401


class _ShardWriteTimer:
    """Accumulate the time ``StoreWriter`` spends in zarr writes (``_Appender._write``: the
    concatenation of pending entries, zstd compression and the shard write), by wrapping that
    method in this process only, for the duration of the ``with`` block."""

    def __enter__(self):
        from streamsvm.io import _writer
        self.cls = _writer._Appender
        self.orig = self.cls._write
        self.seconds = self.cpu = 0.0
        self.calls = 0
        timer = self

        def timed(appender, n):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return timer.orig(appender, n)
            finally:
                timer.seconds += time.perf_counter() - t0
                timer.cpu += time.process_time() - c0
                timer.calls += 1

        self.cls._write = timed
        return self

    def __exit__(self, *exc):
        self.cls._write = self.orig


class ThreadCPU:
    """CPU seconds per thread of this process while the ``with`` block runs (Linux:
    ``/proc/self/task/*/stat`` sampled every ``interval`` s; a thread that ends between two
    samples loses at most one interval).  Threads are named by their Python name, with
    numbered pools merged (``asyncio_0``, ``asyncio_1``, ... → ``asyncio``)."""

    def __init__(self, interval: float = 0.01):
        self.interval = interval
        self.by_name: dict[str, float] = {}
        self.available = os.path.isdir("/proc/self/task")

    def _sample(self, into: dict) -> None:
        import threading
        for t in threading.enumerate():
            if t.native_id is not None:
                self.names[t.native_id] = t.name
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            into[int(tid)] = (int(fields[11]) + int(fields[12])) / self.tick

    def __enter__(self):
        if not self.available:
            return self
        import threading
        self.tick = os.sysconf("SC_CLK_TCK")
        self.names: dict[int, str] = {}
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self._sample(self.base)
        self._stop = threading.Event()
        self._me = None

        def run():
            self._me = threading.get_native_id()
            while not self._stop.is_set():
                self._sample(self.last)
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=run, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if not self.available:
            return
        self._stop.set()
        self._thread.join()
        self._sample(self.last)
        for tid, cpu in self.last.items():
            if tid == self._me:
                continue
            name = self.names.get(tid, "?")
            name = name.rstrip("0123456789").rstrip("_-") or name
            self.by_name[name] = self.by_name.get(name, 0.0) + cpu - self.base.get(tid, 0.0)
        self.by_name = {k: round(v, 3) for k, v in sorted(self.by_name.items(),
                                                           key=lambda kv: -kv[1]) if v > 0}


def measure_parse_encode(plain: str, store_url: str, *, chunk_rows: int, batch_bytes: int,
                         resume_every: int) -> tuple[dict, dict]:
    """Parse-only and encode-only timings over the whole file, in batches of about
    ``batch_bytes`` of text held in memory (reading is not timed)."""
    from streamsvm.io._parse import parse_block
    from streamsvm.io._source import describe_inputs, iter_blocks
    from streamsvm.io._output import prepare_output
    from streamsvm.io._writer import StoreWriter
    lo, hi = _index_limits()
    text = os.path.getsize(plain)
    parse_s = parse_cpu = enc_s = enc_cpu = 0.0
    rows = nnz = 0
    prepare_output(store_url, overwrite=True)
    with _Clock() as c:
        writer = StoreWriter(store_url, chunk_rows=chunk_rows, dtype="float32",
                             index_dtype="int32", options={"bench": "encode-only"},
                             source={"files": [{"url": plain}]})
    enc_s, enc_cpu = c.seconds, c.cpu
    since_save = 0
    batch, size = [], 0

    def run(batch):
        nonlocal parse_s, parse_cpu, enc_s, enc_cpu, rows, nnz, since_save
        with _Clock() as c:
            parsed = []
            for blk in batch:
                p = parse_block(blk.data, file=blk.url, first_line=blk.first_line, min_index=lo,
                                max_index=hi)
                parsed.append((p.labels, p.indptr, p.indices - 1, p.values, len(blk.data)))
        parse_s += c.seconds
        parse_cpu += c.cpu
        with _Clock() as c:
            for labels, indptr, indices, values, nb in parsed:
                writer.append(labels, indptr, indices, values, source_pos=plain)
                rows += len(labels)
                nnz += len(indices)
                since_save += nb
                if since_save >= resume_every:      # as convert's --resume-every
                    since_save = 0
                    writer.save_progress({"bench": True})
        enc_s += c.seconds
        enc_cpu += c.cpu

    with _ShardWriteTimer() as shard:
        for blk in iter_blocks(describe_inputs([plain])):
            batch.append(blk)
            size += len(blk.data)
            if size >= batch_bytes:
                run(batch)
                batch, size = [], 0
        if batch:
            run(batch)
        with _Clock() as c:
            writer.finish(source_name=plain)
    enc_s += c.seconds
    enc_cpu += c.cpu
    parse = _stage("(3) parse only (parse_block + shift to 0-based)", "plain", parse_s,
                   parse_cpu, text, rows=rows, nnz=nnz)
    encode = _stage("(4) encode only (StoreWriter: casts, stats, zstd, write, finish)",
                    "plain", enc_s, enc_cpu, text, finish_s=c.seconds, rows=rows, nnz=nnz)
    writes = _stage("(4a) of which zarr shard writes (concat + zstd + write)", "plain",
                    shard.seconds, shard.cpu, text, calls=shard.calls)
    book = _stage("(4b) of which the rest (casts, chunk stats, labels, finish)", "plain",
                  enc_s - shard.seconds, enc_cpu - shard.cpu, text)
    return parse, encode, writes, book


def measure_stages(plain: str, compressed: dict, scratch: str, *, chunk_rows: int,
                   batch_bytes: int, resume_every: int, keep: bool) -> list[dict]:
    """Stages (1)-(5) for the plain file and its compressed copies."""
    from streamsvm.io import convert
    from streamsvm.io._source import BLOCK_BYTES, describe_inputs, iter_blocks
    text = os.path.getsize(plain)
    files = [("plain", plain)] + sorted(compressed.items())
    out = []
    for comp, path in files:
        with _Clock() as c:
            n = _read_raw(path, BLOCK_BYTES)
        out.append(_stage("(1) read raw bytes (fsspec, no decompression)", comp, c.seconds,
                          c.cpu, text, disk_bytes=n, disk_mb_per_s=mb_per_s(n, c.seconds)))
    for comp, path in files:
        with _Clock() as c:
            n = sum(len(b.data) for b in iter_blocks(describe_inputs([path])))
        what = "read + split lines" if comp == "plain" else "read + decompress + split lines"
        out.append(_stage(f"(2) {what} (iter_blocks)", comp, c.seconds, c.cpu, n))
    store = os.path.join(scratch, f"{_stem(plain)}-encode-only.zarr")
    out.extend(measure_parse_encode(plain, store, chunk_rows=chunk_rows, batch_bytes=batch_bytes,
                                    resume_every=resume_every))
    _rm(store, keep)
    for comp, path in files:
        store = os.path.join(scratch, f"{_stem(plain)}-inproc-{comp}.zarr")
        with ThreadCPU() as threads, _Clock() as c:
            convert(path, store, chunk_rows=chunk_rows, overwrite=True,
                    progress_bytes=resume_every)
        out.append(_stage("(5) convert() end to end, in-process", comp, c.seconds, c.cpu, text,
                          thread_cpu_s=threads.by_name))
        _rm(store, keep)
    return out


def measure_store_read(url: str) -> dict:
    """Read every chunk of a store; decoded CSR bytes (indptr, indices, data, y) per second."""
    from streamsvm import open_store
    store = open_store(url)
    nbytes = rows = 0
    with _Clock() as c:
        for i in range(store.n_chunks):
            ch = store.read_chunk(i)
            nbytes += ch.nbytes
            rows += ch.n_rows
    return {"chunks": store.n_chunks, "chunk_rows": store.chunk_rows, "rows": rows,
            "decoded_bytes": nbytes, "seconds": c.seconds, "cpu_s": c.cpu,
            "mb_per_s": mb_per_s(nbytes, c.seconds), "rows_per_s": rows_per_s(rows, c.seconds),
            "store_bytes": store.bytes_on_disk(), "binary_values": store.binary_values}


def _rm(path: str, keep: bool) -> None:
    if keep or not os.path.exists(path):
        return
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


# --------------------------------------------------------------------------------------------
# the benchmark
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class BenchConfig:
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


def _prepare_inputs(cfg: BenchConfig, made: list) -> list[BenchInput]:
    os.makedirs(cfg.scratch, exist_ok=True)
    inputs = []
    for path, name in zip(cfg.inputs, cfg.names):
        path = os.path.abspath(path)
        if not os.path.exists(path):
            raise SystemExit(f"bench_convert: input {path!r} does not exist")
        from streamsvm.io._source import compression_of
        if compression_of(path):
            plain = os.path.join(cfg.scratch, _stem(path) + ".svm")
            if not os.path.exists(plain):
                log(f"decompressing {path} -> {plain}")
                decompress_to(path, plain)
            made.append(plain)
            inputs.append(BenchInput(name, plain, "file", made=True,
                                     note=f"decompressed from {path}"))
        else:
            kind = "dataset" if path in map(os.path.abspath, DATASETS.values()) else "file"
            inputs.append(BenchInput(name, path, kind))
    if cfg.replicate_mb:
        target = int(cfg.replicate_mb * MB)
        for inp in list(inputs):
            if inp.text_bytes >= target:
                continue
            copies = math.ceil(target / inp.text_bytes)
            dst = os.path.join(cfg.scratch, f"{_stem(inp.path)}-x{copies}.svm")
            if not os.path.exists(dst):
                log(f"replicating {inp.path} x{copies} -> {dst}")
                replicate_to(inp.path, dst, target)
            made.append(dst)
            inputs.append(BenchInput(f"{inp.name} ×{copies}", dst, "replicated", made=True,
                                     note=f"{copies} concatenated copies of {inp.name}"))
    if cfg.synthetic_gb:
        syn = make_synthetic_input(cfg.synthetic_gb, cfg.scratch)
        made.append(syn.path)
        inputs.append(syn)
    if cfg.sklearn:
        limit = cfg.sklearn_max_mb * MB
        for inp in list(inputs):
            if inp.role != "main" or inp.text_bytes <= limit:
                continue
            dst = os.path.join(cfg.scratch, f"{_stem(inp.path)}-prefix{cfg.prefix_mb:g}MB.svm")
            if not os.path.exists(dst):
                log(f"writing a {cfg.prefix_mb:g} MB prefix of {inp.path} -> {dst}")
                prefix_to(inp.path, dst, int(cfg.prefix_mb * MB))
            made.append(dst)
            inputs.append(BenchInput(f"{inp.name}, first {cfg.prefix_mb:g} MB", dst, "prefix",
                                     made=True, role="compare", parent=inp.name,
                                     note=f"same shape as {inp.name}, under --sklearn-max-mb "
                                          f"so scikit-learn can load it"))
    return inputs


def _warm_page_cache(paths) -> None:
    for p in paths:
        _read_raw(p, 8 << 20)


def _warmup_processes(inp: BenchInput, scratch: str, do_sklearn: bool, timeout) -> None:
    """One untimed run of each tool on a small prefix: numba's on-disk cache written, the
    shared libraries in the page cache."""
    small = os.path.join(scratch, "warmup.svm")
    prefix_to(inp.path, small, 200_000)
    store = os.path.join(scratch, "warmup.zarr")
    r = measure_process(streamsvm_argv(small, store, 4096), timeout=timeout)
    if r.get("rc") != 0:
        raise SystemExit(f"bench_convert: warm-up 'streamsvm convert' failed:\n"
                         f"{r.get('stderr_tail')}")
    if do_sklearn:
        measure_process(sklearn_argv(small), timeout=timeout)
    _rm(store, False)
    _rm(small, False)


def _run_tool(argv, cfg, text_bytes, rows):
    reps = [measure_process(argv, timeout=cfg.timeout) for _ in range(cfg.repeat)]
    return reps, summarize_repeats(reps, text_bytes, rows)


def bench_input(inp: BenchInput, cfg: BenchConfig, made: list) -> dict:
    text = inp.text_bytes
    res = {"name": inp.name, "path": inp.path, "kind": inp.kind, "role": inp.role,
           "note": inp.note, "parent": inp.parent, "text_bytes": text,
           "files": {"plain": {"path": inp.path, "bytes": text}},
           "rows": None, "nnz": None, "n_features": None, "binary_values": None,
           "runs": [], "skipped": [], "stages": [], "stage_chunk_rows": None,
           "store_read": []}
    compressed = {}
    if inp.role == "main":
        for kind in cfg.compressions:
            dst = os.path.join(cfg.scratch, os.path.basename(inp.path) + COMPRESSIONS[kind])
            if not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(inp.path):
                log(f"compressing {inp.path} -> {dst}")
                secs = compress_to(inp.path, dst, kind)
            else:
                secs = None
            made.append(dst)
            compressed[kind] = dst
            res["files"][kind] = {"path": dst, "bytes": os.path.getsize(dst),
                                  "compress_s": secs}
    _warm_page_cache([inp.path] + list(compressed.values()))

    chunk_list = list(cfg.chunk_rows) if inp.role == "main" else [cfg.default_chunk()]
    jobs = [("plain", inp.path, c) for c in chunk_list]
    jobs += [(k, p, cfg.default_chunk()) for k, p in sorted(compressed.items())]
    for comp, path, chunk in jobs:
        store = os.path.join(cfg.scratch, f"{_stem(inp.path)}-{comp}-c{chunk}.zarr")
        log(f"{inp.name}: streamsvm convert ({comp}, --chunk-rows {chunk})")
        reps, summ = _run_tool(streamsvm_argv(path, store, chunk), cfg, text, None)
        run = {"tool": "streamsvm", "compression": comp, "chunk_rows": chunk, **summ,
               "repeats": reps}
        if summ["ok"]:
            from streamsvm import open_store
            st = open_store(store)
            if res["rows"] is None:
                res.update(rows=st.n_rows, nnz=st.nnz, n_features=st.n_features,
                           binary_values=st.binary_values)
            run["rows_per_s"] = rows_per_s(st.n_rows, summ["wall_s"])
            run["store_bytes"] = st.bytes_on_disk()
            if cfg.store_read and comp == "plain" and inp.role == "main":
                log(f"{inp.name}: reading every chunk of {store}")
                res["store_read"].append(measure_store_read(store))
        else:
            log(f"  FAILED: {summ.get('error')}")
        res["runs"].append(run)
        _rm(store, cfg.keep)

    if cfg.sklearn:
        reads = [("plain", inp.path)] + [(k, p) for k, p in sorted(compressed.items())
                                         if k in SKLEARN_READS]
        for comp, path in reads:
            if text > cfg.sklearn_max_mb * MB:
                res["skipped"].append({"tool": "sklearn", "compression": comp, "reason": (
                    f"text {text / MB:,.0f} MB > --sklearn-max-mb {cfg.sklearn_max_mb:g} "
                    f"(load_svmlight_file needs ~5x the file in RAM)")})
                continue
            log(f"{inp.name}: sklearn load_svmlight_file ({comp})")
            reps, summ = _run_tool(sklearn_argv(path), cfg, text, res["rows"])
            run = {"tool": "sklearn", "compression": comp, "chunk_rows": None, **summ,
                   "repeats": reps}
            if summ["ok"] and res["rows"] is None:
                try:
                    info = json.loads(reps[0]["stdout_tail"].strip().splitlines()[-1])
                    res.update(rows=info["rows"], nnz=info["nnz"])
                    run["rows_per_s"] = rows_per_s(info["rows"], summ["wall_s"])
                except (ValueError, KeyError, IndexError):
                    pass
            res["runs"].append(run)
    else:
        res["skipped"].append({"tool": "sklearn", "compression": "all",
                               "reason": "--no-sklearn"})

    if cfg.stages and inp.role == "main":
        log(f"{inp.name}: stage breakdown (in-process)")
        warm_in_process()
        res["stage_chunk_rows"] = cfg.default_chunk()
        res["stages"] = measure_stages(inp.path, compressed, cfg.scratch,
                                       chunk_rows=cfg.default_chunk(),
                                       batch_bytes=int(cfg.batch_mb * MB),
                                       resume_every=int(cfg.resume_every_mb * MB),
                                       keep=cfg.keep)
        e2e = {r["compression"]: r for r in res["runs"]
               if r["tool"] == "streamsvm" and r.get("ok") and
               r["chunk_rows"] == cfg.default_chunk()}
        for comp in ["plain"] + sorted(compressed):
            if comp in e2e:
                r = e2e[comp]
                res["stages"].append(_stage("(5') streamsvm convert CLI, separate process",
                                            comp, r["wall_s"], r["cpu_s"], text))
    return res


def compute_targets(inputs: list[dict]) -> list[dict]:
    """Per input and compression: streamsvm (CLI default chunk size) vs sklearn, and peak RSS.

    The speed-up is sklearn wall / streamsvm wall on the same file.  For an input too big for
    sklearn, the reference is sklearn's MB/s on its same-shape prefix (plain text only), and
    the speed-up the ratio of MB/s (``sklearn_reference`` names the file it comes from).
    """
    out = []
    by_parent = {r["parent"]: r for r in inputs if r.get("parent")}
    for res in inputs:
        ss = {r["compression"]: r for r in res["runs"] if r["tool"] == "streamsvm"
              and r.get("ok") and r["chunk_rows"] == CLI_DEFAULT_CHUNK_ROWS}
        if not ss:   # no run at the CLI default: use the first chunk size measured
            first = next((r["chunk_rows"] for r in res["runs"] if r["tool"] == "streamsvm"
                          and r.get("ok")), None)
            ss = {r["compression"]: r for r in res["runs"] if r["tool"] == "streamsvm"
                  and r.get("ok") and r["chunk_rows"] == first}
        sk = {r["compression"]: r for r in res["runs"] if r["tool"] == "sklearn" and r.get("ok")}
        all_rss = [r["peak_rss_mb"] for r in res["runs"] if r["tool"] == "streamsvm"
                   and r.get("ok")]
        proxy = by_parent.get(res["name"])
        proxy_sk = {r["compression"]: r for r in (proxy or {}).get("runs", [])
                    if r["tool"] == "sklearn" and r.get("ok")}
        for comp, r in ss.items():
            s, ref = sk.get(comp), res["name"]
            if s is not None:
                speed = ratio(s["wall_s"], r["wall_s"])
            elif comp in proxy_sk:
                s, ref = proxy_sk[comp], proxy["name"]
                speed = ratio(r["mb_per_s"], s["mb_per_s"])
            else:
                speed = None
            out.append({"input": res["name"], "compression": comp, "chunk_rows": r["chunk_rows"],
                        "streamsvm_mb_per_s": r["mb_per_s"],
                        "sklearn_mb_per_s": s["mb_per_s"] if s else None,
                        "sklearn_reference": ref if s else None,
                        "speedup": speed, "speedup_ok": None if speed is None
                        else speed >= TARGET_SPEEDUP,
                        "streamsvm_peak_rss_mb": r["peak_rss_mb"],
                        "max_peak_rss_mb_any_chunk_rows": max(all_rss) if all_rss else None,
                        "sklearn_peak_rss_mb": s["peak_rss_mb"] if s else None,
                        "rss_ok": max(all_rss) < TARGET_RSS_MB if all_rss else None})
    return out


def run_benchmark(cfg: BenchConfig) -> dict:
    """Run everything ``cfg`` asks for; return the JSON-able result (see ``--json``)."""
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    made: list[str] = []
    t0 = time.perf_counter()
    try:
        inputs = _prepare_inputs(cfg, made)
        if not inputs:
            raise SystemExit("bench_convert: no input (give --dataset, --input or "
                             "--synthetic-gb)")
        if cfg.warmup:
            log("warm-up runs (untimed)")
            _warmup_processes(inputs[0], cfg.scratch, cfg.sklearn, cfg.timeout)
        results = []
        for inp in inputs:
            log(f"== {inp.name}: {inp.path} ({inp.text_bytes / MB:,.1f} MB)")
            results.append(bench_input(inp, cfg, made))
    finally:
        for p in dict.fromkeys(made):
            _rm(p, cfg.keep)
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
        "machine": machine_info(),
        "settings": settings,
        "units": {"MB": "10^6 bytes", "MB/s": "decompressed text MB per wall second",
                  "peak_rss_mb": "getrusage ru_maxrss of the measured process, MB"},
        "targets": {"speedup_vs_sklearn": TARGET_SPEEDUP, "peak_rss_mb": TARGET_RSS_MB,
                    "results": compute_targets(results)},
        "inputs": results,
    }


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------

def _e2e_rows(res: dict) -> list[list[str]]:
    sk = {r["compression"]: r for r in res["runs"] if r["tool"] == "sklearn" and r.get("ok")}
    rows = []
    for r in res["runs"]:
        if not r.get("ok"):
            rows.append([r["tool"], r["compression"], fmt(r.get("chunk_rows"), "int"), "failed",
                         "", "", "", "", "", "", ""])
            continue
        s = sk.get(r["compression"])
        speed = ratio(s["wall_s"], r["wall_s"]) if (s and r["tool"] == "streamsvm") else None
        rows.append([r["tool"], r["compression"],
                     fmt(r["chunk_rows"], "int") if r["chunk_rows"] else "–",
                     fmt(r["wall_s"], "s"), fmt(r["mb_per_s"], "mb"),
                     fmt(r.get("rows_per_s"), "int"), fmt(r["peak_rss_mb"], "mb"),
                     fmt(r["cpu_s"], "s"), fmt(r["cpu_per_wall"], "cpu"),
                     fmt((r.get("store_bytes") or 0) / MB, "mb") if r.get("store_bytes") else "–",
                     fmt(speed, "x")])
    return rows


def render_markdown(result: dict) -> str:
    m = result["machine"]
    v = m["versions"]
    s = result["settings"]
    out = ["# streamsvm convert vs scikit-learn load_svmlight_file", "",
           "```", result["command"], "```", ""]
    mem = f", {m['memory_bytes'] / 2**30:.0f} GiB RAM" if m.get("memory_bytes") else ""
    out.append(f"Machine: {m['cpu_model']}, {m['cpus_usable']} usable cores{mem}; "
               f"Python {m['python']}, numpy {v['numpy']}, numba {v['numba']}, zarr {v['zarr']}, "
               f"numcodecs {v['numcodecs']}, scikit-learn {v['scikit-learn']}, "
               f"fsspec {v['fsspec']}, zstandard {v['zstandard']}, streamsvm {v['streamsvm']}. "
               f"Started {result['started']}, took {result['total_seconds']:.0f} s.")
    out.append("")
    out.append(f"MB = 10^6 bytes; MB/s = decompressed text MB per wall second; rows/s likewise. "
               f"End-to-end rows: each job in its own process (interpreter start-up and imports "
               f"included), median of {s['repeat']} run(s); peak RSS = `ru_maxrss` of that "
               f"process (max over runs); CPU/wall > 1 means more than one core busy. Page "
               f"cache warm. `vs sklearn` = sklearn wall / streamsvm wall on the same file. "
               f"sklearn: `load_svmlight_file(path)` defaults (float64, CSR).")
    for res in result["inputs"]:
        out += ["", f"## {res['name']}", ""]
        desc = [f"`{res['path']}`", f"{res['text_bytes'] / MB:,.1f} MB text"]
        if res.get("rows") is not None:
            desc.append(f"{res['rows']:,} rows")
        if res.get("nnz") is not None:
            desc.append(f"{res['nnz']:,} non-zeros")
        if res.get("n_features") is not None:
            desc.append(f"{res['n_features']:,} features")
        if res.get("binary_values"):
            desc.append("all values 1 (store omits `data`)")
        for k, f in res["files"].items():
            if k != "plain":
                desc.append(f".{k} {f['bytes'] / MB:,.1f} MB")
        out.append(", ".join(desc) + "." + (f" {res['note']}." if res.get("note") else ""))
        out += ["", "End to end:", ""]
        out.append(markdown_table(
            ["tool", "input", "chunk rows", "wall s", "MB/s", "rows/s", "peak RSS MB", "CPU s",
             "CPU/wall", "store MB", "vs sklearn"], _e2e_rows(res), "llrrrrrrrrr"))
        for sk in res["skipped"]:
            out.append(f"\n*{sk['tool']} ({sk['compression']}) skipped: {sk['reason']}.*")
        if res["stages"]:
            out += ["", "Where the time goes (streamsvm, each stage timed on its own, in-process, "
                        f"--chunk-rows {res['stage_chunk_rows']}):", ""]
            out.append(stage_table(res["stages"]))
            out += ["", "convert() runs (2) reading/decompressing, (3) parsing and (4) encoding "
                        "in three overlapping threads, so (5) end to end is less than "
                        "(2) + (3) + (4); (5') adds process start-up, imports and loading the "
                        "numba kernels from the on-disk cache."]
            threads = [st for st in res["stages"] if st.get("thread_cpu_s")]
            if threads:
                out += ["", "CPU seconds per thread during (5) (`streamsvm-reader`: read, "
                            "decompress, split; `MainThread`: parse; `streamsvm-writer`: "
                            "StoreWriter.append; `zarr_io`: zarr's event loop; `asyncio`: "
                            "zarr codec threads (zstd, via asyncio.to_thread)):", ""]
                names = list(dict.fromkeys(n for st in threads for n in st["thread_cpu_s"]))
                out.append(markdown_table(
                    ["input", "wall s"] + [f"`{n}`" for n in names],
                    [[st["input"], fmt(st["seconds"], "s")]
                     + [fmt(st["thread_cpu_s"].get(n), "s") for n in names] for st in threads],
                    "l" + "r" * (len(names) + 1)))
        if res["store_read"]:
            out += ["", "Reading the store back (every chunk via `open_store(url).read_chunk(i)`"
                        "; MB/s of decoded CSR: indptr + indices + data + y):", ""]
            out.append(markdown_table(
                ["chunk rows", "chunks", "s", "decoded MB", "MB/s", "rows/s", "store MB"],
                [[fmt(r["chunk_rows"], "int"), fmt(r["chunks"], "int"), fmt(r["seconds"], "s"),
                  fmt(r["decoded_bytes"] / MB, "mb"), fmt(r["mb_per_s"], "mb"),
                  fmt(r["rows_per_s"], "int"), fmt(r["store_bytes"] / MB, "mb")]
                 for r in res["store_read"]], "rrrrrrr"))
    t = result["targets"]
    out += ["", "## Targets", "",
            f"streamsvm ≥ {t['speedup_vs_sklearn']:g}× scikit-learn's end-to-end throughput "
            f"(CLI default --chunk-rows {CLI_DEFAULT_CHUNK_ROWS}); streamsvm peak RSS < "
            f"{t['peak_rss_mb']:g} MB whatever the file size (max over all chunk sizes).", ""]
    yn = {True: "yes", False: "**no**", None: "–"}
    out.append(markdown_table(
        ["input", "compression", "streamsvm MB/s", "sklearn MB/s", "speed-up", f"≥ "
         f"{t['speedup_vs_sklearn']:g}×", "streamsvm peak RSS MB", "sklearn peak RSS MB",
         f"< {t['peak_rss_mb']:g} MB"],
        [[r["input"], r["compression"], fmt(r["streamsvm_mb_per_s"], "mb"),
          fmt(r["sklearn_mb_per_s"], "mb") + ("" if r["sklearn_reference"] in (None, r["input"])
                                              else " ¹"),
          fmt(r["speedup"], "x"), yn[r["speedup_ok"]],
          fmt(r["max_peak_rss_mb_any_chunk_rows"], "mb"), fmt(r["sklearn_peak_rss_mb"], "mb"),
          yn[r["rss_ok"]]] for r in t["results"]], "llrrrrrrr"))
    refs = {r["sklearn_reference"] for r in t["results"]
            if r["sklearn_reference"] not in (None, r["input"])}
    if refs:
        out += ["", "¹ sklearn measured on " + ", ".join(f"“{x}”" for x in sorted(refs))
                + " (same shape; the whole file is above --sklearn-max-mb); speed-up = ratio "
                  "of MB/s."]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def _positive_ints(text: str) -> list[int]:
    try:
        vals = [int(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return vals


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench_convert.py",
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
               "  python tools/bench_convert.py --quick\n"
               "  python tools/bench_convert.py --dataset a9a --replicate-mb 100 --repeat 3 "
               "--json a9a.json\n"
               "  python tools/bench_convert.py --synthetic-gb 2 --json synthetic.json\n\n"
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
    return p


def config_from_args(args, argv) -> BenchConfig:
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
        command=shlex.join([sys.executable] + list(argv)), argv=list(argv),
        mode="quick" if args.quick else "custom")
    return cfg


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else [sys.argv[0]] + list(argv))
    args = build_parser().parse_args(argv[1:])
    cfg = config_from_args(args, argv)
    result = run_benchmark(cfg)
    text = render_markdown(result)
    sys.stdout.write(text)
    sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
