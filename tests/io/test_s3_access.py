"""S3 that cannot be used — no credentials, refused credentials, no endpoint listening — is
one line naming the URL and what to check, exit 2, wherever the URL is first touched: a
store, a text input, a model, an output file, a checkpoint directory (issue 33, item 12).
Against real moto_server processes on 127.0.0.1."""

from __future__ import annotations

import os

import pytest

from streamsvm.cli import main

from ..conftest import _free_port, run_moto_server
from ..test_cli_ux import _text


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """A local text file, its store and a model trained on it."""
    d = tmp_path_factory.mktemp("s3access")
    _text(d)
    assert main(["convert", str(d / "t.svm"), str(d / "s.zarr"), "-q"]) == 0
    assert main(["train", str(d / "s.zarr"), "-o", str(d / "m.json"), "-q"]) == 0
    return d


@pytest.fixture(autouse=True)
def fresh_filesystems():
    """No S3 filesystem of another test: cached ones would keep their credentials, and
    one collected during a test logs "Unclosed client session" into its stderr."""
    import gc
    s3fs = pytest.importorskip("s3fs")
    s3fs.S3FileSystem.clear_instance_cache()
    gc.collect()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def no_credentials(monkeypatch):
    """An environment where botocore finds no credentials at all."""
    for name in list(os.environ):
        if name.startswith("AWS_") and name != "AWS_CA_BUNDLE":
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="module")
def auth_server():
    """A moto_server that checks credentials: every key is unknown to it."""
    yield from run_moto_server(INITIAL_NO_AUTH_ACTION_COUNT="0")


# every first touch of a URL; {b}: the bucket URL, {d}: the local directory
TOUCHES = [
    (["info", "{b}/s.zarr"], "cannot access '{b}/s.zarr'"),
    (["verify", "{b}/s.zarr"], "cannot access '{b}/s.zarr'"),
    (["convert", "{b}/t.svm", "{d}/never.zarr"], "cannot access '{b}/t.svm'"),
    (["convert", "{d}/t.svm", "{b}/o.zarr"], "cannot access '{b}/o.zarr'"),
    (["train", "{b}/s.zarr", "-o", "{d}/never.json"], "cannot access '{b}/s.zarr'"),
    (["train", "{d}/s.zarr", "-o", "{b}/m.json"], "cannot write the model output (-o) "
                                                  "'{b}/m.json'"),
    (["train", "{d}/s.zarr", "-o", "{d}/never.json", "--checkpoint", "{b}/ck"],
     "cannot write to the checkpoint directory '{b}/ck'"),
    (["predict", "{b}/m.json", "{d}/t.svm", "-o", "{d}/never.txt"], "cannot access '{b}/m.json'"),
    (["predict", "{d}/m.json", "{d}/t.svm", "-o", "{b}/p.txt"], "cannot write the prediction "
                                                                "output (-o) '{b}/p.txt'"),
    (["evaluate", "{d}/m.json", "{b}/t.svm"], "cannot access '{b}/t.svm'"),
    (["evaluate", "{b}/m.json", "{d}/s.zarr"], "cannot access '{b}/m.json'"),
]


def _ids(cases) -> list[str]:
    return ["-".join(os.path.basename(a) for a in argv) for argv, _ in cases]


def _run(argv, bucket, local, options, capsys) -> str:
    """Run ``argv`` (placeholders filled) with ``--storage-option``s; the stderr line."""
    argv = [a.format(b=bucket, d=local) for a in argv]
    so = [x for kv in options.items() for x in ("--storage-option", f"{kv[0]}={kv[1]}")]
    quiet = ["-q"] if argv[0] in ("convert", "train", "verify") else []
    assert main(argv + quiet + so) == 2, argv
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    if argv[0] == "verify":             # its problems listed under one heading
        assert len(lines) == 2 and lines[1].startswith("  - "), err
    else:
        assert len(lines) == 1 and lines[0].startswith(f"streamsvm {argv[0]}: error: "), err
    assert not any(p.name.startswith("never") for p in local.iterdir())
    return err


@pytest.mark.parametrize("argv, says", TOUCHES, ids=_ids(TOUCHES))
def test_no_credentials(argv, says, s3, local, no_credentials, capsys):
    bucket, opts = s3
    err = _run(argv, bucket, local, {"client_kwargs.endpoint_url":
                                     opts["client_kwargs"]["endpoint_url"],
                                     "client_kwargs.region_name": "us-east-1"}, capsys)
    assert says.format(b=bucket) in err, err
    assert "no usable credentials (Unable to locate credentials)" in err, err
    assert "--storage-option key=... --storage-option secret=..." in err, err


REFUSED = TOUCHES[:1] + TOUCHES[2:6] + TOUCHES[7:]       # (verify, checkpoint: as above)


@pytest.mark.parametrize("argv, says", REFUSED, ids=_ids(REFUSED))
def test_refused_credentials(argv, says, auth_server, local, capsys):
    err = _run(argv, "s3://bucket", local, {"key": "wrong", "secret": "wrong",
                                            "client_kwargs.endpoint_url": auth_server,
                                            "client_kwargs.region_name": "us-east-1"}, capsys)
    assert says.format(b="s3://bucket") in err and "access denied (" in err, err
    assert "check the credentials" in err, err


UNREACHABLE = TOUCHES[:1] + TOUCHES[2:3] + TOUCHES[5:6] + TOUCHES[7:8]


@pytest.mark.parametrize("argv, says", UNREACHABLE, ids=_ids(UNREACHABLE))
def test_no_endpoint_listening(argv, says, local, capsys):
    endpoint = f"http://127.0.0.1:{_free_port()}"       # nothing listens there
    err = _run(argv, "s3://bucket", local, {"key": "k", "secret": "s",
                                            "client_kwargs.endpoint_url": endpoint,
                                            "client_kwargs.region_name": "us-east-1",
                                            "config_kwargs.retries.total_max_attempts": 1},
               capsys)
    assert says.format(b="s3://bucket") in err, err
    assert f'Could not connect to the endpoint URL: "{endpoint}/' in err, err
    assert "client_kwargs.endpoint_url=URL" in err, err
