"""The tiny suite every plugin test here builds in pytester's directory
(tests/support/tiny_pack.py)."""

from __future__ import annotations

import pytest

from tests.support.tiny_pack import FLIP_FLOP, Pack


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    return Pack(pytester.path)


@pytest.fixture
def standard(pack: Pack) -> Pack:
    """Two valid tasks, an invalid one (baseline passes) and a flaky, quarantined one."""
    pack.task("good-a", labels=("alpha-label",))
    pack.task("good-b", labels=("beta-label", "multi"))
    pack.task("already-passes", failing="true", oracle=False)
    pack.task("flip-flop", failing=FLIP_FLOP, labels=("flaky",), oracle=False)
    return pack
