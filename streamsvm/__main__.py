"""``python -m streamsvm``: the ``streamsvm`` command."""

import sys

from .cli import main

sys.exit(main())
