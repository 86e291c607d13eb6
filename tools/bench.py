#!/usr/bin/env python
"""Every benchmark of streamsvm: ``python tools/bench.py SUBCOMMAND ...`` (``--help`` lists
them). The code is the package ``tools/bench/``; this file puts the repository on
``sys.path`` and runs its command line (:mod:`tools.bench.cli`).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
