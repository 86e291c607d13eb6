"""``convert``: libsvm/svmlight text (local, remote, compressed, several files) → store.

Three stages overlap: a reader thread reads and decompresses line-aligned text blocks,
the calling thread parses them with the numba tokenizer (which releases the GIL), and a
writer thread appends rows to the Zarr store (compression releases the GIL too). Memory
is bounded by a few text blocks plus one shard per array, whatever the input size.

Every ``progress_bytes`` of text the writer flushes and records a resume point in the
store's attributes, so ``resume=True`` continues an interrupted conversion from there.
The store is marked ``complete`` only at the very end.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

import numpy as np

from ..exceptions import FormatError, InvalidParameterError, StoreWriteError
from ._compression import DEFAULT as DEFAULT_COMPRESSION
from ._compression import LEGACY, parse_compression
from ._lock import OutputLock
from ._parse import FLOAT32_MAX_VALUE, parse_block
from ._shuffle import Shuffler, bucket_bytes
from ._source import BLOCK_BYTES, describe_inputs, iter_blocks
from ._output import (check_not_an_input, check_output_parent, clean_failed_output,
                      prepare_output, write_errors)
from ._writer import StoreWriter

__all__ = ["convert"]

log = logging.getLogger(__name__)

NO_LIMIT = 2**62
INT32_MAX = 2**31 - 1


def _check_params(inputs, chunk_rows, zero_based, dtype, task, n_features, seed,
                  compression=DEFAULT_COMPRESSION):
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [os.fspath(u) for u in inputs]
    if not inputs:
        raise InvalidParameterError("at least one input file is required")
    if not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise InvalidParameterError(f"The 'chunk_rows' parameter must be an int >= 1. "
                                    f"Got {chunk_rows!r} instead.")
    zb = {True: "yes", False: "no"}.get(zero_based, zero_based)
    if zb not in ("yes", "no", "auto"):
        raise InvalidParameterError(f"The 'zero_based' parameter must be one of 'yes', 'no', "
                                    f"'auto'. Got {zero_based!r} instead.")
    if np.dtype(dtype).name not in ("float32", "float64"):
        raise InvalidParameterError(f"The 'dtype' parameter must be 'float32' or 'float64'. "
                                    f"Got {dtype!r} instead.")
    if task not in ("auto", "binary", "multiclass"):
        raise InvalidParameterError(f"The 'task' parameter must be one of 'auto', 'binary', "
                                    f"'multiclass'. Got {task!r} instead.")
    if n_features is not None and (not isinstance(n_features, (int, np.integer))
                                   or n_features < 1):
        raise InvalidParameterError(f"The 'n_features' parameter must be an int >= 1. "
                                    f"Got {n_features!r} instead.")
    if not isinstance(seed, (int, np.integer)):
        raise InvalidParameterError(f"The 'seed' parameter must be an int. Got {seed!r} instead.")
    parse_compression(compression)
    return inputs, zb


class _Bounds:
    """Allowed raw index range and the shift to 0-based, decided once."""

    def __init__(self, zero_based: str, n_features: int | None, index_dtype: str):
        self.mode = zero_based
        self.n_features = n_features
        self.cap = NO_LIMIT if index_dtype == "int64" else INT32_MAX
        self.decided = zero_based != "auto"
        self.zero = zero_based == "yes"

    def limits(self) -> tuple[int, int]:
        if not self.decided:
            return 0, NO_LIMIT
        lo = 0 if self.zero else 1
        hi = (self.n_features - 1 + lo) if self.n_features is not None else self.cap - 1 + lo
        return lo, hi

    def decide(self, parsed, url) -> None:
        self.zero = parsed.min_index == 0
        self.decided = True
        log.info("--zero-based auto: %s indices (decided from the first %d lines of %s: "
                 "%s)", "zero-based" if self.zero else "one-based", parsed.n_lines, url,
                 "an index 0 occurs" if self.zero else "no index 0")


def convert(inputs, output, *, chunk_rows: int = 65536, shuffle: bool = False, seed: int = 0,
            n_features: int | None = None, zero_based="no", dtype="float32", task="auto",
            sort_indices: bool = False, overwrite: bool = False, resume: bool = False,
            storage_options: dict | None = None, scratch_dir: str | None = None,
            shuffle_memory: int = 256 << 20, progress: bool = False,
            progress_bytes: int = 512 << 20, block_bytes: int = BLOCK_BYTES,
            compression: str = DEFAULT_COMPRESSION):
    """Convert libsvm/svmlight text files into a chunked Zarr v3 CSR store.

    Parameters
    ----------
    inputs : str or list of str
        Local paths or fsspec URLs; ``.gz``/``.bz2``/``.xz``/``.zst`` are decompressed.
        Several files are concatenated in order.
    output : str
        Store location (local path or URL such as ``s3://bucket/train.zarr``).
    chunk_rows : int, default 65536
        Rows per row chunk.
    shuffle : bool, default False
        External shuffle of the rows (bounded memory, deterministic for ``seed``).
    n_features : int, optional
        Number of features; indices above it are an error. Default: the largest index seen.
    zero_based : {"no", "yes", "auto"}, default "no"
        Index base; "auto" decides from the first block (an index 0 → zero-based).
    dtype : {"float32", "float64"}
    task : {"auto", "binary", "multiclass"}
    sort_indices : bool
        Repair unsorted indices within a line instead of rejecting them.
    overwrite, resume : bool
        Replace an existing store (only a streamsvm store or an empty directory, never an
        input); continue an unfinished conversion.
    storage_options : dict, optional
        fsspec options for inputs and output (e.g. S3 endpoint and credentials).
    shuffle_memory : int, default 256 MiB
        Memory the shuffle holds: one loaded bucket and the permuted pieces cut from it.
    compression : str, default "lz4"
        The compressor of the store's inner chunks: ``"lz4"``, ``"lz4:N"``, ``"zstd"``,
        ``"zstd:N"``, ``"blosclz"``, ``"blosclz:N"`` (Blosc at level N, 1-9, byte shuffle;
        lz4 and blosclz at 5 and zstd at 4 without one) or ``"none"`` (every chunk stored as
        it is, with its CRC-32C). Training results do not depend on it.

    Returns
    -------
    Store
        The opened, complete store.

    Raises
    ------
    FormatError
        Malformed input, or a value that overflows float32 in a float32 store.
    StoreExistsError
        Something is at ``output`` that ``overwrite`` may not replace.
    StoreWriteError
        The store or the shuffle's scratch files could not be written (disk full,
        read-only); the unfinished store is removed unless it has a resume point.
    OutputLockedError
        Another process is writing ``output`` (it is named; :class:`~streamsvm.io.OutputLock`).

    Examples
    --------
    >>> import pathlib, tempfile, streamsvm as ss
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "t.svm").write_text("+1 1:0.5 3:1\\n-1 2:2\\n")
    >>> ss.convert(str(d / "t.svm"), str(d / "t.zarr")).n_rows
    2
    """
    # one writer per output: its lock (beside the store) is taken before anything is
    # touched; an output inside an input file is refused first (no lock can go there)
    check_not_an_input(os.fspath(output), _check_params(
        inputs, chunk_rows, zero_based, dtype, task, n_features, seed, compression)[0],
        storage_options)
    check_output_parent(os.fspath(output), storage_options)   # before its lock goes there
    with OutputLock(output, storage_options=storage_options):
        return _convert(inputs, output, chunk_rows=chunk_rows, shuffle=shuffle, seed=seed,
                        n_features=n_features, zero_based=zero_based, dtype=dtype, task=task,
                        sort_indices=sort_indices, overwrite=overwrite, resume=resume,
                        storage_options=storage_options, scratch_dir=scratch_dir,
                        shuffle_memory=shuffle_memory, progress=progress,
                        progress_bytes=progress_bytes, block_bytes=block_bytes,
                        compression=compression)


def _convert(inputs, output, *, chunk_rows, shuffle, seed, n_features, zero_based, dtype,
             task, sort_indices, overwrite, resume, storage_options, scratch_dir,
             shuffle_memory, progress, progress_bytes, block_bytes, compression):
    """:func:`convert`, under the output's lock."""
    inputs, zb = _check_params(inputs, chunk_rows, zero_based, dtype, task, n_features, seed,
                               compression)
    compression = parse_compression(compression)
    files = describe_inputs(inputs, storage_options)
    output = os.fspath(output)
    index_dtype = "int64" if (n_features or 0) >= INT32_MAX else "int32"
    options = {"chunk_rows": int(chunk_rows), "shuffle": bool(shuffle), "seed": int(seed),
               "n_features": n_features, "zero_based": zb, "dtype": np.dtype(dtype).name,
               "task": task, "sort_indices": bool(sort_indices),
               "compression": compression.spec}
    source = {"files": [{"url": f.url, "size": f.size, "compression": f.compression}
                        for f in files]}
    with write_errors(f"the store {output!r}"):
        resume_meta = prepare_output(output, storage_options, overwrite=overwrite,
                                     resume=resume, inputs=[f.url for f in files])
        if resume_meta is not None and not (resume_meta.get("progress") or {}).get("input"):
            log.warning("the unfinished store at %s has no resume point (it was stopped "
                        "before its first one): restarting", output)
            prepare_output(output, storage_options, overwrite=True)
            resume_meta = None
        elif resume_meta is not None and (_recorded_options(resume_meta) != options
                                          or resume_meta.get("source") != source or shuffle):
            why = "--shuffle conversions restart" if shuffle else "inputs or options differ"
            log.warning("cannot resume the unfinished store at %s (%s): restarting", output,
                        why)
            prepare_output(output, storage_options, overwrite=True)
            resume_meta = None
    bounds = _Bounds(zb, n_features, index_dtype)
    start = (0, 0, 1, 0)
    crcs = [0] * len(files)
    underflow = [0]         # non-zero values the store's dtype holds as 0 (_parsed_blocks)
    if resume_meta is not None:
        inp = resume_meta["progress"]["input"]
        start = (inp["file"], inp["offset"], inp["line"], inp["crc"])
        crcs = list(inp["crcs"])
        underflow[0] = int(inp.get("underflow", 0))
        bounds.decided, bounds.zero = True, inp["zero"]
        log.info("resuming %s at %s line %d (%d rows already written)", output,
                 files[inp["file"]].url, inp["line"], resume_meta["progress"]["rows_done"])
    total = sum(f.size for f in files) if all(f.compression is None for f in files) else None
    rows_done = resume_meta["progress"]["rows_done"] if resume_meta is not None else 0
    bar = _Progress(_progress_bar(progress, total, start[1] if start[0] == 0 else None),
                    rows=rows_done)
    t0 = time.perf_counter()
    sink = None
    try:
        # From here on the output is this conversion's own: a failed write tidies it up.
        with write_errors(f"the store {output!r}"):
            writer = StoreWriter(output, chunk_rows=chunk_rows, dtype=dtype,
                                 index_dtype=index_dtype, storage_options=storage_options,
                                 options=options, source=source, resume_meta=resume_meta,
                                 compression=compression)
        sink = _WriterThread(writer)
        blocks = _parsed_blocks(files, storage_options, start, bounds, sort_indices,
                                block_bytes, crcs, index_dtype, dtype, underflow)
        if shuffle:
            _shuffled(blocks, files, writer, sink, seed, index_dtype, dtype, shuffle_memory,
                      scratch_dir, bar)
        else:
            next_save = progress_bytes
            done = 0
            for blk, parsed, pos in blocks:
                sink.put(("rows", parsed, blk.url))
                done += len(blk.data)
                bar.advance(len(blk.data), len(parsed[0]))
                if done >= next_save:
                    next_save += progress_bytes
                    sink.put(("progress", pos, None))
        sink.close()
        with write_errors(f"the store {output!r}"):
            store = writer.finish(n_features=n_features, task=task,
                                  source_name=", ".join(inputs), extra_source={"crc32": crcs},
                                  n_underflow=underflow[0])
    except StoreWriteError as exc:
        if sink is not None:
            sink.abort()
        err = StoreWriteError(f"{exc}; {clean_failed_output(output, storage_options)}")
        err.errno = exc.errno
        raise err from exc.__cause__
    except FormatError as exc:
        if sink is not None:        # bad input: no resume can fix it, so nothing is kept
            sink.abort()
            done = clean_failed_output(output, storage_options, keep_resume_point=False)
            exc.args = (f"{exc}; {done}",)
        raise
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    finally:
        bar.close()
    if underflow[0]:
        log.warning("%d non-zero value%s of the input %s stored as 0: below the smallest "
                    "magnitude %s holds (pass --dtype float64 to keep them)", underflow[0],
                    "" if underflow[0] == 1 else "s", "is" if underflow[0] == 1 else "are",
                    np.dtype(dtype).name)
    secs = time.perf_counter() - t0
    log.info("converted %d rows, %d features, %d non-zeros into %s in %.1fs", store.n_rows,
             store.n_features, store.nnz, output, secs)
    return store


