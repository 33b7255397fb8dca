"""One xdist worker for the tests of a module that share a module-scoped fixture.

A module-scoped fixture (an expensive pytest run, a harvest) is made once per worker that runs
one of its tests: under `-n 2 --dist loadgroup` (scripts/test) the two workers each took some of
test_plugin_docker.py's tests and each made its 30-second oracle run. `group_shared_fixtures`
gives such tests an `xdist_group` named after their module, so the fixture is made once; the
module's other tests still go to whichever worker is free. A test that already has a group
(the second engine's, tests/support/engines.py) keeps it: xdist joins two names into a third
group, which would take it from the worker of its first.

Call it from a `tryfirst` pytest_collection_modifyitems (tests/conftest.py): xdist's worker reads
the groups in its own.
"""

from __future__ import annotations

import pytest

SHARED_SCOPES = ("module", "class")  # made once per worker, so once per group


def shared_fixtures(item: pytest.Item) -> list[str]:
    """The module- or class-scoped fixtures `item` uses, directly or through another."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:  # not a python test function (a doctest, a task item)
        return []
    return sorted(name for name, defs in info.name2fixturedefs.items()
                  if defs and defs[-1].scope in SHARED_SCOPES)


def group_shared_fixtures(items: list[pytest.Item]) -> int:
    """Mark every test that uses a shared fixture with its module's xdist group; returns how
    many were marked."""
    marked = 0
    for item in items:
        if item.get_closest_marker("xdist_group") is not None or not shared_fixtures(item):
            continue
        module = item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(f"shared-fixture:{module}"))
        marked += 1
    return marked


def group_suffix(item: pytest.Item) -> str:
    """"@<group>[_<group>...]" as xdist's worker appends it for --dist loadgroup; "" without."""
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers("xdist_group")})
    return "@" + "_".join(names) if names else ""


def keep_groups_in_node_ids(config: pytest.Config, items: list[pytest.Item]) -> int:
    """Under --dist loadgroup, on a worker: put each grouped test's "@<group>" into the node id
    pytest reports, where xdist's scheduler looks for it. pytest 9.2 reads the id from `item._id`
    while xdist 3.8 still appends to `item._nodeid`, so every group was silently dropped and
    grouped tests spread over both workers (pytest-dev/pytest-xdist#1386, open). Call it from a
    `tryfirst` pytest_collection_finish (xdist's worker sends the ids in its own); a no-op where
    xdist's own suffix took. Returns how many ids it changed."""
    if not getattr(config.option, "loadgroup", False):
        return 0
    changed = 0
    for item in items:
        suffix, nodeid = group_suffix(item), item.nodeid
        if not suffix or nodeid.endswith(suffix) or not hasattr(item, "_id"):
            continue
        item._id = type(item._id).parse(nodeid + suffix)
        changed += 1
    return changed
