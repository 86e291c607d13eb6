"""convert → store → read back, against sklearn's load_svmlight_file."""

from __future__ import annotations

import bz2
import gzip
import lzma
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

import streamsvm as ss
from streamsvm.exceptions import (FormatError, IncompleteStoreError, InvalidParameterError,
                                  StoreExistsError, StoreNotFoundError)
from streamsvm.io import convert

from ..conftest import data_file
from .helpers import assert_csr_equal, encode_binary, store_arrays, store_to_csr

sk = pytest.importorskip("sklearn.datasets")

DATASETS = ["a9a/a9a", "a9a/a9a.t", "mushrooms/mushrooms", "dna/dna.scale",
            "letter/letter.scale", "pendigits/pendigits", "usps/usps.t", "vowel/vowel.scale"]


def _reference(path, n_features=None):
    X, y = sk.load_svmlight_file(str(path), zero_based=False, n_features=n_features)
    return sp.csr_matrix(X), y


@pytest.mark.parametrize("name", DATASETS)
def test_real_datasets_round_trip(name, tmp_path):
    path = data_file(name)
    X, y = _reference(path)
    store = convert(str(path), str(tmp_path / "s.zarr"), chunk_rows=997)
    Xs, ys = store_to_csr(store, n_features=X.shape[1])
    assert store.n_rows == X.shape[0] and store.nnz == X.nnz
    assert store.n_features == X.shape[1]
    assert_csr_equal(Xs, X.astype(np.float32))
    if store.task == "binary":
        np.testing.assert_array_equal(ys, encode_binary(y))
    else:
        np.testing.assert_array_equal(store.classes[ys], y)
    assert store.chunk_nnz.sum() == X.nnz


