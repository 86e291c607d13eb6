"""Memory budget strings and parameter validation (before any pass)."""

from __future__ import annotations

import numpy as np
import pytest

from .helpers import random_store
from streamsvm.exceptions import InvalidParameterError
from streamsvm.io import StoreMeta
from streamsvm.schedule import Accumulator, PassScheduler, parse_memory


@pytest.mark.parametrize("value,expected", [
    ("2GB", 2 * 10**9), ("512MB", 512 * 10**6), ("1.5GiB", 3 * 2**29), ("1.5 gib", 3 * 2**29),
    ("100kB", 100_000), ("64KiB", 65536), ("1e3", 1000), ("1000", 1000), ("0", 0),
    ("2 TB", 2 * 10**12), (" 7b ", 7), (".5MB", 500_000), (12345, 12345), (0, 0),
    (np.int64(42), 42), (2e9, 2_000_000_000),
])
def test_parse_memory(value, expected):
    assert parse_memory(value) == expected


@pytest.mark.parametrize("value", ["", "GB", "2XB", "-1GB", "1.2.3MB", "2 G B", "inf", "nan",
                                   -1, float("inf"), float("nan"), True, None, [1], "1e999GB"])
def test_parse_memory_rejects(value):
    with pytest.raises(InvalidParameterError, match="'memory' parameter of PassScheduler"):
        parse_memory(value)


def test_invalid_parameter_error_is_value_and_type_error():
    with pytest.raises(ValueError):
        parse_memory("lots")
    with pytest.raises(TypeError):
        parse_memory("lots")


@pytest.mark.parametrize("kwargs,name", [
    ({"memory": "2XB"}, "memory"), ({"prefetch": -1}, "prefetch"), ({"prefetch": 1.5}, "prefetch"),
    ({"block_rows": 0}, "block_rows"), ({"seed": -3}, "seed"), ({"seed": True}, "seed"),
    ({"scratch_dir": 3}, "scratch_dir"),
])
def test_scheduler_validates_parameters(kwargs, name):
    store, _, _ = random_store()
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of PassScheduler"):
        PassScheduler(store, **kwargs)


def test_scheduler_rejects_non_store():
    with pytest.raises(InvalidParameterError, match="'store' parameter.*Got ndarray"):
        PassScheduler(np.zeros((3, 3)))


def test_a_store_declaring_only_its_rows_gets_the_interface_defaults():
    store, X, y = random_store(chunk_rows=10)

    class RowsOnly(StoreMeta):              # metadata and read_rows: the rest is declared
        meta, url, storage_options = store.meta, "rows-only", {}
        read_rows = staticmethod(store.read_rows)

    rows = RowsOnly()
    assert (rows.zero_copy, rows.range_reads, rows.fingerprint) == (False, False, "")
    assert (rows.held_bytes_for(4), rows.largest_inner_bytes(), rows.keep_partial(4)) == \
        (0, 0, None)
    sched = PassScheduler(rows, block_rows=4)           # splits chunks: cut from whole ones
    w = np.linspace(-1.0, 1.0, X.shape[1])
    got = sched.map_reduce(_margin_sum, args=(w,), acc={"s": Accumulator(())})["s"]
    assert got == pytest.approx(float((X @ w).sum()))
    assert sched.inflight_bytes > 0                     # its blocks own their arrays


def _margin_sum(block, views, args, acc):
    (w,) = args
    acc["s"] += float(np.dot(block.data, w[block.indices]))      # the block's margins, summed


@pytest.mark.parametrize("order", ["shuffled", 3.5, [[0, 1]], [0.0, 1.0], [0, 99], [-1]])
def test_invalid_orders(order):
    sched = PassScheduler(random_store()[0])
    with pytest.raises(InvalidParameterError, match="'order' parameter"):
        sched.blocks(order)
    assert sched.sweeps == 0          # a rejected order does not consume a sweep


@pytest.mark.parametrize("active", [np.ones(3, dtype=bool), np.ones(11, dtype=int)])
def test_invalid_active_mask(active):
    sched = PassScheduler(random_store()[0])
    with pytest.raises(InvalidParameterError, match="'active' parameter"):
        sched.map_reduce(lambda b, *_: None, active=active)


def test_map_reduce_needs_callable():
    with pytest.raises(InvalidParameterError, match="'kernel' parameter"):
        PassScheduler(random_store()[0]).map_reduce(42)
