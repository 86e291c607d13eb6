"""What every benchmark of ``tools/bench.py`` shares: where the repository and the data sets
are, the unit of its megabytes, its log line, and its JSON files.

The repository root is found here and only here (``ROOT``); ``tools/bench.py`` puts it on
``sys.path`` before it imports this package.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
import time

__all__ = ["ROOT", "LAUNCHER", "SHARED", "DATASETS", "MB", "log", "clean", "write_json",
           "print_rows", "command_line"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: ``tools/bench.py``: how a benchmark starts a process of its own (the suite's workers).
LAUNCHER = os.path.join(ROOT, "tools", "bench.py")
#: ``../shared`` next to the repository (``STREAMSVM_SHARED`` overrides it).
SHARED = os.environ.get("STREAMSVM_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
#: The real data sets (libsvm files): ``DATASETS/<name>/<file>``.
DATASETS = os.path.join(SHARED, "datasets")
#: The megabyte of every table: 10^6 bytes.
MB = 1e6


def log(msg: str, who: str = "bench") -> None:
    """One progress line on stderr, stamped with the time."""
    print(f"[{who} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def clean(o):
    """JSON-safe copy: numpy scalars → Python, NaN/inf → None."""
    if isinstance(o, dict):
        return {str(k): clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [clean(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):
        try:
            o = o.item()
        except (ValueError, AttributeError):
            return str(o)
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def write_json(obj, path: str, *, cleaned: bool = True) -> None:
    """Write ``obj`` to ``path`` (indent 1) through a ``.partial`` file: a reader never sees
    half a file. ``cleaned``: through :func:`clean` (the results documents); else as it is,
    anything JSON does not know as its ``str`` (the ``--json`` rows of the experiments)."""
    tmp = path + ".partial"
    with open(tmp, "w") as f:
        if cleaned:
            json.dump(clean(obj), f, indent=1)
        else:
            json.dump(obj, f, indent=1, default=str)
    os.replace(tmp, path)


def print_rows(table: str, rows, json_path: str | None) -> int:
    """An experiment's ending: its Markdown ``table`` on stdout, its ``rows`` written to
    ``json_path`` when one is given (``--json``); exit status 0."""
    print(table)
    if json_path:
        write_json(rows, json_path, cleaned=False)
    return 0


def command_line(argv) -> str:
    """The command a result came from: ``python tools/bench.py`` and its arguments."""
    return "python tools/bench.py " + " ".join(shlex.quote(str(a)) for a in argv)