@pytest.mark.parametrize("chunk_rows", [1, 7, 13, 100, 10**6])
def test_chunk_sizes_slice(chunk_rows, tmp_path):
    path = data_file("a9a/a9a")
    lines = path.read_bytes().splitlines(keepends=True)[:200]
    small = tmp_path / "small.svm"
    small.write_bytes(b"".join(lines))
    X, y = _reference(small)
    store = convert(str(small), str(tmp_path / "s.zarr"), chunk_rows=chunk_rows, dtype="float64")
    assert store.n_chunks == -(-200 // chunk_rows)
    Xs, ys = store_to_csr(store, n_features=X.shape[1])
    assert_csr_equal(Xs, X)
    np.testing.assert_array_equal(ys, encode_binary(y))
    last = store.read_chunk(store.n_chunks - 1)
    assert last.n_rows == 200 - (store.n_chunks - 1) * chunk_rows


def test_float64_exact_and_float32_default(tmp_path):
    path = data_file("dna/dna.scale")
    X, _ = _reference(path)
    s64 = convert(str(path), str(tmp_path / "a.zarr"), dtype="float64")
    assert s64.dtype == np.float64
    assert_csr_equal(store_to_csr(s64, X.shape[1])[0], X)
    s32 = convert(str(path), str(tmp_path / "b.zarr"))
    assert s32.dtype == np.float32


def _write(path, text):
    pathlib.Path(path).write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


TEXT = "+1 1:0.5 3:2 # c\n-1 2:1e-3 7:4\n\n# only a comment\n1 qid:3 5:-1.5\n-1\n"


def test_small_text_features(tmp_path):
    store = convert(_write(tmp_path / "t.svm", TEXT), str(tmp_path / "t.zarr"), chunk_rows=2)
    X, y = store_to_csr(store)
    assert store.n_rows == 4 and store.n_features == 7
    np.testing.assert_array_equal(y, [1, -1, 1, -1])
    assert X[3].nnz == 0
    assert X[1, 6] == np.float32(4)


@pytest.mark.parametrize("opener,ext", [(gzip.compress, ".gz"), (bz2.compress, ".bz2"),
                                        (lzma.compress, ".xz"), ("zstd", ".zst")])
def test_compressed_inputs_equal_plain(opener, ext, tmp_path):
    path = data_file("mushrooms/mushrooms")
    raw = path.read_bytes()
    if opener == "zstd":
        zstandard = pytest.importorskip("zstandard")
        comp = zstandard.ZstdCompressor().compress(raw)
    else:
        comp = opener(raw)
    cpath = _write(tmp_path / ("m" + ext), comp)
    a = convert(str(path), str(tmp_path / "a.zarr"), chunk_rows=500)
    b = convert(cpath, str(tmp_path / "b.zarr"), chunk_rows=500)
    assert_csr_equal(store_to_csr(a)[0], store_to_csr(b)[0])
    assert b.meta["source"]["crc32"] == a.meta["source"]["crc32"]
    # truncated stream: a FormatError naming the file, no complete store
    _write(tmp_path / ("t" + ext), comp[: len(comp) // 2])
    with pytest.raises(FormatError, match="t" + ext.replace(".", r"\.")):
        convert(str(tmp_path / ("t" + ext)), str(tmp_path / "c.zarr"))
    with pytest.raises((IncompleteStoreError, StoreNotFoundError)):
        ss.open_store(str(tmp_path / "c.zarr"))


def test_several_inputs_concatenated(tmp_path):
    a = _write(tmp_path / "a.svm", "1 1:1\n-1 2:1\n")
    b = _write(tmp_path / "b.svm", "1 3:2\n")
    store = convert([a, b], str(tmp_path / "s.zarr"))
    X, y = store_to_csr(store)
    assert store.n_rows == 3 and store.n_features == 3
    np.testing.assert_array_equal(y, [1, -1, 1])
    assert store.binary_values is False


@pytest.mark.parametrize("labels,stored", [(("-1", "+1"), (-1, 1)), (("0", "1"), (-1, 1)),
                                           (("1", "2"), (-1, 1)), (("2", "1"), (1, -1))])
def test_binary_label_maps(labels, stored, tmp_path):
    text = f"{labels[0]} 1:1\n{labels[1]} 2:1\n"
    store = convert(_write(tmp_path / "t.svm", text), str(tmp_path / "s.zarr"))
    assert store.task == "binary"
    np.testing.assert_array_equal(store_to_csr(store)[1], stored)


def test_multiclass_and_task_override(tmp_path):
    path = _write(tmp_path / "t.svm", "3 1:1\n1 2:1\n7.5 1:2\n3 2:2\n")
    store = convert(path, str(tmp_path / "m.zarr"))
    assert store.task == "multiclass"
    np.testing.assert_array_equal(store.classes, [1, 3, 7.5])
    np.testing.assert_array_equal(store_to_csr(store)[1], [1, 0, 2, 1])
    assert store.label_counts == {"1": 1, "3": 2, "7.5": 1}
    two = _write(tmp_path / "two.svm", "1 1:1\n2 2:1\n")
    s2 = convert(two, str(tmp_path / "two.zarr"), task="multiclass")
    assert s2.task == "multiclass"
    np.testing.assert_array_equal(store_to_csr(s2)[1], np.array([0, 1], dtype=np.int32))
    assert store_to_csr(s2)[1].dtype == np.int32
    with pytest.raises(FormatError, match="--task binary"):
        convert(path, str(tmp_path / "b.zarr"), task="binary")


def test_binary_values_omit_data(tmp_path):
    path = data_file("a9a/a9a")
    store = convert(str(path), str(tmp_path / "s.zarr"), chunk_rows=5000)
    assert store.binary_values
    arrays, attrs = store_arrays(tmp_path / "s.zarr")
    assert set(arrays) == {"indptr", "indices", "y"}
    assert attrs["streamsvm"]["complete"] is True
    assert store.read_chunk(0).data.dtype == np.float32


def test_readable_with_plain_zarr(tmp_path):
    path = data_file("pendigits/pendigits")
    X, y = _reference(path)
    convert(str(path), str(tmp_path / "s.zarr"), chunk_rows=1000, dtype="float64")
    arrays, attrs = store_arrays(tmp_path / "s.zarr")
    Z = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=X.shape)
    assert_csr_equal(Z, X)
    meta = attrs["streamsvm"]
    assert meta["n_rows"] == 7494 and meta["chunk_rows"] == 1000 and meta["n_chunks"] == 8
    assert len(meta["chunk_nnz"]) == 8 and len(meta["chunk_max_sq_norm"]) == 8
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    np.testing.assert_allclose(meta["chunk_max_sq_norm"][7], sq[7000:].max(), rtol=1e-12)
    np.testing.assert_array_equal(store_classes := meta["classes"], np.unique(y))
    np.testing.assert_array_equal(np.asarray(store_classes)[arrays["y"]], y)


def test_zero_based_modes(tmp_path):
    z = _write(tmp_path / "z.svm", "1 0:1 2:1\n-1 1:3\n")
    store = convert(z, str(tmp_path / "a.zarr"), zero_based="auto")
    assert store.n_features == 3 and store.read_chunk(0).indices[0] == 0
    store = convert(z, str(tmp_path / "b.zarr"), zero_based="yes")
    assert store.n_features == 3
    with pytest.raises(FormatError, match="line 1"):
        convert(z, str(tmp_path / "c.zarr"), zero_based="no")
    o = _write(tmp_path / "o.svm", "1 1:1 3:1\n")
    assert convert(o, str(tmp_path / "d.zarr"), zero_based="auto").n_features == 3


def test_n_features(tmp_path):
    p = _write(tmp_path / "t.svm", "1 1:1\n-1 5:1\n")
    assert convert(p, str(tmp_path / "a.zarr"), n_features=10).n_features == 10
    with pytest.raises(FormatError, match=r"line 2"):
        convert(p, str(tmp_path / "b.zarr"), n_features=4)


def test_overwrite_and_existing(tmp_path):
    p = _write(tmp_path / "t.svm", "1 1:1\n-1 2:1\n")
    out = str(tmp_path / "s.zarr")
    convert(p, out)
    with pytest.raises(StoreExistsError, match="--overwrite"):
        convert(p, out)
    assert convert(p, out, overwrite=True).n_rows == 2


def test_sort_indices_option(tmp_path):
    p = _write(tmp_path / "t.svm", "1 3:1 1:2\n")
    with pytest.raises(FormatError, match="--sort-indices"):
        convert(p, str(tmp_path / "a.zarr"))
    s = convert(p, str(tmp_path / "b.zarr"), sort_indices=True)
    c = s.read_chunk(0)
    np.testing.assert_array_equal(c.indices, [0, 2])
    np.testing.assert_array_equal(c.data, [2, 1])


def test_missing_input_and_bad_parameters(tmp_path):
    with pytest.raises(StoreNotFoundError, match="nope.svm"):
        convert(str(tmp_path / "nope.svm"), str(tmp_path / "s.zarr"))
    p = _write(tmp_path / "t.svm", "1 1:1\n")
    for kw in [{"chunk_rows": 0}, {"zero_based": "maybe"}, {"dtype": "int8"},
               {"task": "regression"}, {"n_features": 0}]:
        with pytest.raises(InvalidParameterError):
            convert(p, str(tmp_path / "s.zarr"), **kw)
    assert not (tmp_path / "s.zarr").exists()


def test_open_store_errors(tmp_path):
    with pytest.raises(StoreNotFoundError):
        ss.open_store(str(tmp_path / "missing.zarr"))
    with pytest.raises(FileNotFoundError):
        ss.open_store(str(tmp_path / "missing.zarr"))


def test_store_pickles_and_reads(tmp_path):
    import pickle
    path = data_file("vowel/vowel.scale")
    store = convert(str(path), str(tmp_path / "s.zarr"), chunk_rows=100)
    c0 = store.read_chunk(2)
    clone = pickle.loads(pickle.dumps(store))
    c1 = clone.read_chunk(2)
    np.testing.assert_array_equal(c0.indices, c1.indices)
    np.testing.assert_array_equal(c0.y, c1.y)
    assert c1.row_start == 200 and c1.id == 2


@pytest.mark.parametrize("n_ones_rows", [2, 300_000])
def test_values_after_a_run_of_ones_are_back_filled(n_ones_rows, tmp_path):
    """data is not written while every value is 1; a later value back-fills the ones
    (across shard boundaries for the large case)."""
    lines = "".join(f"{1 if i % 2 else -1} 1:1 2:1 5:1 9:1\n" for i in range(n_ones_rows))
    p = _write(tmp_path / "t.svm", lines + "1 1:2.5 3:1\n-1 4:1\n")
    store = convert(p, str(tmp_path / "s.zarr"), chunk_rows=65536)
    assert not store.binary_values
    X, y = store_to_csr(store)
    ref, _ = _reference(p)
    assert_csr_equal(X, ref.astype(np.float32))


def test_glob_inputs(tmp_path):
    for i in range(3):
        _write(tmp_path / f"part-{i}.svm", f"1 {i + 1}:1\n-1 {i + 2}:2\n")
    store = convert(str(tmp_path / "part-*.svm"), str(tmp_path / "s.zarr"))
    assert store.n_rows == 6 and len(store.meta["source"]["files"]) == 3
    assert [f["url"].rsplit("/", 1)[1] for f in store.meta["source"]["files"]] == \
        ["part-0.svm", "part-1.svm", "part-2.svm"]
    with pytest.raises(StoreNotFoundError, match="no input file matches"):
        convert(str(tmp_path / "nothing-*.svm"), str(tmp_path / "t.zarr"))


@pytest.mark.parametrize("token", ["1e39", "-3.4028236e38", "1" + "0" * 39])
def test_float32_overflow_is_an_error_not_inf(token, tmp_path):
    p = _write(tmp_path / "t.svm", f"1 1:1\n-1 1:2 4:{token} 5:1\n")
    with pytest.raises(FormatError) as info:
        convert(p, str(tmp_path / "a.zarr"))
    msg = str(info.value)
    assert msg.startswith(f"{p}, line 2, column 10: value '{token}' overflows float32")
    assert "--dtype float64" in msg
    with pytest.raises((IncompleteStoreError, StoreNotFoundError)):
        ss.open_store(str(tmp_path / "a.zarr"))
    s = convert(p, str(tmp_path / "b.zarr"), dtype="float64")
    assert s.read_chunk(0).data[2] == float(token)
    largest = convert(_write(tmp_path / "m.svm", "1 1:3.4028235e38\n-1 1:-1\n"),
                      str(tmp_path / "m.zarr"))
    assert largest.read_chunk(0).data[0] == np.finfo(np.float32).max


@pytest.mark.parametrize("value, dtype, match", [
    (1e39, "float32", r"too large for dtype\('float32'\): X\[2, 1\] = 1e\+39 .*'float64'"),
    (np.inf, "float64", r"NaN or infinity: X\[2, 1\] = inf"),
    (np.nan, "float32", r"NaN or infinity: X\[2, 1\] = nan"),
])
def test_write_store_refuses_non_finite_values(value, dtype, match, tmp_path):
    from streamsvm.io._writer import write_store
    X = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 0], [0, value, 1]]))
    with pytest.raises(InvalidParameterError, match=match):
        write_store(tmp_path / "s.zarr", X, [1, -1, 1], dtype=dtype)
    assert not (tmp_path / "s.zarr").exists()
    X[2, 1] = 3.4028235e38
    assert write_store(tmp_path / "s.zarr", X, [1, -1, 1]).read_chunk(0).data[2] == \
        np.finfo(np.float32).max


