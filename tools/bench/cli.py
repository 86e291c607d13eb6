"""``python tools/bench.py SUBCOMMAND ...`` (or ``python -m tools.bench``): the command line of
every benchmark. Each family module registers its subcommands (``register(sub)``) and runs
them as ``run(args, argv)``, ``argv`` the whole command line, recorded with the results.

``python tools/bench.py --suite dcd ...``, options without a subcommand, is the ``suite``
subcommand (the command line of the suite before the subcommands existed).
"""

from __future__ import annotations

import argparse
import sys

from . import (alm, avsf, codecs, convert, cv, kernels, larger_than_ram, matrix, memory,
               nesvm, newton_ram, readers, scheduler, store_io, suite, walrus, ww)

__all__ = ["main", "build_parser", "subcommands"]

#: The family modules, in the order of ``--help``.
FAMILIES = (suite, store_io, memory, larger_than_ram, scheduler, convert, codecs, readers, alm,
            nesvm, newton_ram, kernels, avsf, ww, walrus, matrix, cv)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tools/bench.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Every benchmark of streamsvm, one subcommand each ('tools/bench.py\n"
                    "SUBCOMMAND --help' for its options). Results: JSON (under bench-out/ or\n"
                    "where --out/--json say) and Markdown tables on stdout.",
        epilog="Options without a subcommand run 'suite' ('tools/bench.py --suite dcd' is\n"
               "'tools/bench.py suite --suite dcd').")
    sub = p.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    for family in FAMILIES:
        family.register(sub)
    return p


def subcommands(parser: argparse.ArgumentParser | None = None) -> list[str]:
    """The subcommands ``--help`` lists (not the suite's internal ``worker``)."""
    parser = parser or build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [c.dest for c in action._choices_actions]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["suite", *argv]
    args = build_parser().parse_args(argv)
    return args.run(args, argv)
