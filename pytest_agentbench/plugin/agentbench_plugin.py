"""The plugin object of one agentbench run (`AgentbenchPlugin`): registered by plugin/entry.py as
"agentbench-run" once a run is asked for; its methods are the hooks, its attributes the run's
settings, tasks, image and state. Everything else reaches it through `run_plugin(config)`.

On the controller it collects task items, writes each attempt's record as its report arrives
(the one writer of attempts.jsonl) and ends the run (run/finish.py). On an xdist worker it
collects and runs attempts with the state the controller shipped.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.port import Agent
from pytest_agentbench.agents.variants import VariantError, agent_builder
from pytest_agentbench.core.attempt_record import invalid_task_record
from pytest_agentbench.plugin.attempt_reports import attach_record, worker_crash_record
from pytest_agentbench.plugin.exit_status import Selection, recorded_line, settle_exit
from pytest_agentbench.plugin.items import (
    LABEL_MARK_HELP,
    CollectedTasks,
    InvalidTaskDir,
    InvalidTaskItem,
    TaskFile,
    TaskItem,
    foreign_marks,
    label_marks,
)
from pytest_agentbench.plugin.options import ini_value
from pytest_agentbench.plugin.resume import resume_command, with_recorded
from pytest_agentbench.plugin.rootdir import check_space_form
from pytest_agentbench.plugin.workers import (
    cap_workers,
    default_worksteal,
    is_crash_report,
    is_worker,
    signal_workers,
    unhandled_reports,
    worker_id,
)
from pytest_agentbench.run.engine_pool import EnginePlan
from pytest_agentbench.run.engine_setup import plan_engines
from pytest_agentbench.run.finish import end_run
from pytest_agentbench.run.hostenv import WorkRootError, work_base, work_root
from pytest_agentbench.run.settings import OutDirError, RunSettings, build_settings
from pytest_agentbench.run.sigterm import (
    on_sigterm,
    restore_sigterm,
    sigterm_as_interrupt,
    uninterrupted,
)
from pytest_agentbench.run.state import ResumeError, RunState, start_run
from pytest_agentbench.run.verdict import INFRA_ERROR
from pytest_agentbench.run.writer import AttemptLog
from pytest_agentbench.sandbox.docker.image import ImageUnavailable, RunnerImage, runner_image
from pytest_agentbench.schemas.records import attempt_key
from pytest_agentbench.tasks.loader import TASK_FILE, LoadedTask
from pytest_agentbench.text.redaction import Redactor

PLUGIN_NAME = "agentbench-run"  # "agentbench" is the entry module (the pytest11 name)


def run_plugin(config: pytest.Config) -> AgentbenchPlugin | None:
    """The run's plugin object, or None when no run was asked for."""
    plugin: AgentbenchPlugin | None = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return plugin


