"""Stores and wrappers shared by the scheduler tests (not a test module)."""

from __future__ import annotations

import threading
import time

import numpy as np
import scipy.sparse as sp

from streamsvm.io import InMemoryStore, StoreMeta


def random_problem(n=103, d=17, density=0.3, seed=0):
    """A random sparse X (with some empty rows) and ±1 labels."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.standard_normal(k))
    X = sp.csr_matrix(sp.diags((np.arange(n) % 7 != 3).astype(float)) @ X)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return X, y


def random_store(n=103, d=17, chunk_rows=10, density=0.3, seed=0):
    X, y = random_problem(n, d, density, seed)
    return InMemoryStore(X, y, chunk_rows=chunk_rows), X, y


def a9a_problem(n_rows=2000):
    """The first ``n_rows`` rows of a9a (tests/data)."""
    from ..conftest import data_file
    from sklearn.datasets import load_svmlight_file
    X, y = load_svmlight_file(str(data_file("a9a/a9a")), n_features=123)
    return sp.csr_matrix(X[:n_rows]), y[:n_rows]


class CountingStore(StoreMeta):
    """Delegates to a store and records every read (chunk id, rows, thread name)."""

    def __init__(self, store, *, fail_chunk=None, delay=0.0, seed=0):
        self._store = store
        self.meta, self.url, self.storage_options = store.meta, store.url, store.storage_options
        self.zero_copy, self.range_reads = store.zero_copy, store.range_reads
        self.fail_chunk = fail_chunk
        self.delay = delay
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.reads = []          # (chunk id, start, stop)
        self.threads = set()

    def __getattr__(self, name):
        return getattr(self._store, name)

    fingerprint = property(lambda self: self._store.fingerprint)

    def held_bytes_for(self, keep):
        return self._store.held_bytes_for(keep)

    def keep_partial(self, keep):
        self._store.keep_partial(keep)

    def largest_inner_bytes(self):
        return self._store.largest_inner_bytes()

    def _record(self, chunk_id, start, stop):
        with self._lock:
            self.reads.append((chunk_id, start, stop))
            self.threads.add(threading.current_thread().name)
            pause = self.delay * self._rng.random()
        if pause:
            time.sleep(pause)
        if chunk_id == self.fail_chunk:
            raise OSError(f"disk on fire under chunk {chunk_id}")

    def read_chunk(self, i):
        start, stop = self._store.chunk_bounds(i)
        self._record(i, start, stop)
        return self._store.read_chunk(i)

    def read_rows(self, start, stop, chunk_id=-1):
        self._record(chunk_id, start, stop)
        return self._store.read_rows(start, stop, chunk_id=chunk_id)

    @property
    def n_reads(self):
        return len(self.reads)
