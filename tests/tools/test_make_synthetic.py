"""tools/make_synthetic.py: a streaming generator of synthetic libsvm files."""

from __future__ import annotations

import bz2
import gzip
import lzma
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

from tools.make_synthetic import hidden_model, make_synthetic
from tools.synthetic.rows import Generator, _draw_features
from tools.synthetic.text import _format_g6

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "make_synthetic.py"


def _gen(path, **kw):
    kw.setdefault("progress", False)
    return make_synthetic(path, **kw)


def _parse(path):
    """(labels as strings, [(indices, value tokens)] per row) read straight from the text."""
    labels, rows = [], []
    for line in pathlib.Path(path).read_text().splitlines():
        head, *toks = line.split(" ")
        labels.append(head)
        pairs = [t.split(":") for t in toks]
        rows.append((np.array([int(i) for i, _ in pairs], np.int64), [v for _, v in pairs]))
    return labels, rows


def _load(path, n_features, **kw):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path), n_features=n_features, **kw)
    X.indices = X.indices.astype(np.int32)  # recent sklearn returns int64; LinearSVC wants int32
    X.indptr = X.indptr.astype(np.int32)
    return X, y


# ------------------------------------------------------------------------------------------
# format
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("classes", [2, 4])
def test_output_parses_and_has_the_promised_structure(tmp_path, classes):
    pytest.importorskip("sklearn")
    out = tmp_path / "d.svm"
    D, n = 60, 700
    s = _gen(out, rows=n, features=D, nnz_per_row=8, classes=classes, seed=3)
    X, y = _load(out, D)
    assert X.shape == (n, D)
    assert X.nnz == s["nnz"]
    assert s["rows"] == n and s["bytes"] == s["text_bytes"] == out.stat().st_size
    expected = {-1.0, 1.0} if classes == 2 else set(range(1, classes + 1))
    assert set(np.unique(y)) == expected
    assert s["label_counts"] == {int(k): int(c) for k, c in zip(*np.unique(y, return_counts=True))}
    labels, rows = _parse(out)
    if classes == 2:
        assert set(labels) == {"+1", "-1"}
    sizes = []
    for idx, _ in rows:
        assert len(idx) >= 1
        assert np.all(np.diff(idx) > 0)  # sorted, unique
        assert idx[0] >= 1 and idx[-1] <= D  # one-based
        sizes.append(len(idx))
    assert 6 < np.mean(sizes) <= 8  # 1 + Poisson(7) minus duplicates of the Zipf head
    assert not (tmp_path / "d.svm.partial").exists()


def test_zero_based_indices(tmp_path):
    D = 30
    _gen(tmp_path / "one.svm", rows=300, features=D, nnz_per_row=5)
    _gen(tmp_path / "zero.svm", rows=300, features=D, nnz_per_row=5, zero_based=True)
    l1, r1 = _parse(tmp_path / "one.svm")
    l0, r0 = _parse(tmp_path / "zero.svm")
    assert l0 == l1
    for (i1, v1), (i0, v0) in zip(r1, r0):
        np.testing.assert_array_equal(i0, i1 - 1)
        assert v0 == v1
    assert min(i.min() for i, _ in r0) == 0
    assert max(i.max() for i, _ in r0) <= D - 1


def test_values_round_trip_as_written(tmp_path):
    out = tmp_path / "d.svm"
    _gen(out, rows=400, features=1000, nnz_per_row=20)
    _, rows = _parse(out)
    toks = [v for _, vals in rows for v in vals]
    assert len(toks) > 5000
    for t in toks:  # canonical '%.6g' text: re-formatting the parsed value gives the same text
        assert "%.6g" % float(t) == t
    assert any("e-" in t for t in toks) or all(abs(float(t)) >= 1e-4 for t in toks)


def test_value_formatting_matches_percent_g():
    edge = [1e-12, 1e-13, 1e12, 1e13, 1e-4, 1e-5, 9.999995e-5, 0.9999995, 0.99999949, 999999.5,
            123456.0, 100000.0, 1e6, 9999995.0, 0.1, 2 / 3, -1.5, -0.000123456789, 5e-324]
    rng = np.random.default_rng(0)
    scale = 10.0 ** rng.integers(-12, 12, 20000)
    values = np.concatenate([edge, rng.standard_normal(20000) * scale])
    toks = _format_g6(values)
    for x, t in zip(values, toks):
        clamped = np.sign(x) * min(max(abs(x), 1e-12), 1e12)
        assert t == "%.6g" % clamped, x
        assert "%.6g" % float(t) == t


