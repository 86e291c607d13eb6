"""The disk under a local store: its sequential read bandwidth, measured on the store's own
files with ``O_DIRECT`` (past the page cache, as ``dd if=SHARD of=/dev/null bs=16M
iflag=direct`` reads), the yardstick of a pass that reads the store from disk.
"""

from __future__ import annotations

import mmap
import os
import time

from ._common import MB

__all__ = ["store_files", "read_bandwidth"]


def store_files(path: str) -> list[tuple[str, int]]:
    """``(file, bytes)`` of every file under the local store directory ``path``, largest
    first (the shards of ``indices`` and ``data``: the bytes a pass reads)."""
    out = []
    for dirpath, _, names in os.walk(path):
        for name in names:
            p = os.path.join(dirpath, name)
            out.append((p, os.path.getsize(p)))
    return sorted(out, key=lambda f: (-f[1], f[0]))


def read_bandwidth(files: list[tuple[str, int]], min_bytes: int = 10**9,
                   block: int = 16 << 20) -> dict:
    """Read ``files`` (``(path, bytes)``, in order) with ``O_DIRECT`` in ``block``-byte reads
    until ``min_bytes`` are read, going round them again when they hold fewer (``cycles`` > 1:
    a virtual disk's host may serve the later rounds from its own cache, so
    ``first_cycle_mb_per_s`` is given apart). Raises ``OSError`` naming the file when it
    cannot be read so (a file system without ``O_DIRECT``)."""
    if not hasattr(os, "O_DIRECT"):
        raise OSError("this platform has no O_DIRECT: the disk's bandwidth is not measured")
    files = [f for f in files if f[1] > 0]
    if not files:
        raise OSError("no bytes to read: the store has no non-empty file")
    buf = mmap.mmap(-1, block)          # page-aligned, as O_DIRECT wants
    total, cycles, first = 0, 0, None
    t0 = time.perf_counter()
    while total < min_bytes:
        cycles += 1
        for path, _ in files:
            total += _read_direct(path, buf, min_bytes - total)
            if total >= min_bytes:
                break
        if first is None:
            first = (total, time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    return {"bytes": total, "seconds": seconds, "mb_per_s": total / MB / seconds,
            "cycles": cycles, "files": len(files), "distinct_bytes": sum(f[1] for f in files),
            "first_cycle_mb_per_s": first[0] / MB / first[1],
            "method": f"O_DIRECT, {block >> 20} MiB reads, largest files first"}


def _read_direct(path: str, buf, most: int) -> int:
    """Bytes read from ``path`` with ``O_DIRECT`` into ``buf``, at most about ``most``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot open {path} with O_DIRECT: {exc.strerror}") from exc
    n = 0
    try:
        while n < most:
            try:
                got = os.readv(fd, [buf])
            except OSError as exc:
                raise OSError(exc.errno, f"cannot read {path} with O_DIRECT: "
                                         f"{exc.strerror}") from exc
            n += got
            if got < len(buf):
                break
    finally:
        os.close(fd)
    return n
