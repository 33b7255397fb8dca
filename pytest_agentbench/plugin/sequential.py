"""`--agentbench-sequential BASELINE_RUN`: the anytime-valid comparison (reporting/sequential.py)
updated while the run goes, which stops the run as soon as it can say REGRESSION or OK.

- Order: every process sorts the task items by a hash of the seed and the task id (a task's
  attempts together), so xdist workers collect the same order; the seed is the option's, the
  resumed run's, or a random one, recorded in run.json (`sequential.seed`) and shipped to the
  workers. Under xdist the items are handed out one at a time in that order (`--dist load
  --maxschedchunk 1`, unless the user chose a mode): work stealing would run the second half
  of the order beside the first, results the test could use only once the first half is done.
- Updates: on the controller, when an attempt's record is written, the tasks are taken in the
  order as far as every one of them is finished (a task finishing out of turn waits for those
  before it: processing tasks as they finish would let durations, which depend on outcomes,
  bias the test). The test then reads the records and the baseline as `agentbench gate
  --sequential` does, so both give the same answer.
- Stop: the decision is written to `<run dir>/.sequential-stop`; every item that starts after it
  is skipped with the reason (xdist workers check the file before each item), and in one process
  pytest stops after the current item (`session.shouldfail`). run.json's `sequential` section
  says why and after how many tasks; the summary and the terminal say it too.
- Exit status: the gate's, 0 OK, 1 REGRESSION, 3 INCONCLUSIVE, 2 when the runs cannot be paired,
  in place of the run's own 0 or 1; an infra error (10) and pytest's other codes stand.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.core.rundir import write_json
from pytest_agentbench.plugin.workers import is_worker
from pytest_agentbench.schemas.records import attempt_key

if TYPE_CHECKING:
    from pytest_agentbench.plugin.agentbench_plugin import AgentbenchPlugin

PLUGIN_NAME = "agentbench-sequential"
STOP_FILE = ".sequential-stop"
WIRE_KEY = "agentbench_sequential_seed"
EXIT_REFUSED = 2  # the gate's code for runs that cannot be paired


def register(config: pytest.Config, run: AgentbenchPlugin) -> Sequential | None:
    """The sequential plugin of this process when `--agentbench-sequential` is given."""
    if not config.getoption("agentbench_sequential"):
        return None
    plugin = Sequential.from_config(config, run)
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    return plugin


def _proportion(config: pytest.Config, name: str) -> float | None:
    raw = config.getoption(f"agentbench_sequential_{name}")
    if raw is None:
        return None
    text = str(raw).strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1 or (name == "alpha" and value in (0, 1)):
        flag = f"--agentbench-sequential-{name.replace('_', '-')}"
        bounds = "(0, 1)" if name == "alpha" else "[0, 1]"
        raise pytest.UsageError(f"{flag}: expected a proportion in {bounds} such as 0.05 or 5%, "
                                f"got {raw!r}")
    return value


ALLOW_RESOURCES = "--agentbench-sequential-allow-mismatch=resources"


def _same_scale(config: pytest.Config, baseline: Any, scale: float) -> None:
    """A baseline made at another --agentbench-resources-scale is refused before anything runs
    (the pairing would refuse it after the first task), unless resources may differ."""
    from pytest_agentbench.reporting.names import ReportError
    from pytest_agentbench.reporting.resources import FIELD, scale_of

    allowed = FIELD in (config.getoption("agentbench_sequential_allow_mismatch") or [])
    theirs = scale_of(baseline)
    if theirs != scale and not allowed:
        raise ReportError(f"the baseline ran at --agentbench-resources-scale {theirs:g}, this run "
                          f"at {scale:g}: pass {ALLOW_RESOURCES} to compare them")


class Sequential:
    def __init__(self, config: pytest.Config, run: AgentbenchPlugin, baseline: Any,
                 max_drop: float | None, margin: float | None, alpha: float) -> None:
        from pytest_agentbench.reporting.sequential import threshold_of

        self.config, self.run, self.baseline = config, run, baseline
        self.max_drop, self.margin, self.alpha = max_drop, margin, alpha
        self.threshold = threshold_of(max_drop, margin)
        self.allow_mismatch = list(config.getoption("agentbench_sequential_allow_mismatch") or [])
        self.seed: int | None = None
        self.schedule: list[str] | None = None  # task ids in order (the controller's)
        self.pending: dict[str, set[str]] = {}  # task id -> attempt keys not recorded yet
        self.by_nodeid: dict[str, tuple[str, int]] = {}
        self.position = 0  # tasks of the schedule all finished, from its start
        self.recorded = 0  # the run log's count when last looked at
        self.result: dict[str, Any] | None = None  # the decision, once made
        self.session: pytest.Session | None = None
        if is_worker(config):
            self.seed = int(config.workerinput[WIRE_KEY])  # type: ignore[attr-defined]

    @classmethod
    def from_config(cls, config: pytest.Config, run: AgentbenchPlugin) -> Sequential:
        max_drop, margin = _proportion(config, "max_drop"), _proportion(config, "margin")
        alpha = _proportion(config, "alpha") or 0.05
        if is_worker(config) or config.option.collectonly:
            return cls(config, run, None, max_drop, margin, alpha)
        from pytest_agentbench.reporting.extra import install_hint, missing_report_modules

        spec = str(config.getoption("agentbench_sequential"))
        missing = missing_report_modules()
        if missing:
            raise pytest.UsageError(f"--agentbench-sequential: {install_hint(missing)}")
        from pytest_agentbench.reporting.load import load_run
        from pytest_agentbench.reporting.names import ReportError
        from pytest_agentbench.reporting.runs import resolve_run

        try:
            path = resolve_run(spec, run.settings.out)
            baseline = load_run(path, fields="pairing")
            if baseline.attempts.empty:
                raise ReportError(f"{path}: the baseline run has no attempt")
            _same_scale(config, baseline, run.settings.resources_scale)
        except ReportError as exc:
            raise pytest.UsageError(f"--agentbench-sequential {spec}: {exc}") from None
        return cls(config, run, baseline, max_drop, margin, alpha)

    # -- start: the seed, the schedule's dispatch, run.json -------------------------------------
    def start(self) -> None:
        """After the run started (plugin/entry.py): pick and record the seed (controller)."""
        config = self.config
        given = config.getoption("agentbench_sequential_seed")
        if is_worker(config):
            return
        if self.baseline is None:  # --collect-only: the order only
            self.seed = int(given) if given is not None else 0
            return
        state = self.run.state
        recorded = self._recorded_seed()
        self.seed = recorded if recorded is not None else (
            int(given) if given is not None else secrets.randbelow(2**31))
        if state is not None:
            (state.path / STOP_FILE).unlink(missing_ok=True)  # a stopped run being resumed
            self._write({"seed": self.seed, "outcome": "running",
                         "baseline": str(self.baseline.path), "threshold": self.threshold,
                         "alpha": self.alpha})
        how = f"tasks in a random order (seed {self.seed})"
        if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
            args = config.invocation_params.args
            if not any(a == "-d" or a.startswith("--dist") for a in args):
                config.option.dist = "load"
                if getattr(config.option, "maxschedchunk", None) is None:
                    config.option.maxschedchunk = 1
                how += ", handed to the workers one at a time"
        self.run.header_lines.append(
            f"agentbench: sequential comparison with {self.baseline.run_id}: {how}; stops at "
            f"REGRESSION or OK (threshold {self.threshold * 100:.1f} points, alpha {self.alpha})")

    def _recorded_seed(self) -> int | None:
        state = self.run.state
        if state is None or not state.resumed:
            return None
        from pytest_agentbench.reporting.names import read_meta

        seed = (read_meta(state.path / "run.json").get("sequential") or {}).get("seed")
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None

    def _write(self, section: dict[str, Any]) -> None:
        state = self.run.state
        if state is None or not state.path.is_dir():
            return
        path = state.path / "run.json"
        meta = json.loads(path.read_text("utf-8"))
        meta["sequential"] = section
        write_json(path, meta)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WIRE_KEY] = self.seed

    # -- the order ---------------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from pytest_agentbench.plugin.items import TaskItem
        from pytest_agentbench.reporting.sequential import order_key

        seed = self.seed if self.seed is not None else 0
        rest = [i for i in items if not isinstance(i, TaskItem)]
        tasks = [i for i in items if isinstance(i, TaskItem)]
        tasks.sort(key=lambda i: (order_key(seed, i.loaded.id), i.loaded.id, i.attempt_index))
        items[:] = rest + tasks  # type: ignore[operator]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_agentbench.plugin.items import TaskItem

        if is_worker(self.config) or self.config.pluginmanager.hasplugin("dsession"):
            return
        self._plan((i.nodeid, i.loaded.id, i.attempt_index) for i in session.items
                   if isinstance(i, TaskItem))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.schedule is not None:
            return  # every worker collects the same items
        settings = self.run.settings
        by_name = self.run.tasks.attempts_by_name(settings.attempts, settings.variant.name)
        found = ((nodeid, by_name.get(nodeid.rpartition("::")[2])) for nodeid in ids)
        self._plan((n, a[0].id, a[1]) for n, a in found if a is not None)

    def _plan(self, attempts: Any) -> None:
        from pytest_agentbench.reporting.sequential import task_order

        state = self.run.state
        for nodeid, task_id, index in attempts:
            self.by_nodeid[nodeid] = (task_id, index)
            self.pending.setdefault(task_id, set()).add(attempt_key(task_id, index))
        earlier = {key.rpartition("#")[0] for key in (state.done if state else [])}
        assert self.seed is not None
        self.schedule = task_order(self.seed, set(self.pending) | earlier)
        if self.run.log is not None:
            self.recorded = self.run.log.recorded

    # -- updates on the controller -----------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        state = self.run.state
        if state is None:
            return
        try:
            why = (state.path / STOP_FILE).read_text("utf-8").strip()
        except OSError:
            return
        pytest.skip(f"agentbench: the sequential comparison stopped the run: {why}")

    @pytest.hookimpl(trylast=True)  # after the run plugin wrote the record
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        log = self.run.log
        if log is None or self.schedule is None or log.recorded == self.recorded:
            return
        self.recorded = log.recorded
        record = getattr(report, "agentbench", None)
        key = ((record["task_id"], record["attempt_index"]) if isinstance(record, dict)
               else self.by_nodeid.get(report.nodeid))
        if key is None:
            return
        self.pending.get(key[0], set()).discard(attempt_key(*key))
        before = self.position
        while self.position < len(self.schedule) and not self.pending.get(
                self.schedule[self.position]):
            self.position += 1
        if self.position > before and self.result is None:
            self._update(final=False)

    def _update(self, final: bool) -> None:
        """Run the test over the finished prefix of the order; stop the run on a decision."""
        from pytest_agentbench.reporting.load import load_run
        from pytest_agentbench.reporting.names import ReportError
        from pytest_agentbench.reporting.sequential import as_record, decide, drops_in_order

        state = self.run.state
        assert state is not None and self.schedule is not None and self.seed is not None
        done = self.schedule[:self.position]
        extra = {"baseline": str(self.baseline.path), "tasks_scheduled": len(self.schedule),
                 "tasks_finished": self.position, "max_drop": self.max_drop,
                 "margin": self.margin, "allow_mismatch": self.allow_mismatch}
        try:
            candidate = load_run(state.path, fields="pairing", cache=False)
            order, drops, info = drops_in_order(self.baseline, candidate, self.seed,
                                                self.allow_mismatch, tasks=done)
        except ReportError as exc:  # the flag of `gate` is this run's option here
            text = " ".join(str(exc).split()).replace("--allow-resource-difference",
                                                      ALLOW_RESOURCES)
            self.result = {"outcome": "refused", "seed": self.seed, "reason": text,
                           "exit_code": EXIT_REFUSED, **extra}
            self._stop(f"REFUSED: {text}")
            return
        decision = decide(drops, self.threshold, self.alpha)
        if decision.outcome == "inconclusive" and not final:
            return
        self.result = as_record(decision, self.threshold, self.alpha, self.seed, order, drops,
                                pairing=info, stopped_run=not final, **extra)
        if not final:
            self._stop(self.result["reason"])

    def _stop(self, why: str) -> None:
        state = self.run.state
        assert state is not None and self.result is not None
        self._write(self.result)
        (state.path / STOP_FILE).write_text(why + "\n", "utf-8")
        if self.session is not None and not self.config.pluginmanager.hasplugin("dsession"):
            self.session.shouldfail = f"agentbench sequential: {why}"

    # -- the end ---------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        state = self.run.state
        if is_worker(self.config) or state is None or self.schedule is None:
            return (yield)
        if self.result is None and self.run.log is not None:
            try:
                self._update(final=True)  # no decision: where the test stands at the end
            except Exception as exc:  # noqa: BLE001 - the run's own end must still happen
                self.result = {"outcome": "error", "seed": self.seed,
                               "reason": f"{type(exc).__name__}: {exc}"}
            if self.result is not None:
                self._write(self.result)
        (state.path / STOP_FILE).unlink(missing_ok=True)
        outcome = yield  # the run's end: records, summary (with this section), exit status
        code = (self.result or {}).get("exit_code")
        if isinstance(code, int) and int(session.exitstatus) in (0, 1):
            session.exitstatus = code
        return outcome

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.result is None:
            return
        status = self.result.get("exit_code")
        terminalreporter.write_line(
            f"agentbench sequential: {self.result['reason']}"
            + (f" (exit status {status}, the gate's)" if isinstance(status, int) else ""),
            red=self.result["outcome"] in ("regression", "refused"),
            green=self.result["outcome"] == "ok")

