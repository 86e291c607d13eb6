"""The PassScheduler: the only component that touches data (DESIGN.md §4).

Solvers see the store only as a stream of *blocks* (a chunk, or a slice of one when
``block_rows`` splits chunks), visited in an order they choose, plus per-row state the
scheduler keeps aligned with the blocks. One call is one *sweep* over some blocks;
``passes`` counts rows visited / n_rows, so skipping blocks (shrinking) or visiting a
weighted subset costs fractional passes.

Pieces, one module each: ``_orders`` (visiting orders, weighted schedules), ``_blocks``
(block layout), ``_local`` (the thread backend: read-ahead and the cache, ``_prefetch`` and
``_cache``), ``_reduce`` (fixed-order reduction), ``_state`` (per-row state and spilling),
``_memory`` (budget strings).

Determinism: a sweep's order depends only on the seed and the sweep counters; reductions fold
per-block partials in (block id, occurrence) order; the cache changes where bytes come
from, never their values. Results are therefore identical for every memory budget,
prefetch depth and visiting order of a reduction, and a run restored with
:meth:`PassScheduler.load_state_dict` continues with the same orders.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import numbers
import os
import time
import weakref
from collections.abc import Callable, Iterator

import numpy as np

from ..exceptions import CheckpointError, InvalidParameterError
from ..io import StoreMeta, read_derived, write_derived
from ._blocks import Block, BlockLayout
from ._heap import release_free_heap
from ._local import LocalBackend, default_readers, reader_bytes
from ._memory import parse_memory
from ._needs import Need, RowField
from ._orders import (RESIDENT_STREAM, ROW_STREAM, USER_STREAM, chunk_groups, mix64,
                      sweep_order, visit_ranks)
from ._reduce import Folder
from ._resident import ResidentRows
from ._state import RemoteRowState, RowState, ScratchDir

__all__ = ["PassScheduler", "Group", "Reduced", "Swept"]

logger = logging.getLogger(__name__)

_STATE_DICT_VERSION = 1


@dataclasses.dataclass(frozen=True, eq=False)
class Group:
    """Blocks resident together (:meth:`PassScheduler.groups`): ``blocks``, ``views[j][s]``
    the rows of block ``j`` in state ``s``, ``seed`` for a kernel's own generator and
    ``position``, the group's place in its sweep."""
    blocks: tuple
    views: tuple
    seed: int
    position: int = 0


class Reduced(dict):
    """The accumulators of a :meth:`PassScheduler.map_reduce` pass by name, and ``visits``:
    the rows it visited (counted in ``passes``)."""

    def __init__(self, arrays: dict, *, visits: int):
        super().__init__(arrays)
        self.visits = int(visits)


@dataclasses.dataclass(frozen=True)
class Swept:
    """What a :meth:`PassScheduler.sweep` did: ``visits``, the rows it visited (counted in
    ``passes``), and ``value``, what the solver's function returned."""
    visits: int
    value: object = None


def _weak_call(method):
    """A function calling the bound ``method`` while its object lives, holding it weakly:
    what the scheduler hands the objects it owns does not make a reference cycle (its O(d)
    arrays would stay until the cyclic collector's next full sweep)."""
    ref = weakref.WeakMethod(method)

    def call(*args):
        m = ref()
        return None if m is None else m(*args)
    return call


def _mb(nbytes: int) -> str:
    """``nbytes`` for messages: "1.5 MB", "12 kB"."""
    return f"{nbytes / 1e6:.3g} MB" if nbytes >= 1e5 else f"{nbytes / 1e3:.3g} kB"


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise InvalidParameterError(
            f"The {name!r} parameter of PassScheduler must be an int in the range "
            f"[{low}, inf). Got {value!r} instead.")
    return int(value)


