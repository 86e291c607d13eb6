"""Accumulators the scheduler owns for :meth:`PassScheduler.map_reduce`, and the fixed
order in which their partials combine.

A kernel adds its block's contribution into accumulator arrays it is handed; it never
allocates them. Two kinds:

* **run** accumulators (``per_block=False``, the default): one array per *reduction group*
  (below), set to the operation's identity when the pass first visits the group, into which
  every block of the group adds in visiting order — a d-vector gradient or a d×k matrix
  costs a few arrays per pass, not one per block;
* **per-block** accumulators (``per_block=True``): set to the identity before each block and
  folded into the total by rank — (block id, occurrence) order, see
  :func:`~streamsvm.schedule._orders.visit_ranks` — so their floating-point result is the
  same for every visiting order (small arrays: scalars, per-class statistics).

**Reduction groups.** The blocks are cut into at most :data:`N_GROUPS` runs of consecutive
blocks of about equal rows (:func:`reduction_groups`, a function of the store and its block
layout alone); fewer when the store is small next to its width (:func:`group_count`: each
group holds at least ``GROUP_NNZ·(n_features + 1)`` non-zeros, so that its own run arrays —
zeroed, then added up, O(d) each — cost little next to its rows). A
group's run arrays are complete once the pass has visited all of its blocks; the groups'
arrays then combine pairwise along one fixed binary tree over the group ids
(:class:`PairwiseTree`: node ``(level, j)`` covers groups ``[j·2^level, (j+1)·2^level)``, its
value is its left child's ⊕ its right child's, a subtree without visits is skipped). A dask
cluster owns whole groups, worker by worker in contiguous ranges; each worker folds the
complete subtrees of its range and the client completes the tree. Every backend and every
cluster shape so computes the same floating-point operations in the same order: a map/reduce
pass gives bit-identical results locally and on any number of workers. In a sequential pass
at most ``log2(N_GROUPS) + 1`` arrays of a run accumulator are alive at once.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

from ..exceptions import InvalidParameterError

__all__ = ["Accumulator", "Folder", "GroupRuns", "PairwiseTree", "group_count",
           "reduction_groups"]

N_GROUPS = 32              # reduction groups per layout (and so: most useful dask workers)
GROUP_NNZ = 8              # ... each holding at least this many non-zeros per feature

_IDENTITY = {"sum": 0.0, "max": -np.inf, "min": np.inf}


@dataclasses.dataclass(frozen=True)
class Accumulator:
    """What a reduction accumulates.

    Parameters
    ----------
    shape : int or tuple of int
    op : {"sum", "max", "min"} or callable, default="sum"
        How partials combine; a callable ``op(total, partial)`` updates ``total`` in place
        (then ``init`` gives its identity).
    dtype : dtype, default=float64
    per_block : bool, default=False
        Start from the identity at every block and fold by rank (module doc).
    init : array-like, optional
        The identity, when ``op`` is a callable (e.g. per-column identities).
    """

    shape: tuple
    op: str | Callable = "sum"
    dtype: str = "float64"
    per_block: bool = False
    init: object = None

    def __post_init__(self):
        shape = (self.shape,) if isinstance(self.shape, (int, np.integer)) else tuple(self.shape)
        object.__setattr__(self, "shape", shape)
        if not callable(self.op) and self.op not in _IDENTITY:
            raise InvalidParameterError(f"The 'op' parameter of Accumulator must be 'sum', "
                                        f"'max', 'min' or a callable. Got {self.op!r} instead.")
        if callable(self.op) and self.init is None:
            raise InvalidParameterError("an Accumulator with a callable 'op' needs 'init'")

    def new(self) -> np.ndarray:
        """A fresh array at the identity."""
        if self.init is not None:
            return np.array(np.broadcast_to(np.asarray(self.init, dtype=self.dtype),
                                            self.shape))
        return np.full(self.shape, _IDENTITY[self.op], dtype=self.dtype)

    def fold(self, total: np.ndarray, part: np.ndarray) -> None:
        """``total ⊕= part`` in place."""
        if callable(self.op):
            self.op(total, part)
        elif self.op == "sum":
            np.add(total, part, out=total)
        elif self.op == "max":
            np.maximum(total, part, out=total)
        else:
            np.minimum(total, part, out=total)


def group_count(nnz: int, n_features: int, n_blocks: int) -> int:
    """How many reduction groups a store gets (module doc): at most :data:`N_GROUPS` and its
    blocks, each with ``GROUP_NNZ·(n_features + 1)`` non-zeros on average; at least 1."""
    return int(max(1, min(N_GROUPS, n_blocks, int(nnz) // (GROUP_NNZ * (int(n_features) + 1)))))


def reduction_groups(sizes, n_groups: int = N_GROUPS) -> np.ndarray:
    """Group of each block: at most ``n_groups`` runs of consecutive blocks of about equal
    rows (every group non-empty, numbered from 0 in block order)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    n = len(sizes)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    g = min(int(n_groups), n)
    total = float(sizes.sum())
    if total <= 0:
        raw = (np.arange(n) * g) // n
    else:
        mid = np.cumsum(sizes) - 0.5 * sizes
        raw = np.minimum((mid / total * g).astype(np.int64), g - 1)
    # renumber so that groups are 0..G-1 without gaps (empty blocks can skip a group)
    return np.concatenate(([0], np.cumsum(np.diff(raw) > 0))).astype(np.int64)


