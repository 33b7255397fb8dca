"""The work of `agentbench replay` (what the command does: cli/replay.py's docstring, which
registers it and imports this only when it runs: it pulls in the agents, the attempt and
pydantic)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.agents.builtin import ScriptedAgent, load_script
from pytest_agentbench.agents.port import AgentContext, AgentOutcome
from pytest_agentbench.core.rundir import read_jsonl, write_json
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.loader import TASK_FILE, LoadedTask, TaskSpecError, load_task

AGENT_VERDICTS = frozenset({Reason.AGENT_GAVE_UP, Reason.AGENT_STUCK, Reason.AGENT_NO_PROGRESS,
                            Reason.TOOL_ERROR, Reason.TIMEOUT})
ATTEMPT_VERDICTS = {(Reason.TOOL_ERROR, "EDIT_NOT_ALLOWED"), (Reason.TIMEOUT,
                                                             "PASSING_COMMAND_TIMEOUT")}


class ReplayError(Exception):
    """A problem with the arguments or the run directory (exit status 2)."""


def replay(args: argparse.Namespace) -> int:
    run_dir = Path(args.run).resolve()
    record = find_record(run_dir, args.task, args.attempt)
    attempt_dir = run_dir / record.get("artifact_paths", {}).get("task_dir",
                                                                 f"tasks/{args.task}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    out = run_dir / "replays" / f"{args.task}-{stamp}"
    out.mkdir(parents=True)
    script = attempt_dir / "agent" / "tool_calls.jsonl"
    if not script.is_file():  # the agent made no calls: replay nothing
        script = out / "tool_calls.jsonl"
        script.touch()
    n_calls = len(load_script(script))
    task = load_frozen_task(attempt_dir / TASK_FILE, Path(args.taskpacks))
    spec = task.spec
    if spec.agent.max_steps <= n_calls:  # the recorded agent may count turns, not calls
        agent_spec = spec.agent.model_copy(update={"max_steps": n_calls + 1})
        task = replace(task, spec=spec.model_copy(update={"agent": agent_spec}))
    print(f"replaying {args.task} (attempt {record.get('attempt_index', 0) + 1} of run "
          f"{record.get('run_id')}): {n_calls} tool call(s) in a fresh {args.sandbox} sandbox")
    print(f"  task directory: {task.task_dir}")
    new = _run_attempt(task, record, script, out, args)
    old_result, new_result = record.get("result", {}), new["result"]
    reproduced = (bool(old_result.get("passed")) == bool(new_result.get("passed"))
                  and old_result.get("failure_reason") == new_result.get("failure_reason"))
    write_json(out / "replay.json", {"reproduced": reproduced, "task_id": args.task,
                                     "source_run": str(run_dir), "tool_calls": n_calls,
                                     "recorded": old_result, "replayed": new_result})
    print(f"  recorded: {_describe(old_result)}")
    print(f"  replayed: {_describe(new_result)}")
    print(f"{'REPRODUCED' if reproduced else 'NOT REPRODUCED'} (artifacts: {out})")
    return 0 if reproduced else 1


def find_record(run_dir: Path, task_id: str, attempt: int | None) -> dict[str, Any]:
    path = run_dir / "attempts.jsonl"
    if not path.is_file():
        raise ReplayError(f"{run_dir}: no attempts.jsonl (not a run directory?)")
    records = [r for r in read_jsonl(path) if r.get("task_id") == task_id]
    if not records:
        known = sorted({str(r.get("task_id")) for r in read_jsonl(path)})
        raise ReplayError(f"task {task_id!r} has no record in {path} (recorded: "
                          f"{', '.join(known) or 'none'})")
    if attempt is not None:
        records = [r for r in records if r.get("attempt_index") == attempt - 1]
        if not records:
            raise ReplayError(f"task {task_id!r} has no attempt {attempt} in {path}")
    elif len({r.get("attempt_index") for r in records}) > 1:
        raise ReplayError(f"task {task_id!r} has {len(records)} attempts in {path}; choose one "
                          "with --attempt N")
    return dict(records[-1])  # a resumed run may hold a retried attempt: the last one counts


def load_frozen_task(frozen: Path, taskpacks: Path) -> LoadedTask:
    """The run's frozen task.yaml, with `task_dir` pointing at the original task directory
    (found under `taskpacks`), so that a relative `repo.url` and `oracle.patch` resolve as they
    did in the run; the frozen copy's own folder when the original is gone."""
    try:
        task = load_task(frozen, check_layout=False)
    except TaskSpecError as exc:
        raise ReplayError(str(exc)) from None
    original = find_task_dir(taskpacks, task.spec.suite, task.spec.id)
    if original is None:
        print(f"  note: task {task.id!r} not found under {taskpacks}/{task.spec.suite}; "
              "relative paths resolve against the frozen copy", file=sys.stderr)
        return task
    if (original / TASK_FILE).read_text("utf-8") != task.raw_text:
        print(f"  note: {original / TASK_FILE} changed since the run; replaying the frozen copy",
              file=sys.stderr)
    return replace(task, task_dir=original.resolve())


