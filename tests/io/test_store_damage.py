"""Fault injection: a damaged store stops loudly or reads back exactly; never anything else.

For every file of a store (each array's shards and ``zarr.json``, the group's
``zarr.json``), the file deleted and single bits flipped at random positions. Each case must
either raise a streamsvm error (exit 2 from the CLI) that names the array and the chunk —
when training, reading through the scheduler, and in ``verify`` — or read back arrays
identical to the clean store and train the same model. Never a different model, never a
crash (the kernels only see rows that passed the read-time checks).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm import open_store
from streamsvm.estimators import train
from streamsvm.exceptions import StreamSVMError
from streamsvm.io import _writer
from streamsvm.io._verify import verify_store
from streamsvm.io._writer import write_store
from streamsvm.schedule import PassScheduler

FLIPS_PER_FILE = 4


def _make(path, *, values: bool, multiclass: bool, seed: int):
    rng = np.random.default_rng(seed)
    X = sp.random(600, 40, density=0.2, format="csr", random_state=seed, dtype=np.float64)
    if not values:
        X.data[:] = 1.0
    y = rng.integers(0, 4, 600) if multiclass else rng.choice([-1.0, 1.0], 600)
    with pytest.MonkeyPatch.context() as mp:   # many small shards in a small store
        mp.setattr(_writer, "INNER_ELEMS", 64)
        mp.setattr(_writer, "SHARD_ELEMS", 256)
        mp.setattr(_writer, "ROW_INNER_MIN", 64)
        mp.setattr(_writer, "ROW_SHARD", 256)
        write_store(path, X, y, chunk_rows=97)
    return path


def _keep(block, views, args, acc):
    args[0].append((block.row_start, block.indptr.copy(), block.indices.copy(),
                    block.data.copy(), block.y.copy()))


def _read_all(url):
    """Every row through the scheduler (as training reads), in order."""
    store = open_store(url)
    sched = PassScheduler(store, memory="1MB", prefetch=2, block_rows=50)
    parts = []
    sched.map_reduce(_keep, args=(parts,))
    sched.close()
    return parts


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        x[0] == y[0] and all(np.array_equal(u, v) for u, v in zip(x[1:], y[1:]))
        for x, y in zip(a, b))


def _cases(root: pathlib.Path, seed: int):
    """(description, relative path, damage) for every file: deletion and bit flips."""
    rng = np.random.default_rng(seed)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        yield f"delete {rel}", rel, None
        size = path.stat().st_size
        for _ in range(FLIPS_PER_FILE):
            bit = int(rng.integers(0, 8 * size))
            yield f"flip bit {bit} of {rel}", rel, bit


def _damage(root: pathlib.Path, rel, bit) -> None:
    target = root / rel
    if bit is None:
        target.unlink()
        return
    raw = bytearray(target.read_bytes())
    raw[bit // 8] ^= 1 << (bit % 8)
    target.write_bytes(bytes(raw))


def _array_of(rel: pathlib.Path) -> str | None:
    return rel.parts[0] if len(rel.parts) > 1 else None


@pytest.mark.parametrize("values,multiclass", [(True, False), (False, True)],
                         ids=["binary-values", "multiclass-ones"])
def test_every_damage_is_loud_or_harmless(tmp_path, values, multiclass):
    clean = _make(tmp_path / "clean.zarr", values=values, multiclass=multiclass, seed=3)
    want_rows = _read_all(str(clean))
    want_model, _ = train(str(clean), memory="64MB", tol=1e-4, loss="hinge")
    assert verify_store(str(clean))["ok"]
    loud = quiet = 0
    for i, (what, rel, bit) in enumerate(_cases(clean, seed=4)):
        case = tmp_path / f"case{i}.zarr"
        shutil.copytree(clean, case)
        _damage(case, rel, bit)
        report = verify_store(str(case))
        errors = []
        for attempt in (lambda: _read_all(str(case)),
                        lambda: train(str(case), memory="64MB", tol=1e-4, loss="hinge")):
            try:
                errors.append((None, attempt()))
            except StreamSVMError as exc:
                errors.append((exc, None))
        (read_exc, rows), (train_exc, result) = errors
        if read_exc is None:
            assert train_exc is None, what
            assert _same(rows, want_rows), f"{what}: read back different rows without an error"
            np.testing.assert_array_equal(result[0].coef, want_model.coef, err_msg=what)
            np.testing.assert_array_equal(result[0].intercept, want_model.intercept)
            assert report["ok"], f"{what}: verify found {report['problems']}"
            quiet += 1
            continue
        loud += 1
        assert train_exc is not None, f"{what}: reading fails but training succeeded"
        assert not report["ok"], f"{what}: reading fails with {read_exc} but verify passes"
        array = _array_of(rel)
        for exc in (read_exc, train_exc):
            msg = str(exc)
            if array is not None:
                assert f"'{array}'" in msg or f"{array}/" in msg, f"{what}: {msg}"
            if array is not None and rel.name != "zarr.json":
                assert "chunk" in msg and "rows [" in msg, f"{what}: {msg}"
        shutil.rmtree(case)
    # every deletion and every flip inside a chunk, an index or an array's metadata is loud
    n_shards = sum(1 for p in clean.rglob("c/*"))
    assert loud >= n_shards * (1 + FLIPS_PER_FILE)
    assert quiet + loud == sum(1 for _ in _cases(clean, seed=4))


def _cli(*args, cwd):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "streamsvm.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_stops_with_exit_2_naming_array_and_chunk(tmp_path):
    clean = _make(tmp_path / "clean.zarr", values=True, multiclass=False, seed=5)
    cases = {"y-deleted": ("y/c/1", None), "indices-flip": ("indices/c/2", 8 * 40 + 3),
             "data-meta-flip": ("data/zarr.json", 8 * 30 + 1)}
    for name, (rel, bit) in cases.items():
        case = tmp_path / f"{name}.zarr"
        shutil.copytree(clean, case)
        _damage(case, pathlib.Path(rel), bit)
        array = rel.split("/")[0]
        for cmd in (["train", str(case), "-o", str(tmp_path / "m.json"), "-q"],
                    ["verify", str(case), "-q"]):
            proc = _cli(*cmd, cwd=tmp_path)
            assert proc.returncode == 2, (name, cmd, proc.stderr)
            assert "Traceback" not in proc.stderr
            assert f"'{array}'" in proc.stderr or f"{array}/" in proc.stderr, proc.stderr
        assert not (tmp_path / "m.json").exists()
    assert _cli("verify", str(clean), "-q", cwd=tmp_path).returncode == 0


def test_verify_lists_every_problem(tmp_path):
    clean = _make(tmp_path / "s.zarr", values=True, multiclass=False, seed=6)
    (clean / "y" / "c" / "0").unlink()
    _damage(clean, pathlib.Path("data/c/3"), 8 * 20)
    report = verify_store(str(clean))
    assert not report["ok"] and report["n_problems"] == 2
    assert any("'y'" in p and "missing" in p and "chunks 0-" in p for p in report["problems"])
    assert any("'data'" in p and "checksum" in p for p in report["problems"])


def test_format_1_stores_are_refused(tmp_path):
    import zarr
    clean = _make(tmp_path / "s.zarr", values=True, multiclass=False, seed=7)
    g = zarr.open_group(str(clean), mode="r+")
    attrs = dict(g.attrs["streamsvm"])
    attrs["format_version"] = 1
    from streamsvm.io._integrity import seal
    g.attrs["streamsvm"] = seal(attrs)
    with pytest.raises(StreamSVMError, match="format version 1.*convert the input again"):
        open_store(str(clean))


def test_damage_after_a_first_read_is_found_when_the_file_changed(tmp_path):
    """A local chunk's CRC is checked when a run first reads it; a shard file rewritten
    while the run goes on is checked again (its identity changed), damage included."""
    clean = _make(tmp_path / "s.zarr", values=True, multiclass=False, seed=8)
    store = open_store(str(clean))
    first = store.read_rows(0, store.n_rows)
    again = store.read_rows(0, store.n_rows)           # verified chunks: not checked again
    np.testing.assert_array_equal(first.data, again.data)
    shard = clean / "data" / "c" / "2"
    st = shard.stat()
    _damage(clean, pathlib.Path("data/c/2"), 8 * 30)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(StreamSVMError, match=r"'data', shard data/c/2.*checksum"):
        store.read_rows(0, store.n_rows)


def test_remote_chunks_are_checked_on_every_read(s3, monkeypatch):
    import s3fs
    url, opts = s3
    monkeypatch.setattr(_writer, "INNER_ELEMS", 64)
    monkeypatch.setattr(_writer, "SHARD_ELEMS", 256)
    X = sp.random(300, 20, density=0.2, format="csr", random_state=2, dtype=np.float64)
    store = write_store(url + "/s.zarr", X, np.where(np.arange(300) % 2, 1.0, -1.0),
                        chunk_rows=50, storage_options=opts)
    store.read_rows(0, store.n_rows)
    fs = s3fs.S3FileSystem(**opts)
    key = url.split("://", 1)[1] + "/s.zarr/data/c/1"
    raw = bytearray(fs.cat_file(key))
    raw[40] ^= 0x10
    fs.pipe_file(key, bytes(raw))
    with pytest.raises(StreamSVMError, match=r"'data', shard data/c/1.*checksum"):
        store.read_rows(0, store.n_rows)
