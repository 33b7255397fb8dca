"""Every task loader test here runs in its own empty directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Problems print paths relative to the current directory."""
    monkeypatch.chdir(tmp_path)
