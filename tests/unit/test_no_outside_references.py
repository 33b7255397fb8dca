"""No docstring or comment of the package points to a document a reader of the repository does
not have (the original spec's sections, the issue tracker's numbers): what a reference would
say is said in place, or in docs/."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_agentbench"
OUTSIDE = re.compile(r"spec §|spec improvement|improvements? [0-9]+|\b[Ii]ssue [0-9]+|seed-spec")


def test_no_reference_to_documents_outside_the_repository() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
             if OUTSIDE.search(line)]
    assert found == []