def test_binary_values_write_only_ones(tmp_path):
    out = tmp_path / "b.svm"
    _gen(out, rows=300, features=40, nnz_per_row=6, binary_values=True)
    _, rows = _parse(out)
    assert {v for _, vals in rows for v in vals} == {"1"}
    assert b":1 " in out.read_bytes() and b":1\n" in out.read_bytes()


def test_feature_draws_equal_searchsorted():
    rng = np.random.default_rng(1)
    for D, zipf in [(1, 1.1), (2, 0.0), (7, 2.5), (1000, 1.1), (300_000, 1.1)]:
        gen = Generator(features=D, nnz_per_row=5, classes=2, noise=0.0, zipf=zipf,
                        binary_values=False, seed=0)
        u = rng.random(50_000)
        u[:3] = [0.0, gen.cdf[0], np.nextafter(1.0, 0.0)]
        f = np.empty(u.size, np.int64)
        _draw_features(u, gen.cdf, gen.guide, f)
        np.testing.assert_array_equal(f, np.minimum(np.searchsorted(gen.cdf, u, "right"), D - 1))


def test_zipf_head_is_frequent(tmp_path):
    out = tmp_path / "z.svm"
    _gen(out, rows=2000, features=1000, nnz_per_row=10, zipf=1.1)
    _, rows = _parse(out)
    freq = np.bincount(np.concatenate([i for i, _ in rows]) - 1, minlength=1000)
    assert freq[0] > freq[9] > freq[99] and freq[:10].sum() > freq[500:].sum()


# ------------------------------------------------------------------------------------------
# determinism
# ------------------------------------------------------------------------------------------

def test_deterministic_for_a_seed(tmp_path):
    kw = dict(rows=800, features=200, nnz_per_row=7, classes=3, noise=0.1)
    _gen(tmp_path / "a.svm", seed=5, **kw)
    _gen(tmp_path / "b.svm", seed=5, progress=True, **kw)
    _gen(tmp_path / "c.svm", seed=6, **kw)
    a = (tmp_path / "a.svm").read_bytes()
    assert a == (tmp_path / "b.svm").read_bytes()
    assert a != (tmp_path / "c.svm").read_bytes()


@pytest.mark.parametrize("block_rows", [None, 500])
def test_shorter_file_is_a_prefix_of_a_longer_one(tmp_path, block_rows):
    kw = dict(features=100, nnz_per_row=6, seed=2, _block_rows=block_rows)
    _gen(tmp_path / "short.svm", rows=1234, **kw)
    _gen(tmp_path / "long.svm", rows=2600, **kw)
    short = (tmp_path / "short.svm").read_bytes()
    long = (tmp_path / "long.svm").read_bytes()
    assert short.count(b"\n") == 1234 and long.count(b"\n") == 2600
    assert long.startswith(short)


@pytest.mark.parametrize("suffix,opener", [(".gz", gzip.open), (".bz2", bz2.open),
                                           (".xz", lzma.open), (".zst", None)])
def test_compressed_output_holds_the_same_bytes(tmp_path, suffix, opener):
    if opener is None:
        zstandard = pytest.importorskip("zstandard")

        def opener(p):
            return zstandard.ZstdDecompressor().stream_reader(open(p, "rb"))
    kw = dict(rows=1500, features=300, nnz_per_row=9, seed=4)
    plain = tmp_path / "d.svm"
    packed = tmp_path / ("d.svm" + suffix)
    _gen(plain, **kw)
    s = _gen(packed, **kw)
    with opener(packed) as f:
        assert f.read() == plain.read_bytes()
    assert s["bytes"] == packed.stat().st_size < s["text_bytes"] == plain.stat().st_size
    again = tmp_path / ("again.svm" + suffix)
    _gen(again, **kw)
    assert again.read_bytes() == packed.read_bytes()  # no name or time stamp in the header
    assert not list(tmp_path.glob("*.partial"))


def test_failed_run_leaves_no_output(tmp_path, monkeypatch):
    out = tmp_path / "d.svm.gz"
    real = Generator.block

    def failing(self, b, n):
        if b == 2:
            raise RuntimeError("boom")
        return real(self, b, n)

    monkeypatch.setattr(Generator, "block", failing)
    with pytest.raises(RuntimeError, match="boom"):
        _gen(out, rows=1000, features=50, _block_rows=100)
    assert list(tmp_path.iterdir()) == []


def test_invalid_arguments(tmp_path):
    for kw in [dict(rows=-1), dict(features=0), dict(nnz_per_row=0), dict(classes=1),
               dict(noise=1.5), dict(zipf=-1.0), dict(seed=-3), dict(rows=2.5)]:
        args = dict(rows=10, features=10) | kw
        with pytest.raises(ValueError):
            _gen(tmp_path / "x.svm", **args)
    assert list(tmp_path.iterdir()) == []


