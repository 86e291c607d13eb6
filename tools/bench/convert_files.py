"""The conversion benchmark's inputs (``tools/bench.py convert``): the shared data sets, any
libsvm file (a compressed one decompressed first), a synthetic file of a given size, copies
made of concatenated copies of a small file, same-shape prefixes of files too large for
scikit-learn, and the compressed copies of each; all made in the scratch directory.
"""

from __future__ import annotations

import dataclasses
import gzip
import math
import os
import shutil
import sys
import time

from ._common import DATASETS as _SHARED_DATASETS
from ._common import MB, log

__all__ = ["DATASETS", "COMPRESSIONS", "SYNTH", "BenchInput", "prepare_inputs", "stem",
           "remove", "read_raw", "decompress_to", "compress_to", "replicate_to", "prefix_to"]

#: The shared data sets it knows by name.
DATASETS = {"a9a": os.path.join(_SHARED_DATASETS, "a9a", "a9a"),
            "a9a.t": os.path.join(_SHARED_DATASETS, "a9a", "a9a.t")}
COMPRESSIONS = {"gz": ".gz", "zst": ".zst", "bz2": ".bz2"}
# The synthetic shape of the issue: 10^5 features, ~40 non-zeros per row, 6-digit values.
SYNTH = dict(features=100_000, nnz_per_row=40, classes=2, noise=0.05, zipf=1.1,
             binary_values=False, seed=0, zero_based=False)
SYNTH_SAMPLE_ROWS = 20_000


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


def stem(path: str) -> str:
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


def prepare_inputs(cfg, made: list) -> list[BenchInput]:
    """The inputs ``cfg`` (a :class:`tools.bench.convert.BenchConfig`) asks for, made in its
    scratch directory; every file made is appended to ``made``."""
    os.makedirs(cfg.scratch, exist_ok=True)
    inputs = []
    for path, name in zip(cfg.inputs, cfg.names):
        path = os.path.abspath(path)
        if not os.path.exists(path):
            raise SystemExit(f"bench.py convert: input {path!r} does not exist")
        from streamsvm.io._source import compression_of
        if compression_of(path):
            plain = os.path.join(cfg.scratch, stem(path) + ".svm")
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
            dst = os.path.join(cfg.scratch, f"{stem(inp.path)}-x{copies}.svm")
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
            dst = os.path.join(cfg.scratch, f"{stem(inp.path)}-prefix{cfg.prefix_mb:g}MB.svm")
            if not os.path.exists(dst):
                log(f"writing a {cfg.prefix_mb:g} MB prefix of {inp.path} -> {dst}")
                prefix_to(inp.path, dst, int(cfg.prefix_mb * MB))
            made.append(dst)
            inputs.append(BenchInput(f"{inp.name}, first {cfg.prefix_mb:g} MB", dst, "prefix",
                                     made=True, role="compare", parent=inp.name,
                                     note=f"same shape as {inp.name}, under --sklearn-max-mb "
                                          f"so scikit-learn can load it"))
    return inputs


def remove(path: str, keep: bool) -> None:
    if keep or not os.path.exists(path):
        return
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def read_raw(path: str, block: int) -> int:
    import fsspec
    n = 0
    with fsspec.open(path, "rb") as f:
        while True:
            b = f.read(block)
            if not b:
                return n
            n += len(b)
