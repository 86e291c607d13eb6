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
    assert "was written by a run with --memory 8000000; this run has --memory 200000000" in err
    # the same budget however it is spelled resumes
    assert _train(store, tmp_path, "--memory", "8000000", "--resume", out="again.json") == 0
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "m.json").read_bytes()


def test_resume_with_another_readers_count_is_refused(store, tmp_path, capsys):
    assert _train(store, tmp_path, "--readers", "1") == 0
    assert _train(store, tmp_path, "--readers", "2", "--resume") == 2
    assert "with --readers 1; this run has --readers 2" in _error(capsys)
    assert _train(store, tmp_path, "--readers", "1", "--resume", out="again.json") == 0
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "m.json").read_bytes()


def test_a_resume_without_readers_takes_the_checkpoints_count(store, tmp_path, capsys,
                                                              monkeypatch):
    """The default count follows the machine (CPUs, page cache): a resume on another keeps
    the checkpoint's count instead of being refused."""
    from streamsvm.schedule import _local
    monkeypatch.setattr(_local, "usable_cpus", lambda: 2)       # default: 1 reader
    assert _train(store, tmp_path, "--readers", "3") == 0
    assert _train(store, tmp_path, "--resume", out="again.json") == 0
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "m.json").read_bytes()
    assert _train(store, tmp_path, "--readers", "1", "--resume", out="no.json") == 2
    assert "with --readers 3; this run has --readers 1" in _error(capsys)


# -- item 6: a checkpoint directory holds one run -------------------------------------------

def _interrupted(store, tmp_path, capsys, monkeypatch, *extra):
    """Run train through the CLI and SIGINT it (as a user's Ctrl-C) at its third
    checkpoint: exit 130, "the same command continues from its checkpoint"."""
    import signal
    from streamsvm.solvers import _driver
    real, saves = _driver._save, []

    def save(*a, **k):
        real(*a, **k)
        saves.append(1)
        if len(saves) == 3:
            signal.raise_signal(signal.SIGINT)
    with monkeypatch.context() as mp:
        mp.setattr(_driver, "_save", save)
        assert _train(store, tmp_path, "--checkpoint-every-passes", "1", *extra) == 130
    assert "the same command continues from its checkpoint" in capsys.readouterr().err
    return _snapshot(tmp_path / "ck")


def _snapshot(ck) -> dict:
    return {p.name: p.read_bytes() for p in ck.iterdir()}


def _newest(snapshot: dict) -> str:
    return max(n for n in snapshot if n.startswith("manifest-"))


@pytest.fixture(scope="module")
def reference(store, tmp_path_factory):
    """The uninterrupted models for seeds 0 and 1."""
    d = tmp_path_factory.mktemp("ref")
    out = {}
    for seed in (0, 1):
        assert main(["train", str(store), "-o", str(d / f"{seed}.json"), "-C", "0.1", "-q",
                     "--seed", str(seed)]) == 0
        out[seed] = (d / f"{seed}.json").read_bytes()
    return out


def test_another_run_does_not_prune_an_interrupted_runs_checkpoints(store, reference, tmp_path,
                                                                    capsys, monkeypatch):
    """The issue's case: a run interrupted, another with a different seed started in the same
    --checkpoint directory is refused naming the seed, and the first still resumes to its
    model; --overwrite-checkpoint starts the other run there, deleting them."""
    before = _interrupted(store, tmp_path, capsys, monkeypatch)
    assert _train(store, tmp_path, "--seed", "1", out="other.json") == 2
    err = _error(capsys)
    assert (f"checkpoint {_newest(before)} under {tmp_path / 'ck'} was written by a run with "
            f"--seed 0; this run has --seed 1") in err
    assert "use another --checkpoint directory; --overwrite-checkpoint deletes its" in err
    assert _snapshot(tmp_path / "ck") == before and not (tmp_path / "other.json").exists()
    # (--no-resume: the same refusal, worded for a fresh start)
    assert _train(store, tmp_path, "--seed", "1", "--no-resume", out="other.json") == 2
    assert (f"checkpoint directory {tmp_path / 'ck'} holds the checkpoints of another run (the "
            f"newest, {_newest(before)}, was written by a run with --seed 0; this run has "
            f"--seed 1); they are kept: use another --checkpoint directory, or pass "
            f"--overwrite-checkpoint to delete them and start afresh") in _error(capsys)
    assert _snapshot(tmp_path / "ck") == before
    assert _train(store, tmp_path) == 0                  # the same command: continues
    assert (tmp_path / "m.json").read_bytes() == reference[0]
    # the other run, allowed to delete them
    assert _train(store, tmp_path, "--seed", "1", "--overwrite-checkpoint",
                  out="other.json") == 0
    assert (tmp_path / "other.json").read_bytes() == reference[1]
    assert not set(before) & set(_snapshot(tmp_path / "ck"))
    assert _train(store, tmp_path, "--seed", "1", "--resume", out="again.json") == 0
    assert (tmp_path / "again.json").read_bytes() == reference[1]


def test_the_same_run_with_no_resume_is_refused(store, reference, tmp_path, capsys,
                                               monkeypatch):
    before = _interrupted(store, tmp_path, capsys, monkeypatch)
    assert _train(store, tmp_path, "--no-resume") == 2
    assert (f"checkpoint directory {tmp_path / 'ck'} holds checkpoints of this same run (the "
            f"newest is {_newest(before)}): continue it with --resume (the default), or pass "
            f"--overwrite-checkpoint") in _error(capsys)
    assert _snapshot(tmp_path / "ck") == before
    assert _train(store, tmp_path, "--no-resume", "--overwrite-checkpoint") == 0   # afresh
    assert (tmp_path / "m.json").read_bytes() == reference[0]


def test_resume_of_another_run_names_the_way_out(store, reference, tmp_path, capsys,
                                                 monkeypatch):
    before = _interrupted(store, tmp_path, capsys, monkeypatch)
    assert _train(store, tmp_path, "--seed", "1", "--resume") == 2
    err = _error(capsys)
    assert "was written by a run with --seed 0; this run has --seed 1" in err
    assert "--overwrite-checkpoint deletes its checkpoints" in err
    assert _snapshot(tmp_path / "ck") == before
    assert _train(store, tmp_path, "--seed", "1", "--resume", "--overwrite-checkpoint") == 0
    assert (tmp_path / "m.json").read_bytes() == reference[1]


def test_unreadable_checkpoints_are_kept_too(store, tmp_path, capsys):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "manifest-00000007.json").write_text('{"format": 2, "seq"')
    assert _train(store, tmp_path) == 2
    err = _error(capsys)
    assert f"all 1 checkpoints under {tmp_path / 'ck'} are" in err
    assert "--overwrite-checkpoint deletes its checkpoints" in err
    assert _train(store, tmp_path, "--no-resume") == 2
    assert "holds checkpoints that cannot be read (all damaged)" in _error(capsys)
    assert _train(store, tmp_path, "--overwrite-checkpoint") == 0
    assert "manifest-00000007.json" not in _snapshot(tmp_path / "ck")


def test_python_api_refuses_and_overwrites(store, tmp_path):
    from streamsvm._train import train
    from streamsvm.exceptions import CheckpointError
    assert _train(store, tmp_path) == 0
    with pytest.raises(CheckpointError, match="was written by a run with seed=0; this run "
                                              "has seed=2"):
        train(str(store), C=0.1, seed=2, checkpoint=str(tmp_path / "ck"))
    model, _ = train(str(store), C=0.1, seed=2, checkpoint=str(tmp_path / "ck"),
                     overwrite_checkpoint=True)
    assert model.summary["seed"] == 2
