"""Test helpers for stores."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import scipy.sparse as sp


def store_to_csr(store, n_features=None):
    """Concatenate every chunk of a store into (scipy CSR, y)."""
    chunks = list(store.iter_chunks())
    d = n_features or store.n_features
    mats = [sp.csr_matrix((c.data, c.indices, c.indptr), shape=(c.n_rows, d)) for c in chunks]
    return sp.vstack(mats, format="csr"), np.concatenate([c.y for c in chunks])


def assert_csr_equal(a, b):
    a, b = sp.csr_matrix(a), sp.csr_matrix(b)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)


def store_arrays(url, storage_options=None):
    """All arrays and the attributes of a store, read with plain zarr."""
    import zarr
    from streamsvm.io._store_open import _zarr_store
    g = zarr.open_group(_zarr_store(str(url), storage_options, "r"), mode="r")
    return {k: g[k][:] for k in g.array_keys()}, dict(g.attrs)


def encode_binary(y):
    """sklearn-loaded binary labels → ±1 as the converter stores them."""
    classes = np.unique(y)
    return np.where(y == classes[-1], 1.0, -1.0).astype(np.float32)


def reseal(path, edit):
    """Change a local store's ``streamsvm`` attributes with ``edit(attrs)`` (in place) and
    seal them again: the checksum is valid, as an attacker or a careless script would leave
    it."""
    from streamsvm.io._integrity import seal
    f = pathlib.Path(path) / "zarr.json"
    doc = json.loads(f.read_text())
    attrs = doc["attributes"]["streamsvm"]
    edit(attrs)
    doc["attributes"]["streamsvm"] = seal(attrs)
    f.write_text(json.dumps(doc))


def write_svm(path, n=3000, d=40, seed=0):
    """A libsvm text file of ``n`` rows, ``d`` features (30 % non-zero) and ±1 labels from a
    noisy linear rule: small, but dcd needs a dozen passes at C=0.1."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.3)
    y = np.where(X @ rng.standard_normal(d) + 0.8 * rng.standard_normal(n) > 0, 1, -1)
    with open(path, "w") as f:
        for i in range(n):
            nz = np.nonzero(X[i])[0]
            f.write(f"{y[i]:+d} " + " ".join(f"{j + 1}:{X[i, j]:.4g}" for j in nz) + "\n")


def stop_at_first_resume_point(monkeypatch, src, out, **kw):
    """``convert(src, out, **kw)`` stopped (KeyboardInterrupt) right after it recorded its
    first resume point; returns the unfinished store's ``progress``."""
    import pytest

    from streamsvm.io import convert, read_meta
    from streamsvm.io._writer import StoreWriter
    save = StoreWriter.save_progress

    def stop_after(self, state):
        save(self, state)
        raise KeyboardInterrupt

    with monkeypatch.context() as mp:
        mp.setattr(StoreWriter, "save_progress", stop_after)
        with pytest.raises(KeyboardInterrupt):
            convert(str(src), str(out), **kw)
    return read_meta(str(out))["progress"]
