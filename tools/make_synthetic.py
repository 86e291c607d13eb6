#!/usr/bin/env python
"""Stream a synthetic libsvm/svmlight file of any size to disk with bounded memory.

Rows are generated and written one block at a time, so a file of 10^8 rows needs no more memory
than one of 10^4.  The data come from a hidden linear model, so the accuracy of a linear SVM on
them is meaningful (well above chance, below 100 % once ``noise`` > 0):

* non-zeros per row: ``1 + Poisson(K - 1)`` capped at ``D`` (duplicates then merged, so a row
  with a heavy-headed feature distribution may end up with a few fewer);
* feature ids: Zipf-like, P(feature j) proportional to ``1 / (j + 1) ** zipf`` (``zipf=0`` is
  uniform), unique and sorted within a row;
* values: standard normal / sqrt(K), rounded to 6 significant digits and written exactly as
  Python's ``'%.6g'`` would, so the parsed value *is* the value the labels were computed from
  (magnitudes are clamped to [1e-12, 1e12]); or exactly ``1`` with ``binary_values``;
* labels: a hidden dense model ``W`` (uniform on [-sqrt 3, sqrt 3], one weight per feature and
  class, defined by a hash of (seed, feature, class), so it is never stored: see
  ``hidden_model``) plus a bias chosen on a fixed pilot sample to balance the classes.
  Binary (``classes=2``): ``sign(x.w + b)`` written ``+1`` / ``-1``; multiclass:
  ``argmax_c x.W[:, c] + b[c]`` written ``1..k``.  Then each label is replaced, with
  probability ``noise``, by a different class chosen uniformly.

Memory: about 200 MB (numpy + numba + one block of ~5 * 10^5 non-zeros), plus 8 bytes per
feature for the Zipf CDF (D = 10^7: ~290 MB), whatever the number of rows.

Determinism: the same arguments (and numpy version) give the same bytes.  Block ``i`` draws from
``SeedSequence(seed, spawn_key=(2, i, stream))``; the block size is a fixed function of
``nnz_per_row`` and ``features`` only; and every random quantity has its own stream, so the file
for ``rows=n`` is exactly the first ``n`` lines of the file for any larger ``rows``.

The output is written to ``OUT + ".partial"`` and renamed to OUT only when complete.  OUT ending
in ``.gz``, ``.bz2``, ``.xz`` or ``.zst`` is compressed (gzip level 1, bz2 level 9, xz preset 1,
zstd level 3; headers carry no name or time stamp, so compressed output is deterministic too).

Example::

    python tools/make_synthetic.py train.svm.gz --rows 1000000 --features 100000 --nnz-per-row 20
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import lzma
import math
import numbers
import os
import queue
import sys
import threading
import time

if __name__ == "__main__":
    # Run as a script: re-enter through the importable module, so that the kernels are only
    # ever imported as ``tools.synthetic.*`` (numba's on-disk cache is keyed by file, not module
    # name, and written only under those names).
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tools.make_synthetic import main as _main

    sys.exit(_main())

import numpy as np  # noqa: E402
from tools.synthetic.rows import Generator  # noqa: E402
from tools.synthetic.text import VALUE_MAX_CHARS, format_block  # noqa: E402

from streamsvm._progress import progress_bar  # noqa: E402

__all__ = ["make_synthetic", "hidden_model", "main"]

_EMPTY_I32, _EMPTY_I8, _EMPTY_BOOL = (np.empty(0, np.int32), np.empty(0, np.int8),
                                      np.empty(0, np.bool_))


class _NoBar:
    """No progress (``progress=False``, ``--quiet``): the bar's calls do nothing."""

    def update(self, n=1):
        pass

    def set_postfix_str(self, s="", refresh=True):
        pass

    def close(self):
        pass


def _open_compressed(raw, path):
    name = os.fspath(path).lower()
    if name.endswith(".gz"):
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0)
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw, "wb", compresslevel=9)
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw, "wb", format=lzma.FORMAT_XZ, preset=1)
    if name.endswith(".zst"):
        try:
            import zstandard
        except ImportError as exc:  # pragma: no cover - zstandard is a test/bench extra
            raise ValueError(".zst output needs the 'zstandard' package") from exc
        return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
    return None


