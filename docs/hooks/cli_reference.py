"""MkDocs hook: the command-line reference, rendered from the parser the CLI really uses.

``streamsvm.cli.build_parser()`` builds every subcommand; the ``train`` options come from
the run's table (``streamsvm._train.RUN_PARAMS``) and each solver's declared parameters
(``SOLVERS[name].param_table()``). :func:`render_cli_reference` turns them into Markdown,
and :func:`on_page_markdown` puts that text where ``docs/cli.md`` holds the marker line, at
every build: nothing is copied by hand. ``tests/test_docs.py`` calls the same function.
"""

from __future__ import annotations

import argparse
import html

MARKER = "<!-- cli-reference -->"

__all__ = ["MARKER", "render_cli_reference", "on_page_markdown"]


def on_page_markdown(markdown: str, page, config, files) -> str:
    """MkDocs event: replace the marker of ``cli.md`` with the generated reference."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_cli_reference())


def _text(s) -> str:
    """Plain help text made safe for Markdown (no emphasis, links or HTML from it)."""
    s = html.escape(str(s), quote=False)
    for ch in "\\`*_[]":
        s = s.replace(ch, "\\" + ch)
    return " ".join(s.split())


def _code(s) -> str:
    s = str(s)
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def _subparsers(parser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _takes(action) -> str:
    """What an option takes: its choices or its metavar, as the help shows them."""
    if action.nargs == 0:
        return ""
    if action.choices:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    if action.metavar:
        return str(action.metavar)
    return action.dest.upper()


def _action_lines(action) -> list[str]:
    if action.help == argparse.SUPPRESS:
        return []
    takes = _takes(action)
    if action.option_strings:
        names = ", ".join(_code(o + (" " + takes if takes and not o.startswith("--no-")
                                     else "")) for o in action.option_strings)
    else:
        names = _code(action.metavar or action.dest)
        if action.nargs in ("+", "*"):
            names += " (one or more)"
    line = f"- {names}"
    if action.help:
        line += f": {_text(action.help)}"
    return [line]


def _parser_section(name: str, parser, level: int) -> list[str]:
    out = [f"{'#' * level} {name}", ""]
    if parser.description:
        desc = parser.description.split("\n\nsolvers:\n")[0]
        out += [_text(desc), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    for group in parser._action_groups:
        lines = [ln for a in group._group_actions for ln in _action_lines(a)]
        if not lines:
            continue
        out += [f"**{_text(group.title)}**", "", *lines, ""]
    return out


def _solver_sections() -> list[str]:
    from streamsvm.solvers import SOLVERS
    out = ["## Solver parameters, solver by solver", "",
           "Each solver declares its parameters once (name, type, range, default, help); "
           "`streamsvm train` takes them as options and `LinearSVC(solver=NAME, ...)` as "
           "keyword arguments of the same names. An option of another solver is refused, "
           "naming the solver's own.", ""]
    for name in sorted(SOLVERS):
        cls = SOLVERS[name]
        out += [f"### `--solver {name}`", "", _text(cls.summary) + ".", ""]
        for p in cls.param_table().values():
            if p.kind == "bool":
                flags = f"{_code(p.cli_flag)}, {_code('--no-' + p.cli_flag[2:])}"
            else:
                flags = _code(p.cli_flag)
            default = "none" if p.default is None else _code(repr(p.default))
            out.append(f"- {flags} (Python `{p.name}`; {_text(p.describe())}; default "
                       f"{default}): {_text(p.help)}")
        out.append("")
    return out


def render_cli_reference() -> str:
    """The reference of every subcommand and every solver's options, as Markdown."""
    from streamsvm.cli import build_parser
    parser = build_parser()
    sub = _subparsers(parser)
    helps = {a.dest: a.help for a in sub._choices_actions}
    out = ["## streamsvm", "", _text(parser.description), "",
           "```text", parser.format_usage().strip(), "```", "", "**commands**", ""]
    out += [f"- [`{n}`](#streamsvm-{n}): {_text(helps.get(n, ''))}" for n in sub.choices]
    out.append("")
    if parser.epilog:
        out += ["```text", parser.epilog.strip(), "```", ""]
    for group in parser._action_groups:
        lines = [ln for a in group._group_actions if a is not sub for ln in _action_lines(a)]
        if lines:
            out += [f"**{_text(group.title)}**", "", *lines, ""]
    for name, sp in sub.choices.items():
        out += _parser_section(f"streamsvm {name}", sp, 2)
    out += _solver_sections()
    return "\n".join(out).rstrip() + "\n"
