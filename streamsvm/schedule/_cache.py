"""The decoded-block cache: blocks are kept while they fit, the rest stream.

Policy: *keep while it fits* — a block read from the store is admitted if its bytes fit
in the free capacity, and admitted blocks stay. Nothing is evicted to make room for a
newer block. Against repeated full sweeps this beats LRU: LRU evicts each block just
before it is needed again and gets no hits at all on sequential sweeps larger than the
cache, while keep-while-fits serves the same ``capacity / block bytes`` blocks from memory
on every sweep, whatever the order (sequential, cyclic, random or weighted). Capacity
shrinks when per-row state claims memory; then the most recently admitted blocks go first.

The cache is touched only from the thread that consumes a sweep (admission happens as
blocks are handed to the solver), so its content — and therefore every I/O counter —
is deterministic. Cached or not, a block's arrays are the same values, so results never
depend on the cache.
"""

from __future__ import annotations

__all__ = ["BlockCache"]


class BlockCache:
    """Decoded blocks by id, within a byte budget.

    Parameters
    ----------
    capacity : int
        Bytes available for cached blocks (``Chunk.nbytes`` counts).
    """

    def __init__(self, capacity: int):
        self.capacity = max(0, int(capacity))
        self.nbytes = 0
        self._blocks: dict[int, object] = {}   # insertion order = admission order

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block_id: int) -> bool:
        return block_id in self._blocks

    def get(self, block_id: int):
        """The cached block, or None."""
        return self._blocks.get(block_id)

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more would fit in the free capacity."""
        return self.nbytes + nbytes <= self.capacity

    def admit(self, block_id: int, block) -> bool:
        """Keep ``block`` if it fits in the free capacity; return whether it is cached."""
        if block_id in self._blocks:
            return True
        if self.nbytes + block.nbytes > self.capacity:
            return False
        self._blocks[block_id] = block
        self.nbytes += block.nbytes
        return True

    def resize(self, capacity: int) -> None:
        """Change the capacity, dropping the most recently admitted blocks until they fit."""
        self.capacity = max(0, int(capacity))
        while self.nbytes > self.capacity:
            _, block = self._blocks.popitem()
            self.nbytes -= block.nbytes

    def clear(self) -> None:
        self._blocks.clear()
        self.nbytes = 0
