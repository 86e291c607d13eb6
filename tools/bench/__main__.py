"""``python -m tools.bench SUBCOMMAND ...`` (from the repository root): as ``tools/bench.py``."""

import sys

from .cli import main

sys.exit(main())
