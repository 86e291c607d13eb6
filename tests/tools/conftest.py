"""Make the repository root importable, so that tests can ``import tools.make_synthetic``.

``tools/`` is not part of the installed package and pytest's default (prepend) import mode only
puts the test directories on ``sys.path``.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse as sp  # noqa: E402


@pytest.fixture
def linear_store(tmp_path):
    """A small binary store (300 rows, 20 features, labels from a noisy linear model, chunks
    of 64 rows) for the solver benchmarks' tests."""
    from streamsvm.io import write_store
    rng = np.random.default_rng(0)
    X = sp.random(300, 20, density=0.3, random_state=0, format="csr")
    y = np.where(X @ rng.normal(size=20) + 0.3 * rng.normal(size=300) > 0, 1.0, -1.0)
    path = tmp_path / "s.zarr"
    write_store(path, X, y, chunk_rows=64)
    return path
