"""A full or read-only disk during convert: exit code 2, a message naming the output (or the
scratch directory) and the OS reason, no temporary file left, and no store that opens.

The disk errors are simulated (the tests run as root, so permissions do not stop writes):
zarr's ``LocalStore.set`` or the shuffle's scratch ``open`` raise ENOSPC / EROFS, after
leaving a half-written temporary file as a filling disk would.
"""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

import streamsvm as ss
from streamsvm.cli import main
from streamsvm.exceptions import (IncompleteStoreError, StoreError, StoreNotFoundError,
                                  StoreWriteError)
from streamsvm.io import _shuffle, convert

from ..conftest import data_file
from .helpers import store_arrays


def _input(tmp_path, copies=4):
    p = tmp_path / "in.svm"
    p.write_bytes(data_file("a9a/a9a").read_bytes() * copies)
    return p


def _resume_point(key, value) -> bool:
    """Whether a write of ``key`` records a resume point in the store's attributes."""
    if key != "zarr.json":
        return False
    attrs = json.loads(value.to_bytes()).get("attributes", {}).get("streamsvm") or {}
    return bool((attrs.get("progress") or {}).get("input"))


def _fail_zarr_writes(monkeypatch, code, fail):
    """Make ``LocalStore.set`` raise OSError(code) once ``fail(key, value)`` says so, after
    writing half of the value to a temporary ``*.partial`` file."""
    import zarr.storage
    real = zarr.storage.LocalStore.set

    async def set_(self, key, value):
        if fail(key, value):
            path = self.root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.with_suffix(".0123abcd.partial").write_bytes(value.to_bytes()[:100])
            raise OSError(code, os.strerror(code), str(path))
        return await real(self, key, value)

    monkeypatch.setattr(zarr.storage.LocalStore, "set", set_)


def _partial_files(root):
    return sorted(str(p) for p in root.rglob("*.partial"))


def _assert_no_store(out):
    with pytest.raises(StoreNotFoundError):
        ss.open_store(str(out))
    assert not out.exists()


def test_disk_full_before_a_resume_point_removes_the_store(tmp_path, monkeypatch, capsys):
    inp, out = _input(tmp_path), tmp_path / "out.zarr"
    _fail_zarr_writes(monkeypatch, errno.ENOSPC, lambda key, _: key.startswith("indices/c/"))
    assert main(["convert", str(inp), str(out), "-q", "--chunk-rows", "3000"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the store {str(out)!r}: No space left on device" in err
    assert "the unfinished store was removed" in err and "Traceback" not in err
    assert _partial_files(tmp_path) == []
    _assert_no_store(out)


def test_disk_full_after_a_resume_point_keeps_it_for_resume(tmp_path, monkeypatch, capsys):
    inp, out = _input(tmp_path), tmp_path / "out.zarr"
    args = ["convert", str(inp), str(out), "-q", "--chunk-rows", "3000", "--resume-every", "2MB"]
    armed = []

    def fail(key, value):
        if _resume_point(key, value):
            armed.append(key)
        return bool(armed) and key.startswith("indices/c/")
    _fail_zarr_writes(monkeypatch, errno.ENOSPC, fail)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"cannot write the store {str(out)!r}: No space left on device" in err
    assert "keeps its resume point" in err and "--resume" in err
    assert _partial_files(tmp_path) == []
    with pytest.raises(IncompleteStoreError):
        ss.open_store(str(out))
    monkeypatch.undo()                              # space freed
    assert main(args + ["--resume"]) == 0
    ref = convert(str(inp), str(tmp_path / "ref.zarr"), chunk_rows=3000)
    a, attrs_a = store_arrays(ref.url)
    b, attrs_b = store_arrays(out)
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_read_only_output(tmp_path, monkeypatch, capsys):
    inp, out = _input(tmp_path, copies=1), tmp_path / "out.zarr"
    _fail_zarr_writes(monkeypatch, errno.EROFS, lambda key, _: True)
    assert main(["convert", str(inp), str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the store {str(out)!r}: Read-only file system" in err
    _assert_no_store(out)
    with pytest.raises(StoreWriteError) as info:        # a StoreError and an OSError
        convert(str(inp), str(out))
    assert isinstance(info.value, StoreError) and isinstance(info.value, OSError)
    assert info.value.errno == errno.EROFS


class _FillingFile:
    """A scratch file on a disk that fills up after ``room[0]`` more bytes."""

    def __init__(self, f, room):
        self.f, self.room = f, room

    def write(self, data):
        self.room[0] -= len(data)
        if self.room[0] < 0:
            self.f.write(bytes(data)[:10])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.f.write(data)

    def close(self):
        self.f.close()


@pytest.mark.parametrize("phase", ["scatter", "split"])
def test_shuffle_scratch_disk_full(phase, tmp_path, monkeypatch, capsys):
    """The disk fills while rows are scattered to buckets, or while an oversized bucket is
    split into sub-buckets (files ``bNNNNN.j``)."""
    inp, out, scratch = _input(tmp_path), tmp_path / "out.zarr", tmp_path / "scratch"
    space = [1 << 20]

    def open_(path, mode="r", *args):
        f = open(path, mode, *args)
        split = "." in os.path.basename(path)
        return _FillingFile(f, space) if "w" in mode and split == (phase == "split") else f
    monkeypatch.setattr(_shuffle, "open", open_, raising=False)
    assert main(["convert", str(inp), str(out), "-q", "--shuffle", "--scratch-dir",
                 str(scratch), "--shuffle-memory", "1MB"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the shuffle's scratch files in '{scratch}/streamsvm-shuffle-" in err
    assert "No space left on device" in err and "--scratch-dir" in err
    assert list(scratch.iterdir()) == []
    _assert_no_store(out)


def test_shuffle_output_disk_full(tmp_path, monkeypatch, capsys):
    inp, out, scratch = _input(tmp_path), tmp_path / "out.zarr", tmp_path / "scratch"
    _fail_zarr_writes(monkeypatch, errno.ENOSPC, lambda key, _: key.startswith("indices/c/"))
    assert main(["convert", str(inp), str(out), "-q", "--shuffle", "--scratch-dir",
                 str(scratch)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the store {str(out)!r}: No space left on device" in err
    assert _partial_files(tmp_path) == [] and list(scratch.iterdir()) == []
    _assert_no_store(out)
