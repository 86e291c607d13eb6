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