class _Writer:
    """Writes buffers to ``sink`` in a background thread, so that compression (zlib, bz2, lzma
    and zstd release the GIL) overlaps with generating the next block.  At most one buffer waits."""

    def __init__(self, sink):
        self._sink = sink
        self._queue = queue.Queue(maxsize=1)
        self._error = None
        self._thread = threading.Thread(target=self._run, name="make_synthetic-writer",
                                        daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:  # after an error keep draining, so put() never blocks
                try:
                    self._sink.write(item)
                except BaseException as exc:
                    self._error = exc

    def write(self, data):
        if self._error is not None:
            raise self._error
        self._queue.put(data)

    def close(self):
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def abort(self):
        self._error = self._error or RuntimeError("aborted")
        self._queue.put(None)
        self._thread.join()


def _check(name, value, ok, what):
    if isinstance(value, bool) or not ok(value):
        raise ValueError(f"{name} must be {what}, got {value!r}")


def make_synthetic(path, *, rows, features, nnz_per_row=10, classes=2, noise=0.05, zipf=1.1,
                   binary_values=False, seed=0, zero_based=False, progress=True,
                   _block_rows=None) -> dict:
    """Stream a synthetic libsvm file to ``path`` (see the module docstring) and return a summary.

    Memory is bounded by one block (about 5 * 10^5 non-zeros) plus 8 bytes per feature for the
    Zipf CDF, whatever ``rows`` is.  ``_block_rows`` overrides the internal block size (for tests
    only: it changes the output).

    Returns a dict with ``path``, ``rows``, ``features``, ``nnz`` (non-zeros written), ``bytes``
    (size of the file on disk), ``text_bytes`` (uncompressed), ``seconds``, ``mb_per_s``
    (uncompressed MB written per second, 1 MB = 10^6 bytes) and ``label_counts``
    ({label: rows}; labels -1/+1, or 1..k).
    """
    integral, real = numbers.Integral, numbers.Real
    _check("rows", rows, lambda v: isinstance(v, integral) and v >= 0, "an integer >= 0")
    _check("features", features, lambda v: isinstance(v, integral) and v >= 1, "an integer >= 1")
    _check("nnz_per_row", nnz_per_row, lambda v: isinstance(v, integral) and v >= 1,
           "an integer >= 1")
    _check("classes", classes, lambda v: isinstance(v, integral) and v >= 2, "an integer >= 2")
    _check("noise", noise, lambda v: isinstance(v, real) and 0 <= v <= 1,
           "a number in [0, 1]")
    _check("zipf", zipf, lambda v: isinstance(v, real) and 0 <= v < math.inf,
           "a finite number >= 0")
    _check("seed", seed, lambda v: isinstance(v, integral) and v >= 0, "an integer >= 0")
    rows, features, nnz_per_row, classes, seed = map(int, (rows, features, nnz_per_row, classes,
                                                           seed))
    path = os.fspath(path)
    partial = path + ".partial"
    t0 = time.perf_counter()
    gen = Generator(features=features, nnz_per_row=nnz_per_row, classes=classes,
                     noise=float(noise), zipf=float(zipf), binary_values=bool(binary_values),
                     seed=seed, block_rows=_block_rows)
    offset = 0 if zero_based else 1
    idx_chars = len(str(features - 1 + offset))
    label_chars = 2 if gen.binary_labels else len(str(classes))
    tok_chars = 1 + idx_chars + 1 + (1 if binary_values else VALUE_MAX_CHARS)
    counts = np.zeros(classes, np.int64)  # binary: [-1, +1]
    nnz = 0
    text_bytes = 0

    # a bar on a terminal; into a file or a pipe, a plain line every few seconds
    bar = progress_bar(total=rows, desc=os.path.basename(path), unit="rows",
                       mininterval=0.5) if progress else _NoBar()
    raw = open(partial, "wb")
    out = writer = None
    try:
        out = _open_compressed(raw, path)
        writer = _Writer(out if out is not None else raw)
        for b in range(-(-rows // gen.block_rows)):
            n = min(gen.block_rows, rows - b * gen.block_rows)
            blk = gen.block(b, n)
            y, feats = blk.labels, blk.feats
            if binary_values:
                mant, expo, neg = _EMPTY_I32, _EMPTY_I8, _EMPTY_BOOL
            else:
                mant, expo, neg = blk.mant, blk.expo, blk.neg
            # a fresh buffer per block: the writer thread may still hold the previous ones
            buf = np.empty(n * (label_chars + 1) + feats.size * tok_chars, np.uint8)
            end = format_block(y, blk.indptr, feats, mant, expo, neg, offset, gen.binary_labels,
                                bool(binary_values), buf)
            del blk
            writer.write(memoryview(buf)[:end])
            del buf
            nnz += feats.size
            text_bytes += end
            if gen.binary_labels:
                counts += np.bincount((y > 0).astype(np.int64), minlength=2)
            else:
                counts += np.bincount(y - 1, minlength=classes)
            bar.update(n)
            if progress:
                dt = time.perf_counter() - t0
                bar.set_postfix_str(f"{text_bytes / 1e6 / max(dt, 1e-9):.0f} MB/s, "
                                    f"{text_bytes / 1e6:,.0f} MB", refresh=False)
        writer.close()
        if out is not None:
            out.close()
        raw.close()
        os.replace(partial, path)
    except BaseException:
        bar.close()
        if writer is not None:
            writer.abort()
        if out is not None:
            try:
                out.close()
            except Exception:
                pass
        raw.close()
        try:
            os.remove(partial)
        except OSError:
            pass
        raise
    bar.close()
    seconds = time.perf_counter() - t0
    labels = [-1, 1] if gen.binary_labels else list(range(1, classes + 1))
    return {
        "path": path,
        "rows": rows,
        "features": features,
        "nnz": int(nnz),
        "bytes": os.path.getsize(path),
        "text_bytes": int(text_bytes),
        "seconds": seconds,
        "mb_per_s": text_bytes / 1e6 / seconds if seconds > 0 else float("inf"),
        "label_counts": {lab: int(c) for lab, c in zip(labels, counts)},
    }


def hidden_model(*, features, nnz_per_row=10, classes=2, zipf=1.1, binary_values=False, seed=0):
    """The hidden ``(W, bias)`` behind ``make_synthetic`` with the same arguments (dense arrays)."""
    gen = Generator(features=features, nnz_per_row=nnz_per_row, classes=classes, noise=0.0,
                     zipf=zipf, binary_values=binary_values, seed=seed)
    return gen.hidden_model()


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="make_synthetic.py",
        description="Stream a synthetic libsvm/svmlight file (labels from a hidden linear model, "
                    "Zipf-distributed sparse features) of any size to disk with bounded memory. "
                    "Same arguments give the same bytes; the file for --rows n is the first n "
                    "lines of the file for any larger --rows.",
        epilog="OUT ending in .gz/.bz2/.xz/.zst is compressed. The file is written to "
               "OUT.partial and renamed when complete. Example: python tools/make_synthetic.py "
               "train.svm.gz --rows 1000000 --features 100000 --nnz-per-row 20",
    )
    p.add_argument("out", metavar="OUT", help="output path (.gz, .bz2, .xz, .zst compress)")
    p.add_argument("--rows", type=int, required=True, help="number of rows (examples)")
    p.add_argument("--features", type=int, required=True, help="number of features D")
    p.add_argument("--nnz-per-row", type=int, default=10, metavar="K",
                   help="mean non-zeros per row: 1 + Poisson(K-1), capped at D, de-duplicated "
                        "(default: %(default)s)")
    p.add_argument("--classes", type=int, default=2,
                   help="2: labels -1/+1; k > 2: labels 1..k, the argmax of k hidden models "
                        "(default: %(default)s)")
    p.add_argument("--noise", type=float, default=0.05,
                   help="fraction of labels replaced by a different class at random "
                        "(default: %(default)s)")
    p.add_argument("--zipf", type=float, default=1.1,
                   help="feature j is drawn with probability proportional to 1/(j+1)^zipf "
                        "(0: uniform; default: %(default)s)")
    p.add_argument("--binary-values", action="store_true",
                   help="write every value as exactly 1 (idx:1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    p.add_argument("--zero-based", action="store_true",
                   help="write 0-based feature indices (default: 1-based, the libsvm convention)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (the one-line summary is still printed on stdout)")
    return p


def main(argv=None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        summary = make_synthetic(
            args.out, rows=args.rows, features=args.features, nnz_per_row=args.nnz_per_row,
            classes=args.classes, noise=args.noise, zipf=args.zipf,
            binary_values=args.binary_values, seed=args.seed, zero_based=args.zero_based,
            progress=not args.quiet)
    except ValueError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        print("interrupted; no output written", file=sys.stderr)
        return 130
    labels = " ".join(f"{'+' if lab > 0 and args.classes == 2 else ''}{lab}:{c}"
                      for lab, c in summary["label_counts"].items())
    print(f"{summary['path']}: {summary['rows']} rows, {summary['nnz']} non-zeros, "
          f"{summary['bytes']} bytes ({summary['text_bytes']} uncompressed) in "
          f"{summary['seconds']:.2f} s = {summary['mb_per_s']:.1f} MB/s; labels {labels}")
    return 0