class PairwiseTree:
    """The fixed pairwise fold of per-group partials (module doc).

    Parameters
    ----------
    present : ndarray of bool, shape (n_groups,)
        Groups the pass visits (the others are skipped).
    fold : callable
        ``fold(left, right)``: left ⊕= right in place (dicts of arrays).
    """

    def __init__(self, present, fold):
        present = np.asarray(present, dtype=bool)
        self.levels = max(0, int(np.ceil(np.log2(max(len(present), 1)))))
        need = np.zeros(1 << self.levels, dtype=np.int64)
        need[:len(present)] = present
        self.need = [need]
        for _ in range(self.levels):
            need = need[0::2] + need[1::2]
            self.need.append(need)
        self.have = [np.zeros_like(n) for n in self.need]
        self.fold = fold
        self.nodes: dict = {}

    def add(self, level: int, j: int, value) -> None:
        """Node ``(level, j)`` is complete with ``value``; merge every ancestor it completes."""
        count = int(self.need[level][j])
        if count == 0 or (level, j) in self.nodes:
            raise ValueError(f"reduction tree: node {(level, j)} added twice or unvisited")
        for up in range(level, self.levels + 1):
            self.have[up][j >> (up - level)] += count
        self.nodes[(level, j)] = value
        while level < self.levels:
            p = j >> 1
            if self.have[level + 1][p] != self.need[level + 1][p]:
                break
            left = self.nodes.pop((level, 2 * p), None)
            right = self.nodes.pop((level, 2 * p + 1), None)
            if left is None:
                left = right
            elif right is not None:
                self.fold(left, right)
            self.nodes[(level + 1, p)] = left
            level, j = level + 1, p

    def result(self):
        """The root's value (None when the pass visited nothing)."""
        return self.nodes.get((self.levels, 0))


def _fold_specs(specs: dict, left: dict, right: dict) -> None:
    for k, v in right.items():
        specs[k].fold(left[k], v)


