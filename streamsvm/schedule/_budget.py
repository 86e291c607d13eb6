"""The memory budget (DESIGN.md §4): every byte a run holds, computed in one place.

:class:`Budget` is the part of :class:`~streamsvm.schedule.PassScheduler` that turns what a
solver declares (:class:`~streamsvm.schedule.Need` for its models and a pass's sums,
:class:`~streamsvm.schedule.RowField` for what it keeps per resident row) into bytes,
refuses a budget too small before the first pass, sizes the blocks read ahead and the block
cache in what is left, and gives the resident and hot rows their room. Solvers never do
this arithmetic (``tests/test_layout.py``).

What is charged, of ``memory × (1 − ALLOCATOR_HEADROOM)``: the per-row states in RAM, the
needs :meth:`Budget.check_budget` accepted, the blocks in flight and what the reader keeps
decoded, the bytes reserved by resident or hot rows; the cache takes the rest.
"""

from __future__ import annotations

import logging

import numpy as np

from ..exceptions import BudgetTooSmallError, InvalidParameterError
from ._checks import mb
from ._heap import release_free_heap
from ._local import reader_bytes
from ._needs import Need, RowField
from ._resident import ResidentRows

__all__ = ["Budget"]

logger = logging.getLogger(__name__)


class Budget:
    """The memory budget of a :class:`~streamsvm.schedule.PassScheduler` (module doc).

    A mixin: it reads the scheduler's ``store``, ``memory``, ``_layout``, ``_backend`` and
    ``_states``, and keeps ``reserved``, ``_held``, ``_dropped`` and ``_keep_partial``.
    """

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
        """What the block cache may hold: the budget less the states in RAM, the needs
        :meth:`check_budget` accepted, the reservations and the blocks in flight."""
        return self.data_budget - self.state_bytes - self._held - self.reserved - \
            self.inflight_bytes

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
        BudgetTooSmallError
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
                                        "chunks per array", mb(self.memory), depth, readers,
                                        depth0, readers0, keep)
                        self._held = fixed
                        self._set_read_ahead(depth, keep, readers, helps)
                        return
        needs = dict(needs)
        needs["2 blocks in flight and the inner chunks being decoded"] = self._inflight(0, 1, 1)
        least = int(-(-(fixed + self._inflight(0, 1, 1)) // (1.0 - self.ALLOCATOR_HEADROOM)))
        parts = ", ".join(f"{what} {mb(v)}" for what, v in needs.items())
        url = self.store.url
        raise BudgetTooSmallError(
            f"The 'memory' budget ({mb(self.memory)}) is too small for {owner} on {url!r}: "
            f"it must hold {parts}, and a quarter of the budget stays with the allocator; "
            f"give at least {mb(least)} (memory={least}).")

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

    @staticmethod
    def rows_fit(store, memory, share: float) -> bool:
        """Before any scheduler exists: whether the store's rows as a RAM slab keeps them
        (entries, and a pointer, label and id a row) take at most ``share`` of the data
        budget of a run with ``memory`` (``--solver auto``: in memory or streamed)."""
        from ._memory import parse_memory
        entry = store.dtype.itemsize + np.dtype(store.meta["index_dtype"]).itemsize
        need = store.nnz * entry + store.n_rows * (8 + 4 + 8)
        return need <= share * parse_memory(memory) * (1.0 - Budget.ALLOCATOR_HEADROOM)

    def store_fits_ram(self, fields=(), share: float = 1.0) -> bool:
        """Whether every row of the store, with ``fields`` per row (the solver's states
        and work arrays, as :class:`~streamsvm.schedule.RowField` records) beside its
        entries, label and id, fits ``share`` of the room a RAM slab of resident rows has
        now (never on a dask cluster): a solver's choice to keep the whole store in RAM
        (newton sums its Hessians from the rows there)."""
        if self.remote:
            return False
        store = self.store
        entry = store.dtype.itemsize + np.dtype(store.meta["index_dtype"]).itemsize
        need = store.nnz * entry + store.n_rows * self._row_bytes((), fields)
        room = self.data_budget - self.state_bytes - self.inflight_bytes - self._held
        return need <= share * room

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
            :class:`~streamsvm.schedule._resident.ResidentRows` (on a dask cluster a RAM
            slab only: ``disk=False``).
        """
        if self.remote and kw.get("disk", True):
            raise InvalidParameterError("resident rows on a dask cluster: a RAM slab in the "
                                        "training process only (disk=False), its rows sent "
                                        "by the workers at the end of a pass")
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
