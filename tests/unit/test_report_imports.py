"""The summary's cold path stays free of scipy and statsmodels (their import costs about 2 s,
which is why Wilson is written out in stats.py); the paired report and gate use statsmodels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.synthetic import make_record, write_run

CHECK = """
import sys
import pytest_agentbench.reporting.cli as cli
code = cli.main(sys.argv[1:])
print(code, sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'statsmodels'}))
"""


def _modules(argv: list[str]) -> str:
    done = subprocess.run([sys.executable, "-c", CHECK, *argv], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip().splitlines()[-1]


def test_summary_imports_neither_scipy_nor_statsmodels(tmp_path: Path) -> None:
    records = [make_record("r", f"t{i}", "s", "v", 0, 1, i % 2 == 0,
                           None if i % 2 == 0 else "TESTS_FAILED", 2, 1.0) for i in range(6)]
    run = write_run(tmp_path / "r", records, run_id="r")
    assert _modules(["report", "summary", "--run", str(run)]) == "0 []"
    assert _modules(["report", "summary", "--run", str(run), "--format", "html",
                     "--output", str(tmp_path / "r.html")]) == "0 []"
    worse = write_run(tmp_path / "w", [dict(r, result={**r["result"], "passed": False,
                                                       "failure_reason": "TESTS_FAILED"})
                                       for r in records], run_id="w")
    assert _modules(["gate", "--baseline", str(run), "--candidate", str(worse)]) == \
        "1 ['scipy', 'statsmodels']"


LOAD = """
import sys
import pytest_agentbench.reporting.load as load
load.CACHE_MIN_BYTES = 0
run = load.load_run(sys.argv[1], fields=sys.argv[2])
print(len(run.attempts), sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'scipy',
                                                                          'statsmodels'}))
"""


def test_a_warm_load_imports_no_pydantic(tmp_path: Path) -> None:
    """The parser (record_parse.py) is pydantic's; a load from the frame cache needs none of it
    (about 0.3 s of a cold process). The first load parses, and writes the cache."""
    records = [make_record("r", f"t{i}", "s", "v", 0, 1, i % 3 > 0,
                           None if i % 3 else "TESTS_FAILED", 2, 1.0) for i in range(9)]
    run = write_run(tmp_path / "r", records, run_id="r")
    argv = [sys.executable, "-c", LOAD, str(run), "summary"]
    cold = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    warm = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert cold.split() == ["9", "['pydantic']"]
    assert warm.split() == ["9", "[]"]