class GroupRuns:
    """The run accumulators of one pass, or of one worker's share of it: one array set per
    open group, each group handed to the :class:`PairwiseTree` when its last visit is done.

    Parameters
    ----------
    specs : dict of str to Accumulator
        The run accumulators (``per_block=False``).
    ids : ndarray of int
        The whole pass's visits (block ids), also on a worker that runs a share of them.
    groups : ndarray of int
        ``reduction_groups`` of the layout.
    """

    def __init__(self, specs: dict, ids, groups):
        self.specs = specs
        self.groups = groups
        n_groups = int(groups.max()) + 1 if len(groups) else 0
        self.left = np.bincount(groups[np.asarray(ids, dtype=np.int64)],
                                minlength=n_groups).astype(np.int64)
        # the tree folds with a function of the specs, not with the bound method: a cycle
        # (runs → tree → runs.fold) kept each pass's run arrays, O(d) each, alive until the
        # cyclic collector's rare full sweep (on a 2·10^6-feature store, tens of MB above the
        # memory budget after a few passes)
        self.tree = PairwiseTree(self.left > 0, functools.partial(_fold_specs, specs))
        self.open: dict = {}

    def fold(self, left: dict, right: dict) -> None:
        """``left ⊕= right``, accumulator by accumulator."""
        _fold_specs(self.specs, left, right)

    def arrays(self, block_id: int) -> dict:
        """The arrays block ``block_id`` adds into (its group's)."""
        g = int(self.groups[block_id])
        acc = self.open.get(g)
        if acc is None:
            acc = self.open[g] = {k: v.new() for k, v in self.specs.items()}
        return acc

    def done(self, block_id: int) -> None:
        g = int(self.groups[block_id])
        self.left[g] -= 1
        if self.left[g] == 0:
            self.tree.add(0, g, self.open.pop(g))

    def nodes(self) -> dict:
        """The complete subtrees so far, ``{(level, j): arrays}`` (a worker's share)."""
        return self.tree.nodes

    def result(self) -> dict:
        root = self.tree.result()
        return root if root is not None else {k: v.new() for k, v in self.specs.items()}


class Folder:
    """The accumulators of one reduction: run arrays by group along the pairwise tree,
    per-block partials folded by rank (module doc). ``fuse``: the pass is one group (a
    kernel that carries its updates from block to block in the run arrays, as CoCoA+'s
    local solver does, sees them all)."""

    def __init__(self, specs: dict, ids, groups, fuse: bool = False):
        self.specs = dict(specs or {})
        bad = [k for k, v in self.specs.items() if not isinstance(v, Accumulator)]
        if bad:
            raise InvalidParameterError(f"The 'acc' parameter of map_reduce must map names to "
                                        f"Accumulator(...). Got {bad[0]!r}: "
                                        f"{self.specs[bad[0]]!r} instead.")
        if fuse:
            groups = np.zeros(len(groups), dtype=np.int64)
        self.runs = GroupRuns({k: v for k, v in self.specs.items() if not v.per_block},
                              ids, groups)
        self._per_block = [k for k, v in self.specs.items() if v.per_block]
        self.totals = {k: self.specs[k].new() for k in self._per_block}
        self._pending: dict[int, dict] = {}
        self._next = 0
        self._extra: list = []

    def arrays(self, block_id: int) -> dict:
        """The arrays a kernel adds into for block ``block_id``."""
        acc = self.runs.arrays(block_id)
        if not self._per_block:
            return acc
        acc = dict(acc)
        acc.update({k: self.specs[k].new() for k in self._per_block})
        return acc

    def done(self, block_id: int, rank: int, acc: dict) -> None:
        """Block ``block_id`` (visit rank ``rank``) has added into ``acc``."""
        self.runs.done(block_id)
        self.fold_block(rank, acc)

    def fold_block(self, rank: int, acc: dict) -> None:
        """Fold the per-block partials of the visit of rank ``rank``, in rank order."""
        if not self._per_block:
            return
        self._pending[rank] = {k: acc[k] for k in self._per_block}
        while self._next in self._pending:
            part = self._pending.pop(self._next)
            self._next += 1
            for k, v in part.items():
                self.specs[k].fold(self.totals[k], v)

    def add_nodes(self, nodes: dict) -> None:
        """A worker's complete subtrees of run arrays (:meth:`GroupRuns.nodes`)."""
        for (level, j), value in sorted(nodes.items()):
            self.runs.tree.add(level, j, value)

    def add_run(self, part: dict) -> None:
        """Run arrays from outside the tree (a fused worker's), folded after it in call
        order."""
        self._extra.append(part)

    def result(self) -> dict:
        out = dict(self.totals)
        run = self.runs.result()
        for part in self._extra:
            self.runs.fold(run, part)
        out.update(run)
        return out
