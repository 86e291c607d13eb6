"""Ordered read-ahead: load the next items in threads while the consumer works on this one.

Store reads (zarr decompression, fsspec/S3 I/O) release the GIL and so do the
``nogil`` numba kernels, so reading block j+1..j+depth overlaps the kernel on block j.
The threads live exactly as long as the generator: closing it (``break``, an exception in
the consumer, garbage collection) cancels reads not yet started, waits for the running
ones and joins every thread — nothing leaks into the next sweep.

A consumer that would wait helps instead: when the item it needs is still being loaded, it
takes the next load no thread has started and runs it itself, so that decompression gets
both cores while the kernel has nothing to do. On 2 CPUs with one reader thread, dcd's
streamed sweeps of the 10^7-row benchmark store spent up to 0.43 s a pass waiting for
blocks once shrinking made the kernel faster than one thread decompresses
(``tools/bench.py --suite dcd``, BENCHMARKS.md). Loads are pure functions of their key, so
which thread runs one changes nothing but the time.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
from collections.abc import Callable, Iterable, Iterator

__all__ = ["read_ahead"]


def read_ahead(keys: Iterable, load: Callable, depth: int, *,
               lookup: Callable | None = None, threads: int | None = None,
               help_while_waiting: bool = True) -> Iterator[tuple]:
    """Yield ``(key, value, loaded)`` for every key, in order.

    Parameters
    ----------
    keys : iterable
        Items to load, in the order they are consumed.
    load : callable
        ``load(key) -> value``; runs in a worker thread (in the consumer when
        ``depth == 0``). An exception it raises is re-raised in the consumer when that
        key's turn comes; later keys are then cancelled.
    depth : int
        Loads kept in flight ahead of the consumer. 0 loads synchronously, without
        threads.
    lookup : callable, optional
        ``lookup(key) -> value or None``, called in the consumer thread when the key is
        scheduled; a non-None value is used without calling ``load`` (a cache hit).
    threads : int, optional
        Threads running ``load`` (at most ``depth``; default ``depth``). Fewer threads
        than loads in flight keep CPU-bound loads (decompression) off the cores the
        consumer computes on while still queueing work ahead of it.
    help_while_waiting : bool
        When the item the consumer needs is not loaded yet, run the next load not yet
        started in the consumer's thread (module doc); its result, or its exception, is
        delivered at its own turn.

    Yields
    ------
    key
    value
    loaded : bool
        True when ``value`` came from ``load``, False when from ``lookup``.
    """
    lookup = lookup or (lambda key: None)
    if depth == 0:
        for key in keys:
            value = lookup(key)
            yield (key, value, False) if value is not None else (key, load(key), True)
        return
    workers = depth if threads is None else max(1, min(int(threads), depth))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers,
                                                 thread_name_prefix="streamsvm-read")
    pending: collections.deque = collections.deque()

    def schedule(key):
        value = lookup(key)
        pending.append((key, value, False) if value is not None else
                       (key, pool.submit(load, key), True))

    def help_with_next() -> bool:
        """Run, in this thread, the first load after the head that no thread has started."""
        for j in range(1, len(pending)):
            key, fut, loaded = pending[j]
            if loaded and isinstance(fut, concurrent.futures.Future) and fut.cancel():
                pending[j] = (key, _run(load, key), True)
                return True
        return False

    it = iter(keys)
    try:
        for key in itertools.islice(it, depth):
            schedule(key)
        while pending:
            key, value, loaded = pending[0]
            if loaded and help_while_waiting:
                while not value.done() and help_with_next():
                    pass
            pending.popleft()
            if loaded:
                value = value.result()
            for nxt in itertools.islice(it, 1):
                schedule(nxt)
            yield key, value, loaded
    finally:
        for _, value, loaded in pending:
            if loaded:
                value.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _run(load: Callable, key) -> concurrent.futures.Future:
    """``load(key)`` run here, as a finished future (its value or its exception)."""
    done: concurrent.futures.Future = concurrent.futures.Future()
    try:
        done.set_result(load(key))
    except Exception as exc:  # noqa: BLE001  (delivered at the key's turn, as a thread's)
        done.set_exception(exc)
    return done
