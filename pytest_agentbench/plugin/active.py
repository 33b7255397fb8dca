"""The active half of the plugin: registered by plugin/entry.py only when an agentbench run
was asked for, so that an inert pytest session pays nothing for it. Collection of task.yaml
files, xdist
plumbing, the one writer of attempts.jsonl, the run's end.

The run's end is a list of independent steps (merge events, remove work dirs, sweep containers,
write the summary and the HTML report): one failing (the Docker engine gone) is reported as one
line and never stops the others. SIGTERM ends a run like Ctrl-C (session.sigterm_as_interrupt).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.variants import (
    Variant,
    VariantError,
    agent_factories,
    load_variant,
)
from pytest_agentbench.plugin.items import (
    AB_KEY,
    SHORT_FAILURES,
    TaskFile,
    collect_task_directory,
)
from pytest_agentbench.plugin.workers import (
    crash_record,
    is_worker,
    signal_workers,
    unhandled_reports,
)
from pytest_agentbench.run.hostenv import resolve_ca_bundle
from pytest_agentbench.run.state import (
    OutDirError,
    ResumeError,
    RunState,
    check_out_dir,
    end_run,
    on_sigterm,
    record_attempt,
    restore_sigterm,
    sigterm_as_interrupt,
    start_run,
    uninterrupted,
)
from pytest_agentbench.tasks.discovery import discover
from pytest_agentbench.tasks.loader import LoadedTask, TaskProblem
from pytest_agentbench.text.redaction import Redactor


@dataclass
class AgentbenchConfig:
    taskpacks: Path
    suites: list[str]
    variant: Variant
    attempts: int
    quarantine: str
    out: Path
    options: dict[str, Any]
    tasks_by_path: dict[Path, LoadedTask] = field(default_factory=dict)
    problems_by_path: dict[Path, list[TaskProblem]] = field(default_factory=dict)
    state: RunState | None = None
    image: dict[str, Any] = field(default_factory=dict)
    recorded: int = 0
    recorded_keys: set[str] = field(default_factory=set)
    outcomes: dict[str, int] = field(default_factory=dict)
    finish_errors: list[str] = field(default_factory=list)  # session-end steps that failed
    _redactor: Redactor | None = None

    @property
    def redactor(self) -> Redactor:
        """The run's redactor: every task's own secrets (repo.url, setup commands, the
        artifacts.redact variables) plus the credential patterns. Workers build the same one."""
        if self._redactor is None:
            self._redactor = Redactor.for_tasks(t.spec for t in self.tasks_by_path.values())
        return self._redactor

    def run_config(self) -> dict[str, Any]:
        """What must match for --agentbench-resume to continue a run."""
        return {
            "suites": self.suites,
            "variant": self.variant.config(),
            "variant_config_hash": self.variant_hash(),
            "attempts": self.attempts,
            "image": self.image.get("id") or self.image.get("name"),
            "sandbox": self.options["sandbox"],
        }

    def run_config_hash(self) -> str:
        import hashlib
        import json

        blob = json.dumps(self.run_config(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def variant_hash(self) -> str:
        return self.variant.config_hash({"llm": self.options.get("llm", {})})


def activate(config: pytest.Config, suites: list[str]) -> None:
    """Set up the run (called from plugin.pytest_configure once a run was asked for)."""
    resume = config.getoption("agentbench_resume")
    try:
        ab = _make_config(config, suites)
    except (VariantError, ResumeError, OutDirError, ValueError) as exc:  # ModelConfigError too
        raise pytest.UsageError(str(exc)) from None
    config.stash[AB_KEY] = ab
    sigterm_as_interrupt()
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(ab.taskpacks / suite) for suite in ab.suites]
    if is_worker(config):
        ab.state = RunState.from_wire(config.workerinput["agentbench_state"])  # type: ignore[attr-defined]
        ab.image = dict(config.workerinput["agentbench_image"])  # type: ignore[attr-defined]
        return
    _default_worksteal(config)
    if config.option.collectonly:
        return  # listing tasks needs no image and leaves no run directory
    ab.image = _ensure_image(ab)
    try:
        ab.state = start_run(
            ab.out,
            ab.suites,
            ab.variant.name,
            ab.run_config(),
            ab.run_config_hash(),
            Path(resume) if resume else None,
            redact_obj=ab.redactor.redact_obj,
            out_label=_out_label(config),
        )
    except (ResumeError, OutDirError) as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(ab), "agentbench-xdist")
        # workers stop at once, each removing its own containers, as with a terminal's Ctrl-C
        on_sigterm(lambda: signal_workers(config, signal.SIGTERM))


def _check_rootdir(config: pytest.Config) -> None:
    """`--agentbench-out DIR` with a space: pytest's early argument scan, which does not know
    plugin options yet, takes an existing DIR for a test path and may make it the rootdir,
    silently dropping the project's ini file. Say so instead."""
    args = list(config.invocation_params.args)
    for name in ("agentbench_out", "agentbench_resume", "agentbench_taskpacks"):
        value, flag = config.getoption(name), "--" + name.replace("_", "-")
        space_form = any(a == flag and b == value for a, b in zip(args, args[1:], strict=False))
        if space_form and Path(value).resolve() == config.rootpath.resolve():
            raise ValueError(
                f"pytest took {value} as its rootdir; write {flag}={value} "
                "(with '=') so it is read as the option's value"
            )


