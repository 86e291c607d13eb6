"""The one table writer of the benchmarks: Markdown tables from rows, and their cells.

Every table prints only numbers its caller measured (formatted, never recomputed); a
missing value prints as ``–``.
"""

from __future__ import annotations

import math

__all__ = ["fmt", "markdown_table", "table_head", "table_row", "GAP_FLOOR"]

GAP_FLOOR = 1e-9      # gaps at or below this (the best run itself) are drawn on the floor


def _seconds(x) -> str:
    """Seconds, 3 significant digits (at least a whole second)."""
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}" if x >= 0.01 else f"{x:.4f}"


def _gap(x) -> str:
    if x <= GAP_FLOOR:
        return "0 (best)" if x <= 0 else f"{x:.0e}"
    return f"{x:.1e}"


_KINDS = {
    "s": _seconds,                                          # seconds
    "mb": lambda x: f"{x:,.0f}",                            # megabytes, whole
    "acc": lambda x: f"{x:.4f}",                            # accuracy
    "obj": lambda x: f"{x:,.2f}" if abs(x) >= 1000 else f"{x:.6g}",   # objective
    "gap": _gap,                                            # relative gap
    "x": lambda x: f"{x:.2f}×",                             # ratio
    "passes": lambda x: f"{x:.0f}" if x >= 100 else f"{x:.3g}",
    # the conversion benchmark's cells
    "sig3": lambda x: f"{x:#.3g}" if x < 100 else f"{x:.0f}",        # 3 significant digits
    "mb1": lambda x: f"{x:,.1f}" if x < 1000 else f"{x:,.0f}",       # megabytes, 1 decimal
    "int": lambda x: f"{int(round(x)):,}",                           # thousands separators
    "x1": lambda x: f"{x:.2f}×" if x < 10 else f"{x:.1f}×",          # ratio, 3 digits
    "cpu": lambda x: f"{x:.2f}",                                     # CPU / wall
}


def fmt(x, kind: str = "g") -> str:
    """One table cell of kind ``kind`` (see ``_KINDS``; ``g``: ``%g`` for a float, ``str``
    otherwise); ``–`` for None or a non-finite float."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if kind in _KINDS:
        return _KINDS[kind](x)
    return f"{x:g}" if isinstance(x, float) else str(x)


def table_head(headers, align=None) -> list[str]:
    """The header and separator lines of a table (``align``: 'l'/'r' per column, default
    the first column left, the rest right), for tables printed row by row."""
    align = align or ["l"] + ["r"] * (len(headers) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    return [table_row(headers), table_row(sep)]


def table_row(cells) -> str:
    """One row of a table."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_table(headers, rows, align=None, *, pad: bool = False) -> str:
    """A GitHub Markdown table; ``align`` as in :func:`table_head`. ``pad``: every column
    padded to its widest cell (readable as plain text too)."""
    if not pad:
        return "\n".join(table_head(headers, align) + [table_row(r) for r in rows])
    align = align or ["l"] + ["r"] * (len(headers) - 1)
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(str(h))] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(vals):
        return table_row(v.ljust(w) if a == "l" else v.rjust(w)
                         for v, w, a in zip(vals, widths, align))

    sep = "|" + "|".join(("-" * (w + 1) + ":" if a == "r" else ":" + "-" * (w + 1))
                         for w, a in zip(widths, align)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in cells])
