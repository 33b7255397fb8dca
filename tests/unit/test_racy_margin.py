"""The racy margin a snapshot allows between a change and its ctime (git_scripts.margin_us): the
fine one only on a filesystem the sandbox's own kernel stamps with nanosecond ctimes."""

from __future__ import annotations

import pytest

from pytest_agentbench.core.git_scripts import FINE_MARGIN_US, RACY_MARGIN_SEC, margin_us

WIDE = RACY_MARGIN_SEC * 1_000_000


@pytest.mark.parametrize(("facts", "expected"), [
    ("2026-11-28 00:47:34.433732939 +0000|ext2/ext3", FINE_MARGIN_US),
    ("2026-11-28 00:47:34.000000001 +0000|xfs", FINE_MARGIN_US),
    ("2026-11-28 00:47:34.433732939 +0000|overlayfs", FINE_MARGIN_US),
    ("2026-11-28 00:47:34.000000000 +0000|ext2/ext3", WIDE),  # whole-second ctimes
    ("2026-11-28 00:47:34.433732939 +0000|nfs", WIDE),  # stamped by a server's clock
    ("2026-11-28 00:47:34.433732939 +0000|fuseblk", WIDE),
    ("2026-11-28 00:47:34.433732939 +0000|UNKNOWN (0x6a656a63)", WIDE),  # virtiofs
    ("2026-11-28 00:47:34 +0000|ext2/ext3", WIDE),
    ("", WIDE),
    ("garbage", WIDE),
])
def test_the_fine_margin_needs_a_local_filesystem_with_nanosecond_ctimes(
        facts: str, expected: int) -> None:
    assert margin_us(facts) == expected
