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
