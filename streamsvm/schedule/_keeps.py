"""What the scheduler keeps for a solver besides the data (DESIGN.md §4–§5).

:class:`Keeps` is the part of :class:`~streamsvm.schedule.PassScheduler` that holds the
per-row states (in RAM while they fit the budget, else spilled to reserved scratch files),
the scratch directory, the seeded generators (stateless: keyed by the sweep, the block's
place in it or the solver's own counters, so a resumed run draws the same), the values
derived from the data kept with the store, and the scheduler's own resumable counters
(:meth:`~Keeps.state_dict`).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from ..exceptions import CheckpointError, InvalidParameterError
from ..io import read_derived, write_derived
from ._blocks import Block
from ._checks import check_int
from ._orders import ROW_STREAM, USER_STREAM, mix64
from ._state import RemoteRowState, RowState

__all__ = ["Keeps"]

logger = logging.getLogger(__name__)

_STATE_DICT_VERSION = 1


class Keeps:
    """Per-row states, scratch files, randomness, derived values and resumable counters of
    a :class:`~streamsvm.schedule.PassScheduler` (module doc).

    A mixin: it reads the scheduler's ``store``, ``seed``, ``_backend``, ``_scratch`` and
    ``_poll``, and keeps ``_states``.
    """

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
        keys = tuple(check_int("keys", k, 0) for k in keys)
        return np.random.default_rng([self.seed, USER_STREAM, *keys])

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
            width = check_int("width", width, 1)
        shape = (self.n_rows,) if width is None else (self.n_rows, width)
        nbytes = math.prod(shape) * dtype.itemsize      # Python ints: no overflow
        if self.remote:
            st = RemoteRowState(name, shape, dtype, fill, self._backend)
            self._states[name] = st
            return st
        self.poll_interrupt()
        # the needs check_budget accepted are held whatever the budget: a state that does
        # not fit beside them is spilled (an alm.lam of 5 models × 3·10^6 rows, 120 MB, beside
        # its 124 MB of a pass's sums at 200MB peaked at 640 MB)
        if nbytes == 0 or self.state_bytes + self._held + nbytes <= self.data_budget:
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
