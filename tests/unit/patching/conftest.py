"""The workspace every patch applier test here patches: an empty directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root