def _tree(path):
    """Every file under ``path`` with its bytes (or the file's bytes)."""
    path = pathlib.Path(path)
    if path.is_file():
        return {".": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def test_overwrite_replaces_only_streamsvm_stores(tmp_path):
    import zarr
    p = _write(tmp_path / "t.svm", "1 1:1\n-1 2:1\n")
    (tmp_path / "mine").mkdir()
    _write(tmp_path / "mine" / "notes.txt", "keep me")
    _write(tmp_path / "file.txt", "keep me too")
    zarr.open_group(str(tmp_path / "plain.zarr"), mode="w").attrs["other"] = 1
    for name, what in [("mine", "a directory holding 1 entry (notes.txt)"),
                       ("file.txt", "a file of 11 bytes"),
                       ("plain.zarr", "a Zarr node without 'streamsvm' attributes")]:
        before = _tree(tmp_path / name)
        for overwrite in (False, True):
            with pytest.raises(StoreExistsError) as info:
                convert(p, str(tmp_path / name), overwrite=overwrite)
            assert what in str(info.value) and "left alone" in str(info.value)
        assert _tree(tmp_path / name) == before
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreExistsError, match="empty directory.*--overwrite"):
        convert(p, str(tmp_path / "empty"))
    assert convert(p, str(tmp_path / "empty"), overwrite=True).n_rows == 2
    assert convert(p, str(tmp_path / "empty"), overwrite=True).n_rows == 2   # a store now


