"""The real browser of the page tests (tests/e2e/test_html_browser.py, test_viewer_browser.py):
Debian's Chromium driven by Playwright, headless. `require_browser()` skips a test when Chromium
or Playwright is missing outside CI, and never under CI (there the test fails instead)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("AGENTBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def require_browser() -> Any:
    """Playwright's `sync_playwright`, once Chromium and Playwright are known to be there."""
    if not Path(CHROMIUM).exists() and not os.environ.get("CI"):
        pytest.skip(f"Chromium not found at {CHROMIUM} (install Debian's `chromium`); "
                    "this test never skips under CI")
    if not os.environ.get("CI"):
        pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright

    return sync_playwright


def launch(playwright: Any) -> Any:
    """A headless Chromium of `playwright` (what `sync_playwright()` entered gives)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
