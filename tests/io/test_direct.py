"""The direct shard reader (streamsvm/io/_direct.py) against zarr's own reading."""

from __future__ import annotations

import json
import os

import fsspec
import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm import open_store
from streamsvm.exceptions import StoreCorruptError, StoreError
from streamsvm.io import _writer
from streamsvm.io._direct import DirectArray, _expected_layout
from streamsvm.io._integrity import crc32c
from streamsvm.io._writer import write_store

from .helpers import reseal, store_arrays


@pytest.fixture
def small_shards(monkeypatch):
    """Tiny inner chunks and shards, so a small store has many of both."""
    monkeypatch.setattr(_writer, "INNER_ELEMS", 64)
    monkeypatch.setattr(_writer, "SHARD_ELEMS", 256)


def _random_store(path, n_rows=700, n_features=50, seed=0, chunk_rows=97, values=True):
    rng = np.random.default_rng(seed)
    X = sp.random(n_rows, n_features, density=0.1, format="csr", random_state=seed)
    if not values:
        X.data[:] = 1.0
    y = rng.choice([-1.0, 1.0], n_rows)
    return write_store(path, X, y, chunk_rows=chunk_rows, dtype="float64"), X, y


def test_direct_reads_equal_zarr(small_shards, tmp_path):
    store, X, y = _random_store(tmp_path / "s.zarr")
    ref, _ = store_arrays(tmp_path / "s.zarr")
    fs = fsspec.filesystem("file")
    rng = np.random.default_rng(1)
    for name, want in ref.items():
        arr = DirectArray.open(fs, str(tmp_path / "s.zarr" / name))
        assert arr is not None and len(arr) == len(want)
        np.testing.assert_array_equal(arr[:], want)
        for _ in range(60):          # inside one inner chunk, across chunks and shards
            a = int(rng.integers(0, len(want)))
            b = int(min(len(want), a + rng.integers(0, 400)))
            np.testing.assert_array_equal(arr[a:b], want[a:b])
    assert store.range_reads
    for _ in range(30):
        a = int(rng.integers(0, store.n_rows))
        b = int(min(store.n_rows, a + rng.integers(1, 150)))
        part = store.read_rows(a, b)
        np.testing.assert_array_equal(part.to_scipy().toarray(),
                                      X[a:b].toarray()[:, :part.to_scipy().shape[1]])
        np.testing.assert_array_equal(part.y, y[a:b])


