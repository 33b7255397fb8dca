"""Help texts name nothing the reader does not have: no "(spec improvement 6)", issue or item
numbers, design documents or source files (issue 22 polish: `replay --help` said "(spec
improvement 6)"). Every `agentbench` command's --help and the plugin's pytest options."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from pytest_agentbench.cli.main import build_parser
from pytest_agentbench.plugin.options import add_options

INTERNAL = re.compile(r"spec improvement|\bissue \d|\bitem \d|DESIGN|seed-spec|§|"
                      r"\b[\w/]+\.py\b(?!\))", re.IGNORECASE)
ALLOWED = ("conftest.py",)  # a file the user has


def helps(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, str]]:
    yield name, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from helps(sub, f"{name} {sub_name}")


def internal_references(text: str) -> list[str]:
    return [m.group(0) for m in INTERNAL.finditer(text) if m.group(0) not in ALLOWED]


def test_no_agentbench_help_refers_to_documents_the_reader_does_not_have() -> None:
    found = {name: refs for name, text in helps(build_parser(), "agentbench")
             if (refs := internal_references(text))}
    assert len(list(helps(build_parser(), "agentbench"))) > 15  # the walk found the commands
    assert not found, found


def test_no_plugin_option_help_refers_to_them_either() -> None:
    parser = pytest.Parser(_ispytest=True)
    add_options(parser)
    texts = [str(opt.attrs().get("help", "")) for group in parser._groups
             for opt in group.options]
    texts += [str(help_) for help_, _type, _default in parser._inidict.values()]
    assert len(texts) > 10
    found = [refs for text in texts if (refs := internal_references(text))]
    assert not found, found


def test_the_pattern_catches_what_it_is_for() -> None:
    assert internal_references("replay (spec improvement 6) see core/pipeline.py, issue 22 item 3")
