"""Resident rows: kept rows counted and collected as sweeps go by, RAM and disk slabs,
groups of resident blocks, and slabs written again exactly from a checkpoint."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.io import InMemoryStore
from streamsvm.schedule import PassScheduler
from streamsvm.schedule._orders import chunk_groups, group_window
from streamsvm.schedule._slabs import DiskWriter


def _store(unit=False, n=500, d=30, seed=3):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng, dtype=np.float64)
    if unit:
        X.data[:] = 1.0
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return X, y, InMemoryStore(X, y, chunk_rows=100)


def _rows(sched, **kw):
    key = sched.state("key", np.uint8, width=2, fill=1)
    other = sched.state("other", np.float64, width=2)
    from streamsvm.schedule import RowField
    # 40 bytes a row besides its entries: pointer, label, id (20), key (2), other (16), 2
    rows = sched.resident_rows(key, (key, other), fields=(RowField("uint8", 2),), **kw)
    assert rows.extra_row_bytes == 40
    return key, other, rows


def _sweep(sched, rows, key, other, rng, epoch=0):
    """A groups() sweep that drops some rows and writes their ids into ``other``."""
    seen = []
    for g in sched.groups(rows, 2, epoch=epoch, states=(key, other)):
        for b, (k, o) in zip(g.blocks, g.views):
            k[rng.random(len(k)) < 0.3] = 0
            o[:, 0] = b.ids if hasattr(b, "ids") and b.ids is not None else \
                b.row_start + np.arange(b.n_rows)
            seen.append((b.id, g.seed))
    return seen


def test_kept_rows_are_counted_and_collected_to_ram_then_disk(tmp_path):
    X, y, store = _store()
    sched = PassScheduler(store, memory="1GB", block_rows=40, scratch_dir=tmp_path)
    key, other, rows = _rows(sched, ram=True, disk=False)
    rng = np.random.default_rng(0)
    _sweep(sched, rows, key, other, rng)
    assert sched.passes == 1.0
    kept = key.values.any(axis=1)
    counts = [kept[slice(*sched.block_bounds(b))].sum() for b in range(sched.n_blocks)]
    np.testing.assert_array_equal(rows.block_rows, counts)
    np.testing.assert_array_equal(other.values[:, 0], np.arange(500))
    rows.plan()
    assert rows.collect_to == "ram"
    _sweep(sched, rows, key, other, rng, epoch=1)
    assert rows.where == "ram"
    ram = rows.ram
    np.testing.assert_array_equal(np.sort(ram.ids), np.flatnonzero(key.values.any(axis=1)))
    got = sp.csr_matrix((ram.X[2], ram.X[1], ram.X[0]), shape=(ram.n_rows, 30))
    assert (got != X[ram.ids]).nnz == 0
    np.testing.assert_array_equal(ram.y, y[ram.ids])
    np.testing.assert_array_equal(ram.local["key"], key.values[ram.ids])
    ram.local["other"][:] = 7.0
    rows.leave_ram()                                     # local copies written back
    assert rows.where == "store"
    np.testing.assert_array_equal(other.values[ram.ids], 7.0)


@pytest.mark.parametrize("unit", [False, True])
def test_disk_rows_sweep_write_back_and_rebuild_the_same_files(unit, tmp_path):
    X, y, store = _store(unit)
    sched = PassScheduler(store, memory="1GB", block_rows=40, scratch_dir=tmp_path)
    key, other, rows = _rows(sched, ram=False, disk=True, disk_fraction=1.0)
    rng = np.random.default_rng(1)
    _sweep(sched, rows, key, other, rng)
    rows.ram_enabled = True                   # the plan allows a disk slab beside RAM only
    rows.collect_to = "disk"
    _sweep(sched, rows, key, other, rng, epoch=1)
    assert rows.where == "disk" and rows.disk.n_blocks > 1
    disk = rows.disk
    passes = sched.passes
    seen = _sweep(sched, rows, key, other, rng, epoch=2)           # a sweep of the disk rows
    assert sched.passes == pytest.approx(passes + disk.n_rows / 500)
    assert sorted(b for b, _ in seen) == list(range(disk.n_blocks))
    ids = np.concatenate([disk.read_block(j).ids for j in range(disk.n_blocks)])
    np.testing.assert_array_equal(other.values[ids, 0], ids)      # gathered, written back
    for j in range(disk.n_blocks):                               # the rows of X, by id
        blk = disk.read_block(j)
        ref = X[blk.ids]
        np.testing.assert_array_equal(blk.indptr, ref.indptr)
        np.testing.assert_array_equal(blk.indices, ref.indices)
        if not unit:
            np.testing.assert_array_equal(blk.data, ref.data)
        np.testing.assert_array_equal(blk.y, y[blk.ids])
    arrays, meta = rows.state_dict()
    other_sched = PassScheduler(store, memory="1GB", block_rows=40, scratch_dir=tmp_path)
    _, _, again = _rows(other_sched, ram=False, disk=True)
    again.load_state_dict(arrays, meta)
    assert other_sched.passes == 0.0 and other_sched.sweeps == 0   # rebuilt: nothing counted
    for part in disk.paths:
        with open(disk.paths[part], "rb") as a, open(again.disk.paths[part], "rb") as b:
            assert a.read() == b.read(), part
    paths = list(disk.paths.values())
    rows.close()
    assert not any(os.path.exists(p) for p in paths)
    sched.close()
    other_sched.close()


def test_ram_rows_rebuild_from_a_checkpoint(tmp_path):
    X, y, store = _store()
    sched = PassScheduler(store, memory="1GB", block_rows=40)
    key, other, rows = _rows(sched)
    rng = np.random.default_rng(2)
    _sweep(sched, rows, key, other, rng)
    rows.collect_to = "ram"
    _sweep(sched, rows, key, other, rng, epoch=1)
    rows.ram.local["other"][:, 1] = np.arange(rows.ram.n_rows)
    arrays, meta = rows.state_dict()
    sched2 = PassScheduler(store, memory="1GB", block_rows=40)
    key2, other2, again = _rows(sched2)
    key2.load_array(key.values)
    again.load_state_dict(arrays, meta)
    a, b = rows.ram, again.ram
    for u, v in zip(a.X + (a.y, a.ids), b.X + (b.y, b.ids)):
        np.testing.assert_array_equal(u, v)
    np.testing.assert_array_equal(b.local["other"][:, 1], np.arange(b.n_rows))


def test_groups_pair_chunks_and_seed_each_group():
    _, _, store = _store(n=1000)
    sched = PassScheduler(store, memory="1GB", block_rows=25)
    key, other, rows = _rows(sched)
    window = group_window(2, sched._keep_partial, sched.block_rows, store)
    assert window >= 4          # in memory nothing is decoded: a chunk's blocks shuffled
    ids = chunk_groups(sched.block_chunks, np.arange(sched.n_blocks), 2, sched.rng(4, 0),
                       window)
    seen = _sweep(sched, rows, key, other, np.random.default_rng(0), epoch=4)
    assert [b for b, _ in seen] == list(ids)
    seeds = [s for _, s in seen]
    assert seeds[0::2] == seeds[1::2] and len(set(seeds[0::2])) == len(seeds) // 2
    chunks = sched.block_chunks[ids]
    assert np.all(chunks[0::2] != chunks[1::2])      # a group mixes two chunks


def test_writer_gives_up_past_its_limit(tmp_path):
    X = sp.random(200, 20, density=0.3, format="csr", random_state=0)
    y = np.where(np.arange(200) % 2, 1.0, -1.0)
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=50), memory="1MB", scratch_dir=tmp_path)
    w = DiskWriter(sched, {"indices": np.int32, "data": np.float64, "y": None}, False,
                    block_rows=50, limit=2000)
    for blk in sched.read_blocks(range(sched.n_blocks)):
        w.add(blk, np.ones(blk.n_rows, dtype=bool))
    assert w.failed and w.finish() is None
    assert not any(os.path.exists(p) for p in w.paths.values())
    sched.close()


def test_read_blocks_checks_ids():
    X = sp.random(20, 5, density=0.5, format="csr", random_state=0)
    sched = PassScheduler(InMemoryStore(X, np.where(np.arange(20) % 2, 1.0, -1.0), chunk_rows=5))
    with pytest.raises(ValueError, match="read_blocks"):
        list(sched.read_blocks([0, 9]))


def test_hot_rows_are_full_when_no_row_of_the_size_asked_fits_in_rows_or_bytes():
    """HotRows.full(row_nnz): the cache takes no more rows once a row of that many
    non-zeros would pass its row count or its bytes (the byte room binds first when rows
    are long; offering blocks then copies nothing)."""
    X, y, store = _store(n=500, d=30)                    # about 6 entries a row
    sched = PassScheduler(store, memory="1GB", block_rows=100)
    p = sched.state("p", np.float64)
    flag = sched.state("hot", np.uint8)
    from streamsvm.schedule import RowField
    # a hot row: 12 bytes an entry (int32 + float64), its pointer, label, id and p (28 B)
    # and a field of 12: 40 bytes besides; the budget leaves room for 60 rows of 52 bytes
    hot = sched.hot_rows((p,), flag, fields=(RowField("int32", 3),), max_rows=400)
    hot.room = 60 * (12 + 40)
    hot.max_rows = min(400, hot.room // hot.extra_row_bytes)
    assert hot.extra_row_bytes == 40
    assert hot.max_rows == 60 * 52 // 40 and not hot.full()
    for block in sched.blocks(range(sched.n_blocks)):
        hot.admit(block, np.arange(block.n_rows), (p.view(block),))
    assert hot.n_rows < hot.max_rows and hot.nbytes <= hot.room and hot.full(row_nnz=6.0)
    left = hot.room - hot.nbytes                         # the room an admitted row leaves
    assert hot.full(row_nnz=(left - 40) / 12 + 1) and (left < 52 or not hot.full())
    hot.evict(np.arange(hot.n_rows // 2))
    assert not hot.full(row_nnz=6.0)
    np.testing.assert_array_equal(flag.values[hot.ids], 1)
