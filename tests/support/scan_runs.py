"""`agentbench report scan` over a run directory, as the oracle-scan e2e tests use it: the
scanners must flag nothing on the oracle's attempts of any bundled task."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def assert_no_finding(run_dir: Path) -> None:
    """`report scan RUN --format json --fail-on-suspicious` exits 0 with no finding."""
    proc = subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "report", "scan",
                           str(run_dir), "--format", "json", "--fail-on-suspicious"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["findings"] == []