class PassScheduler:
    """Stream a store's blocks through solver code, counting passes.

    Parameters
    ----------
    store : Store or InMemoryStore
        Anything with ``n_rows``, ``n_features``, ``n_chunks``, ``chunk_sizes()`` and
        ``read_chunk(i)`` (and ``read_rows(start, stop, chunk_id)`` when ``block_rows``
        splits chunks).
    memory : int or str, default="1GB"
        Budget for per-row state plus cached decoded blocks (``"2GB"``, ``"512MB"``,
        ``"1.5GiB"`` or bytes). State is served first; blocks are cached in what is left.
        States that do not fit spill to memmap files. The blocks in flight (at most
        ``prefetch + 2`` and what the reader keeps decoded) are charged to the budget too.
    prefetch : int, default=8
        Blocks read ahead by background threads while the current block is processed.
        0 reads in the calling thread.
    readers : int, optional
        Threads that read and decompress those blocks (at most ``prefetch``). Default:
        for a local store one fewer than the usable CPUs (at least 1), so the solver's
        kernel keeps a core to itself; for a remote store, ``prefetch``
        (:func:`~streamsvm.schedule._local.default_readers`).
    block_rows : int, optional
        Split chunks into blocks of at most this many rows. Default: one block per chunk.
    seed : int, default=0
        Seed of every random order and of :meth:`block_rng` and :meth:`rng`.
    scratch_dir : str or os.PathLike, optional
        Where spilled state files go (a private subdirectory, deleted by :meth:`close`).
        Default: the system temporary directory.
    scheduler : distributed.Client or str, optional
        Run the passes on a dask cluster (a Client, or a scheduler address such as
        ``"tcp://host:8786"``; ``_dask.py``): its workers read the store themselves and
        keep the per-row state of the blocks they own; ``memory`` is then each worker's
        budget. Only :meth:`map_reduce` passes run there.
    interrupt : callable, optional
        Polled while the scheduler sets up, before the first sweep (allocating and
        reserving per-row state, restoring a checkpoint's resident rows): when it returns
        True, ``KeyboardInterrupt`` is raised (:meth:`poll_interrupt`). A run asked to stop
        (SIGTERM) during a long set-up stops there, not after its first pass.

    Attributes
    ----------
    store : Store or InMemoryStore
        For metadata (``task``, ``classes``, ...); read data only through the scheduler.
    memory : int
        The budget in bytes.
    seed : int
    sweeps : int
        Sweeps started so far (index of the next one).
    cyclic_sweeps : int
        ``"cyclic"`` sweeps started so far (their parity gives the next direction).
    rows_visited, blocks_visited : int
        Rows and blocks handed to the caller, over all sweeps.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from streamsvm.io import InMemoryStore
    >>> from streamsvm.kernels import csr_matvec
    >>> from streamsvm.schedule import Accumulator
    >>> X = sp.random(10, 4, density=0.5, format="csr", random_state=0)
    >>> y = np.r_[np.ones(5), -np.ones(5)]
    >>> sched = PassScheduler(InMemoryStore(X, y, chunk_rows=4), memory="1MB")
    >>> margins = sched.state("margins", np.float64)
    >>> def loss(block, views, args, acc):       # a kernel: module-level in a solver
    ...     (m,), (w,) = views, args
    ...     csr_matvec((block.indptr, block.indices, block.data), w, m)
    ...     acc["loss"] += np.maximum(0.0, 1.0 - block.y * m).sum()
    >>> w = np.ones(4)
    >>> r = sched.map_reduce(loss, args=(w,), states=(margins,), acc={"loss": Accumulator(())})
    >>> bool(np.isclose(r["loss"], np.maximum(0, 1 - y * (X @ w)).sum()))
    True
    >>> sched.passes, sched.n_blocks
    (1.0, 3)
    """

    def __init__(self, store, *, memory="1GB", prefetch: int = 8, readers: int | None = None,
                 block_rows: int | None = None, seed: int = 0, scratch_dir=None,
                 scheduler=None, interrupt=None):
        if not isinstance(store, StoreMeta):
            raise InvalidParameterError(
                f"The 'store' parameter of PassScheduler must be a streamsvm store "
                f"(open_store(...), InMemoryStore, or another streamsvm.io.StoreMeta). Got "
                f"{type(store).__name__} instead.")
        self.memory = parse_memory(memory)
        prefetch = _check_int("prefetch", prefetch, 0)
        readers = default_readers(store, prefetch) if readers is None else \
            _check_int("readers", readers, 1)
        if block_rows is not None:
            block_rows = _check_int("block_rows", block_rows, 1)
        self.seed = _check_int("seed", seed, 0)
        if scratch_dir is not None and not isinstance(scratch_dir, (str, os.PathLike)):
            raise InvalidParameterError(
                f"The 'scratch_dir' parameter of PassScheduler must be a path or None. "
                f"Got {scratch_dir!r} instead.")
        self.store = store
        self._layout = BlockLayout.from_store(store, block_rows)
        if scheduler is None:
            self._backend = LocalBackend(store, self._layout, prefetch=prefetch,
                                         readers=readers, cache_bytes=0)
        else:
            from ._dask import DaskBackend, connect
            client, owned = connect(scheduler)
            try:
                self._backend = DaskBackend(client, store, self._layout, memory=self.memory,
                                            owned=owned)
            except BaseException:
                if owned:
                    client.close()
                raise
        self._keep_partial = self.KEEP_PARTIAL
        self._states: dict[str, RowState] = {}
        self._interrupt = interrupt
        self._setting_up = True         # until the first sweep (poll_interrupt)
        self._poll = _weak_call(self.poll_interrupt)    # (no cycle through the scheduler)
        self._scratch = ScratchDir(scratch_dir, poll=self._poll)
        if not self.remote:
            self._scratch.sweep()       # folders of dead runs (_scratch.py)
        self.sweeps = 0
        self.reserved = 0
        self._held = 0                # bytes of the needs check_budget accepted
        self._dropped = 0             # cached bytes dropped since the heap was trimmed
        self.cyclic_sweeps = 0
        self.rows_visited = 0
        self.blocks_visited = 0
        self.kernel_seconds = 0.0
        self.wait_seconds = 0.0
        self.resident_bytes_read = 0
        self._pending_collect = None
        self._backend.cache.resize(self._cache_capacity())

    @property
    def remote(self) -> bool:
        """Whether passes run on a dask cluster (only :meth:`map_reduce` then)."""
        return self._backend.remote

    @property
    def workers(self) -> list:
        """The dask workers the blocks are spread over ([] for the local backend)."""
        return list(self._backend.workers)

    @property
    def partitions(self) -> int:
        """How many workers own blocks (at most one per reduction group; 1 for the local
        backend): CoCoA+'s K."""
        return int(self._backend.partitions)

    def rebalance(self) -> None:
        """After a worker left: spread the blocks over the workers still there (the per-row
        state must then be loaded again, e.g. from a checkpoint)."""
        if self.remote:
            self._backend.rebalance()

    def __repr__(self) -> str:
        return (f"PassScheduler(n_rows={self.n_rows}, n_blocks={self.n_blocks}, "
                f"memory={self.memory}, passes={self.passes:.3f})")

    # -- layout --------------------------------------------------------------------
    n_rows = property(lambda self: self._layout.n_rows, doc="Rows in the store.")
    n_features = property(lambda self: int(self.store.n_features),
                          doc="Features in the store (no bias column).")
    n_blocks = property(lambda self: self._layout.n_blocks, doc="Number of blocks.")
    block_rows = property(lambda self: self._layout.block_rows,
                          doc="Maximum rows per block, or None for whole chunks.")
    prefetch = property(lambda self: self._backend.prefetch, doc="Read-ahead depth.")
    readers = property(lambda self: self._backend.readers, doc="Read-ahead threads.")

    @property
    def block_sizes(self) -> np.ndarray:
        """Rows of each block, ndarray of shape (n_blocks,)."""
        return self._layout.sizes.copy()

    @property
    def block_chunks(self) -> np.ndarray:
        """Store chunk of every block, shape (n_blocks,)."""
        return self._layout.chunk

    def block_bounds(self, b: int) -> tuple[int, int]:
        """Global row range ``[start, stop)`` of block ``b``."""
        return int(self._layout.start[b]), int(self._layout.stop[b])

    # -- counters ------------------------------------------------------------------
    @property
    def passes(self) -> float:
        """Rows visited / n_rows over all sweeps (fractional)."""
        return self.rows_visited / self.n_rows if self.n_rows else 0.0

    store_reads = property(lambda self: self._backend.store_reads,
                           doc="Blocks read from the store (cache misses).")
    cache_hits = property(lambda self: self._backend.cache_hits,
                          doc="Blocks served from the cache.")
    bytes_read = property(lambda self: self._backend.bytes_read,
                          doc="Decoded bytes returned by the store.")

    @property
    def mb_read(self) -> float:
        """MB read so far: decoded bytes from the store plus resident rows read back from
        scratch disk."""
        return (self._backend.bytes_read + self.resident_bytes_read) / 1e6
    cache_bytes = property(lambda self: self._backend.cache.nbytes,
                           doc="Bytes of cached blocks.")
    cached_blocks = property(lambda self: len(self._backend.cache), doc="Blocks in the cache.")
    fully_cached = property(lambda self: len(self._backend.cache) == self.n_blocks,
                            doc="Whether every block is cached (sweeps read nothing).")

    @property
    def state_bytes(self) -> int:
        """Bytes of per-row state held in RAM (spilled states not counted)."""
        return sum(s.nbytes for s in self._states.values() if not s.spilled)

    @property
    def inflight_bytes(self) -> int:
        """Decoded bytes held outside the cache while a sweep runs: the blocks being read
        ahead, the current one and the one before it (a solver may keep it, as dcd's
        shuffle buffer does), and what the reader keeps decoded (the inner chunks shared
        by consecutive blocks). Charged to the memory budget."""
        return self._inflight(self.prefetch, self._keep_partial, self._backend.threads,
                              self._backend.helps)

    def _block_bytes(self) -> int:
        """Most decoded bytes of one block (a store's blocks own their arrays; an in-memory
        store's are views of the caller's matrix and cost nothing)."""
        if self.store.zero_copy:
            return 0
        meta = self.store.meta
        # a store that omits ``data`` (all ones) still hands out blocks with their values
        per_entry = np.dtype(meta.get("index_dtype", "int32")).itemsize + \
            np.dtype(meta.get("dtype", "float32")).itemsize
        nnz = int(np.max(self.store.chunk_nnz)) if self.store.n_chunks else 0
        chunk = nnz * per_entry + int(self.store.chunk_rows) * 12
        if bool(np.all(self._layout.whole)):
            return chunk
        rows = int(self._layout.block_rows)
        return -(-chunk * rows // max(1, int(self.store.chunk_rows)))

    def _inflight(self, depth: int, keep: int, readers: int, helps: bool = False) -> int:
        held = int(self.store.held_bytes_for(keep))
        if depth > 0:   # reads in reader threads (and, helping, the consumer's), else in the
            # consumer's
            held += (max(1, min(readers, depth)) - 1 + int(helps)) * reader_bytes(self.store)
        split = not bool(np.all(self._layout.whole))
        if split and not self.store.range_reads:
            # split blocks are cut from decoded chunks, the last few of which are kept
            chunks = self._backend.keep_chunks * self._block_bytes() * \
                max(1, int(self.store.chunk_rows)) // max(1, int(self._layout.block_rows))
            return (depth + 2) * self._block_bytes() + chunks
        return (depth + 2) * self._block_bytes() + held

    def _cache_capacity(self) -> int:
        return self.data_budget - self.state_bytes - self.reserved - self.inflight_bytes

    ALLOCATOR_HEADROOM = 0.25
    """Share of the budget left to the allocator and untracked buffers: blocks of a few MB
    allocated and freed by several threads every pass leave the C heap fragmented.
    Measured with ``/usr/bin/time -v streamsvm train STORE -o m.json --loss hinge --memory
    256MB --max-passes 8`` on the 10^7-row store of ``tools/bench.py --suite dcd``, whose
    runtime floor (imports and compiled kernels, before any data) that tool puts at 187 MB:
    with the data filling 85 %, 80 % and 75 % of the budget the process peaked at 459, 451
    and 429 MB, i.e. 42-50 MB above the data it holds; 25 % (64 MB at this budget) keeps
    the peak within the floor plus the budget."""

    @property
    def data_budget(self) -> int:
        """The bytes states, cached blocks, blocks in flight and reservations may use."""
        return int(self.memory * (1.0 - self.ALLOCATOR_HEADROOM))

    def _run_bytes(self, nbytes: int) -> int:
        """The most bytes a run accumulator of ``nbytes`` (``Accumulator``, not per block)
        holds at once in a :meth:`map_reduce` pass over this store: one array per level of
        the reduction tree over its groups, ``⌈log2 G⌉ + 1`` (``_reduce.py``)."""
        g = max(1, int(self._layout.n_groups))
        return int(nbytes) * ((g - 1).bit_length() + 1)

    def need_bytes(self, need) -> int:
        """The bytes of a declared :class:`~streamsvm.schedule.Need` (or a sequence of them):
        its arrays, and for the sums of a pass every array of its reduction tree."""
        if isinstance(need, (list, tuple)):
            return sum(self.need_bytes(n) for n in need)
        if not isinstance(need, Need):
            raise InvalidParameterError(f"a solver's needs are declared as Need records, "
                                        f"not {type(need).__name__} ({need!r})")
        nbytes = need.nbytes({"block": int(np.max(self._layout.sizes, initial=0))})
        return self._run_bytes(nbytes) if need.per_pass else nbytes

    def check_budget(self, owner: str, needs: dict) -> None:
        """Refuse, before the first pass, a budget too small for what must stay in memory.

        Parameters
        ----------
        owner : str
            Who needs it (a solver's name), for the message.
        needs : dict of str to Need or sequence of Need
            What a solver must hold whatever the budget (its models, their running sums, a
            pass's sums), by what they are (:class:`~streamsvm.schedule.Need`). The
            scheduler turns them into bytes; the blocks in flight are added here: when the
            budget cannot hold ``prefetch`` blocks read ahead, fewer are (down to none), and
            the reader keeps fewer decoded inner chunks. Accepted needs are held: the room
            of resident and hot rows leaves them out.

        Raises
        ------
        InvalidParameterError
            Naming the smallest ``memory`` that holds them all.
        """
        needs = {what: self.need_bytes(n) for what, n in needs.items()}
        fixed = sum(needs.values())
        depth0, readers0 = self._backend.prefetch_asked, self._backend.readers_asked
        # the most decoded inner chunks kept, then the most blocks read ahead, then the most
        # reader threads that fit; the consumer decodes too while it would wait when one
        # more reader's scratch fits besides (schedule/_prefetch.py)
        for keep in (self.KEEP_PARTIAL, 2, 1):
            for depth in range(depth0, -1, -1):
                for readers in range(readers0, 0, -1):
                    for helps in (True, False):
                        if fixed + self._inflight(depth, keep, readers, helps) > \
                                self.data_budget:
                            continue
                        if (depth, keep, readers) != (depth0, self.KEEP_PARTIAL, readers0):
                            logger.info("memory budget %s: reading %d blocks ahead with %d "
                                        "threads (%d and %d asked), keeping %d decoded inner "
                                        "chunks per array", _mb(self.memory), depth, readers,
                                        depth0, readers0, keep)
                        self._set_read_ahead(depth, keep, readers, helps)
                        self._held = fixed
                        return
        needs = dict(needs)
        needs["2 blocks in flight and the inner chunks being decoded"] = self._inflight(0, 1, 1)
        least = int(-(-(fixed + self._inflight(0, 1, 1)) // (1.0 - self.ALLOCATOR_HEADROOM)))
        parts = ", ".join(f"{what} {_mb(v)}" for what, v in needs.items())
        url = self.store.url
        raise InvalidParameterError(
            f"The 'memory' budget ({_mb(self.memory)}) is too small for {owner} on {url!r}: "
            f"it must hold {parts}, and a quarter of the budget stays with the allocator; "
            f"give at least {_mb(least)} (memory={least}).")

    KEEP_PARTIAL = 4
    """Decoded inner chunks the direct reader keeps per array (see ``io._direct``)."""

    def _set_read_ahead(self, depth: int, keep: int, readers: int,
                        helps: bool = False) -> None:
        self._backend.prefetch = depth
        self._backend.readers = readers
        self._backend.helps = helps
        self._keep_partial = keep
        self.store.keep_partial(keep)
        self._backend.cache.resize(self._cache_capacity())

    def reserve(self, nbytes: int) -> None:
        """Reserve ``nbytes`` of the budget for data a solver holds itself (e.g. dcd's RAM
        slab of active rows); cached blocks are dropped until the rest fits. 0 releases."""
        cached = self._backend.cache.nbytes
        self.reserved = max(0, int(nbytes))
        self._backend.cache.resize(self._cache_capacity())
        self._dropped += cached - self._backend.cache.nbytes
        if self._dropped > self.TRIM_AFTER:     # blocks dropped from the cache (_heap doc)
            release_free_heap()
            self._dropped = 0

    TRIM_AFTER = 16 * 2**20
    """Bytes of cached blocks dropped by reservations before the heap is trimmed."""

    def scratch_file(self, name: str) -> str:
        """Path of a new empty file in the scheduler's private scratch directory (under
        ``scratch_dir``), deleted with the directory by :meth:`close` if not before."""
        return self._scratch.file(name)

    def reserve_scratch(self, path: str, nbytes: int, what: str) -> None:
        """Give the scratch file ``path`` its final size ``nbytes``, its blocks reserved.

        Raises
        ------
        OutputNotWritableError
            Naming the scratch directory, ``what``, the bytes needed and free.
        """
        self._scratch.reserve(path, nbytes, what)

    @property
    def scratch_directory(self) -> str:
        """The scratch directory (``scratch_dir``, or the system temporary directory)."""
        return self._scratch.directory

    def poll_interrupt(self) -> None:
        """While setting up (before the first sweep), raise ``KeyboardInterrupt`` if the
        ``interrupt`` callable says the run was asked to stop; afterwards a no-op (a run
        stops between iterations, where it can write a checkpoint)."""
        if self._setting_up and self._interrupt is not None and self._interrupt():
            raise KeyboardInterrupt("interrupted while setting up the run")

    def read_blocks(self, ids) -> Iterator[Block]:
        """Blocks ``ids`` in order, outside any sweep: no sweep started, no row counted as
        visited (the orders and seeds of later sweeps do not change). For a solver that
        restores its own copy of some rows, e.g. after resuming from a checkpoint."""
        ids = [int(b) for b in ids]
        bad = [b for b in ids if not 0 <= b < self.n_blocks]
        if bad:
            raise InvalidParameterError(f"The 'ids' parameter of PassScheduler.read_blocks "
                                        f"must be block ids in [0, {self.n_blocks}). Got "
                                        f"{bad[:5]} instead.")
        return self._backend.iter_blocks(ids)

    def read_all(self) -> Block:
        """The whole store as one block (id -1), read at once and not cached.

        For the resident and hot rows when the whole store fits the budget (they
        :meth:`reserve` its bytes): one bulk read instead of a streamed first pass. Counts
        the bytes read, not rows visited (the sweeps over those rows count their visits).
        """
        return self._backend.read_all()

    # -- sweeps --------------------------------------------------------------------
    def blocks(self, order="sequential", *, active=None) -> Iterator[Block]:
        """Visit blocks one at a time: one sweep.

        Parameters
        ----------
        order : {"sequential", "random", "cyclic"} or sequence of int, default="sequential"
            ``"random"``: a new seeded permutation every sweep. ``"cyclic"``: ascending
            and descending in turn (counting only cyclic sweeps). A sequence: explicit
            block ids, repeats allowed (see :func:`weighted_schedule`).
        active : ndarray of shape (n_blocks,), bool, optional
            Visit only blocks marked True (shrinking); the others are neither read nor
            counted in ``passes``.

        Returns
        -------
        iterator of Block
            Consumed in the calling thread while up to ``prefetch`` next blocks are read
            in the background. The sweep index is taken when ``blocks`` is called.
            Closing the iterator early stops the readers.
        """
        ids, sweep = self._plan(order, active)
        return self._visit(ids, sweep, order)

    def map_reduce(self, kernel: Callable, *, acc: dict | None = None, args: tuple = (),
                   states=(), order="sequential", active=None, rows=None, fuse: bool = False):
        """One pass: ``kernel`` on every visited block, its contributions summed into
        accumulators the scheduler owns.

        Parameters
        ----------
        kernel : callable
            ``kernel(block, views, args, acc)``, a module-level function (a remote backend
            ships it to its workers): ``views`` holds the block's rows of ``states``, in
            order, ``acc`` the accumulator arrays by name, to add into. Fuse as many
            reductions per block as a method needs (loss, gradient and Hessian in one pass).
        acc : dict of str to Accumulator, optional
            What to accumulate (:class:`~streamsvm.schedule.Accumulator`).
        args : tuple
            Read-only arguments handed to every call (e.g. the weights).
        states : sequence of RowState
            Per-row states the kernel reads or updates.
        order, active
            As in :meth:`blocks`.
        rows : ResidentRows, optional
            Count the rows each block keeps for it, and collect them when it planned to
            (:meth:`ResidentRows.plan`), after the kernel (the pass is over the whole store).
        fuse : bool
            On a dask cluster, hand the kernel each worker's blocks as one block (their
            rows concatenated, the states' rows written back after): a kernel that mixes
            rows (coordinate descent in a fresh random order) then mixes all of a worker's
            rows. Run accumulators only. The local backend runs block by block, all
            blocks adding into one set of run arrays (one reduction group).

        Returns
        -------
        Reduced
            The accumulators after the pass by name (run accumulators by reduction group in
            visiting order, the groups combined along a fixed pairwise tree; per-block
            ones folded by (block id, occurrence): see ``_reduce.py``), the same bits on
            every backend and cluster shape (a fused pass excepted); ``visits``: the rows
            the pass visited.
        """
        if not callable(kernel):
            raise InvalidParameterError(f"The 'kernel' parameter of map_reduce must be "
                                        f"callable. Got {kernel!r} instead.")
        v0 = self.rows_visited
        if self.remote:
            res = self._map_reduce_remote(kernel, acc, args, states, order, active, rows, fuse)
        else:
            res = self._map_reduce_local(kernel, acc, args, states, order, active, rows, fuse)
        return Reduced(res, visits=self.rows_visited - v0)

    def _map_reduce_local(self, kernel, acc, args, states, order, active, rows, fuse) -> dict:
        ids, sweep = self._plan(order, active)
        folder = Folder(acc, ids, self._layout.groups, fuse)
        states = tuple(states)
        collector = rows.collector() if rows is not None else None

        def after(block, views):                # the resident rows counted, collected
            rows.after_block(block, collector)
        k0 = self._backend.kernel_seconds
        installed = False
        try:
            with contextlib.closing(self._visit(ids, sweep, order)) as blocks:
                self._backend.map_blocks(kernel, blocks, args=args, folder=folder,
                                         after=after if rows is not None else None,
                                         views=lambda b: tuple(st.view(b) for st in states))
            installed = True
        finally:
            self.kernel_seconds += self._backend.kernel_seconds - k0
            if rows is not None and not installed and collector is not None:
                collector.abandon()
        self._pending_collect = (rows, collector) if rows is not None else None
        return folder.result()

    def _map_reduce_remote(self, kernel, acc, args, states, order, active, rows,
                           fuse=False) -> dict:
        """:meth:`map_reduce` on the dask workers (``_dask.py``): the same kernel, the
        workers' complete subtrees of run arrays merged along the pairwise tree (fused:
        their run arrays added in block order), per-block partials by rank."""
        if rows is not None:
            raise InvalidParameterError("resident rows live in the training process: not on "
                                        "a dask cluster")
        ids, sweep = self._plan(order, active)
        folder = Folder(acc, ids, self._layout.groups, fuse)
        ranks = visit_ranks(ids)
        t0 = time.perf_counter()
        if fuse and any(s.per_block for s in folder.specs.values()):
            raise InvalidParameterError("map_reduce(fuse=True) takes run accumulators only")
        k0 = self._backend.kernel_seconds
        parts = self._backend.map_ids(kernel, ids, ranks, sweep, tuple(states), args,
                                      folder.specs, fuse)
        self.wait_seconds += time.perf_counter() - t0
        self.kernel_seconds += self._backend.kernel_seconds - k0     # (the workers' sum)
        for nodes, run, blocks in parts:
            if fuse:
                folder.add_run(run)
            else:
                folder.add_nodes(nodes)
            for rank in sorted(blocks):
                folder.fold_block(rank, blocks[rank])
        self.rows_visited += int(self._layout.sizes[ids].sum())
        self.blocks_visited += len(ids)
        self._pending_collect = None
        return folder.result()

    def finish_collect(self, install: bool = True) -> None:
        """Install (or drop) the rows the last :meth:`map_reduce` collected for its
        ``rows`` (a solver decides once it has seen the pass's results)."""
        pending, self._pending_collect = self._pending_collect, None
        if pending is not None:
            rows, collector = pending
            rows.finish(collector, install)

    def groups(self, rows, size: int, *, epoch: int, states=()):
        """One sweep over the rows ``rows`` keeps, in groups of ``size`` resident blocks
        (dual coordinate descent's shuffle buffer: a kernel interleaves their rows).

        Over the store, the blocks with kept rows in chunk groups of ``size``, new every
        pass (:func:`~streamsvm.schedule._orders.chunk_groups`, seeded by ``(epoch, 0)``);
        over resident rows on scratch disk, their blocks in a random order (seeded by
        ``(epoch, RESIDENT_STREAM)``). The rows the solver keeps are counted and collected
        after each group, as :meth:`ResidentRows.plan` asked.

        Parameters
        ----------
        rows : ResidentRows
        size : int
            Blocks per group; the last group may hold fewer.
        epoch : int
            The solver's counter that keys the orders and seeds of this sweep.
        states : sequence of RowState
            States whose rows each group carries (views of the store's blocks, gathered
            copies for resident blocks, written back once the group is done).

        Yields
        ------
        Group
            ``blocks``, ``views`` (per block, per state) and ``seed`` (for the kernel's own
            generator: :meth:`block_seed` of the group's first block over the store,
            ``mix64(seed, RESIDENT_STREAM, epoch, position)`` over the disk).
        """
        states = tuple(states)
        size = _check_int("size", size, 1)
        disk = rows.where == "disk"
        if disk:
            ids = np.flatnonzero(rows.disk.block_rows > 0)
            ids = ids[self.rng(epoch, RESIDENT_STREAM).permutation(len(ids))]
            read0 = rows.disk.bytes_read
            blocks = self._visit_resident(ids, rows.disk)
        else:
            ids = chunk_groups(self.block_chunks, np.flatnonzero(rows.block_rows > 0), size,
                               self.rng(epoch, 0))
            blocks = self.blocks(ids)
        collector = rows.collector()
        position, pending, done = 0, [], False
        try:
            for block in self._timed(blocks):
                pending.append(block)
                if len(pending) == size:
                    yield from self._group(rows, pending, states, collector, disk, epoch,
                                           position)
                    pending, position = [], position + 1
            if pending:
                yield from self._group(rows, pending, states, collector, disk, epoch, position)
            done = True
        finally:
            blocks.close()
            if disk:
                rows.disk_bytes_read += rows.disk.bytes_read - read0
                self.resident_bytes_read += rows.disk.bytes_read - read0
            if done:
                rows.finish(collector)
            elif collector is not None:
                collector.abandon()
                rows.collect_to = None

    def sweep(self, fn: Callable, *args, over, order="sequential", group: int | None = None,
              epoch: int = 0, states=(), rows=None, drop=()) -> "Swept":
        """The one way a solver's code meets rows outside :meth:`map_reduce`: the scheduler
        hands them over, runs ``fn``, counts the visits (and ``fn``'s seconds as kernel time),
        and returns what the solver needs to decide (:class:`Swept`).

        Parameters
        ----------
        fn : callable
            What runs on the rows, by ``over``:

            * ``over="store"``: ``fn(block, views, *args)`` for each block in ``order``, in
              this thread and in that order (``views``: the block's rows of ``states``);
              with ``group``, ``fn(Group, *args)`` for each ``group`` consecutive blocks of
              the order;
            * ``over=ResidentRows`` whose rows are in the store or on disk, with ``group``:
              ``fn(Group, *args)`` for each group of its blocks with kept rows (dual
              coordinate descent's shuffle buffer: :meth:`groups`, keyed by ``epoch``);
            * ``over=ResidentRows`` in RAM, or ``HotRows``: ``fn(rows, *args)`` once, with
              the rows it holds (``X``, ``y``, ``ids``, ``local``); it returns the row visits
              it made, or ``(visits, value)``.
        over : "store", ResidentRows or HotRows
        order : as in :meth:`blocks` (``over="store"``)
        group : int, optional
            Blocks per group (the last may hold fewer).
        epoch : int
            Keys the groups' order and seeds (``over=ResidentRows``).
        states : sequence of RowState
            The states whose rows ``fn`` gets (views, or gathered copies for disk rows).
        rows : ResidentRows, optional
            ``over="store"``: count the rows each block keeps for it, and collect them as it
            planned (:meth:`ResidentRows.plan`), after ``fn``.
        drop : sequence of RowState
            ``over="store"``: spilled states whose pages of a block are dropped once it is
            done (:meth:`RowState.drop_pages`: one block's pages resident).

        Returns
        -------
        Swept
            ``visits``: the rows visited (counted in :attr:`passes`); ``value``: what ``fn``
            returned (over rows it holds), or the list of what it returned per block or group.
        """
        v0 = self.rows_visited
        if isinstance(over, str):
            if over != "store":
                raise InvalidParameterError(f"The 'over' parameter of sweep must be 'store', "
                                            f"ResidentRows or HotRows. Got {over!r} instead.")
            values = self._sweep_store(fn, args, order, group, tuple(states), rows, drop)
        elif group is not None:
            values = []
            for g in self.groups(over, group, epoch=epoch, states=states):
                values.append(self._timed_call(fn, g, *args))
        else:
            held = over.ram if isinstance(over, ResidentRows) else over
            if held is None:
                raise InvalidParameterError("sweep(over=rows): the resident rows are not in "
                                            "RAM; sweep them in groups (group=...)")
            out = self._timed_call(fn, held, *args)
            visits, values = (out if isinstance(out, tuple) else (out, None))
            self.rows_visited += int(visits)
        return Swept(self.rows_visited - v0, values)

    def _sweep_store(self, fn, args, order, group, states, rows, drop) -> list:
        collector = rows.collector() if rows is not None else None
        values, pending, done = [], [], False
        blocks = self.blocks(order)
        try:
            for block in self._timed(blocks):
                views = tuple(st.view(block) for st in states)
                if group is None:
                    values.append(self._timed_call(fn, block, views, *args))
                    self._after_block(block, rows, collector, drop)
                    continue
                pending.append(block)
                if len(pending) == group:
                    values.append(self._store_group(fn, args, pending, states, rows,
                                                    collector, drop, len(values)))
                    pending = []
            if pending:
                values.append(self._store_group(fn, args, pending, states, rows, collector,
                                                drop, len(values)))
            done = True
        finally:
            blocks.close()
            if rows is not None:
                if done:
                    rows.finish(collector)
                elif collector is not None:
                    collector.abandon()
        return values

    def _store_group(self, fn, args, blocks, states, rows, collector, drop, position):
        g = Group(tuple(blocks), tuple(tuple(st.view(b) for st in states) for b in blocks),
                  self.block_seed(blocks[0]), position)
        value = self._timed_call(fn, g, *args)
        for b in blocks:
            self._after_block(b, rows, collector, drop)
        return value

    def _after_block(self, block, rows, collector, drop) -> None:
        if rows is not None:
            rows.after_block(block, collector)
        for st in drop:
            st.drop_pages(block)

    def _timed_call(self, fn, *args):
        """``fn(*args)``, its seconds added to :attr:`kernel_seconds`."""
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.kernel_seconds += time.perf_counter() - t0

    def _group(self, rows, blocks, states, collector, disk, epoch, position):
        if disk:
            views = tuple(tuple(st.values[b.ids] for st in states) for b in blocks)
            seed = mix64(self.seed, RESIDENT_STREAM, epoch, position)
        else:
            views = tuple(tuple(st.view(b) for st in states) for b in blocks)
            seed = self.block_seed(blocks[0])
        yield Group(tuple(blocks), views, seed, position)
        k = states.index(rows.key) if rows.key in states else None
        for b, v in zip(blocks, views):
            if disk:
                for st, arr in zip(states, v):
                    st.values[b.ids] = arr
            rows.after_block(b, collector, None if k is None else v[k])

    def _visit_resident(self, ids, source):
        """Blocks of resident rows on scratch disk, read ahead; their rows counted."""
        blocks = self._backend.iter_blocks(ids.tolist(), source=source)
        try:
            for position, block in enumerate(blocks):
                self.rows_visited += block.n_rows
                yield dataclasses.replace(block, position=position)
        finally:
            blocks.close()

    def _timed(self, items):
        """Iterate ``items``, adding the time spent waiting for each to ``wait_seconds``."""
        it = iter(items)
        while True:
            t0 = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                self.wait_seconds += time.perf_counter() - t0
            yield item

    def _row_bytes(self, states, fields) -> int:
        """What a resident row costs beside its CSR entries: its pointer (int64), label
        (4 bytes), global id (int64), its values of ``states`` (local copies) and the
        solver's declared per-row ``fields`` (:class:`~streamsvm.schedule.RowField`)."""
        for f in fields:
            if not isinstance(f, RowField):
                raise InvalidParameterError(f"a resident row's fields are declared as "
                                            f"RowField records, not {f!r}")
        own = sum(st.dtype.itemsize * (st.width or 1) for st in states)
        return 8 + 4 + 8 + own + sum(f.nbytes() for f in fields)

    def resident_rows(self, key, states=(), *, fields=(), **kw):
        """Rows a solver keeps for revisits without a pass over the store
        (:class:`~streamsvm.schedule._resident.ResidentRows`: RAM and disk slabs, charged
        to the budget, their visits counted).

        Parameters
        ----------
        key : RowState
            A row is kept while any of its columns is at least ``threshold`` (default 1).
        states : sequence of RowState
            Copied locally for the RAM slab (and written back when it is left).
        fields : sequence of RowField
            What the solver keeps per resident row besides (the scheduler counts the rows'
            CSR entries, labels, ids and state copies itself): with the needs
            :meth:`check_budget` accepted, what sizes the RAM slab.
        **kw
            ``ram``, ``disk``, ``disk_fraction``, ``threshold`` of
            :class:`~streamsvm.schedule._resident.ResidentRows`.
        """
        if self.remote:
            raise InvalidParameterError("resident rows live in the training process: not on "
                                        "a dask cluster")
        return ResidentRows(self, key, states, extra_row_bytes=self._row_bytes(states, fields),
                            fixed_bytes=self._held, **kw)

    def hot_rows(self, states, flag, *, fields=(), max_rows: int):
        """Rows a solver visits beside the sweeps, copied to RAM as their blocks go by
        (:class:`~streamsvm.schedule._hot.HotRows`: AVSF's hot cache, charged to the budget).

        Parameters
        ----------
        states : sequence of RowState
            Held locally while a row is hot (written back when it leaves).
        flag : RowState
            uint8, 1 while a row is hot.
        fields : sequence of RowField
            What the solver keeps per hot row besides (as :meth:`resident_rows`).
        max_rows : int
            Most rows held; fewer when the budget left by the states, the blocks in flight
            and the needs :meth:`check_budget` accepted holds fewer.
        """
        if self.remote:
            raise InvalidParameterError("hot rows live in the training process: not on a "
                                        "dask cluster")
        from ._hot import HotRows
        room = self.data_budget - self.state_bytes - self.inflight_bytes - self._held
        return HotRows(self, states, flag, max_rows=max_rows, room=room,
                       extra_row_bytes=self._row_bytes(states, fields))

    def _plan(self, order, active) -> tuple[np.ndarray, int]:
        self._setting_up = False
        ids = sweep_order(order, self.n_blocks, self.seed, self.sweeps, self.cyclic_sweeps)
        if active is not None:
            mask = np.asarray(active)
            if mask.shape != (self.n_blocks,) or mask.dtype != np.bool_:
                raise InvalidParameterError(
                    f"The 'active' parameter must be a boolean array of shape "
                    f"({self.n_blocks},). Got shape {mask.shape} and dtype {mask.dtype} instead.")
            ids = ids[mask[ids]]
        sweep = self.sweeps
        self.sweeps += 1
        if isinstance(order, str) and order == "cyclic":
            self.cyclic_sweeps += 1
        return ids, sweep

    def _visit(self, ids: np.ndarray, sweep: int, order) -> Iterator[Block]:
        backend = self._backend
        start = (time.perf_counter(), backend.store_reads, backend.cache_hits,
                 backend.bytes_read, self.rows_visited)
        ranks = visit_ranks(ids)
        blocks = backend.iter_blocks(ids.tolist())
        try:
            for position, block in enumerate(blocks):
                self.rows_visited += block.n_rows
                self.blocks_visited += 1
                yield dataclasses.replace(block, sweep=sweep, position=position,
                                          rank=int(ranks[position]))
        finally:
            blocks.close()
            release_free_heap()     # the sweep's freed blocks back to the system (_heap doc)
            t0, reads0, hits0, bytes0, rows0 = start
            logger.debug("sweep %d (%s): %d rows, %d store reads (%.1f MB), %d cache hits, "
                         "%.3f s, passes %.3f", sweep, order if isinstance(order, str)
                         else "explicit", self.rows_visited - rows0, backend.store_reads - reads0,
                         (backend.bytes_read - bytes0) / 1e6, backend.cache_hits - hits0,
                         time.perf_counter() - t0, self.passes)

    # -- values derived from the data ----------------------------------------------------
    def derived(self, name: str, *, with_array: bool = False):
        """A value an earlier run derived from the store's data and kept with the store
        (:func:`~streamsvm.io.read_derived`: ``nesvm``'s Lipschitz constant), or None; with
        ``with_array``, ``(value, array)``."""
        return read_derived(self.store, name, with_array=with_array)

    def keep_derived(self, name: str, value: dict, array=None) -> bool:
        """Keep a value derived from the store's data (a JSON-able dict, optionally one
        float64 array) with the store, for later runs (:func:`~streamsvm.io.write_derived`);
        False when the store cannot be written or is in memory. A solver never writes into
        a store itself."""
        return write_derived(self.store, name, value, array=array)

    # -- randomness ----------------------------------------------------------------
    def block_rng(self, block: Block) -> np.random.Generator:
        """A generator for randomness inside one visited block (e.g. a row permutation).

        Seeded by ``(seed, sweep, position)`` of the visit, so it differs between visits of
        the same block and is reproduced exactly on resume.
        """
        if getattr(block, "sweep", -1) < 0 or getattr(block, "position", -1) < 0:
            raise InvalidParameterError(
                "block_rng needs a block yielded by blocks() or map_reduce()")
        return np.random.default_rng([self.seed, ROW_STREAM, block.sweep, block.position])

    def block_seed(self, block: Block) -> int:
        """A 64-bit seed for a kernel's own generator inside one visited block.

        The same ``(seed, sweep, position)`` key as :meth:`block_rng`, mixed with SplitMix64:
        1.4 µs against 9.6 µs to build a numpy Generator (``python -m timeit`` on each, this
        machine), and the kernel then shuffles in compiled code. For ``kernels._rng``.
        """
        if getattr(block, "sweep", -1) < 0 or getattr(block, "position", -1) < 0:
            raise InvalidParameterError(
                "block_seed needs a block yielded by blocks() or map_reduce()")
        return mix64(self.seed, ROW_STREAM, block.sweep, block.position)

    def rng(self, *keys: int) -> np.random.Generator:
        """A generator seeded by ``(seed, *keys)``, for a solver's own draws.

        For example ``weighted_schedule(p, n, sched.rng(epoch))``; stateless, so the same
        keys give the same draws after a resume.
        """
        keys = tuple(_check_int("keys", k, 0) for k in keys)
        return np.random.default_rng([self.seed, USER_STREAM, *keys])

    # -- per-row state -------------------------------------------------------------
    @property
    def states(self) -> dict[str, RowState]:
        """Every per-row state by name (a new dict; for checkpoints)."""
        return dict(self._states)

    def state(self, name: str, dtype, width: int | None = None, fill=0) -> RowState:
        """Create a per-row state array aligned with the blocks.

        Parameters
        ----------
        name : str
            Unique name (the key in :attr:`states` and in checkpoints).
        dtype : dtype
            Boolean, integer or floating.
        width : int, optional
            Values per row (e.g. k - 1 for Weston–Watkins); None for one value, shape (n_rows,).
        fill : scalar, default=0
            Initial value.

        Returns
        -------
        RowState
            In RAM if it fits the budget left by the other states (cached blocks are
            dropped to make room), otherwise a memmap file in ``scratch_dir``, its blocks
            reserved before use.

        Raises
        ------
        OutputNotWritableError
            A state that does not fit the budget nor the scratch directory's free space
            (naming the directory, the bytes needed and free), before anything is allocated.
        """
        if not isinstance(name, str) or not name or name in self._states:
            raise InvalidParameterError(
                f"The 'name' parameter of PassScheduler.state must be a new non-empty string; "
                f"existing states: {sorted(self._states)}. Got {name!r} instead.")
        try:
            dtype = np.dtype(dtype)
        except TypeError as exc:
            raise InvalidParameterError(f"state {name!r}: invalid dtype {dtype!r}") from exc
        if dtype.kind not in "biuf":
            raise InvalidParameterError(
                f"state {name!r}: dtype must be boolean, integer or floating. Got {dtype}.")
        if width is not None:
            width = _check_int("width", width, 1)
        shape = (self.n_rows,) if width is None else (self.n_rows, width)
        nbytes = math.prod(shape) * dtype.itemsize      # Python ints: no overflow
        if self.remote:
            st = RemoteRowState(name, shape, dtype, fill, self._backend)
            self._states[name] = st
            return st
        self.poll_interrupt()
        if nbytes == 0 or self.state_bytes + nbytes <= self.data_budget:
            st = RowState(name, shape, dtype, fill, poll=self._poll)
        else:
            # the file's blocks reserved before it is mapped, or the state refused with the
            # numbers, before a byte is written (_state.py)
            row = dtype.itemsize * (width or 1)
            path = self._scratch.new_file(name, nbytes, f"per-row state {name!r} "
                                          f"({self.n_rows:,} rows of {row} B)")
            try:
                st = RowState(name, shape, dtype, fill, path=path, poll=self._poll)
            except BaseException:
                self._scratch.discard(path)
                raise
            logger.info("state %r (%.1f MB) does not fit the memory budget (%.1f MB, %.1f MB "
                        "used by states): spilled to %s", name, nbytes / 1e6, self.memory / 1e6,
                        self.state_bytes / 1e6, st.path)
        self._states[name] = st
        self._backend.cache.resize(self._cache_capacity())
        return st

    def free_state(self, name: str) -> None:
        """Delete a state, returning its memory to the block cache."""
        if name not in self._states:
            raise InvalidParameterError(f"no state named {name!r}; states: {sorted(self._states)}")
        self._states.pop(name)._release()
        self._backend.cache.resize(self._cache_capacity())

    # -- resumable state -----------------------------------------------------------
    def state_dict(self) -> dict:
        """The scheduler's own resumable state, JSON-serializable.

        Holds the seed, the sweep counters (which fix every future order) and the pass
        counters, plus the layout to check on load. Per-row states are saved separately
        (:attr:`states`, ``RowState.to_array``); I/O counters start afresh in a new process.
        """
        return {
            "version": _STATE_DICT_VERSION,
            "seed": self.seed,
            "sweep": self.sweeps,
            "cyclic_sweeps": self.cyclic_sweeps,
            "rows_visited": self.rows_visited,
            "blocks_visited": self.blocks_visited,
            "n_rows": self.n_rows,
            "n_blocks": self.n_blocks,
            "block_rows": self.block_rows,
        }

    def load_state_dict(self, d: dict) -> None:
        """Restore :meth:`state_dict` output, so the next sweeps repeat the saved run's.

        Raises
        ------
        CheckpointError
            Missing keys, or a different store layout (rows, blocks, block_rows).
        """
        keys = ("version", "seed", "sweep", "cyclic_sweeps", "rows_visited", "blocks_visited",
                "n_rows", "n_blocks", "block_rows")
        missing = [k for k in keys if k not in d]
        if missing:
            raise CheckpointError(f"scheduler state lacks {', '.join(missing)}")
        if d["version"] != _STATE_DICT_VERSION:
            raise CheckpointError(f"scheduler state version {d['version']!r}; this streamsvm "
                                  f"reads version {_STATE_DICT_VERSION}")
        for key in ("n_rows", "n_blocks", "block_rows"):
            if d[key] != getattr(self, key):
                raise CheckpointError(f"scheduler state was saved with {key}={d[key]!r}; this "
                                      f"scheduler has {key}={getattr(self, key)!r}")
        if int(d["seed"]) != self.seed:
            logger.info("resuming with the saved seed %d (scheduler was created with %d)",
                        int(d["seed"]), self.seed)
        self.seed = int(d["seed"])
        self.sweeps = int(d["sweep"])
        self.cyclic_sweeps = int(d["cyclic_sweeps"])
        self.rows_visited = int(d["rows_visited"])
        self.blocks_visited = int(d["blocks_visited"])

    # -- lifetime ------------------------------------------------------------------
    def close(self) -> None:
        """Free every state (deleting spilled files) and empty the cache."""
        for st in self._states.values():
            st._release()
        self._states.clear()
        self._scratch.remove()
        self._backend.cache.clear()
        if self.remote:
            self._backend.close()

    def __enter__(self) -> "PassScheduler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