def find_task_dir(taskpacks: Path, suite: str, task_id: str) -> Path | None:
    suite_dir = taskpacks / suite
    if (suite_dir / task_id / TASK_FILE).is_file():
        return suite_dir / task_id
    for candidate in sorted(suite_dir.glob(f"*/{TASK_FILE}")):
        try:
            data = yaml.safe_load(candidate.read_text("utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and data.get("id") == task_id:
            return candidate.parent
    return None


class _ReplayAgent:
    """The scripted agent over the recorded calls, returning the recorded agent's own verdict."""

    name = "replay"

    def __init__(self, script: Path, record: dict[str, Any]) -> None:
        self.inner = ScriptedAgent(script=str(script))
        result = record.get("result") or {}
        reason, sub = result.get("failure_reason"), result.get("sub_reason")
        keep = (reason in AGENT_VERDICTS and (reason, sub) not in ATTEMPT_VERDICTS
                and (reason != Reason.TIMEOUT or sub == "TASK_BUDGET"))
        self.verdict = (Reason(str(reason)), sub) if keep else None

    def run(self, ctx: AgentContext) -> AgentOutcome:
        outcome = self.inner.run(ctx)
        if self.verdict is not None and outcome.reason is None:
            outcome.reason, outcome.sub_reason = self.verdict
            outcome.summary = f"recorded verdict {self.verdict[0]}; {outcome.summary}"
        return outcome


def _run_attempt(task: LoadedTask, record: dict[str, Any], script: Path, out: Path,
               args: argparse.Namespace) -> dict[str, Any]:
    from pytest_agentbench.core.attempt_config import SharedAttemptConfig
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.run.factory import (
        AttemptFactory,
        sandbox_factory,
    )
    from pytest_agentbench.run.hostenv import WorkRootError, attempt_defaults, work_root

    image = _image(args, record)
    run_id = f"replay-{out.name}"
    try:
        root = work_root(run_id)
    except WorkRootError as exc:  # another user's, or a link: one line, exit 2
        raise ReplayError(str(exc)) from None
    shared = SharedAttemptConfig(
        run_id=run_id, run_dir=out, work_root=root, variant="replay",
        variant_config_hash=str(record.get("variant_config_hash", "")),
        image=image["name"], image_id=image["id"], image_digest=image["digest"],
        worker="replay", events_path=out / "events.jsonl", **attempt_defaults(args.sandbox))
    sandboxes = sandbox_factory(args.sandbox)
    attempts = AttemptFactory(shared, sandboxes, MirrorCache(args.git_cache),
                              lambda: _ReplayAgent(script, record))
    try:
        new = attempts.run(task, index=int(record.get("attempt_index", 0)))
    finally:
        sandboxes.sweep({"agentbench.run_id": run_id})
    write_json(out / "attempt.json", new)
    return new


def _image(args: argparse.Namespace, record: dict[str, Any]) -> dict[str, Any]:
    if args.sandbox == "local":
        return {"name": "local", "id": None, "digest": None}
    from pytest_agentbench.sandbox.docker.image import (
        DOCKER_CLI_MISSING,
        ImageBuildError,
        ensure_image,
        inspect_image,
    )

    try:
        if args.image:
            found = inspect_image(args.image)
            if not found:
                raise ReplayError(f"--image {args.image}: no such image")
            image = {"name": args.image, "id": found["id"], "digest": found["digest"]}
        else:
            info = ensure_image()
            image = {"name": info.name, "id": info.image_id, "digest": info.digest}
    except ImageBuildError as exc:
        raise ReplayError(f"runner image: {exc}") from None
    except FileNotFoundError:
        raise ReplayError(DOCKER_CLI_MISSING) from None
    recorded = (record.get("image") or {}).get("id")
    if recorded and recorded != image["id"]:
        print(f"  note: the runner image differs from the run's ({recorded[:19]} then, "
              f"{str(image['id'])[:19]} now)", file=sys.stderr)
    return image


def _describe(result: dict[str, Any]) -> str:
    text = f"passed={bool(result.get('passed'))} failure_reason={result.get('failure_reason')}"
    if result.get("sub_reason"):
        text += f"/{result['sub_reason']}"
    return text + (f" ({clip_words(str(result['summary']))})" if result.get("summary") else "")


def clip_words(text: str, limit: int = 300) -> str:
    """`text` on one line, cut at a word boundary when longer than `limit` (a reason cut
    mid-word read as a different word)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit + 1].rsplit(" ", 1)[0] if " " in text[:limit + 1] else text[:limit]
    return cut.rstrip(" ,;:") + " …"
