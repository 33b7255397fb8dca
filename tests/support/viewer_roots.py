"""Output roots for the viewer's tests: synthetic runs with hostile content, a run in progress
written file by file the way a real run writes it, and links that point out of the root."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.synthetic import make_record, write_artifacts, write_run

EVIL_TASK = "task-<img src=x onerror=window.__xss=1>"
EVIL_SUMMARY = "<script>window.__xss=2</script>"
EVIL_COMMAND = "echo '<img src=x onerror=window.__xss=3>' && pytest -q tests/test_evil.py"
EVIL_VARIANT = "<script>window.__xss=4</script>"
SECRET = "top-secret-outside-the-root"


def paired_root(base: Path) -> Path:
    """`base/runs` with runs `run-a` and `run-b` (8 tasks plus the evil one, paired), run-a's
    evil attempt with artifacts (a tool call running EVIL_COMMAND), and three links out: a
    folder link in the root, a file link and a folder link inside run-a."""
    root = base / "runs"
    for name, fails, variant in (("a", {1, 3, 4}, "variant-a"), ("b", {3}, EVIL_VARIANT)):
        recs = [make_record(f"run-{name}", f"task-{i:03d}", "custom-dev", variant, 0, 1,
                            i not in fails, "TESTS_FAILED" if i in fails else None, steps=3,
                            duration=10.0 + i) for i in range(8)]
        evil = make_record(f"run-{name}", EVIL_TASK, "custom-dev", variant, 0, 1, name == "b",
                           None if name == "b" else "TOOL_ERROR", steps=2, duration=3.0)
        evil["result"]["summary"] = "" if name == "b" else EVIL_SUMMARY
        evil["result"]["signature"] = ["FAILED tests/test_evil.py::test_<b>bold</b>"]
        recs.append(evil)
        run = write_run(root / f"run-{name}", recs, variant=variant, run_id=f"run-{name}")
        meta = json.loads((run / "run.json").read_text())
        meta["started_at"] = f"2025-01-0{1 if name == 'a' else 2}T00:00:00Z"
        (run / "run.json").write_text(json.dumps(meta))
        write_artifacts(run, evil, steps=2)
        write_artifacts(run, recs[1], steps=3)
        calls = run / evil["artifact_paths"]["task_dir"] / "agent" / "tool_calls.jsonl"
        with calls.open("a") as fh:
            fh.write(json.dumps({"step": 3, "tool": "run", "arguments": {
                "command": EVIL_COMMAND}}) + "\n")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (root / "leak").symlink_to(outside, target_is_directory=True)
    (root / "run-a" / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "run-a" / "tasks" / "linked").symlink_to(outside, target_is_directory=True)
    return root


class LiveRun:
    """A run in progress, written as the plugin writes it: run.json, then each attempt's events
    appended to `events/<session>-<worker>.jsonl`, its line in attempts.jsonl when it ends, and
    at the run's end the parts merged into events.jsonl and the `events/` folder removed."""

    def __init__(self, root: Path, name: str = "run-live", session: str = "5e55") -> None:
        self.path = root / name
        self.path.mkdir(parents=True)
        self.name, self.session = name, session
        self.part = self.path / "events" / f"{session}-gw0.jsonl"
        self.part.parent.mkdir()
        self.seq: dict[str, int] = {}
        self.written: list[dict[str, Any]] = []
        (self.path / "run.json").write_text(json.dumps({
            "run_id": name, "variant": "oracle", "started_at": "2025-02-01T00:00:00Z",
            "sessions": [session], "harness_version": "0.1.0+test"}))

    def attempt_id(self, task: str) -> str:
        return f"{self.name}:{task}:oracle:0@{self.session}"

    def event(self, task: str, kind: str, **fields: Any) -> None:
        aid = self.attempt_id(task)
        seq = self.seq.get(aid, 0)
        self.seq[aid] = seq + 1
        event = {"event_version": 1, "event_id": f"{aid}-{seq}", "seq": seq, "ts":
                 f"2025-02-01T00:00:{seq:02d}Z", "mono_ms": seq * 10, "actor": "harness",
                 "run_id": self.name, "task_id": task, "attempt_id": aid, "type": kind,
                 **fields}
        self.written.append(event)
        with self.part.open("a") as fh:
            fh.write(json.dumps(event) + "\n")

    def start(self, task: str) -> None:
        self.event(task, "task_started", variant="oracle", worker="gw0")

    def phase(self, task: str, phase: str) -> None:
        self.event(task, "phase_started", phase=phase)

    def step(self, task: str, step: int, tool: str) -> None:
        self.event(task, "tool_call_started", tool=tool, step=step, inputs_sha256="0" * 64)

    def finish(self, task: str, passed: bool) -> None:
        self.event(task, "task_finished", passed=passed, duration_ms=1000,
                   failure_reason=None if passed else "TESTS_FAILED")
        record = make_record(self.name, task, "custom-dev", "oracle", 0, 1, passed,
                             None if passed else "TESTS_FAILED", steps=2, duration=1.0)
        record["attempt_id"] = self.attempt_id(task)
        with (self.path / "attempts.jsonl").open("a") as fh:
            fh.write(json.dumps(record) + "\n")

    def end(self) -> None:
        with (self.path / "events.jsonl").open("a") as fh:
            fh.writelines(json.dumps(e) + "\n" for e in self.written)
        self.part.unlink()
        self.part.parent.rmdir()