def _recorded_options(meta: dict) -> dict:
    """The options an unfinished store was started with (one from before ``compression``
    existed was written with :data:`~streamsvm.io._compression.LEGACY`)."""
    options = dict(meta.get("options") or {})
    options.setdefault("compression", LEGACY)
    return options


def _parsed_blocks(files, storage_options, start, bounds, sort_indices, block_bytes, crcs,
                   index_dtype, dtype, underflow):
    """Yield ``(TextBlock, (labels, indptr, indices, values), resume_position)``; count in
    ``underflow[0]`` the non-zero values that ``dtype`` holds as 0."""
    # float32 would turn larger values into inf: they are errors, not silently stored
    max_value = FLOAT32_MAX_VALUE if np.dtype(dtype) == np.float32 else np.inf
    for blk in iter_blocks(files, storage_options, start=start, block_bytes=block_bytes):
        lo, hi = bounds.limits()
        parsed = parse_block(blk.data, file=blk.url, first_line=blk.first_line, min_index=lo,
                             max_index=hi, sort_indices=sort_indices, max_value=max_value)
        if not bounds.decided:
            bounds.decide(parsed, blk.url)
            lo, hi = bounds.limits()
            parsed = parse_block(blk.data, file=blk.url, first_line=blk.first_line,
                                 min_index=lo, max_index=hi, sort_indices=sort_indices,
                                 max_value=max_value)
        indices = parsed.indices
        if not bounds.zero:          # parse_block's arrays are fresh: shift in place
            np.subtract(indices, 1, out=indices)
        crcs[blk.file_index] = blk.crc
        # narrow to the store's dtypes here, so queued blocks take half the memory
        values = parsed.values.astype(dtype)
        if values.dtype != parsed.values.dtype:
            underflow[0] += int(np.count_nonzero((values == 0) & (parsed.values != 0)))
        pos = {"file": blk.file_index, "offset": blk.end_offset, "line": blk.end_line,
               "crc": blk.crc, "crcs": list(crcs), "zero": bounds.zero,
               "underflow": underflow[0]}
        yield blk, (parsed.labels, parsed.indptr, indices.astype(index_dtype), values), pos