def test_output_that_is_or_holds_an_input_is_refused(tmp_path):
    p = _write(tmp_path / "t.svm", "1 1:1\n-1 2:1\n")
    (tmp_path / "link.svm").symlink_to(tmp_path / "t.svm")
    store = tmp_path / "s.zarr"
    convert(p, str(store))
    inner = _write(store / "inner.svm", "1 3:1\n")       # an input kept inside a store
    before = _tree(tmp_path)
    cases = [
        (p, p, "is the input"),
        (str(tmp_path / "link.svm"), p, "is the input"),              # through a symlink
        (str(tmp_path / "t*.svm"), f"{tmp_path}/x/../t.svm", "is the input"),   # a glob
        (p, f"file://{p}", "is the input"),
        (inner, str(store), "contains the input"),
        (p, f"{p}/out.zarr", "lies inside the input"),
    ]
    for inp, out, how in cases:
        with pytest.raises(InvalidParameterError, match=how):
            convert(inp, out, overwrite=True)
    assert _tree(tmp_path) == before


def test_output_that_is_an_input_url_is_refused():
    import fsspec
    fs = fsspec.filesystem("memory")
    fs.pipe("/i10/t.svm", b"1 1:1\n-1 2:1\n")
    try:
        for out in ("memory://i10/t.svm", "memory:///i10/t.svm/", "memory://i10"):
            with pytest.raises(InvalidParameterError, match="the input 'memory://i10/t.svm'"):
                convert("memory://i10/t.svm", out, overwrite=True)
        assert fs.cat("/i10/t.svm") == b"1 1:1\n-1 2:1\n"
    finally:
        fs.rm("/i10", recursive=True)


