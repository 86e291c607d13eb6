"""Package layout rules that review would otherwise have to catch by reading."""

from __future__ import annotations

import ast
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


# -- modules by responsibility (issue 34) ---------------------------------------------------
#: The most lines of a module; a solver module (its plan of passes) less.
MODULE_LINES = 520
SOLVER_LINES = 420
#: The most lines of a numba function's body (its docstring left out).
KERNEL_LINES = 40


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_does_several_jobs():
    """No module over MODULE_LINES lines, no solver module (solvers/X.py without a leading
    underscore: its plan of passes) over SOLVER_LINES."""
    too_long = []
    for path in _modules():
        n = len(path.read_text().splitlines())
        solver = path.parent.name == "solvers" and not path.name.startswith("_")
        if n > (SOLVER_LINES if solver else MODULE_LINES):
            too_long.append(f"{path.relative_to(PACKAGE)}: {n} lines")
    assert not too_long, too_long


def _jit_decorated(node) -> bool:
    for d in node.decorator_list:
        name = d.func if isinstance(d, ast.Call) else d
        name = getattr(name, "id", None) or getattr(name, "attr", None)
        if name in ("kernel", "kernel_inline", "njit", "jit") or \
                (isinstance(name, str) and name.startswith("_kernel")):
            return True
    return False


def test_kernels_read_as_short_updates():
    """Every numba function's body (docstring excluded) within KERNEL_LINES lines."""
    too_long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and _jit_decorated(node):
                body = node.body
                doc = body[0] if body and isinstance(body[0], ast.Expr) and \
                    isinstance(body[0].value, ast.Constant) else None
                n = node.end_lineno - (doc.end_lineno if doc else node.lineno)
                if n > KERNEL_LINES:
                    too_long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {n}")
    assert not too_long, too_long


def test_no_import_cycle():
    """The package's modules import each other without a cycle (relative imports at any
    depth of a function, as the code runs them)."""
    names = {p: ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts) for p in _modules()}
    names = {p: n[:-len(".__init__")] if n.endswith(".__init__") else n
             for p, n in names.items()}
    known = set(names.values())
    graph = {}
    for path, mod in names.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = pkg
                for _ in range(max(0, node.level - 1)):
                    base = base.rpartition(".")[0]
                target = (f"{base}.{node.module}" if node.module else base) if node.level \
                    else (node.module or "")
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    deps.add(sub if sub in known else target)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        # a package's __init__ is imported on the way to its modules: not a dependency
        graph[mod] = {d for d in deps if d in known and d != mod
                      and not mod.startswith(d + ".")}
    state, cycle = {}, []

    def visit(m, stack):
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycle.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack + [d])
        state[m] = 2
    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycle, cycle[:3]