def _make_config(config: pytest.Config, suites: list[str]) -> AgentbenchConfig:
    _check_rootdir(config)
    opt = config.getoption
    ini = config.getini
    resume = opt("agentbench_resume")
    if resume and not suites:
        import json

        try:
            suites = json.loads((Path(resume) / "run.json").read_text("utf-8"))["suites"]
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(
                f"--agentbench-resume {resume}: not a readable run directory "
                f"({type(exc).__name__}: {exc})"
            ) from None
    taskpacks = Path(opt("agentbench_taskpacks") or ini("agentbench_taskpacks") or "taskpacks")
    if not taskpacks.is_absolute():
        taskpacks = config.rootpath / taskpacks if not taskpacks.exists() else taskpacks.resolve()
    variant = load_variant(opt("agentbench_variant") or ini("agentbench_variant") or "oracle")
    raw_attempts = opt("agentbench_attempts")
    if raw_attempts is None:
        raw_attempts = ini("agentbench_attempts") or 1
    try:
        attempts = int(raw_attempts)
    except ValueError:
        attempts = 0
    if attempts < 1:
        raise ValueError("--agentbench-attempts: expected a positive integer")
    out = Path(opt("agentbench_out") or ini("agentbench_out") or "reports/runs")
    if not resume:
        check_out_dir(out.resolve(), f"{_out_label(config)}={out}")
    options = {
        "image": opt("agentbench_image") or ini("agentbench_image") or None,
        "sandbox": opt("agentbench_sandbox") or "docker",
        "full_logs": bool(opt("agentbench_full_logs")),
        "keep_workspace": bool(opt("agentbench_keep_workspace")),
        "ca_bundle": resolve_ca_bundle(
            opt("agentbench_ca_bundle") or ini("agentbench_ca_bundle") or "auto"
        ),
        "git_cache": opt("agentbench_git_cache"),
        "env_cache": opt("agentbench_env_cache"),
        "llm": {
            k: v
            for k in ("model", "base_url", "temperature", "top_p", "max_tokens", "preset", "seed")
            if (v := opt(f"agentbench_{k}")) is not None
        },
    }
    _infer_local_preset(options["llm"])
    factories = agent_factories(config.hook.pytest_agentbench_agents())
    if variant.agent not in factories:
        raise ValueError(
            f"--agentbench-variant {variant.name}: unknown agent {variant.agent!r}; "
            f"known: {', '.join(sorted(factories))}"
        )
    if variant.agent == "llm_v0":
        from pytest_agentbench.agents.llm_config import check_config

        check_config(variant.config(), options["llm"])  # one usage error, not N failed attempts
    ab = AgentbenchConfig(
        taskpacks=taskpacks,
        suites=sorted(set(suites)),
        variant=variant,
        attempts=attempts,
        quarantine=opt("agentbench_quarantine") or ini("agentbench_quarantine") or "run",
        out=out.resolve(),
        options=options,
    )
    loaded = discover(taskpacks, ab.suites)
    for problem in loaded.problems:
        if problem.task_file is None:
            raise ValueError(str(problem))  # a missing suite or taskpacks dir: nothing to run
        ab.problems_by_path.setdefault(problem.task_file.resolve(), []).append(problem)
    for task in loaded.tasks:
        ab.tasks_by_path[task.path.resolve()] = task
    return ab