def test_write_store_overwrites_only_stores(tmp_path):
    from streamsvm.io._writer import write_store
    X = sp.csr_matrix(np.eye(3))
    (tmp_path / "d").mkdir()
    _write(tmp_path / "d" / "data.csv", "1,2,3\n")
    with pytest.raises(StoreExistsError, match="data.csv.*left alone"):
        write_store(tmp_path / "d", X, [1, -1, 1], overwrite=True)
    assert (tmp_path / "d" / "data.csv").read_text() == "1,2,3\n"
    write_store(tmp_path / "s.zarr", X, [1, -1, 1])
    assert write_store(tmp_path / "s.zarr", X[:2], [1, -1], overwrite=True).n_rows == 2


def test_appender_writes_every_value_once_in_order(tmp_path):
    """Pieces smaller and larger than a shard, flushes mid-shard (resume points)."""
    import zarr
    from streamsvm.io._writer import _Appender
    arr = zarr.create_array(str(tmp_path / "a.zarr"), shape=(0,), dtype="int64", chunks=(4,),
                            shards=(8,), fill_value=-1)
    app = _Appender(arr, 8)
    rng = np.random.default_rng(0)
    expected = []
    for step in range(60):
        piece = np.arange(len(expected), len(expected) + rng.integers(0, 20))
        app.append(piece)
        expected.extend(piece.tolist())
        assert app.pos % 8 == 0 or app.pos == arr.shape[0]   # only whole shards, or flushed
        if step % 7 == 3:
            app.flush()
            np.testing.assert_array_equal(arr[:], expected)
    app.flush()
    np.testing.assert_array_equal(arr[:], expected)