def _shuffled(blocks, files, writer, sink, seed, index_dtype, dtype, budget, scratch_dir, bar):
    est = sum(f.size * (1 if f.compression is None else 5) for f in files)
    n_buckets = max(1, int(np.ceil(est / bucket_bytes(budget))))
    with Shuffler(n_buckets, seed, index_dtype=index_dtype, dtype=dtype, budget_bytes=budget,
                  scratch_dir=scratch_dir) as sh:
        for blk, parsed, _ in blocks:
            sh.scatter(blk.index, *parsed)
            bar.advance(len(blk.data), len(parsed[0]))
        blk = parsed = None                   # the budget is the buckets' from here on
        bar.start_gather()
        for part in sh.gather():
            sink.put(("rows", part, "shuffle bucket"))
            bar.gathered(len(part[0]))
        sink.close()


def _progress_bar(enabled, total, initial):
    if not enabled:
        return None
    from .._progress import progress_bar
    return progress_bar(total=total, initial=initial or 0, unit="B", unit_scale=True,
                        unit_divisor=1024, desc="convert", smoothing=0.1)


class _Progress:
    """The convert bar's rows: counted as the calling thread parses them (the writer thread
    lags behind) and timed by one clock, ``clock`` (``time.perf_counter``).

    With ``--shuffle``, :meth:`advance` counts rows scattered to the buckets, then, after
    :meth:`start_gather`, :meth:`gathered` counts rows handed to the writer from them.
    ``bar`` may be None (no progress shown).
    """

    def __init__(self, bar, rows: int = 0, clock=time.perf_counter):
        self.bar, self.clock = bar, clock
        self.rows = rows                  # shown: includes rows written before a resume
        self.total = 0                    # for the gather phase
        self._new, self._t0 = 0, clock()  # rows of this phase and its start, for the rate

    def _show(self, text: str, refresh: bool) -> None:
        rate = self._new / max(self.clock() - self._t0, 1e-9)
        self.bar.set_postfix_str(f"{text}, {rate:,.0f} rows/s", refresh=refresh)

    def advance(self, nbytes: int, rows: int) -> None:
        """Count ``nbytes`` of text read and the ``rows`` parsed from them."""
        self.rows += rows
        self._new += rows
        if self.bar is not None:        # the status first: a plain line is written by update
            self._show(f"{self.rows:,} rows", refresh=False)
            self.bar.update(nbytes)

    def start_gather(self) -> None:
        """Shuffle: all rows are in the buckets; count them again as they are written."""
        self.total, self.rows, self._new, self._t0 = self.rows, 0, 0, self.clock()
        if self.bar is not None:
            self.bar.set_description("shuffle: writing buckets")
            self._show(f"0/{self.total:,} rows", refresh=True)

    def gathered(self, rows: int) -> None:
        """Shuffle: ``rows`` more rows handed to the writer."""
        self.rows += rows
        self._new += rows
        if self.bar is not None:
            self._show(f"{self.rows:,}/{self.total:,} rows", refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _WriterThread:
    """Runs StoreWriter.append / save_progress in a background thread (bounded queue)."""

    def __init__(self, writer: StoreWriter, depth: int = 2):
        self.writer = writer
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="streamsvm-writer", daemon=True)
        self.thread.start()
        self.closed = False

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            if self.error is not None:
                continue
            kind, payload, src = item
            try:
                with write_errors(f"the store {self.writer.url!r}"):
                    if kind == "rows":
                        self.writer.append(*payload, source_pos=src)
                    else:
                        self.writer.save_progress(payload)
            except BaseException as exc:
                self.error = exc

    def put(self, item) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(item)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.q.put(None)
            self.thread.join()
        if self.error is not None:
            raise self.error

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            self.error = self.error or RuntimeError("aborted")
            self.q.put(None)
            self.thread.join()
