"""The scheduler fits its read-ahead to the memory budget, or refuses the budget up front."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.exceptions import InvalidParameterError
from streamsvm.io import _writer, write_store
from streamsvm.schedule import Accumulator, Need, PassScheduler


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(_writer, "INNER_ELEMS", 4096)
    X = sp.random(4000, 60, density=0.2, format="csr", random_state=0)
    y = np.where(np.arange(4000) % 3, 1.0, -1.0)
    return write_store(tmp_path / "s.zarr", X, y, chunk_rows=500)


def _data_sum(block, views, args, acc):
    acc["s"] += float(block.data.sum())


def test_ample_budget_keeps_the_read_ahead_asked(store):
    sched = PassScheduler(store, memory="1GB", prefetch=8, readers=3, block_rows=100)
    sched.check_budget("test", {"model": Need(1000, "uint8")})
    assert (sched.prefetch, sched._backend.threads) == (8, 3)


def test_the_consumer_decodes_while_it_waits_only_when_the_budget_holds_it(store):
    """Helping costs one more reader's decoding scratch: charged when on, and left off
    (the read-ahead asked kept) when the budget holds the read-ahead but not that."""
    from streamsvm.schedule._local import reader_bytes
    ample = PassScheduler(store, memory="1GB", prefetch=8, readers=1, block_rows=100)
    ample.check_budget("test", {"model": Need(1000, "uint8")})
    assert ample._backend.helps
    tight_need = ample.inflight_bytes - reader_bytes(store)   # the same, not helping
    assert tight_need > 0
    tight = PassScheduler(store, memory=int((tight_need + 1000) / 0.75) + 8, prefetch=8,
                          readers=1, block_rows=100)
    tight.check_budget("test", {"model": Need(1000, "uint8")})
    assert not tight._backend.helps and (tight.prefetch, tight._backend.threads) == (8, 1)
    assert tight.inflight_bytes == tight_need


def test_small_budget_reads_fewer_blocks_ahead_with_fewer_threads(store):
    ample = PassScheduler(store, memory="1GB", prefetch=8, readers=3, block_rows=100)
    need = ample.inflight_bytes
    sched = PassScheduler(store, memory=int(need * 0.7 / 0.75), prefetch=8, readers=3,
                          block_rows=100)
    sched.check_budget("test", {"model": Need(1000, "uint8")})
    assert sched.prefetch < 8 or sched._backend.threads < 3
    assert sched.inflight_bytes + 1000 <= sched.data_budget
    # the results do not depend on it
    total = {"s": Accumulator(())}
    a = ample.map_reduce(_data_sum, acc=total)["s"]
    b = sched.map_reduce(_data_sum, acc=total)["s"]
    assert a == b


def test_budget_below_the_minimum_is_refused_naming_it(store):
    sched = PassScheduler(store, memory="10KB", block_rows=100)
    with pytest.raises(InvalidParameterError, match=r"too small for test .* give at least"):
        sched.check_budget("test", {"the model": Need(1000, "uint8")})
    least = PassScheduler(store, memory="10KB", block_rows=100)
    least_bytes = int(np.ceil((1000 + least._inflight(0, 1, 1)) / 0.75))
    fits = PassScheduler(store, memory=least_bytes, block_rows=100)
    fits.check_budget("test", {"the model": Need(1000, "uint8")})          # the minimum named is enough
    assert fits.prefetch == 0


def test_remote_reader_threads_are_charged_and_fitted(moto_server, s3, monkeypatch):
    """Each reader thread of a remote store costs ~10 MB (measured, _local.py): a small
    budget gets fewer threads instead of twice its memory."""
    monkeypatch.setattr(_writer, "INNER_ELEMS", 4096)
    url, opts = s3
    X = sp.random(2000, 30, density=0.2, format="csr", random_state=1)
    store = write_store(url + "/s.zarr", X, np.where(np.arange(2000) % 2, 1.0, -1.0),
                        chunk_rows=500, storage_options=opts)
    big = PassScheduler(store, memory="1GB", block_rows=100)
    assert big._backend.threads == 8                      # one per block in flight
    sched = PassScheduler(store, memory="40MB", block_rows=100)
    sched.check_budget("test", {})
    assert 1 <= sched._backend.threads < 8
    assert sched.inflight_bytes <= sched.data_budget


def test_a_pass_sum_need_is_the_most_run_arrays_a_sequential_pass_holds(store):
    """A declared pass's sum (``Need(per_pass=True)``: what a solver's O(d) reduction
    costs) is charged the most arrays of one run accumulator alive at once when the groups
    complete in order."""
    from streamsvm.schedule import Need
    from streamsvm.schedule._reduce import GroupRuns
    sched = PassScheduler(store, memory="1GB", block_rows=100)
    groups = sched._layout.groups
    assert int(groups.max()) + 1 == 32
    ids = np.arange(sched.n_blocks)
    runs = GroupRuns({"s": Accumulator(3)}, ids, groups)
    most = 0
    for b in ids:
        runs.arrays(int(b))
        most = max(most, len(runs.open) + len(runs.tree.nodes))
        runs.done(int(b))
    assert sched.need_bytes(Need(3, per_pass=True)) == 24 * most == 24 * 6
