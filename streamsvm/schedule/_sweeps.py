"""Sweeps (DESIGN.md §4): the one way a solver's code meets rows.

:class:`Sweeps` is the part of :class:`~streamsvm.schedule.PassScheduler` that plans a
sweep's order (seeded by the sweep counters, so a resumed run repeats it), hands the blocks
over (:meth:`~Sweeps.blocks`), runs a kernel into accumulators it owns
(:meth:`~Sweeps.map_reduce`), or runs a solver's function over the store, groups of
resident blocks or rows held in RAM (:meth:`~Sweeps.sweep`), and counts every row visited.
What a sweep returns (:class:`Reduced`, :class:`Swept`) is what a solver schedules its
exact checks by.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator

import numpy as np

from ..exceptions import InvalidParameterError
from ._blocks import Block
from ._checks import check_int
from ._heap import release_free_heap
from ._orders import RESIDENT_STREAM, mix64, sweep_order, visit_ranks
from ._reduce import Folder
from ._resident import ResidentRows
from ._rows_reduce import map_reduce_rows
from ._state import flagged_rows

__all__ = ["Sweeps", "Group", "Reduced", "Swept"]

logger = logging.getLogger(__name__)


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


class Sweeps:
    """The sweep engine of a :class:`~streamsvm.schedule.PassScheduler` (module doc).

    A mixin: it reads the scheduler's ``seed``, ``_layout`` and ``_backend``, and keeps the
    counters ``sweeps``, ``cyclic_sweeps``, ``rows_visited``, ``blocks_visited``,
    ``kernel_seconds``, ``wait_seconds`` and ``resident_bytes_read``.
    """

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
                   states=(), order="sequential", active=None, rows=None, fuse: bool = False,
                   visits=None):
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
            On a dask cluster, hand the kernel each worker's blocks as one block (rows in
            ascending block order, kept for the next fused pass while they fit; the
            states' rows written back after): a kernel that mixes rows (coordinate descent
            in a fresh random order) then mixes all of a worker's rows. Run accumulators
            only. The local backend runs block by block into one set of run arrays.

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
            res = self._map_reduce_remote(kernel, acc, args, states, order, active, rows, fuse,
                                          visits)
        else:
            res = self._map_reduce_local(kernel, acc, args, states, order, active, rows, fuse,
                                         visits)
        return Reduced(res, visits=self.rows_visited - v0)

    def map_reduce_rows(self, kernel: Callable, *, acc: dict, args: tuple = (), rows) -> dict:
        """:meth:`map_reduce`'s reduction over the RAM slab of ``rows`` holding every row
        of the store: the same bits as a sequential pass, not a pass (``_rows_reduce.py``)."""
        return map_reduce_rows(self, kernel, acc, args, rows)

    def _map_reduce_local(self, kernel, acc, args, states, order, active, rows, fuse,
                          visits=None) -> dict:
        ids, sweep = self._plan(order, active)
        skipped = {}                # per block: the rows the kernel will skip
        if visits is not None:
            lay, flags = self._layout, visits.values
            skipped = {b: int(lay.sizes[b]) - flagged_rows(flags[lay.start[b]:lay.stop[b]])
                       for b in ids.tolist()}
        folder = Folder(acc, ids, self._layout.groups, fuse)
        states = tuple(states)
        collector = rows.collector() if rows is not None else None
        spilled = _spilled(states)

        def after(block, views):                # the resident rows counted, collected
            if rows is not None:
                rows.after_block(block, collector)
            for st in spilled:                  # one block's pages of a spilled state mapped
                st.drop_pages(block)
        k0 = self._backend.kernel_seconds
        installed = False
        try:
            with contextlib.closing(self._visit(ids, sweep, order)) as blocks:
                self._backend.map_blocks(kernel, blocks, args=args, folder=folder,
                                         after=after if rows is not None or spilled
                                         else None,
                                         views=lambda b: tuple(st.view(b) for st in states))
            installed = True
        finally:
            self.kernel_seconds += self._backend.kernel_seconds - k0
            if rows is not None and not installed and collector is not None:
                collector.abandon()
        self._pending_collect = (rows, collector) if rows is not None else None
        cache = self._backend.cache                 # blocks kept in memory: only the visits
        self.rows_visited -= sum(n for b, n in skipped.items() if b in cache)
        return folder.result()

    def _map_reduce_remote(self, kernel, acc, args, states, order, active, rows,
                           fuse=False, visits=None) -> dict:
        """:meth:`map_reduce` on the dask workers (``_dask.py``): the same kernel, the
        workers' complete subtrees of run arrays merged along the pairwise tree (fused:
        their run arrays added in block order), per-block partials by rank; ``rows``: the
        blocks' kept rows counted by the workers, and sent to a RAM slab collected here."""
        if rows is not None and (fuse or rows.collect_to == "disk"):
            raise InvalidParameterError("resident rows on a dask cluster: a RAM slab in the "
                                        "training process, from an unfused pass")
        ids, sweep = self._plan(order, active)
        folder = Folder(acc, ids, self._layout.groups, fuse)
        ranks = visit_ranks(ids)
        t0 = time.perf_counter()
        if fuse and any(s.per_block for s in folder.specs.values()):
            raise InvalidParameterError("map_reduce(fuse=True) takes run accumulators only")
        k0 = self._backend.kernel_seconds
        collector = rows.collector() if rows is not None else None
        keep = None if rows is None else rows.remote_keep(collector)
        parts, visited, (kept, over) = self._backend.map_ids(
            kernel, ids, ranks, sweep, tuple(states), args, folder.specs, fuse,
            None if visits is None else visits.name, keep)
        self.wait_seconds += time.perf_counter() - t0
        self.kernel_seconds += self._backend.kernel_seconds - k0     # (the workers' sum)
        for nodes, run, blocks in parts:
            if fuse:
                folder.add_run(run)
            else:
                folder.add_nodes(nodes)
            for rank in sorted(blocks):
                folder.fold_block(rank, blocks[rank])
        self.rows_visited += visited
        self.blocks_visited += len(ids)
        if rows is not None:                    # in visiting order, as a local pass
            if over and collector is not None:  # (a worker's share over the room)
                collector.abandon()
            for position in sorted(kept):
                rows.after_remote_block(*kept[position], collector)
        self._pending_collect = (rows, collector) if rows is not None else None
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
        pass (:meth:`chunk_order`, seeded by ``(epoch, 0)``);
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
        size = check_int("size", size, 1)
        disk = rows.where == "disk"
        if disk:
            ids = np.flatnonzero(rows.disk.block_rows > 0)
            ids = ids[self.rng(epoch, RESIDENT_STREAM).permutation(len(ids))]
            read0 = rows.disk.bytes_read
            blocks = self._visit_resident(ids, rows.disk)
        else:
            ids = self.chunk_order(np.flatnonzero(rows.block_rows > 0), size, epoch)
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
            ``over="store"``: spilled states beside ``states`` whose pages of a block are
            dropped once it is done (:meth:`RowState.drop_pages`: one block's pages
            resident); those of ``states`` always are.

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
            drop = tuple(drop) + tuple(st for st in _spilled(states) if st not in drop)
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
                    st.drop_rows(0, st.shape[0])    # the ids are scattered: all its pages
            rows.after_block(b, collector, None if k is None else v[k])
            if not disk:                # one block's pages of a spilled state mapped
                for st in _spilled(states):
                    st.drop_pages(b)

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


def _spilled(states) -> tuple:
    """The spilled ones of ``states``: once a block is done, the scheduler unmaps their pages
    of its rows (:meth:`RowState.drop_pages`), so a sweep holds one block's pages of a state
    that did not fit the budget, not the whole file's (they would count in the process's
    resident memory)."""
    return tuple(st for st in states if st.spilled)
