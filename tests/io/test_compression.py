"""``convert --compression``: every form writes a store that reads, verifies and trains the
same as the default's; bad forms are refused before anything is written; the direct reader
accepts any Blosc setting and uncompressed chunks, checked as before."""

from __future__ import annotations

import json

import fsspec
import numpy as np
import pytest

import streamsvm as ss
from streamsvm.cli import main
from streamsvm.exceptions import InvalidParameterError, StoreCorruptError
from streamsvm.io import _writer, convert, verify_store
from streamsvm.io._compression import Compression, parse_compression
from streamsvm.io._direct import DirectArray, _expected_layout
from streamsvm.io._integrity import crc32c
from streamsvm.io._writer import write_store

from .helpers import (assert_csr_equal, reseal, stop_at_first_resume_point, store_arrays,
                      store_to_csr, write_svm)

CODECS = ("lz4", "zstd", "zstd:1", "blosclz:2", "none")
INNER, SHARD = 512, 2048            # entries per inner chunk and shard of indices / data


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The same text converted with each form of :data:`CODECS` (small shards: ~70 inner
    chunks per array)."""
    d = tmp_path_factory.mktemp("codecs")
    write_svm(d / "in.svm", n=3000, d=40)
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_writer, "INNER_ELEMS", INNER)
        mp.setattr(_writer, "SHARD_ELEMS", SHARD)
        for spec in CODECS:
            out[spec] = convert(str(d / "in.svm"), str(d / f"{spec}.zarr"), chunk_rows=500,
                                compression=spec).url
    return out


def _inner_codecs(url, name="indices"):
    with fsspec.open(f"{url}/{name}/zarr.json") as f:
        return json.load(f)["codecs"][0]["configuration"]["codecs"]


@pytest.mark.parametrize("spec, canonical", [
    ("lz4", "lz4:5"), ("LZ4:3", "lz4:3"), ("zstd", "zstd:4"), ("zstd:9", "zstd:9"),
    ("blosclz", "blosclz:5"), ("blosclz:2", "blosclz:2"), (" none ", "none")])
def test_forms(spec, canonical):
    assert parse_compression(spec).spec == canonical


@pytest.mark.parametrize("bad", ["", "zstd:0", "zstd:10", "lz4:", "gzip", "none:1", "lz4hc",
                                 "zstd:3+bitshuffle", None, 5])
def test_bad_forms_are_refused_before_anything_is_written(bad, tmp_path):
    write_svm(tmp_path / "in.svm", n=20, d=5)
    with pytest.raises(InvalidParameterError,
                       match=r"The 'compression' parameter must be one of lz4, lz4:N, zstd"):
        convert(str(tmp_path / "in.svm"), str(tmp_path / "out.zarr"), compression=bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.svm"]


def test_cli_bad_form_is_one_line_naming_the_option(tmp_path, capsys):
    write_svm(tmp_path / "in.svm", n=20, d=5)
    rc = main(["convert", str(tmp_path / "in.svm"), str(tmp_path / "out.zarr"),
               "--compression", "zstd:12"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith("streamsvm convert: error: The '--compression' parameter must be "
                          "one of lz4, lz4:N, zstd, zstd:N, blosclz, blosclz:N (N a level "
                          "1-9) or none. Got 'zstd:12' instead."), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.svm"]


def test_each_form_is_recorded_and_reads_the_same(stores, capsys):
    ref = ss.open_store(stores["lz4"])
    X0, y0 = store_to_csr(ref)
    for spec, url in stores.items():
        want = parse_compression(spec)
        names = [c["name"] for c in _inner_codecs(url)]
        if want.cname is None:
            assert names == ["bytes", "crc32c"]
        else:
            assert names == ["bytes", "blosc", "crc32c"]
            conf = _inner_codecs(url)[1]["configuration"]
            assert (conf["cname"], conf["clevel"], conf["shuffle"]) == \
                (want.cname, want.clevel, "shuffle")
        store = ss.open_store(url)
        assert store.info()["compression"] == want.spec == store.meta["options"]["compression"]
        X, y = store_to_csr(store)
        assert_csr_equal(X, X0)
        np.testing.assert_array_equal(y, y0)
        assert verify_store(url)["ok"]
        assert main(["verify", url, "-q"]) == 0
        assert main(["info", url]) == 0
        assert f"compression  {want.spec}\n" in capsys.readouterr().out
    sizes = {spec: ss.open_store(url).bytes_on_disk() for spec, url in stores.items()}
    assert sizes["none"] > max(v for k, v in sizes.items() if k != "none")


@pytest.mark.parametrize("memory", ["1GB", "150KB"])
def test_training_does_not_depend_on_the_compression(stores, memory):
    """In memory (the store read whole) and streamed at a budget below the store: the same
    weights, bit for bit, and the same passes."""
    from streamsvm._train import train
    runs = {}
    for spec in ("lz4", "zstd", "none"):
        model, res = train(ss.open_store(stores[spec]), C=1.0, loss="hinge", memory=memory,
                           tol=1e-4)
        runs[spec] = (np.asarray(model.coef).tobytes(), np.asarray(model.intercept).tobytes(),
                      res.passes)
        assert (res.history[0]["kind"] == "stream") == (memory == "150KB")
    assert runs["lz4"] == runs["zstd"] == runs["none"]


def test_default_writes_the_layout_of_stores_from_before(tmp_path):
    """Without --compression the arrays are written exactly as before the option existed,
    and a store whose options do not name a compression (written then) reads as lz4:5."""
    write_store(tmp_path / "s.zarr", np.eye(30, 8), np.r_[np.ones(15), -np.ones(15)])
    for name, typesize in (("indptr", 8), ("indices", 4), ("y", 4)):
        assert _inner_codecs(str(tmp_path / "s.zarr"), name) == [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "blosc", "configuration": {"typesize": typesize, "cname": "lz4",
                                                "clevel": 5, "shuffle": "shuffle",
                                                "blocksize": 0}},
            {"name": "crc32c"}]
    reseal(tmp_path / "s.zarr", lambda a: [opts.pop("compression") for opts in
                                           (a["options"], a["converter"]["options"])])
    store = ss.open_store(tmp_path / "s.zarr")
    assert "compression" not in store.meta["options"]
    assert store.info()["compression"] == "lz4:5"
    assert_csr_equal(store_to_csr(store)[0], np.eye(30, 8))


def test_other_blosc_settings_are_read(tmp_path):
    """Any Blosc compressor, level and shuffle zarr writes is read (the header says how)."""
    import scipy.sparse as sp
    X = sp.random(400, 30, density=0.2, format="csr", random_state=0)
    y = np.where(np.arange(400) % 3 == 0, 1.0, -1.0)
    for c in (Compression("zstd", 3, "bitshuffle"), Compression("lz4hc", 0, "noshuffle"),
              Compression("zlib", 9, "shuffle")):
        store = write_store(tmp_path / f"{c.cname}.zarr", X, y, dtype="float64", compression=c)
        assert ss.open_store(store.url).compression() == c.spec
        assert_csr_equal(store_to_csr(ss.open_store(store.url))[0], X)
        assert verify_store(store.url)["ok"]
    assert Compression("zstd", 3, "bitshuffle").spec == "zstd:3+bitshuffle"


@pytest.mark.parametrize("inner", [
    [{"name": "blosc", "configuration": {"cname": "lzma", "clevel": 5, "shuffle": "shuffle"}}],
    [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 12, "shuffle": "shuffle"}}],
    [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "byte"}}],
    [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": True, "shuffle": "shuffle"}}],
    [{"name": "gzip", "configuration": {"level": 1}}],
    [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle"}}] * 2,
])
def test_other_inner_codecs_are_refused(inner, stores):
    with fsspec.open(f"{stores['lz4']}/indices/zarr.json") as f:
        meta = json.load(f)
    conf = meta["codecs"][0]["configuration"]
    conf["codecs"] = [conf["codecs"][0], *inner, conf["codecs"][-1]]
    assert _expected_layout(meta) is None


def _rewrite_inner_chunk(shard, j, payload: bytes, per_shard: int):
    """Replace inner chunk ``j`` of a local shard file with ``payload`` (its CRC-32C
    appended), the index and its checksum rewritten to match: damage no checksum sees."""
    raw = shard.read_bytes()
    n_index = per_shard * 16 + 4
    index = np.frombuffer(raw[-n_index:-4], "<u8").reshape(per_shard, 2)
    chunks = [raw[int(o):int(o) + int(n)] for o, n in index]
    chunks[j] = payload + crc32c(payload).to_bytes(4, "little")
    offsets = np.cumsum([0] + [len(c) for c in chunks[:-1]])
    new = np.stack([offsets, [len(c) for c in chunks]], axis=1).astype("<u8").tobytes()
    shard.write_bytes(b"".join(chunks) + new + crc32c(new).to_bytes(4, "little"))


def test_damaged_uncompressed_chunks_are_errors(stores, tmp_path):
    import shutil
    url = str(tmp_path / "none.zarr")
    shutil.copytree(stores["none"], url)
    shard = tmp_path / "none.zarr" / "indices" / "c" / "1"
    original = shard.read_bytes()
    raw = bytearray(original)
    raw[100] ^= 0x01                             # inside inner chunk 0, under its CRC
    shard.write_bytes(bytes(raw))
    with pytest.raises(StoreCorruptError, match=r"indices/c/1, inner chunk 0 .*checksum "
                                                r"mismatch"):
        store = ss.open_store(url)
        store.read_rows(0, store.n_rows)
    shard.write_bytes(original)
    _rewrite_inner_chunk(shard, 2, original[:INNER * 4 - 8], SHARD // INNER)
    with pytest.raises(StoreCorruptError, match=r"indices/c/1, inner chunk 2 .*holds 2040 "
                                                r"bytes, expected 2048 \(uncompressed\)"):
        store = ss.open_store(url)
        store.read_rows(0, store.n_rows)
    rep = verify_store(url)
    assert not rep["ok"] and any("holds 2040 bytes" in p for p in rep["problems"])
    fs = fsspec.filesystem("file")
    arr = DirectArray.open(fs, url + "/indices")
    assert arr.compression.cname is None and arr.check_shard(0) == []


@pytest.mark.parametrize("first, then, restarts", [
    ("zstd", "zstd:4", False), ("zstd", "none", True), ("lz4", "lz4:5", False),
    (None, "lz4", False), (None, "zstd", True)])
def test_resume_continues_only_with_the_same_compression(first, then, restarts, tmp_path,
                                                         monkeypatch, caplog):
    """``None``: an unfinished store from before the option (no compression in its options),
    written with lz4:5."""
    write_svm(tmp_path / "in.svm", n=3000, d=40)
    out = tmp_path / "out.zarr"
    kw = dict(chunk_rows=100, progress_bytes=1, block_bytes=4096)
    progress = stop_at_first_resume_point(monkeypatch, tmp_path / "in.svm", out,
                                          compression=first or "lz4", **kw)
    assert progress["input"] is not None
    if first is None:
        doc = json.loads((out / "zarr.json").read_text())
        doc["attributes"]["streamsvm"]["options"].pop("compression")
        (out / "zarr.json").write_text(json.dumps(doc))
    caplog.clear()
    store = convert(str(tmp_path / "in.svm"), str(out), resume=True, compression=then, **kw)
    assert ("restarting" in caplog.text) == restarts, caplog.text
    assert store.compression() == parse_compression(then).spec
    ref = convert(str(tmp_path / "in.svm"), str(tmp_path / "ref.zarr"), **kw)
    a, b = store_arrays(ref.url)[0], store_arrays(store.url)[0]
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
