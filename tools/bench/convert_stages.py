"""The conversion benchmark's in-process measurements (``tools/bench.py convert``): where the
time goes (the converter's stages timed one at a time on the same bytes: read raw bytes,
read + decompress + split lines, parse only, encode only — of which zarr's shard writes —,
``convert()`` end to end with the CPU seconds of each of its threads), the read speed of a
store afterwards, and the throughput arithmetic of every table.
"""

from __future__ import annotations

import os
import time

from ._common import MB
from ._timed import Clock
from .convert_files import read_raw, remove, stem

__all__ = ["mb_per_s", "rows_per_s", "ratio", "stage", "warm_in_process", "ThreadCPU",
           "measure_stages", "measure_store_read"]


def mb_per_s(nbytes, seconds):
    """``nbytes`` / 10^6 / ``seconds``; None when either is missing or seconds <= 0."""
    if nbytes is None or seconds is None or seconds <= 0:
        return None
    return nbytes / MB / seconds


def rows_per_s(rows, seconds):
    if rows is None or seconds is None or seconds <= 0:
        return None
    return rows / seconds


def ratio(a, b):
    """a / b, or None."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def stage(name, inp, seconds, cpu, text_bytes, **extra) -> dict:
    """One row of the stage table: seconds, CPU seconds, text MB per second."""
    d = {"stage": name, "input": inp, "seconds": seconds, "cpu_s": cpu,
         "text_bytes": text_bytes, "mb_per_s": mb_per_s(text_bytes, seconds)}
    d.update(extra)
    return d


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
    with Clock() as c:
        writer = StoreWriter(store_url, chunk_rows=chunk_rows, dtype="float32",
                             index_dtype="int32", options={"bench": "encode-only"},
                             source={"files": [{"url": plain}]})
    enc_s, enc_cpu = c.seconds, c.cpu
    since_save = 0
    batch, size = [], 0

    def run(batch):
        nonlocal parse_s, parse_cpu, enc_s, enc_cpu, rows, nnz, since_save
        with Clock() as c:
            parsed = []
            for blk in batch:
                p = parse_block(blk.data, file=blk.url, first_line=blk.first_line, min_index=lo,
                                max_index=hi)
                parsed.append((p.labels, p.indptr, p.indices - 1, p.values, len(blk.data)))
        parse_s += c.seconds
        parse_cpu += c.cpu
        with Clock() as c:
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
        with Clock() as c:
            writer.finish(source_name=plain)
    enc_s += c.seconds
    enc_cpu += c.cpu
    parse = stage("(3) parse only (parse_block + shift to 0-based)", "plain", parse_s,
                   parse_cpu, text, rows=rows, nnz=nnz)
    encode = stage("(4) encode only (StoreWriter: casts, stats, zstd, write, finish)",
                    "plain", enc_s, enc_cpu, text, finish_s=c.seconds, rows=rows, nnz=nnz)
    writes = stage("(4a) of which zarr shard writes (concat + zstd + write)", "plain",
                    shard.seconds, shard.cpu, text, calls=shard.calls)
    book = stage("(4b) of which the rest (casts, chunk stats, labels, finish)", "plain",
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
        with Clock() as c:
            n = read_raw(path, BLOCK_BYTES)
        out.append(stage("(1) read raw bytes (fsspec, no decompression)", comp, c.seconds,
                          c.cpu, text, disk_bytes=n, disk_mb_per_s=mb_per_s(n, c.seconds)))
    for comp, path in files:
        with Clock() as c:
            n = sum(len(b.data) for b in iter_blocks(describe_inputs([path])))
        what = "read + split lines" if comp == "plain" else "read + decompress + split lines"
        out.append(stage(f"(2) {what} (iter_blocks)", comp, c.seconds, c.cpu, n))
    store = os.path.join(scratch, f"{stem(plain)}-encode-only.zarr")
    out.extend(measure_parse_encode(plain, store, chunk_rows=chunk_rows, batch_bytes=batch_bytes,
                                    resume_every=resume_every))
    remove(store, keep)
    for comp, path in files:
        store = os.path.join(scratch, f"{stem(plain)}-inproc-{comp}.zarr")
        with ThreadCPU() as threads, Clock() as c:
            convert(path, store, chunk_rows=chunk_rows, overwrite=True,
                    progress_bytes=resume_every)
        out.append(stage("(5) convert() end to end, in-process", comp, c.seconds, c.cpu, text,
                          thread_cpu_s=threads.by_name))
        remove(store, keep)
    return out


def measure_store_read(url: str) -> dict:
    """Read every chunk of a store; decoded CSR bytes (indptr, indices, data, y) per second."""
    from streamsvm import open_store
    store = open_store(url)
    nbytes = rows = 0
    with Clock() as c:
        for i in range(store.n_chunks):
            ch = store.read_chunk(i)
            nbytes += ch.nbytes
            rows += ch.n_rows
    return {"chunks": store.n_chunks, "chunk_rows": store.chunk_rows, "rows": rows,
            "decoded_bytes": nbytes, "seconds": c.seconds, "cpu_s": c.cpu,
            "mb_per_s": mb_per_s(nbytes, c.seconds), "rows_per_s": rows_per_s(rows, c.seconds),
            "store_bytes": store.bytes_on_disk(), "binary_values": store.binary_values}
