"""The local backend: blocks read ahead by threads of this process, kept in a cache, and
kernels run in the calling thread (:class:`~streamsvm.schedule._backend.Backend`).

The one read-ahead pipeline of the package: sweeps of the store and of resident rows on
scratch disk both come through :meth:`LocalBackend.iter_blocks`.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator

import numpy as np

from ..exceptions import StoreError
from ._backend import Backend
from ._blocks import Block, BlockLayout
from ._cache import BlockCache
from ._prefetch import read_ahead

__all__ = ["LocalBackend", "default_readers"]

logger = logging.getLogger(__name__)


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


def default_readers(store, prefetch: int) -> int:
    """Reader threads for ``prefetch`` blocks in flight: for a local store one fewer than
    the usable CPUs (at least one), so that decompression leaves the solver's kernel a
    core of its own; for a remote one (waiting on the network, not the CPU) one per
    block in flight.

    On 2 CPUs and the 10^7-row benchmark store, streamed dcd passes took a median
    1.04-1.12 s with two readers for two blocks in flight (three busy threads on two
    cores: the kernel 0.78-0.82 s of it), 0.88-0.98 s with one reader for four and
    0.86-0.91 s with one reader for eight (the kernel 0.67-0.68 s)
    (``python tools/bench.py readers``; docs/bench/results/readers-synth-1e7.md).

    A local store that outgrows the page cache is read from the disk every pass: there a
    reader waits for its bytes as long as it decompresses them, and one more reader (as
    many as the CPUs) keeps the disk and a core busy at once. dcd's streamed sweeps of the
    10^7-row store (1.4 GB) in a memory cgroup of 800 MB at ``--memory 300MB``, three runs
    of 12 passes each: a median 3.46-3.65 s with two readers against 3.87-3.95 s with one,
    waiting 0.23-0.32 s for blocks against 0.57-0.82 s (``tools/bench.py readers ...
    --limit 800MB``, BENCHMARKS.md).
    """
    from ..io import is_local
    if not is_local(store.url):
        return max(1, prefetch)
    spare = 0 if getattr(store, "outgrows_page_cache", False) else 1
    return max(1, min(prefetch, usable_cpus() - spare))


REMOTE_READER_BYTES = 10_000_000
"""Peak memory each reader thread of a remote store adds (its request and response buffers,
the inner chunks it decodes, its allocator arena): reading a 10^6-row store (10^5 features,
64 MB budget) from a moto S3 server, ``streamsvm train ... --readers 1/4/8`` peaked at 263,
304 and 328 MB (``/usr/bin/time -f %M``), 9.3 MB per reader beyond the first."""


def reader_bytes(store) -> int:
    """Memory charged to the budget per reader thread (what a read holds besides the block it
    returns): for a local store the inner chunks it decodes at once (their compressed bytes
    and the decoded inner chunk of a partial read); for a remote one
    :data:`REMOTE_READER_BYTES`."""
    from ..io import is_local
    if not is_local(store.url):
        return REMOTE_READER_BYTES
    return 2 * int(store.largest_inner_bytes())


def _compact(block: Block) -> Block:
    """A copy of ``block`` that owns its arrays (drops the reference to its chunk)."""
    return dataclasses.replace(block, indptr=block.indptr.copy(), indices=block.indices.copy(),
                               data=block.data.copy(), y=block.y.copy())


class LocalBackend(Backend):
    """Read ``prefetch`` blocks ahead of ``store`` with ``readers`` threads, caching up to
    ``cache_bytes``.

    Parameters
    ----------
    store : Store or InMemoryStore
    layout : BlockLayout
    prefetch : int
        Blocks read ahead of the consumer (0: read in the consumer thread).
    readers : int
        Threads reading them (at most ``prefetch``).
    cache_bytes : int
        Initial cache capacity.
    helps : bool
        The consumer decodes the next block itself while it would wait (``read_ahead``'s
        ``help_while_waiting``); the scheduler turns it on when the budget holds one more
        reader's scratch.

    Attributes
    ----------
    cache : BlockCache
    store_reads : int
        Blocks read from the store (cache misses).
    cache_hits : int
        Blocks served from the cache.
    bytes_read : int
        Decoded bytes returned by the store (``Chunk.nbytes``).
    """

    def __init__(self, store, layout: BlockLayout, *, prefetch: int, readers: int,
                 cache_bytes: int, helps: bool = False):
        self.store = store
        self.layout = layout
        self.prefetch = self.prefetch_asked = prefetch
        self.readers = self.readers_asked = readers
        self.helps = helps
        # decoded chunks kept for the blocks split from them (_read_part): the chunks the
        # blocks in flight (read ahead, current, previous) can span, plus one
        per_chunk = np.bincount(layout.chunk)
        split = per_chunk[per_chunk > 1]
        self.keep_chunks = max(3, -(-(prefetch + 2) // int(split.min())) + 1) \
            if len(split) else 0
        self.cache = BlockCache(cache_bytes)
        self._recent: collections.OrderedDict = collections.OrderedDict()
        self._recent_lock = threading.Lock()
        self._locks: dict[int, threading.Lock] = {}
        self.store_reads = 0
        self.cache_hits = 0
        self.bytes_read = 0
        self.kernel_seconds = 0.0

    @property
    def threads(self) -> int:
        """Reader threads a sweep uses (at most one per block in flight)."""
        return max(1, min(self.readers, self.prefetch))

    def read_block(self, b: int) -> Block:
        """Read block ``b`` from the store (any thread); errors name the block and chunk."""
        lay = self.layout
        c, start, stop = int(lay.chunk[b]), int(lay.start[b]), int(lay.stop[b])
        try:
            if lay.whole[b]:
                chunk = self.store.read_chunk(c)
            elif self.store.range_reads:
                chunk = self.store.read_rows(start, stop, c)     # only this block's bytes
            else:
                chunk = self._read_part(c, start, stop)
            if chunk.n_rows != stop - start or chunk.row_start != start:
                raise StoreError(f"expected rows [{start}, {stop}), got {chunk.n_rows} rows "
                                 f"starting at {chunk.row_start}")
        except StoreError:
            raise                   # the store's message names the array, chunk and rows
        except Exception as exc:
            raise StoreError(f"store {self.store.url!r}: cannot read block {b} (chunk {c}, rows "
                             f"[{start}, {stop})): {type(exc).__name__}: {exc}") from exc
        return Block(b, start, chunk.indptr, chunk.indices, chunk.data, chunk.y, chunk=c)

    def read_all(self) -> Block:
        """Every row of the store as one block (id -1), in one read; nothing is cached."""
        n = self.layout.n_rows
        try:
            chunk = self.store.read_rows(0, n)
            if chunk.n_rows != n:
                raise StoreError(f"expected {n} rows, got {chunk.n_rows}")
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"store {self.store.url!r}: cannot read rows [0, {n}): "
                             f"{type(exc).__name__}: {exc}") from exc
        self.store_reads += 1
        self.bytes_read += chunk.nbytes
        return Block(-1, 0, chunk.indptr, chunk.indices, chunk.data, chunk.y)

    def _read_part(self, c: int, start: int, stop: int):
        """Rows [start, stop) of chunk ``c``, decoding the chunk once for all its blocks.

        For a store read through zarr (not the converter's layout), which decodes whole
        inner chunks with a large overhead per read, reading the blocks of one chunk
        separately would decompress the same bytes once per block. The last
        :attr:`keep_chunks` decoded chunks are kept (charged to the budget with the blocks
        in flight) while their blocks are visited; solvers that split chunks visit a
        chunk's blocks close together.
        """
        with self._locks.setdefault(c, threading.Lock()):
            chunk = self._recent.get(c)
            if chunk is None:
                chunk = self.store.read_chunk(c)
                with self._recent_lock:
                    self._recent[c] = chunk
                    while len(self._recent) > self.keep_chunks:
                        self._recent.popitem(last=False)
        return chunk.rows(start - chunk.row_start, stop - chunk.row_start)

    def iter_blocks(self, ids: Iterable[int], source=None) -> Iterator[Block]:
        """Yield the blocks ``ids`` in order, from the cache or read ahead from the store
        (or from ``source``, resident rows on scratch disk: read ahead, never cached)."""
        if source is not None:
            blocks = read_ahead(ids, source.read_block, self.prefetch, threads=self.threads,
                                help_while_waiting=self.helps)
            try:
                for _, block, _ in blocks:
                    yield block
            finally:
                blocks.close()
            return
        blocks = read_ahead(ids, self.read_block, self.prefetch, lookup=self.cache.get,
                            threads=self.threads, help_while_waiting=self.helps)
        try:
            for b, block, loaded in blocks:
                if loaded:
                    self.store_reads += 1
                    self.bytes_read += block.nbytes
                    if self.cache.fits(block.nbytes) and b not in self.cache:
                        # a block split from a decoded chunk is a view that would keep the
                        # whole chunk alive: cache a compact copy instead (a block read
                        # alone by range already owns its arrays)
                        own = self.layout.whole[b] or self.store.range_reads
                        self.cache.admit(b, block if own else _compact(block))
                else:
                    self.cache_hits += 1
                yield block
        finally:
            blocks.close()

    def map_blocks(self, kernel, blocks, *, views, args, folder, after=None) -> None:
        """Run ``kernel`` on every block in this thread (see :class:`Backend`)."""
        for block in blocks:
            v = views(block)
            acc = folder.arrays(block.id)
            t0 = time.perf_counter()
            kernel(block, v, args, acc)
            self.kernel_seconds += time.perf_counter() - t0
            folder.done(block.id, block.rank, acc)
            if after is not None:
                after(block, v)
