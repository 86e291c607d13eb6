"""The backend interface: how blocks reach kernels (DESIGN.md §4).

The :class:`~streamsvm.schedule.PassScheduler` decides *what* a pass visits — the order of
blocks, the rows kept resident, the accumulators and how they fold, the pass count — and a
:class:`Backend` decides *where and how* each block is read and its kernel run. The local
backend (``_local.py``) reads blocks ahead on threads of this process and runs kernels in
the calling thread. A ``dask.distributed`` backend is a second implementation of the same
two methods: it maps block ids to the workers that own them (they read the store
themselves and keep their blocks' per-row state), runs the same module-level kernel there,
and returns each worker's accumulators, which the scheduler folds in a fixed order.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator

__all__ = ["Backend"]


class Backend(abc.ABC):
    """Reads blocks and runs kernels on them.

    Attributes
    ----------
    store_reads, cache_hits, bytes_read : int
        Blocks read from the store, blocks served from a cache, decoded bytes read.
    kernel_seconds : float
        Seconds spent inside kernels run by :meth:`map_blocks`.
    """

    store_reads: int
    cache_hits: int
    bytes_read: int
    kernel_seconds: float

    remote = False
    """Whether kernels run in other processes (a dask cluster's workers): then blocks never
    reach this one, and only map/reduce passes run."""

    workers: tuple | list = ()
    """The processes that own blocks, in order (none for a backend of this process)."""

    partitions = 1
    """How many of :attr:`workers` own blocks (1 for a backend of this process)."""

    @abc.abstractmethod
    def iter_blocks(self, ids: Iterable[int], source=None) -> Iterator:
        """Yield the blocks ``ids`` in order, to the calling process (sequential methods
        such as dual coordinate descent consume them there).

        ``source``: where the blocks come from — the store (None) or resident rows on
        scratch disk (an object with ``read_block(i)``).
        """

    @abc.abstractmethod
    def map_blocks(self, kernel: Callable, blocks: Iterator, *, views: Callable, args: tuple,
                   folder, after: Callable | None = None) -> None:
        """Run ``kernel(block, views(block), args, acc)`` on every block and fold the
        accumulators (``folder``: :class:`~streamsvm.schedule._reduce.Folder`).

        ``kernel`` must be a module-level function (a remote backend ships it to its
        workers); ``views(block)`` gives the block's per-row states; ``after(block, views)``
        runs once the kernel is done with the block (the scheduler counts and collects
        the rows it keeps resident).
        """

    @abc.abstractmethod
    def read_all(self):
        """Every row of the store as one block, read at once."""
