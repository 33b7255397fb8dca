"""`agentbench` starts without the report stack: only a report command pays for pandas."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import pytest_agentbench.cli.main as cli
parser = cli.build_parser()
parser.parse_args({args!r})
heavy = sorted(m for m in ("pandas", "numpy", "scipy", "statsmodels") if m in sys.modules)
print(",".join(heavy))
"""


def _heavy_modules(args: list[str]) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_non_report_commands_import_no_pandas() -> None:
    for args in (["image", "build"], ["cache", "ls"], ["doctor"], ["gc"]):
        assert _heavy_modules(args) == "", args


def test_the_version_flag_prints_without_the_report_stack() -> None:
    code = ("import sys, contextlib, io\nimport pytest_agentbench.cli.main as cli\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            "    try:\n        cli.main(['--version'])\n    except SystemExit:\n        pass\n"
            "print(buf.getvalue().strip(), 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out.startswith("agentbench ") and out.endswith(" False"), out
