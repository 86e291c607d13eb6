"""What a checkpoint belongs to (issue 33, items 3 and 6): every option that steers a run's
path is part of its identity (``--memory``, ``--readers``), and a checkpoint directory
holding another run's checkpoints, or this run's without ``--resume``, is refused unless
``--overwrite-checkpoint``."""

from __future__ import annotations

import pytest

from streamsvm.cli import main
from streamsvm.io import convert

from .io.helpers import write_svm


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("ident")
    write_svm(d / "s.svm")
    convert(str(d / "s.svm"), str(d / "s.zarr"), chunk_rows=500)
    return d / "s.zarr"


def _train(store, tmp_path, *extra, out="m.json"):
    return main(["train", str(store), "-o", str(tmp_path / out), "-C", "0.1", "-q",
                 "--checkpoint", str(tmp_path / "ck"), *extra])


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("streamsvm train: error: ")
    return lines[-1]


# -- item 3: --memory and --readers ---------------------------------------------------------

def test_resume_under_another_memory_budget_is_refused(store, tmp_path, capsys):
    assert _train(store, tmp_path, "--memory", "8MB") == 0
    assert _train(store, tmp_path, "--memory", "200MB", "--resume") == 2
    err = _error(capsys)
    assert "was written by a run with memory=8000000; this run has memory=200000000" in err
    # the same budget however it is spelled resumes
    assert _train(store, tmp_path, "--memory", "8000000", "--resume", out="again.json") == 0
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "m.json").read_bytes()


def test_resume_with_another_readers_count_is_refused(store, tmp_path, capsys):
    assert _train(store, tmp_path, "--readers", "1") == 0
    assert _train(store, tmp_path, "--readers", "2", "--resume") == 2
    assert "with readers=1; this run has readers=2" in _error(capsys)
    assert _train(store, tmp_path, "--readers", "1", "--resume", out="again.json") == 0
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "m.json").read_bytes()
