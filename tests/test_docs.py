"""The documentation site: the command-line reference generated from the real parser covers
every option of every command and every solver, and the site's pages and the README's links
to them exist. (``mkdocs build --strict`` itself runs in ``.ci/run``.)"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import re

import pytest

from streamsvm.cli import build_parser
from streamsvm.solvers import SOLVERS

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _hook():
    spec = importlib.util.spec_from_file_location("cli_reference",
                                                  DOCS / "hooks" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference() -> str:
    return _hook().render_cli_reference()


def _subcommands(parser):
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def _named(text: str, option: str) -> bool:
    """Whether ``option`` is written as an option in ``text``: a code span that is the
    option, or the option and what it takes."""
    return f"`{option}`" in text or f"`{option} " in text


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    nxt = re.search(r"^#{1,3} ", text[start + len(heading) + 1:], re.MULTILINE)
    return text[start:start + len(heading) + 1 + nxt.start()] if nxt else text[start:]


def test_every_option_of_every_command_is_in_the_reference(reference):
    parser = build_parser()
    missing = [f"streamsvm {o}" for a in parser._actions for o in a.option_strings
               if not _named(_section(reference, "## streamsvm"), o)]
    for name, sp in _subcommands(parser).items():
        section = _section(reference, f"## streamsvm {name}")
        for action in sp._actions:
            missing += [f"streamsvm {name} {o}" for o in action.option_strings
                        if not _named(section, o)]
            if not action.option_strings:
                shown = action.metavar or action.dest
                if f"`{shown}`" not in section:
                    missing.append(f"streamsvm {name} positional {shown}")
    assert not missing, "not in the generated reference: " + ", ".join(missing)


def test_every_solver_parameter_is_in_its_solver_section(reference):
    missing = []
    for name, cls in SOLVERS.items():
        section = _section(reference, f"### `--solver {name}`")
        for p in cls.param_table().values():
            flags = [p.cli_flag] + (["--no-" + p.cli_flag[2:]] if p.kind == "bool" else [])
            missing += [f"{name} {f}" for f in flags if not _named(section, f)]
            if f"Python `{p.name}`" not in section:
                missing.append(f"{name} {p.name} (Python name)")
    assert not missing, "not in the generated reference: " + ", ".join(missing)


def test_the_train_options_cover_every_solver_parameter():
    """The parser (what the reference renders) has an option for every declared
    parameter: the reference cannot miss one by rendering the parser."""
    train = _subcommands(build_parser())["train"]
    options = {o for a in train._actions for o in a.option_strings}
    declared = {p.cli_flag for cls in SOLVERS.values() for p in cls.params}
    assert declared <= options, sorted(declared - options)


def test_the_hook_fills_the_cli_page():
    hook = _hook()
    page = (DOCS / "cli.md").read_text()
    assert hook.MARKER in page
    out = hook.on_page_markdown(page, None, None, None)
    assert hook.MARKER not in out
    assert "## streamsvm train" in out and "### `--solver dcd`" in out
    other = "# A page\n\ntext\n"
    assert hook.on_page_markdown(other, None, None, None) == other


def _nav_files(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [f for v in node.values() for f in _nav_files(v)]
    return [f for v in node for f in _nav_files(v)]


def test_every_page_is_in_the_nav_and_exists():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_files(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.glob("*.md"))
    assert sorted(nav) == pages
    assert config["hooks"] == ["docs/hooks/cli_reference.py"]


def test_pages_carry_content():
    for page in DOCS.glob("*.md"):
        text = page.read_text()
        assert not re.search(r"\bTODO\b|\bTBD\b", text), page.name
        assert len(text.split()) > 100, f"{page.name} is nearly empty"


def test_readme_links_to_docs_resolve():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+)", readme)
    assert links, "the README points to the documentation pages"
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, missing
