#!/usr/bin/env python3
"""The harness's own time per LLM-agent step, model latency excluded, measured in one run.

A loopback OpenAI-compatible server scripts N steps against a real task in a Docker sandbox, in
two mixes: `read+run` (alternating read_file and a cheap `run`, no file changes) and `edits`
(read_file, write_file, `run true`, a `run` that appends to a file: half the steps change files,
and each of those must get its own recorded diff). A step's harness time is the wall time from
the model's answer to the next model request: tool execution, snapshot and diff, recording,
events, the agent loop (snapshot/diff: the recording toolbox's own count, which for a snapshot
folded into a command's exec is its time inside the sandbox).

Printed per mix: median, p90 and mean over the steps of the total and of its parts (tool
execution, snapshot/diff, rest), sandbox commands and docker execs per step (a command after
the first goes through the held wrapper shell, sandbox/docker/held_shell.py), the same by tool,
and a PASS/FAIL line against the target, on the mean (a mix's steps are of different kinds, so its
median is one kind's time). A slow or noisy result never fails the script; a harness error does
(exit 1, after every mix has run and printed what it measured): an attempt that did not run to
its `finish`, or a file-changing step without its own diff. The scripted model's `finish` is
taken at its word (`verify_finish: false`): the steps measured are the scripted ones, not a
check of the task.

    uv run --frozen python scripts/bench_agent_step.py [--steps 20] [--mix read+run|edits|both]
    uv run --frozen python scripts/bench_agent_step.py --smoke   # 4 steps: it runs, figures print
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.api.client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness_attempts import bench_config  # noqa: E402

import pytest_agentbench.core.recording as recording  # noqa: E402
import pytest_agentbench.llm.client as llm_client  # noqa: E402
import pytest_agentbench.sandbox.docker.sandbox as docker_sandbox  # noqa: E402
import pytest_agentbench.tools.toolbox as toolbox  # noqa: E402
from pytest_agentbench.agents.variants import Variant, agent_builder  # noqa: E402
from pytest_agentbench.core.pipeline import AttemptPipeline  # noqa: E402
from pytest_agentbench.repos.mirror import MirrorCache  # noqa: E402
from pytest_agentbench.run.hostenv import attempt_defaults  # noqa: E402
from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory  # noqa: E402
from pytest_agentbench.sandbox.docker.image import ensure_image  # noqa: E402
from pytest_agentbench.tasks.discovery import discover  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, Reply, tool_reply  # noqa: E402

TARGET_MS = 40.0
USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
MIXES = ("read+run", "edits")


class Probe:
    """Wall-clock marks of one attempt's agent phase, by step (= model calls answered so far)."""

    def __init__(self) -> None:
        self.chats: list[tuple[float, float]] = []
        self.tool_ms: dict[int, float] = defaultdict(float)
        self.snap_ms: dict[int, float] = defaultdict(float)
        self.execs: dict[int, int] = defaultdict(int)  # sandbox commands
        self.engine_execs: dict[int, int] = defaultdict(int)  # execs the engine was asked for
        self.tools: dict[int, str] = {}

    @property
    def step(self) -> int:
        return len(self.chats)

    def install(self) -> Callable[[], None]:
        """Wrap the LLM client, the toolbox, the snapshotter and the Docker exec; returns the
        undo."""
        saved: list[tuple[Any, str, Any]] = []

        def patch(owner: Any, name: str, new: Any) -> None:
            saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, new)

        chat = llm_client.OpenAICompatClient.chat

        def timed_chat(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return chat(*args, **kwargs)
            finally:
                self.chats.append((start, time.perf_counter()))

        docker_exec = docker_sandbox.DockerSandbox.exec

        def counted_exec(*args: Any, **kwargs: Any) -> Any:
            self.execs[self.step] += 1
            return docker_exec(*args, **kwargs)

        exec_create = docker.api.client.APIClient.exec_create

        def counted_create(*args: Any, **kwargs: Any) -> Any:
            self.engine_execs[self.step] += 1
            return exec_create(*args, **kwargs)

        patch(llm_client.OpenAICompatClient, "chat", timed_chat)
        patch(docker.api.client.APIClient, "exec_create", counted_create)
        inner_call = toolbox.Toolbox.call
        outer_call = recording.RecordingToolbox.call
        boxes: list[Any] = []

        def named_call(box: Any, name: str, arguments: Any) -> Any:
            # the tool's own time: without the snapshot folded into its exec
            step, start = self.step, time.perf_counter()
            self.tools[step] = name
            snap = boxes[-1].snapshot_ms if boxes else 0.0
            try:
                return inner_call(box, name, arguments)
            finally:
                folded = (boxes[-1].snapshot_ms - snap) if boxes else 0.0
                self.tool_ms[step] += (time.perf_counter() - start) * 1000 - folded

        def recorded_call(box: Any, name: str, arguments: Any) -> Any:
            step, snap = self.step, box.snapshot_ms
            boxes[:] = [box]
            try:
                return outer_call(box, name, arguments)
            finally:
                self.snap_ms[step] += box.snapshot_ms - snap

        patch(toolbox.Toolbox, "call", named_call)
        patch(recording.RecordingToolbox, "call", recorded_call)
        patch(docker_sandbox.DockerSandbox, "exec", counted_exec)

        def undo() -> None:
            for owner, name, old in reversed(saved):
                setattr(owner, name, old)
        return undo

    def steps(self) -> list[dict[str, Any]]:
        """Per step (every model answer but the last, `finish`): its harness time and parts."""
        rows = []
        for i in range(1, len(self.chats)):
            total = (self.chats[i][0] - self.chats[i - 1][1]) * 1000
            tool, snap = self.tool_ms[i], self.snap_ms[i]
            rows.append({"total": total, "tool": tool, "snap": snap,
                         "rest": total - tool - snap, "execs": self.execs[i],
                         "engine_execs": self.engine_execs[i],
                         "name": self.tools.get(i, "?")})
        return rows


def script_for(mix: str, steps: int) -> tuple[list[Reply], int]:
    """The model's replies, and how many of the steps change files."""
    replies, changing = [], 0
    for i in range(steps):
        kind = i % 2 if mix == "read+run" else i % 4
        if kind == 0:
            replies.append(tool_reply("read_file", {"path": "minilib/mathx.py"}, usage=USAGE))
        elif mix == "read+run" or kind == 2:
            replies.append(tool_reply("run", {"command": "true"}, usage=USAGE))
        elif kind == 1:
            replies.append(tool_reply("write_file", {"path": "minilib/notes.py",
                                                     "content": f"STEP = {i}\n"}, usage=USAGE))
            changing += 1
        else:
            replies.append(tool_reply("run", {"command": f"echo '# {i}' >> minilib/mathx.py"},
                                      usage=USAGE))
            changing += 1
    replies.append(tool_reply("finish", {"summary": "done"}, usage=USAGE))
    return replies, changing


def run_mix(mix: str, steps: int, image: Any) -> tuple[list[dict[str, Any]], str | None]:
    """One attempt; the per-step rows and a harness error (None when it ran as scripted)."""
    task = next(t for t in discover(ROOT / "taskpacks", ["custom-dev"]).tasks
                if t.id == "fix-mean-off-by-one")
    # the task's own cap on model turns (30) would end a longer script before its `finish`
    agent_spec = task.spec.agent.model_copy(update={"max_steps": steps + 5})
    task = dataclasses.replace(task, spec=task.spec.model_copy(update={"agent": agent_spec}))
    replies, changing = script_for(mix, steps)
    probe = Probe()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(replies) as server:
        cfg = bench_config(Path(tmp), image, run_id="bench-step", variant="llm_v0",
                           **attempt_defaults(), events_path=Path(tmp) / "events.jsonl")
        variant = Variant("llm_v0", "llm_v0",
                          params={"max_steps": steps + 5, "stuck_after": 10 ** 6,
                                  "max_noop": 10 ** 6, "verify_finish": False})
        agent = agent_builder(variant, llm_cli={"base_url": server.base_url,
                                                "model": "bench/model", "preset": "local"})()
        undo = probe.install()
        try:
            record = AttemptPipeline(task, cfg, DockerSandboxFactory(), MirrorCache(), agent).run()
        finally:
            undo()
        events = [json.loads(line) for line in
                  (Path(tmp) / "events.jsonl").read_text().splitlines()]
    diffs = {e.get("step") for e in events if e["type"] == "patch_applied"}
    error = None
    if record.agent is None or record.agent.finished_by != "finish":
        r = record.result
        error = (f"the agent did not finish as scripted: finished_by="
                 f"{record.agent.finished_by if record.agent else None}, steps "
                 f"{record.agent.steps if record.agent else None}, result {r.failure_reason} "
                 f"{r.sub_reason or ''}: {r.summary}")
    elif len(probe.chats) != steps + 1:
        error = f"{len(probe.chats)} model calls, expected {steps + 1}"
    elif len(diffs) != changing:
        error = f"{len(diffs)} steps recorded a diff, but {changing} steps changed files"
    return probe.steps(), error


def summary(rows: list[dict[str, Any]], key: str) -> str:
    values = sorted(row[key] for row in rows)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return (f"median {statistics.median(values):6.1f}  p90 {p90:6.1f}  "
            f"mean {statistics.fmean(values):6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--mix", choices=[*MIXES, "both"], default="both")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny size (4 steps): it runs and prints its figures")
    args = parser.parse_args()
    if args.smoke:
        args.steps = 4
    image = ensure_image(quiet=True)
    failed = False
    verdicts = []
    for mix in MIXES if args.mix == "both" else (args.mix,):
        rows, error = run_mix(mix, args.steps, image)
        print(f"== mix {mix}: {len(rows)} steps, harness time per step in ms, model excluded")
        if error is not None:
            print(f"HARNESS ERROR: {error}")
            failed = True
        if not rows:
            continue
        for key, label in (("total", "total"), ("tool", "tool execution"),
                           ("snap", "snapshot/diff"), ("rest", "rest")):
            print(f"  {label:15s} {summary(rows, key)}")
        print(f"  sandbox commands per step: {statistics.fmean(r['execs'] for r in rows):.2f}, "
              f"docker execs per step: {statistics.fmean(r['engine_execs'] for r in rows):.2f}")
        for name in sorted({r["name"] for r in rows}):
            mine = [r for r in rows if r["name"] == name]
            print(f"  {name + ' steps':15s} {summary(mine, 'total')}  "
                  f"(snapshot/diff mean {statistics.fmean(r['snap'] for r in mine):.1f})")
        # The mean: a mix's steps are of different kinds, so its median is one kind's time.
        mean = statistics.fmean(r["total"] for r in rows)
        verdict = "PASS" if mean <= TARGET_MS else "FAIL"
        verdicts.append(f"{mix}: {verdict} (mean {mean:.1f} ms per step, target "
                        f"<= {TARGET_MS:g} ms)")
    for line in verdicts:
        print(f"per-step overhead target: {line}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