class AgentbenchPlugin:
    """One agentbench run in this pytest process (controller, worker or both in one)."""

    def __init__(
        self,
        config: pytest.Config,
        settings: RunSettings,
        tasks: CollectedTasks,
        redactor: Redactor,
        build_agent: Callable[[], Agent],
    ) -> None:
        self.config = config
        self.settings = settings
        self.tasks = tasks
        self.redactor = redactor
        """Every task's own secrets (repo.url, setup commands, the artifacts.redact variables)
        plus the credential patterns. Workers build the same one."""
        self.build_agent = build_agent  # a fresh agent of the variant for each attempt
        self.image: RunnerImage | None = None
        self.engines: list[EnginePlan] = []  # the run's Docker engines (run/engine_setup.py)
        self.header_lines: list[str] = []
        self.state: RunState | None = None
        self.log: AttemptLog | None = None  # the controller's, once the run started
        self.finish_errors: list[str] = []  # session-end steps that failed
        self._by_nodeid: dict[str, tuple[LoadedTask, int]] = {}  # the controller's, under xdist
        self._names: set[str] | None = None  # every task item's test name
        self.selection = Selection()  # how many task items collection left to run, and why
        self.verdict_lines: list[str] = []

    @classmethod
    def from_config(cls, config: pytest.Config, suites: list[str]) -> AgentbenchPlugin:
        """The run's settings and tasks; a usage error (one line) for a bad option or variant,
        an out dir that cannot be, or nothing to run."""
        try:
            check_space_form(config)
            resume = config.getoption("agentbench_resume")
            settings = build_settings(
                with_recorded(lambda name: config.getoption(f"agentbench_{name}"),
                              config.invocation_params.dir / resume if resume else None),
                lambda name: ini_value(config, name),
                suites=suites,
                rootpath=config.rootpath,
                invocation_dir=config.invocation_params.dir,
                ini_dir=config.inipath.parent if config.inipath else None,
                worker=is_worker(config),
            )
            tasks = CollectedTasks.discover(settings.taskpacks, settings.suites)
            labels = (label for t in tasks.tasks.values() for label in t.spec.labels)
            for label in label_marks(labels, foreign_marks(config)):
                config.addinivalue_line("markers", f"{label}: {LABEL_MARK_HELP}")
            redactor = Redactor.for_tasks(t.spec for t in tasks.tasks.values())
            build_agent = agent_builder(  # checks the variant: a usage error, not N failures
                settings.variant,
                extra_factories=config.hook.pytest_agentbench_agents(),
                llm_cli=settings.llm,
                redactor=redactor,
            )
            tasks.check()
            return cls(config, settings, tasks, redactor, build_agent)
        except (VariantError, OutDirError, ValueError) as exc:
            raise pytest.UsageError(str(exc)) from None

    def start(self) -> None:
        """Begin the run: on a worker, take the controller's state; on the controller, check
        the image, make or reopen the run directory. Listing tasks (--collect-only) needs no
        image and leaves no run directory."""
        config, settings = self.config, self.settings
        sigterm_as_interrupt()
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            config.args = [str(settings.taskpacks / suite) for suite in settings.suites]
        if is_worker(config):
            workerinput = config.workerinput  # type: ignore[attr-defined]
            self.state = RunState.from_wire(workerinput["agentbench_state"])
            self.image = RunnerImage.from_wire(workerinput["agentbench_image"])
            self.engines = [EnginePlan.from_wire(p) for p in workerinput["agentbench_engines"]]
            return
        default_worksteal(config)
        if config.option.collectonly:
            return
        try:
            work_base()  # another user's or a link: refused here, in one line
            self.image = runner_image(settings.sandbox, settings.image)
            if settings.docker:
                self.engines = plan_engines(settings.engines, self.image, work_root("engines"),
                                            self._say)[0]
            self.state = start_run(settings, self.image.ref, redact_obj=self.redactor.redact_obj)
        except ImageUnavailable as exc:
            if exc.usage:
                raise pytest.UsageError(str(exc)) from None
            # no engine or no image: the infrastructure's fault, not a bad option
            pytest.exit(f"infrastructure error: {exc}", returncode=INFRA_ERROR)
        except (ResumeError, OutDirError, WorkRootError) as exc:
            raise pytest.UsageError(str(exc)) from None
        self.log = AttemptLog(self.state, self.redactor.redact_record)
        capped = cap_workers(config, self.tasks.item_count(settings.attempts, self.state.done))
        if capped:
            self._say(capped)
        if config.pluginmanager.hasplugin("xdist"):
            # workers stop at once, each removing its own containers, as with a terminal's Ctrl-C
            on_sigterm(lambda: signal_workers(config, signal.SIGTERM))

    # -- collection ---------------------------------------------------------------------------
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        if not collection_path.is_file():
            return None
        inside = self.settings.taskpacks in collection_path.parents
        return True if inside and collection_path.name != TASK_FILE else None

    def pytest_collect_directory(
        self, path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if (path / TASK_FILE).is_file():
            return None
        problems = self.tasks.directory_problems(path)
        if not problems:
            return None
        return InvalidTaskDir.from_parent(
            parent, path=path, problems=problems, invalid_record=self.invalid_record
        )

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if file_path.name != TASK_FILE or not self.tasks.knows(file_path):
            return None
        resolved = file_path.resolve()
        return TaskFile.from_parent(
            parent,
            path=file_path,
            task=self.tasks.tasks.get(resolved),
            problems=self.tasks.problems.get(resolved, []),
            attempts=self.settings.attempts,
            variant=self.settings.variant.name,
            invalid_record=self.invalid_record,
        )

    def invalid_record(self, task_dir: Path, problems: list[str]) -> dict[str, Any] | None:
        """The TASK_INVALID record of an invalid task (items.InvalidTaskItem), once a run
        started (not for --collect-only)."""
        if self.state is None:
            return None
        return invalid_task_record(
            run_id=self.state.run_id,
            session_token=self.state.session_token,
            task_id=task_dir.name,
            suite=task_dir.parent.name,
            variant=self.settings.variant.name,
            variant_config_hash=self.settings.variant_hash(),
            worker=worker_id(self.config),
            problems=problems,
        ).to_json_dict()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        done = set(self.state.done) if self.state else set()
        quarantine = self.settings.quarantine
        for item in items:
            marker = item.get_closest_marker("agentbench_quarantine")
            if isinstance(item, TaskItem | InvalidTaskItem) and item.attempt_key in done:
                drop.append(item)
                self.selection.already_done += 1
                continue
            if quarantine == "only" and marker is None:
                drop.append(item)
                continue
            if marker is not None:
                reason = f"quarantined: {marker.kwargs.get('reason', '')}"
                if quarantine == "skip":
                    item.add_marker(pytest.mark.skip(reason=reason))
                elif quarantine == "run":
                    item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
            keep.append(item)
        if drop:
            self.config.hook.pytest_deselected(items=drop)
            items[:] = keep

    @pytest.hookimpl(trylast=True)  # after -k/-m deselected theirs
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        tasks = [i for i in session.items if isinstance(i, TaskItem | InvalidTaskItem)]
        self.selection.selected = len(tasks)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        done = set(self.state.done) if self.state else set()
        self.selection.deselected = (self.selection.deselected or 0) + sum(
            isinstance(i, TaskItem | InvalidTaskItem) and i.attempt_key not in done for i in items
        )

    # -- xdist, on the controller (hooks that exist only when xdist is installed) -------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.state is not None and self.image is not None:
            node.workerinput["agentbench_state"] = self.state.to_wire()
            node.workerinput["agentbench_image"] = self.image.to_wire()
            node.workerinput["agentbench_engines"] = [p.to_wire() for p in self.engines]

    def _say(self, line: str) -> None:
        """A line for the report header (the engines' checks run before the terminal exists)."""
        self.header_lines.append(f"agentbench: {line}")

    def pytest_report_header(self) -> list[str]:
        return self.header_lines

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Which attempt each collected item is, for the record of a worker that dies in it."""
        if self._by_nodeid or self.selection.selected is not None:
            return  # every worker collects the same items
        names = self._task_item_names()
        self.selection.selected = sum(nodeid.rpartition("::")[2] in names for nodeid in ids)
        by_name = self.tasks.attempts_by_name(self.settings.attempts, self.settings.variant.name)
        if not self.selection.selected:  # the workers deselected; what can the controller tell?
            done = set(self.state.done) if self.state else set()
            keys = {attempt_key(task.id, index) for task, index in by_name.values()}
            recorded = len(keys & done)
            self.selection.already_done = recorded
            if recorded < len(keys):
                self.selection.deselected = None  # some were left to run: -k/-m took them
        for nodeid in ids:
            attempt = by_name.get(nodeid.rpartition("::")[2])
            if attempt is not None:
                self._by_nodeid[nodeid] = attempt

    # -- reports and records ------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        attach_record(item, call, report)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.log is not None:
            with uninterrupted():  # a SIGTERM now takes effect once the line is written
                self._record(report)
            if report.failed and not self._is_task_report(report):
                self.selection.other_failures += 1  # a project's own test, run beside a suite

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if self.log is not None and report.failed:
            self.selection.other_failures += 1  # a test module that does not import, say

    def _task_item_names(self) -> set[str]:
        if self._names is None:
            by_name = self.tasks.attempts_by_name(self.settings.attempts,
                                                  self.settings.variant.name)
            self._names = set(by_name) | self.tasks.invalid_names()
        return self._names

    def _is_task_report(self, report: pytest.TestReport) -> bool:
        return hasattr(report, "agentbench") or (
            report.nodeid.rpartition("::")[2] in self._task_item_names()
        )

    def _record(self, report: pytest.TestReport) -> None:
        assert self.log is not None and self.state is not None
        record = getattr(report, "agentbench", None)
        if record is None and is_crash_report(report):
            attempt = self._by_nodeid.get(report.nodeid)
            if attempt is not None:
                record = worker_crash_record(self.state, self.settings, attempt, report)
            else:  # not an attempt xdist told us of: say so rather than lose it silently
                self.state.notes.append(
                    f"a worker crashed in {report.nodeid}, which is no collected attempt: "
                    "no record written"
                )
        if record is not None:
            self.log.write(record)

    # -- the run's end --------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)  # after xdist stopped its workers: none starts after the sweep
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.log is None or self.state is None:
            return
        config = session.config

        def record_unhandled() -> None:
            if config.pluginmanager.hasplugin("dsession"):
                for report in unhandled_reports(config):
                    self._record(report)

        self.finish_errors += end_run(
            self.state, self.redactor, docker=self.settings.docker, first=record_unhandled,
            engines=self.engines,
        )
        assert self.log is not None
        self.verdict_lines = settle_exit(
            session, self.log, self.state, self.settings, self.selection, bool(self.finish_errors)
        )

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if self.log is None or self.state is None:
            return
        self._summary(terminalreporter)
        if exitstatus == pytest.ExitCode.INTERRUPTED and self.state.path.is_dir():
            # the exact command that continues the run
            args = [str(a) for a in self.config.invocation_params.args]
            terminalreporter.write_line(
                f"to resume: {resume_command(args, self.state.path)}", bold=True)

    def _summary(self, terminalreporter: Any) -> None:
        assert self.log is not None and self.state is not None
        log, state = self.log, self.state
        terminalreporter.write_sep("-", "agentbench")
        terminalreporter.write_line(
            f"run {state.run_id} ({self.settings.variant.name}): {recorded_line(log)}")
        if state.path.is_dir():
            terminalreporter.write_line(f"run dir: {state.run_dir}")
        for line in self.verdict_lines:
            terminalreporter.write_line(line, red=line.startswith("ERROR"))
        for note in state.notes:
            terminalreporter.write_line(f"agentbench: {note}", yellow=True)
        for line in self.finish_errors:
            text = self.redactor.redact(f"agentbench: session end: {line}")
            terminalreporter.write_line(text, red=True)

    def pytest_unconfigure(self) -> None:
        restore_sigterm()

