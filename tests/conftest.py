"""Test tiers, one per folder: every test gets exactly one tier marker from where it lives.

    tests/unit/         unit         fast, no Docker, no whole-task runs (`-m unit` < 1 minute)
    tests/docker/       docker       needs a Docker engine and the runner image
    tests/contract/     docker       the sandbox contract, run against the local and the docker
                                     adapter; the local half is the reference the docker half is
                                     held to, so both halves run together
    tests/e2e/          e2e          whole tasks run through pytest end to end (Docker or local)
    tests/adversarial/  adversarial  attacks, spoofs, hangs, faults and bad input (issue 8)

Test files carry no tier marker of their own: a test outside these folders, or one that carries
a tier marker itself (a second tier, or a copy of its folder's), makes its module an ERROR at
collection (with or without xdist), so a tier command never silently misses a test. `pytest
tests` (scripts/test) runs all four tiers; `-m <tier>` imports only that tier's folders.

Fixtures every folder shares are registered here: `docker_sandboxes`, the session's one Docker
sandbox factory (tests/support/sandboxes.py), `plain_shell_image`, the runner image without its
execute-only shell (the same module), and `sequential_baseline`, the one baseline run the
sequential tests compare against (tests/support/sequential_runs.py): a session fixture imported
into two test modules would be two fixtures, made once each.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engines import second_engine  # noqa: F401 - one per session (xdist_group)
from tests.support.sandboxes import (
    docker_sandboxes,  # noqa: F401 - one per session, every folder
    plain_shell_image,  # noqa: F401 - one per test process
)
from tests.support.sequential_runs import sequential_baseline  # noqa: F401 - one per session
from tests.support.xdist_groups import group_shared_fixtures, keep_groups_in_node_ids

TESTS = Path(__file__).resolve().parent

TIER_OF_FOLDER = {
    "unit": "unit",
    "docker": "docker",
    "contract": "docker",
    "e2e": "e2e",
    "adversarial": "adversarial",
}
TIERS = frozenset(TIER_OF_FOLDER.values())


def folder_tier(path: Path) -> str | None:
    """The tier of the test file at `path`, or None when it is outside every tier folder."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return TIER_OF_FOLDER.get(parts[0]) if len(parts) > 1 else None


def selected_tiers(markexpr: str) -> frozenset[str] | None:
    """The tiers a `-m` expression of tier names joined by `or` selects ("unit", "docker or e2e");
    None for any other expression (then every folder is collected and `-m` deselects)."""
    names = re.split(r"\s+or\s+", markexpr.strip())
    return frozenset(names) if names and TIERS.issuperset(names) else None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `-m unit` (or `-m "docker or e2e"`), do not import the other tiers' folders: their
    tests could only be deselected, and importing them costs more than the unit tests take."""
    tiers = selected_tiers(config.option.markexpr or "")
    if tiers is None or collection_path.parent != TESTS:
        return None
    tier = TIER_OF_FOLDER.get(collection_path.name)
    return True if tier is not None and tier not in tiers else None


def tier_problem(item: pytest.Item) -> str | None:
    """What breaks the tier rule for a test under tests/; None for items elsewhere (the task
    items of an agentbench run started from the repository root are no tests of the harness)."""
    if not item.path.resolve().is_relative_to(TESTS):
        return None
    tier = folder_tier(item.path)
    if tier is None:
        folders = ", ".join(f"tests/{name}/" for name in TIER_OF_FOLDER)
        return f"{item.nodeid}: outside every tier folder ({folders})"
    own = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
    if own:
        return (
            f"{item.nodeid}: carries tier marker(s) {own}; its tier is {tier!r}, set by its"
            " folder in tests/conftest.py"
        )
    return None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    """A module (or class) whose tests break the tier rule fails to collect, with one line per
    test: an ERROR at collection, the same with or without xdist workers."""
    report = yield
    if report.passed:
        problems = [
            problem
            for node in report.result
            if isinstance(node, pytest.Item) and (problem := tier_problem(node))
        ]
        if problems:
            report.outcome, report.result = "failed", []
            report.longrepr = "test tiers:\n  " + "\n  ".join(problems)
    return report


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = folder_tier(item.path)
        if tier is not None:
            item.add_marker(tier)
    group_shared_fixtures(items)  # a module-scoped run is made once, not once per worker


@pytest.hookimpl(tryfirst=True)  # before xdist's worker sends the ids to be scheduled
def pytest_collection_finish(session: pytest.Session) -> None:
    keep_groups_in_node_ids(session.config, session.items)