def _out_label(config: pytest.Config) -> str:
    return "--agentbench-out" if config.getoption("agentbench_out") else "agentbench_out (ini)"


def _infer_local_preset(llm: dict[str, Any]) -> None:
    """A loopback --agentbench-base-url with no preset means a local server that needs no key."""
    from urllib.parse import urlparse

    host = urlparse(str(llm.get("base_url", ""))).hostname or ""
    if "preset" not in llm and (host in ("localhost", "::1") or host.startswith("127.")):
        llm["preset"] = "local"


def _default_worksteal(config: pytest.Config) -> None:
    """Task durations vary wildly: steal work unless the user chose a distribution mode."""
    if not config.pluginmanager.hasplugin("xdist") or not config.getoption("numprocesses", None):
        return
    args = config.invocation_params.args
    if not any(a == "-d" or a.startswith("--dist") for a in args):
        config.option.dist = "worksteal"


def _ensure_image(ab: AgentbenchConfig) -> dict[str, Any]:
    if ab.options["sandbox"] != "docker":
        return {"name": "local", "id": None, "digest": None}
    from pytest_agentbench.sandbox.image import DEFAULT_IMAGE, ImageBuildError, ensure_image

    name = ab.options["image"] or DEFAULT_IMAGE
    import subprocess

    try:
        subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        raise pytest.UsageError(
            "Docker daemon not reachable: run scripts/ensure-docker (or start Docker), or use "
            "--agentbench-sandbox local for unisolated test runs"
        ) from None
    try:
        if ab.options["image"]:
            from pytest_agentbench.sandbox.image import inspect_image

            found = inspect_image(name)
            if not found:
                raise pytest.UsageError(f"--agentbench-image {name}: no such image")
            return {"name": name, "id": found["id"], "digest": found["digest"]}
        info = ensure_image(name=name)
    except ImageBuildError as exc:
        raise pytest.UsageError(f"runner image: {exc}") from None
    except FileNotFoundError:
        raise pytest.UsageError("docker CLI not found; run scripts/ensure-docker") from None
    return {"name": info.name, "id": info.image_id, "digest": info.digest}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    ab = config.stash.get(AB_KEY, None)
    if ab is None or not collection_path.is_file():
        return None
    inside = ab.taskpacks in collection_path.parents
    return True if inside and collection_path.name != "task.yaml" else None


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return collect_task_directory(path, parent)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    ab = parent.config.stash.get(AB_KEY, None)
    if ab is None or file_path.name != "task.yaml":
        return None
    resolved = file_path.resolve()
    if resolved in ab.tasks_by_path or resolved in ab.problems_by_path:
        return TaskFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ab = config.stash.get(AB_KEY, None)
    if ab is None:
        return
    keep, drop = [], []
    done = set(ab.state.done) if ab.state else set()
    for item in items:
        marker = item.get_closest_marker("agentbench_quarantine")
        loaded = getattr(item, "loaded", None)
        if loaded is not None and f"{loaded.id}#{item.attempt_index}" in done:  # type: ignore[attr-defined]
            drop.append(item)
            continue
        if ab.quarantine == "only" and marker is None:
            drop.append(item)
            continue
        if marker is not None:
            reason = f"quarantined: {marker.kwargs.get('reason', '')}"
            if ab.quarantine == "skip":
                item.add_marker(pytest.mark.skip(reason=reason))
            elif ab.quarantine == "run":
                item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, SHORT_FAILURES):
        report.longrepr = str(call.excinfo.value)  # one short text, no traceback
    record = getattr(item, "agentbench_record", None)
    if record is None or getattr(item, "_agentbench_attached", False):
        return report
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.when == "setup":
            outcome = "skipped" if report.skipped else "error"
        else:
            outcome = report.outcome
        record["pytest_outcome"] = outcome
        report.agentbench = record
        item._agentbench_attached = True  # type: ignore[attr-defined]
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG.get("config")
    if config is None or is_worker(config):
        return
    ab = config.stash.get(AB_KEY, None)
    if ab is None or ab.state is None:
        return
    with uninterrupted():  # a SIGTERM now takes effect once the line is written
        _record(ab, report)


