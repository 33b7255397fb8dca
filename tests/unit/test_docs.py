"""The documentation keeps up with the code: docs/options.md is what the live parsers say
(every plugin option, ini key and `agentbench` command), every relative link in the README and
docs/ names a file that exists, every docs page is reachable from the README, and the README
stays a front door (at most about 10,000 characters)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _script() -> object:
    spec = importlib.util.spec_from_file_location("docs_options", ROOT / "scripts" /
                                                  "docs_options.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_options_page_is_what_the_parsers_say() -> None:
    script = _script()
    expected = script.render()  # type: ignore[attr-defined]
    assert (ROOT / "docs" / "options.md").read_text("utf-8") == expected, (
        "docs/options.md is out of date: run `uv run python scripts/docs_options.py`")


def test_every_option_ini_key_and_command_is_documented() -> None:
    script = _script()
    options, inis = script.plugin_rows()  # type: ignore[attr-defined]
    text = (ROOT / "docs" / "options.md").read_text("utf-8")
    names = [n.split(" ")[0].rstrip(",") for n, _ in options] + [k for k, _ in inis]
    names += [c for c, _ in script.command_rows()]  # type: ignore[attr-defined]
    assert len(options) > 20 and any(n == "agentbench view" for n in names)
    assert [n for n in names if f"`{n}" not in text] == []


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_name_files_that_exist(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text("utf-8")):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    linked = {Path(t).name for t in LINK.findall(readme) if t.startswith("docs/")}
    assert {p.name for p in DOCS} - linked == set()


def test_the_readme_is_a_front_door() -> None:
    assert len((ROOT / "README.md").read_text("utf-8")) <= 10_000