def test_every_inner_chunk_is_written(small_shards, tmp_path):
    """Chunks equal to the fill value (here: 64 zero indices) are written too, so a reader
    can treat an absent chunk as damage."""
    rows = [[0]] * 200 + [[3, 7]] * 50          # 200 rows whose only feature is 0
    X = sp.lil_matrix((len(rows), 10))
    for i, r in enumerate(rows):
        X[i, r] = 2.0
    y = np.r_[np.ones(125), -np.ones(125)]
    write_store(tmp_path / "z.zarr", X.tocsr(), y, chunk_rows=50, dtype="float64")
    fs = fsspec.filesystem("file")
    arr = DirectArray.open(fs, str(tmp_path / "z.zarr" / "indices"))
    n_inner = -(-len(arr) // arr.inner_len)           # inner chunks within the extent
    offsets = np.concatenate([arr._shard_index(s)[:, 0] for s in range(arr.n_shards)])
    assert not (offsets[:n_inner] == np.uint64(2**64 - 1)).any()
    assert all(arr.check_shard(s) == [] for s in range(arr.n_shards))
    np.testing.assert_array_equal(arr[:], store_arrays(tmp_path / "z.zarr")[0]["indices"])


def test_an_inner_chunk_marked_absent_is_damage(small_shards, tmp_path):
    """What zarr writes by default for an all-fill chunk (an index entry of 2**64 - 1 with
    a valid index checksum) is an error naming the array, shard and inner chunk."""
    from streamsvm.io._integrity import crc32c
    _random_store(tmp_path / "s.zarr")
    shard = tmp_path / "s.zarr" / "indices" / "c" / "0"
    raw = bytearray(shard.read_bytes())
    n_index = (256 // 64) * 16 + 4
    index = np.frombuffer(bytes(raw[-n_index:-4]), "<u8").reshape(-1, 2).copy()
    index[1] = 2**64 - 1
    raw[-n_index:] = index.tobytes() + crc32c(index.tobytes()).to_bytes(4, "little")
    shard.write_bytes(bytes(raw))
    fresh = open_store(tmp_path / "s.zarr")
    with pytest.raises(StoreCorruptError, match=r"'indices', shard indices/c/0, inner chunk 1"):
        fresh.read_rows(0, fresh.n_rows)


def test_other_layouts_are_refused(tmp_path):
    import zarr
    _random_store(tmp_path / "s.zarr")
    # rewrite the indices with another codec: valid zarr, but not what streamsvm writes
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="r+")
    ind = g["indices"][:]
    del g["indices"]
    g.create_array("indices", data=ind, chunks=(1000,), compressors=zarr.codecs.ZstdCodec())
    raw = (tmp_path / "s.zarr" / "indices" / "zarr.json").read_bytes()
    assert _expected_layout(json.loads(raw)) is None
    with pytest.raises(StoreCorruptError, match="indices/zarr.json fails its checksum"):
        open_store(tmp_path / "s.zarr")
    # the new zarr.json's CRC recorded: the layout is what is refused
    reseal(tmp_path / "s.zarr", lambda a: a["array_meta_crc32c"].update(indices=crc32c(raw)))
    with pytest.raises(StoreError, match="array 'indices' is not in the layout"):
        open_store(tmp_path / "s.zarr")


@pytest.mark.parametrize("change", [
    lambda m: m.update(zarr_format=2),
    lambda m: m["codecs"][0]["configuration"].update(index_location="start"),
    lambda m: m["codecs"][0]["configuration"]["codecs"][1].update(name="zstd"),
    lambda m: m["codecs"][0]["configuration"]["index_codecs"].pop(),
    lambda m: m["codecs"][0]["configuration"]["codecs"].pop(),       # no inner crc32c
    lambda m: m.update(shape=[10, 2]),
])
def test_expected_layout_rejects(change, tmp_path):
    _random_store(tmp_path / "s.zarr")
    meta = json.loads((tmp_path / "s.zarr" / "indices" / "zarr.json").read_text())
    assert _expected_layout(meta) is not None
    change(meta)
    assert _expected_layout(meta) is None


def test_corrupt_shard_index_is_an_error_naming_the_file(small_shards, tmp_path):
    store, _, _ = _random_store(tmp_path / "s.zarr")
    shard = tmp_path / "s.zarr" / "indices" / "c" / "1"
    raw = bytearray(shard.read_bytes())
    raw[-10] ^= 0xFF                              # inside the index, under its checksum
    shard.write_bytes(bytes(raw))
    fresh = open_store(tmp_path / "s.zarr")
    with pytest.raises(StoreError, match=os.path.join("indices", "c", "1")):
        fresh.read_rows(0, fresh.n_rows)


def test_truncated_shard_is_an_error(small_shards, tmp_path):
    _random_store(tmp_path / "s.zarr")
    shard = tmp_path / "s.zarr" / "indices" / "c" / "0"
    raw = shard.read_bytes()
    n_index = (256 // 64) * 16 + 4                # (offset, size) per inner chunk + crc32c
    body = raw[:-n_index]
    shard.write_bytes(body[:len(body) // 2] + raw[-n_index:])    # index intact, data cut
    fresh = open_store(tmp_path / "s.zarr")
    with pytest.raises(StoreError):
        fresh.read_rows(0, fresh.n_rows)


@pytest.mark.parametrize("backward", [False, True])
def test_ranges_sharing_boundaries_decode_each_inner_chunk_once(small_shards, tmp_path,
                                                                backward):
    """Two streams of consecutive ranges read in alternation (dcd's chunk pairs), forwards
    or backwards, with two inner chunks kept per stream: every inner chunk is decoded
    once and the values are the array's."""
    store, X, _ = _random_store(tmp_path / "s.zarr", n_rows=2000, chunk_rows=500)
    arr = store._open_arrays()["indices"]
    arr.keep_partial = 4
    decoded = []
    inner = arr._inner_bytes
    arr._inner_bytes = lambda g: decoded.append(g) or inner(g)
    n, half = len(arr), len(arr) // 2
    cuts = [np.arange(0, half, 37).tolist() + [half], np.arange(half, n, 37).tolist() + [n]]
    ranges = [list(zip(c[:-1], c[1:])) for c in cuts]
    if backward:
        ranges = [r[::-1] for r in ranges]
    for a, b in (ab for pair in zip(*ranges) for ab in pair):
        np.testing.assert_array_equal(arr.read(a, b), X.indices[a:b])
    boundary = half % arr.inner_len != 0           # the streams' one shared inner chunk
    assert len(decoded) == -(-n // arr.inner_len) + boundary


def test_a_store_that_outgrows_the_page_cache_drops_what_it_read(small_shards, tmp_path,
                                                                  monkeypatch):
    from streamsvm.io import _page_cache, _store
    _random_store(tmp_path / "s.zarr")
    dropped = []
    real = os.posix_fadvise
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, advice: (
        dropped.append((n, advice)), real(fd, off, n, advice))[1])
    kept = open_store(str(tmp_path / "s.zarr"))
    want = kept.read_rows(0, kept.n_rows)
    assert not dropped                                # fits: its pages stay for the next pass
    monkeypatch.setattr(_store, "store_outgrows_page_cache", lambda size: size > 0)
    big = open_store(str(tmp_path / "s.zarr"))
    got = big.read_rows(0, big.n_rows)
    assert dropped and {a for _, a in dropped} == {os.POSIX_FADV_DONTNEED}
    for name in ("indptr", "indices", "data", "y"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    # the rule: larger than the smaller of MemAvailable and the cgroup's limit
    monkeypatch.setattr(_page_cache, "_cgroup_limit", lambda: 2_000_000_000)
    assert _page_cache.page_cache_room() <= 2_000_000_000
    assert _page_cache.store_outgrows_page_cache(4_236_000_000)
    assert not _page_cache.store_outgrows_page_cache(10_000_000)
