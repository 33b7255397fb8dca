"""Whether this environment has the `reports` extra (numpy, pandas, scipy, statsmodels).

The run path (the plugin, the sandbox, the model gateway, harvest) needs none of them: a team
whose test environment pins an older numpy or pandas installs `pytest-agentbench` alone and
makes its reports where the extra is, without touching that environment:
`uvx --from 'pytest-agentbench[reports]' agentbench report summary --run DIR`.
Imports nothing heavy (find_spec does not import the module it looks for).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pytest_agentbench import __version__

REPORT_MODULES = ("numpy", "pandas", "scipy", "statsmodels")


def missing_report_modules() -> list[str]:
    """The `reports` extra's top-level modules this environment cannot import."""
    return [name for name in REPORT_MODULES if importlib.util.find_spec(name) is None]


def reports_command(args: str) -> str:
    """`agentbench <args>` run from an isolated tool environment that has the extra, at the
    version of the plugin that wrote the records."""
    return f"uvx --from 'pytest-agentbench[reports]=={__version__}' agentbench {args}"


def install_hint(missing: list[str]) -> str:
    """One line: what is missing and the two ways to get it."""
    return (f"reports need the 'reports' extra ({', '.join(missing)} not installed): "
            "pip install 'pytest-agentbench[reports]', or leave this environment as it is "
            f"and run {reports_command('report ...')}")


def write_reports_notice(run_dir: Path, missing: list[str]) -> Path:
    """`report_summary.md` of a run ended where the extra is missing: says how to make the
    summary and the HTML page from the run's records, which are complete."""
    path = run_dir / "report_summary.md"
    run = str(run_dir)
    path.write_text(
        "# agentbench run: reports not made here\n\n"
        f"This environment lacks the `reports` extra ({', '.join(missing)}), so the summary, "
        "`report.html` and the runs index were not written. The run's records "
        "(`attempts.jsonl`, `run.json`, `tasks/`) are complete; make the reports from them "
        "with the extra installed (`pip install 'pytest-agentbench[reports]'`)\n"
        "or in an isolated tool environment:\n\n"
        f"    {reports_command(f'report summary --run {run}')}\n"
        f"    {reports_command(f'report html --run {run}')}\n"
        f"    {reports_command(f'report index {run_dir.parent}')}\n",
        encoding="utf-8")
    return path
