"""Shared fixtures: the real datasets the tests use (committed, xz-compressed, under
tests/data/), a real S3 server on 127.0.0.1, and small tmpfs mounts for the disk-full tests;
and the number of workers of ``-n auto`` (pytest-xdist: the README runs the suite in one
worker process per CPU)."""

from __future__ import annotations

import atexit
import lzma
import os
import pathlib
import shutil
import tempfile

import pytest

DATA = pathlib.Path(__file__).resolve().parent / "data"
MAX_WORKERS = 4     # `-n auto`'s ceiling: each worker may start a dask cluster and an S3 server


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the README's test command) runs one worker per CPU, at most
    ``MAX_WORKERS``: the suite's S3 servers, dask clusters and converter subprocesses are
    processes of their own, so more workers than that oversubscribe a large machine."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0)) if hasattr(
        os, "sched_getaffinity") else (os.cpu_count() or 1)))


_unpacked: dict[str, pathlib.Path] = {}


def data_file(relpath: str) -> pathlib.Path:
    """Path of a real LIBSVM data set the tests use (``"a9a/a9a"``, ``"usps/usps.t"``, …):
    the whole file as published, committed xz-compressed under ``tests/data/`` and
    unpacked once per test session into a read-only temporary file, so the suite runs
    the same in any clone (the team's data folder is for benchmarks only)."""
    if relpath not in _unpacked:
        packed = DATA / (relpath + ".xz")
        if not packed.is_file():
            raise FileNotFoundError(f"{packed}: no such test data set (add it under tests/data/)")
        if not _unpacked:
            root = tempfile.mkdtemp(prefix="streamsvm-testdata-")
            atexit.register(shutil.rmtree, root, True)
            _unpacked[""] = pathlib.Path(root)
        path = _unpacked[""] / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        with lzma.open(packed) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        path.chmod(0o444)
        _unpacked[relpath] = path
    return _unpacked[relpath]


# -- S3 through a real moto_server on 127.0.0.1 ----------------------------------------

def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_moto_server(**env):
    """Start a real ``moto_server`` process on a free local port (``env``: its settings,
    e.g. ``INITIAL_NO_AUTH_ACTION_COUNT="0"`` to check credentials); yields its endpoint
    URL and stops it."""
    import os
    import subprocess
    import sys
    import time
    import urllib.request
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    port = _free_port()
    env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", **env)
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1)
            break
        except Exception:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
    try:
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def moto_server():
    """A real ``moto_server`` process on a free local port; yields its endpoint URL."""
    yield from run_moto_server()


@pytest.fixture
def s3(moto_server, monkeypatch):
    """``(bucket_url, storage_options)`` for a fresh bucket on the moto server."""
    import uuid
    import s3fs
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    opts = {"key": "testing", "secret": "testing",
            "client_kwargs": {"endpoint_url": moto_server, "region_name": "us-east-1"}}
    import boto3
    bucket = "b" + uuid.uuid4().hex[:12]
    boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1",
                 aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=bucket)
    yield f"s3://{bucket}", opts
    s3fs.S3FileSystem.clear_instance_cache()


# -- a small tmpfs: a disk that really fills -------------------------------------------------

@pytest.fixture
def small_tmpfs(tmp_path):
    """``mount(size) -> Path``: a tmpfs of ``size`` (``"1m"``, ``"512k"``; at most 64 MB)
    mounted under ``tmp_path``, unmounted after the test. Skips, saying why, where mounting
    is not permitted (not root, not Linux, no ``mount``)."""
    import subprocess
    import sys
    mounted = []

    def mount(size: str = "1m") -> pathlib.Path:
        if sys.platform != "linux" or not hasattr(os, "geteuid"):
            pytest.skip("a small tmpfs for the disk-full tests needs Linux")
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs for the disk-full tests needs root")
        path = tmp_path / f"tmpfs{len(mounted)}"
        path.mkdir()
        try:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755",
                                "tmpfs", str(path)], capture_output=True, text=True)
        except OSError as exc:
            pytest.skip(f"cannot mount a tmpfs for the disk-full tests: {exc}")
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs for the disk-full tests: {r.stderr.strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill_disk(directory, leave: int) -> pathlib.Path:
    """Write a filler file in ``directory`` so that about ``leave`` bytes stay free there
    (whole pages); remove the returned file to free the space again."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    filler = pathlib.Path(directory) / "filler"
    size = max(0, free - int(leave)) // st.f_frsize * st.f_frsize
    with open(filler, "wb") as f:
        f.truncate(size)
        os.posix_fallocate(f.fileno(), 0, size)
    return filler


@pytest.fixture(scope="module")
def many_classes_store(tmp_path_factory):
    """A store of 20,000 rows of 20 classes (10 features): dcd's α (160 B a row, 3.2 MB)
    and ww's β (152 B a row) spill out of a 3MB budget into the scratch directory."""
    import numpy as np
    import scipy.sparse as sp
    from streamsvm.io import write_store
    n, d, k = 20000, 10, 20
    y = np.random.default_rng(0).integers(0, k, n)
    X = sp.random(n, d, density=0.5, format="csr", random_state=1) + \
        sp.csr_matrix((np.ones(n), (np.arange(n), y % d)), shape=(n, d))
    url = tmp_path_factory.mktemp("many_classes") / "mc.zarr"
    write_store(str(url), X, y.astype(float), chunk_rows=1024)
    return url
