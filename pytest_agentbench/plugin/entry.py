"""The pytest entry point (`pytest11`): options, markers and hookspecs, and nothing else until a
run is asked for with `--agentbench-suite` or `--agentbench-resume`. Only then is the run's
plugin object (plugin/agentbench_plugin.py) registered, with the fixtures (plugin/fixtures.py),
so an inert session does not pay for importing the harness.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_agentbench.plugin.hookspecs as hookspecs
from pytest_agentbench.paths.output_root import is_output_root
from pytest_agentbench.plugin.options import add_options


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """A run takes Ctrl-C from here on even if it inherited SIGINT ignored (run/sigterm.py):
    the earliest hook that knows a run is asked for, before conftests and plugins load."""
    known = early_config.known_args_namespace
    if getattr(known, "agentbench_suite", None) or getattr(known, "agentbench_resume", None):
        from pytest_agentbench.run.sigterm import sigint_as_interrupt

        sigint_as_interrupt()


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """An agentbench output root is never collected (paths/output_root.py): kept workspaces
    hold copies of the project's own tests."""
    return True if is_output_root(collection_path) else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentbench_quarantine(reason): a quarantined task "
        "(xfail non-strict by default; see --agentbench-quarantine)",
    )
    config.addinivalue_line("markers", "agentbench_label(name): a label from task.yaml")
    suites = config.getoption("agentbench_suite") or []
    if not suites and not config.getoption("agentbench_resume"):
        _hint_at_task_paths(config)
        return
    # whole-path imports: a module pytester's in-process runs dropped from sys.modules is loaded
    # afresh, never taken from a stale attribute of the package
    import pytest_agentbench.plugin.ci_outputs as ci_outputs
    import pytest_agentbench.plugin.fixtures as fixtures
    import pytest_agentbench.plugin.progress as progress
    import pytest_agentbench.plugin.sequential as sequential_plugin
    from pytest_agentbench.plugin.agentbench_plugin import PLUGIN_NAME, AgentbenchPlugin

    plugin = AgentbenchPlugin.from_config(config, suites)
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    config.pluginmanager.register(fixtures, "agentbench-fixtures")
    # junit properties, JSON metadata, --durations, the report.html line; live progress
    config.pluginmanager.register(ci_outputs.CiOutputs(plugin), ci_outputs.PLUGIN_NAME)
    config.pluginmanager.register(progress.Progress(config, plugin), progress.PLUGIN_NAME)
    sequential = sequential_plugin.register(config, plugin)  # --agentbench-sequential
    plugin.start()
    if sequential is not None:
        sequential.start()


def _hint_at_task_paths(config: pytest.Config) -> None:
    """`pytest taskpacks/x/t/task.yaml` with the plugin inert: pytest alone would say only
    "not found". A path that is a task.yaml, or a task's directory, is an agentbench task: say
    how to run it (a usage error, one line). A folder of tests is never refused."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if path.name == "task.yaml" and path.is_file():
            task_dir = path.parent
        elif (path / "task.yaml").is_file() and not any(path.glob("test*.py")):
            task_dir = path  # a task's directory (not a test folder that keeps a sample task)
        else:
            continue
        if not _looks_like_a_task(task_dir / "task.yaml"):
            continue
        suite, root = task_dir.parent.name, task_dir.parent.parent
        where = "" if root == config.rootpath / "taskpacks" else f" --agentbench-taskpacks={root}"
        raise pytest.UsageError(
            f"{arg} is an agentbench task (suite {suite!r}): add --agentbench-suite {suite}"
            f"{where} to run it"
        )


def _looks_like_a_task(task_file: object) -> bool:
    """A task.yaml of ours names its spec version near the top (not some other tool's file)."""
    try:
        with open(str(task_file), "rb") as handle:
            return b"task_spec_version" in handle.read(4096)
    except OSError:
        return False
