"""External shuffle, interrupted conversions (killed processes) and resume."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import streamsvm as ss
from streamsvm.exceptions import IncompleteStoreError
from streamsvm.io import convert, read_meta

from ..conftest import data_file
from .helpers import store_arrays, store_to_csr


def _rows_as_set(store):
    X, y = store_to_csr(store)
    return sorted((float(y[i]), tuple(X.indices[X.indptr[i]:X.indptr[i + 1]]),
                   tuple(X.data[X.indptr[i]:X.indptr[i + 1]])) for i in range(X.shape[0]))


def test_shuffle_is_a_seeded_permutation(tmp_path):
    path = str(data_file("mushrooms/mushrooms"))
    plain = convert(path, str(tmp_path / "p.zarr"), chunk_rows=1000)
    a = convert(path, str(tmp_path / "a.zarr"), chunk_rows=1000, shuffle=True, seed=1,
                shuffle_memory=50_000)   # forces many buckets and recursive splits
    b = convert(path, str(tmp_path / "b.zarr"), chunk_rows=1000, shuffle=True, seed=1,
                shuffle_memory=10 << 20)
    c = convert(path, str(tmp_path / "c.zarr"), chunk_rows=1000, shuffle=True, seed=2)
    assert _rows_as_set(a) == _rows_as_set(plain)
    ya, yb, yc = (store_to_csr(s)[1] for s in (a, b, c))
    yp = store_to_csr(plain)[1]
    assert not np.array_equal(ya, yp) and not np.array_equal(ya, yc)
    # same seed, same budget → identical stores
    convert(path, str(tmp_path / "a2.zarr"), chunk_rows=1000, shuffle=True, seed=1,
            shuffle_memory=50_000)
    arr1, _ = store_arrays(tmp_path / "a.zarr")
    arr2, _ = store_arrays(tmp_path / "a2.zarr")
    for k in arr1:
        np.testing.assert_array_equal(arr1[k], arr2[k])
    # label runs of a random order: about n/2 for balanced classes (plain file: 2223)
    runs = lambda y: int(np.count_nonzero(np.diff(y)))  # noqa: E731
    assert runs(ya) > 0.45 * len(ya) > runs(yp)
    assert len(yb) == len(ya)


def _big_input(tmp_path, copies=12):
    src = data_file("a9a/a9a").read_bytes()
    p = tmp_path / "big.svm"
    p.write_bytes(src * copies)
    return p


def _convert_cmd(inp, out, *extra):
    return [sys.executable, "-m", "streamsvm.cli", "convert", str(inp), str(out),
            "--chunk-rows", "3000", "--resume-every", "2MB", "-q", *extra]


def _kill_when_progress(proc, out, min_rows):
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            meta = read_meta(str(out))
        except Exception:
            meta = None
        if meta and (meta.get("progress") or {}).get("rows_done", 0) >= min_rows:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.01)
    proc.kill()
    raise AssertionError("conversion made no progress")


@pytest.mark.parametrize("kill_after_rows", [1, 120_000])
def test_killed_conversion_resumes_to_identical_store(tmp_path, kill_after_rows):
    inp = _big_input(tmp_path)
    ref = tmp_path / "ref.zarr"
    subprocess.run(_convert_cmd(inp, ref), check=True)
    out = tmp_path / "out.zarr"
    proc = subprocess.Popen(_convert_cmd(inp, out))
    if not _kill_when_progress(proc, out, kill_after_rows):
        pytest.skip("the conversion finished before it could be killed")
    with pytest.raises(IncompleteStoreError, match="incomplete"):
        ss.open_store(str(out))
    rows_before = read_meta(str(out))["progress"]["rows_done"]
    assert 0 < rows_before < 32561 * 12
    subprocess.run(_convert_cmd(inp, out, "--resume"), check=True)
    a, attrs_a = store_arrays(ref)
    b, attrs_b = store_arrays(out)
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    ids = [attrs["streamsvm"].pop("store_id") for attrs in (attrs_a, attrs_b)]
    assert ids[0] != ids[1]                      # each conversion gets its own id ...
    for attrs in (attrs_a, attrs_b):             # ... which an attributes checksum covers
        attrs["streamsvm"].pop("checksum", None)
    assert attrs_a == attrs_b


def test_rerun_after_kill_restarts_cleanly(tmp_path):
    inp = _big_input(tmp_path, copies=8)
    out = tmp_path / "out.zarr"
    proc = subprocess.Popen(_convert_cmd(inp, out))
    if not _kill_when_progress(proc, out, 1):
        pytest.skip("the conversion finished before it could be killed")
    subprocess.run(_convert_cmd(inp, out), check=True)   # no --resume: restart
    ref = convert(str(inp), str(tmp_path / "ref.zarr"), chunk_rows=3000)
    a, _ = store_arrays(ref.url)
    b, _ = store_arrays(out)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_resume_with_other_options_restarts(tmp_path, caplog):
    inp = _big_input(tmp_path, copies=8)
    out = tmp_path / "out.zarr"
    proc = subprocess.Popen(_convert_cmd(inp, out))
    if not _kill_when_progress(proc, out, 1):
        pytest.skip("the conversion finished before it could be killed")
    store = convert(str(inp), str(out), chunk_rows=5000, resume=True)
    assert store.chunk_rows == 5000 and store.n_rows == 8 * 32561
    assert "restarting" in caplog.text


def test_shuffle_memory_is_bounded(tmp_path, monkeypatch):
    """No bucket larger than its share of the budget is ever loaded, whatever the input
    size (a9a's rows take more bytes in the scratch files than as text: buckets split)."""
    from streamsvm.io import _shuffle
    loaded = []
    real = _shuffle._read_bucket

    def spy(path, frames, index_dtype, dtype):
        n, nnz = sum(f[0] for f in frames), sum(f[1] for f in frames)
        loaded.append(_shuffle._loaded_bytes(n, nnz, index_dtype, dtype))
        return real(path, frames, index_dtype, dtype)
    monkeypatch.setattr(_shuffle, "_read_bucket", spy)
    inp = _big_input(tmp_path, copies=3)          # ~7 MB of text
    budget = 300_000
    store = convert(str(inp), str(tmp_path / "s.zarr"), chunk_rows=5000, shuffle=True,
                    seed=4, shuffle_memory=budget)
    assert store.n_rows == 3 * 32561
    assert len(loaded) > 10 and max(loaded) <= _shuffle.bucket_bytes(budget) < budget


def _random_blocks(n_blocks, seed):
    """Parsed-block-like CSR pieces (labels, indptr, int32 indices, float32 values)."""
    rng = np.random.default_rng(seed)
    for _ in range(n_blocks):
        lens = rng.integers(0, 60, size=2000)
        indptr = np.concatenate([[0], np.cumsum(lens)])
        yield (rng.choice([-1.0, 1.0], size=2000), indptr,
               rng.integers(0, 10**5, size=indptr[-1]).astype(np.int32),
               rng.random(indptr[-1], dtype=np.float32))


@pytest.mark.parametrize("n_buckets", [None, 2])     # sized from the data; or split again
def test_shuffle_holds_at_most_its_budget(n_buckets, tmp_path):
    """What the shuffler materializes at once (a loaded bucket, its permutation and the
    pieces it yields, three of which the writer's queue and thread hold) stays within
    ``budget_bytes``, measured by tracemalloc, which sees numpy's array allocations."""
    import collections
    import tracemalloc
    from streamsvm.io._shuffle import Shuffler, bucket_bytes
    budget, n_blocks = 2 << 20, 40                  # ~20 MB of rows in the scratch files
    if n_buckets is None:
        n_buckets = int(np.ceil(n_blocks * 2000 * (16 + 30 * 8) / bucket_bytes(budget)))
    # the same shuffle twice, measured the second time: numba's compiler allocates through
    # Python, and kernels compiled inside the measured window (a cold cache: a fresh clone,
    # or this test run alone) would be counted
    for attempt in range(2):
        (tmp_path / str(attempt)).mkdir()
        tracemalloc.start()
        try:
            with Shuffler(n_buckets, 7, index_dtype="int32", dtype="float32",
                          budget_bytes=budget, scratch_dir=str(tmp_path / str(attempt))) as sh:
                for i, block in enumerate(_random_blocks(n_blocks, 0)):
                    sh.scatter(i, *block)
                del block
                held = collections.deque(maxlen=3)
                base = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                n_rows = nnz = largest = 0
                for part in sh.gather():
                    held.append(part)
                    n_rows += len(part[0])
                    nnz += len(part[2])
                    largest = max(largest, sum(a.nbytes for a in part))
                del part, held
                peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    expected = sum(len(b[0]) for b in _random_blocks(n_blocks, 0))
    assert n_rows == expected == n_blocks * 2000 and nnz > 0
    assert largest <= budget // 16
    assert peak <= budget, f"peak {peak / 2**20:.2f} MiB for a budget of {budget / 2**20} MiB"