def test_zero_rows_gives_an_empty_file(tmp_path):
    s = _gen(tmp_path / "e.svm", rows=0, features=10)
    assert (tmp_path / "e.svm").read_bytes() == b"" and s["nnz"] == 0


# ------------------------------------------------------------------------------------------
# the hidden linear model
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("binary_values", [False, True])
def test_noise_free_labels_are_linearly_separable(tmp_path, binary_values):
    pytest.importorskip("sklearn")
    from sklearn.svm import LinearSVC

    D, kw = 100, dict(nnz_per_row=10, binary_values=binary_values, seed=1)
    acc = {}
    for noise in (0.0, 0.2):
        out = tmp_path / f"n{noise}.svm"
        _gen(out, rows=3000, features=D, noise=noise, **kw)
        X, y = _load(out, D)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning with a large C
            acc[noise] = LinearSVC(C=100.0, max_iter=5000).fit(X, y).score(X, y)
        W, b = hidden_model(features=D, **kw)
        agree = np.mean(np.where(X @ W + b > 0, 1, -1) == y)
        if noise == 0.0:
            assert agree == 1.0  # labels are exactly sign(x.w + b) of the written values
        else:
            assert 0.76 < agree < 0.84  # 20 % of labels flipped
        assert 0.35 < np.mean(y > 0) < 0.65  # the bias balances the classes
    assert acc[0.0] > 0.97
    assert acc[0.2] < 0.9


def test_multiclass_labels_are_the_argmax_of_the_hidden_model(tmp_path):
    pytest.importorskip("sklearn")
    D, kw = 80, dict(nnz_per_row=10, classes=4, seed=7)
    out = tmp_path / "m.svm"
    _gen(out, rows=2000, features=D, noise=0.0, **kw)
    X, y = _load(out, D)
    W, b = hidden_model(features=D, **kw)
    assert W.shape == (D, 4) and b.shape == (4,)
    np.testing.assert_array_equal(np.argmax(X @ W + b, axis=1) + 1, y)
    assert np.bincount(y.astype(int))[1:].min() > 2000 / 4 / 3  # roughly balanced

    _gen(out, rows=2000, features=D, noise=0.3, **kw)
    X, y_noisy = _load(out, D)
    assert 0.65 < np.mean(y_noisy == y) < 0.75


def test_large_feature_space_uses_little_memory(tmp_path):
    # D = 3 * 10^6 would need 24 MB for a dense weight vector; the hash-defined model needs none
    s = _gen(tmp_path / "w.svm", rows=200, features=3_000_000, nnz_per_row=30)
    _, rows = _parse(tmp_path / "w.svm")
    assert max(i.max() for i, _ in rows) <= 3_000_000 and s["nnz"] > 200 * 20


# ------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------

def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_cli_writes_the_same_file_as_the_function(tmp_path):
    out = tmp_path / "cli.svm.gz"
    r = _run(out, "--rows", 500, "--features", 40, "--nnz-per-row", 5, "--classes", 3,
             "--noise", 0.1, "--zipf", 0.8, "--binary-values", "--seed", 9, "--zero-based")
    assert r.returncode == 0, r.stderr
    assert "500 rows" in r.stdout and "MB/s" in r.stdout and len(r.stdout.splitlines()) == 1
    # stderr is a pipe: plain progress lines and a summary, no carriage-return bar frames
    assert "cli.svm.gz: finished, 500/500 rows" in r.stderr and "\r" not in r.stderr
    ref = tmp_path / "ref.svm"
    _gen(ref, rows=500, features=40, nnz_per_row=5, classes=3, noise=0.1, zipf=0.8,
         binary_values=True, seed=9, zero_based=True)
    assert gzip.decompress(out.read_bytes()) == ref.read_bytes()


def test_cli_quiet_and_errors(tmp_path):
    r = _run(tmp_path / "q.svm", "--rows", 10, "--features", 5, "--quiet")
    assert r.returncode == 0 and r.stderr == "" and "10 rows" in r.stdout
    r = _run(tmp_path / "bad.svm", "--rows", 10, "--features", 0)
    assert r.returncode == 2 and "features" in r.stderr
    assert not (tmp_path / "bad.svm").exists()


def test_cli_help():
    r = _run("--help")
    assert r.returncode == 0
    for opt in ("--rows", "--features", "--nnz-per-row", "--classes", "--noise", "--zipf",
                "--binary-values", "--seed", "--zero-based", "--quiet"):
        assert opt in r.stdout
