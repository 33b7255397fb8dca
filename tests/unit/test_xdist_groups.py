"""Tests sharing a module-scoped fixture go to one xdist worker (tests/support/xdist_groups.py),
so the fixture's expensive run is made once under `scripts/test`'s `-n 2 --dist loadgroup`."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GROUPS = """
import pytest
from tests.support.xdist_groups import group_shared_fixtures, keep_groups_in_node_ids

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    group_shared_fixtures(items)
"""
KEEP_IDS = """
@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    keep_groups_in_node_ids(session.config, session.items)
"""
MODULE = """
import os
import time
import pytest

@pytest.fixture(scope="module")
def expensive():
    with open({made!r}, "a") as fh:
        fh.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")
    time.sleep(0.2)  # long enough that the other worker is free for the next test
    return 1

@pytest.mark.parametrize("n", range(8))
def test_shares(expensive, n):
    with open({shares!r}, "a") as fh:
        fh.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")
    time.sleep(0.05)

@pytest.mark.xdist_group("elsewhere")
def test_keeps_its_own_group(expensive):
    assert expensive == 1

@pytest.mark.parametrize("n", range(8))
def test_alone(n):
    time.sleep(0.05)
"""


def run_module(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
               conftest: str) -> tuple[list[str], list[str], str]:
    """In a `-n 2 --dist loadgroup -v` run: the workers that made the module's fixture, those
    that ran the eight tests sharing it, and the output."""
    made, shares = pytester.path / "made.txt", pytester.path / "shares.txt"
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_mod=MODULE.format(made=str(made), shares=str(shares)))
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-v", "-p",
                                           "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=17)
    return made.read_text().split(), shares.read_text().split(), result.stdout.str()


def test_a_module_fixture_is_made_once_for_the_tests_that_share_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    made, shares, output = run_module(pytester, monkeypatch, GROUPS + KEEP_IDS)
    assert len(set(shares)) == 1, shares  # the eight that share it ran on one worker
    assert len(made) == len(set(made)), made  # so no worker made it twice
    assert "test_shares[0]@shared-fixture:test_mod.py" in output
    assert "test_keeps_its_own_group@elsewhere" in output  # not joined into a third group
    assert "test_alone[0]@" not in output  # tests without a shared fixture stay free


@pytest.mark.parametrize("conftest", [GROUPS, ""], ids=["groups-without-the-ids", "no-groups"])
def test_without_either_part_each_worker_makes_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, conftest: str
) -> None:
    """What each part saves. Without the ids, the groups are lost on the way to xdist's scheduler
    (pytest-xdist#1386): should this fail with "groups-without-the-ids", xdist names the groups
    itself again and keep_groups_in_node_ids can go."""
    made, shares, _ = run_module(pytester, monkeypatch, conftest)
    assert sorted(set(shares)) == ["gw0", "gw1"], shares
    assert sorted(made) == ["gw0", "gw1"], made
