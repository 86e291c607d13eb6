"""Messages in the command line's words: the library's errors and warnings name Python
arguments (``resume=True``, ``loss='hinge'``); the CLI says the flags (``--resume``,
``--loss hinge``), one line each."""

from __future__ import annotations

import argparse
import re

__all__ = ["cli_words", "warning_line"]


def warning_line(parser, command: str):
    """Python warnings as the CLI says them: one line, ``streamsvm COMMAND: warning: …``,
    in the CLI's words (:func:`cli_words`; ``increase max_passes or tol`` names the flags
    too), no source line."""
    def line(message, category, filename, lineno, line=None):
        text = re.sub(r"(?<![-\w])(max_passes|tol)\b(?!=)", lambda m: "--" + m[1].replace("_", "-"),
                      cli_words(str(message), parser, command))
        return f"streamsvm {command}: warning: {text}\n"
    return line


def cli_words(text: str, parser, command: str) -> str:
    """A library message in the words of the command line: a Python argument of one of
    ``command``'s options (``resume=True``, ``polish=False``, ``loss='hinge'``,
    ``max_passes=40``) becomes its flag (``--resume``, ``--no-polish``, ``--loss hinge``,
    ``--max-passes 40``); a flag followed by its own Python form in parentheses is said
    once. Names that are no option of the command are left as they are."""
    sub = next((a.choices[command] for a in parser._actions
                if isinstance(a, argparse._SubParsersAction) and command in a.choices), None)
    if sub is None:
        return text
    flags = {}
    for a in sub._actions:
        longs = [o for o in a.option_strings if o.startswith("--") and not o.startswith("--no-")]
        if a.option_strings:
            flags[a.dest] = (longs or a.option_strings)[0], a

    def flag(m):
        name, value = m[1], m[2]
        if name not in flags:
            return m[0]
        opt, action = flags[name]
        if value == "True":
            return opt
        if value == "False":
            return "--no-" + opt[2:] if isinstance(action, argparse.BooleanOptionalAction) \
                else m[0]
        return f"{opt} {value.strip(chr(39))}"
    text = re.sub(r"\b([A-Za-z]\w*)=(True\b|False\b|'[^' ]*'|-?[0-9][0-9.e+-]*)", flag, text)
    text = re.sub(r"\b([Tt])he '(\w+)' parameter\b",     # scikit-learn's wording
                  lambda m: f"{m[1]}he {flags[m[2]][0]} option" if m[2] in flags else m[0], text)
    return re.sub(r"(--[\w-]+(?: [^ ()]+)?) \(\1\)", r"\1", text)
