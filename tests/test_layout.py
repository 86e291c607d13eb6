"""Package layout rules that review would otherwise have to catch by reading."""

from __future__ import annotations

import pathlib
import re

import streamsvm

PACKAGE = pathlib.Path(streamsvm.__file__).resolve().parent
PRIVATE_IO = re.compile(r"^\s*(from\s+(\.+|streamsvm\.)io\._\w+\s+import|import\s+streamsvm\.io\._)",
                        re.MULTILINE)


def test_nothing_outside_io_imports_a_private_io_module():
    """The store is reached through ``streamsvm.io``'s public names (and the data through
    the scheduler): a private ``io`` module is free to change."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "io":
            continue
        for m in PRIVATE_IO.finditer(path.read_text()):
            line = path.read_text().count("\n", 0, m.start()) + 1
            offenders.append(f"{rel}:{line}: {m.group(0).strip()}")
    assert not offenders, "\n".join(offenders)
