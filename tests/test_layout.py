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


# what the scheduler owns: a solver says what to visit and what it holds, never counts
SCHEDULER_WORK = re.compile(
    r"\.(count_rows|read_all|read_blocks|reserve|data_budget|rows_visited|state_bytes|"
    r"inflight_bytes|run_bytes|ram_room|row_bytes|extra_row_bytes|fixed_bytes|itemsize|"
    r"nbytes)\b(?!\()|\bsched\.run\(")
# bytes computed by hand: a product with float64's size (8 * d * k, 3 * 8 * D1, ...)
BYTE_ARITHMETIC = re.compile(r"\b8\s*\*\s*\w|\w\s*\*\s*8\b(?!\.)")


def _solver_lines():
    for path in sorted((PACKAGE / "solvers").glob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if code.strip() and not code.strip().startswith(("\"", "'")):
                yield f"solvers/{path.name}:{n}", code


def test_solvers_leave_rows_visits_and_bytes_to_the_scheduler():
    """DESIGN §4: solvers declare their needs (Need, RowField) and sweep through the
    scheduler (sweep, map_reduce); they never count rows or passes' visits, run kernels
    over rows they hold, read the budget's parts, or compute bytes."""
    offenders = [f"{where}: {code.strip()}" for where, code in _solver_lines()
                 if SCHEDULER_WORK.search(code) or BYTE_ARITHMETIC.search(code)]
    assert not offenders, "\n".join(offenders)