def _record(ab: AgentbenchConfig, report: pytest.TestReport) -> None:
    assert ab.state is not None
    record = getattr(report, "agentbench", None)
    if record is None and report.failed and report.when not in ("setup", "call", "teardown"):
        # pytest-xdist reports a worker that died mid-item with when="???"
        record = crash_record(ab, report)
    key = f"{record['task_id']}#{record['attempt_index']}" if record else ""
    if record is not None and key not in ab.recorded_keys:  # a late crash report of a finished
        record_attempt(ab.state, record, ab.redactor.redact_record)
        ab.recorded_keys.add(key)  # attempt (worker died in teardown) must not add a 2nd line
        ab.recorded += 1
        outcome = record.get("pytest_outcome") or "error"
        ab.outcomes[outcome] = ab.outcomes.get(outcome, 0) + 1


_CONFIG: dict[str, pytest.Config] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config


@pytest.hookimpl(trylast=True)  # after xdist stopped its workers: none starts after the sweep
def pytest_sessionfinish(session: pytest.Session) -> None:
    ab = session.config.stash.get(AB_KEY, None)
    if ab is None or ab.state is None or is_worker(session.config):
        return
    config = session.config

    def record_unhandled() -> None:
        if config.pluginmanager.hasplugin("dsession"):
            for report in unhandled_reports(config):
                _record(ab, report)

    ab.finish_errors += end_run(
        ab.state, ab.redactor, docker=ab.options["sandbox"] == "docker", first=record_unhandled
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    ab = config.stash.get(AB_KEY, None)
    if ab is None or ab.state is None or is_worker(config):
        return
    counts = ", ".join(f"{n} {k}" for k, n in sorted(ab.outcomes.items())) or "none"
    terminalreporter.write_sep("-", "agentbench")
    terminalreporter.write_line(
        f"run {ab.state.run_id} ({ab.variant.name}): {ab.recorded} attempts recorded ({counts})"
    )
    terminalreporter.write_line(f"run dir: {ab.state.run_dir}")
    for note in ab.state.notes:
        terminalreporter.write_line(f"agentbench: {note}", yellow=True)
    for line in ab.finish_errors:
        terminalreporter.write_line(
            ab.redactor.redact(f"agentbench: session end: {line}"), red=True
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    restore_sigterm()


class _XdistController:
    def __init__(self, ab: AgentbenchConfig) -> None:
        self.ab = ab

    def pytest_configure_node(self, node: Any) -> None:
        assert self.ab.state is not None
        node.workerinput["agentbench_state"] = self.ab.state.to_wire()
        node.workerinput["agentbench_image"] = self.ab.image
