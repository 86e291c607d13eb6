"""Shared fixtures: the real datasets in ../shared/datasets (skipped cleanly when absent)."""

from __future__ import annotations

import pathlib

import pytest

SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def shared_dataset(relpath: str) -> pathlib.Path:
    """Path of a file under ../shared/datasets, or skip the test when it is not there."""
    path = SHARED / relpath
    if not path.exists():
        pytest.skip(f"shared dataset {relpath} not available at {SHARED}")
    return path


@pytest.fixture
def datasets_dir() -> pathlib.Path:
    if not SHARED.exists():
        pytest.skip(f"shared datasets not available at {SHARED}")
    return SHARED


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
