"""Synthetic runs for tests, benchmarks and demos: valid `AttemptRecord` lines plus `run.json`.

Test data, so it lives under tests/ and is not shipped in the package; the scripts that make
synthetic runs (scripts/make_synthetic_runs.py, scripts/bench_reports.py) import it from here.

Task facts (suite, commit, validity, flakiness, quarantine, difficulty and the random number of
each attempt) come from `task_seed`, so two runs made with the same `task_seed` and different
`skill` are properly paired: same tasks, commits, image and limits, correlated outcomes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

SUITES = ("custom-dev", "custom-heldout")
LIMITS = {"timeout_sec": 900.0, "tool_timeout_sec": 120.0, "max_steps": 30, "cpu_limit": 2.0,
          "mem_limit_mb": 2048, "budgets": {"max_cost_usd": 1.0, "max_tokens": 200000}}
IMAGE = {"name": "agentbench-runner:v1", "id": "sha256:" + "ab" * 32,
         "digest": "agentbench-runner@sha256:" + "cd" * 32}
_AGENT_REASONS = ("TESTS_FAILED", "TESTS_FAILED", "TESTS_FAILED", "AGENT_GAVE_UP", "TIMEOUT",
                  "AGENT_STUCK", "TOOL_ERROR")
_SUMMARIES = (
    "AssertionError: assert {a} == {b}",
    "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",
    "KeyError: 'field_{a}'",
    "pytest exited with code 1 after {a} steps",
)


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def task_ids(n_tasks: int) -> list[str]:
    return [f"task-{i:06d}" for i in range(n_tasks)]


def synthetic_records(
    n_records: int,
    attempts: int = 1,
    variant: str = "baseline",
    skill: float = 0.0,
    task_seed: int = 0,
    seed: int = 1,
    run_id: str | None = None,
    harness_version: str = "0.1.0+synthetic",
) -> Iterator[dict[str, Any]]:
    """Yield `n_records` attempt records (plain dicts): `n_records // attempts` tasks.

    `skill` shifts the pass probability of every attempt (-1..1); the per-attempt random numbers
    are shared between runs with the same `task_seed`, so outcomes are paired.
    """
    n_tasks = max(1, n_records // attempts)
    trng = np.random.default_rng(task_seed)
    suite_ix = trng.integers(0, len(SUITES), n_tasks)
    difficulty = trng.beta(2, 2, n_tasks)
    kind = trng.random(n_tasks)  # < .03 invalid, < .05 flaky, < .06 quarantined
    u = trng.random((n_tasks, attempts))
    infra_u = trng.random((n_tasks, attempts))
    orng = np.random.default_rng(seed)
    redraw = orng.random((n_tasks, attempts)) < 0.15  # some outcomes differ between variants
    u = np.where(redraw, orng.random((n_tasks, attempts)), u)
    steps = orng.integers(1, 31, (n_tasks, attempts))
    durations = orng.gamma(2.0, 60.0, (n_tasks, attempts))
    reason_ix = orng.integers(0, len(_AGENT_REASONS), (n_tasks, attempts))
    summary_ix = orng.integers(0, len(_SUMMARIES), (n_tasks, attempts))
    rid = run_id or f"synthetic-{variant}-{task_seed}-{seed}"
    ids = task_ids(n_tasks)
    count = 0
    for t in range(n_tasks):
        tid = ids[t]
        for i in range(attempts):
            if count >= n_records:
                return
            count += 1
            passed = bool(u[t, i] < np.clip(1 - difficulty[t] + skill, 0, 1))
            reason: str | None = None
            if kind[t] < 0.03:
                reason, passed = ("SETUP_FAILED", "BASELINE_NOT_FAILING")[t % 2], False
            elif kind[t] < 0.05:
                reason, passed = "BASELINE_FLAKY", False
            elif infra_u[t, i] < 0.02:
                reason, passed = ("SANDBOX_ERROR", "LLM_ERROR")[t % 2], False
            elif not passed:
                reason = _AGENT_REASONS[reason_ix[t, i]]
            yield make_record(rid, tid, SUITES[suite_ix[t]], variant, i, attempts, passed,
                              reason, int(steps[t, i]), float(durations[t, i]),
                              int(summary_ix[t, i]), 0.05 <= kind[t] < 0.06, harness_version)


def make_record(
    run_id: str, task_id: str, suite: str, variant: str, attempt_index: int, attempts: int,
    passed: bool, reason: str | None, steps: int, duration: float, summary_ix: int = 0,
    quarantined: bool = False, harness_version: str = "0.1.0+synthetic",
) -> dict[str, Any]:
    """One record dict that validates as `AttemptRecord`."""
    prompt_tokens = 900 * steps
    completion_tokens = 150 * steps
    flaky = reason == "BASELINE_FLAKY"
    summary = "" if passed else _SUMMARIES[summary_ix].format(a=steps, b=steps + 1)
    failing = ([] if passed or summary_ix % 2
               else [f"tests/test_{task_id}.py::test_case_{steps % 3}"])
    task_dir = f"tasks/{task_id}" + (f"/attempt-{attempt_index}" if attempts > 1 else "")
    return {
        "record_version": 1, "run_id": run_id,
        "attempt_id": f"{run_id}:{task_id}:{attempt_index}", "task_id": task_id,
        "suite": suite, "variant": variant, "variant_config_hash": _sha(variant)[:12],
        "attempt_index": attempt_index, "task_spec_version": 1, "task_commit": _sha(task_id),
        "harness_version": harness_version, "worker": "gw0",
        "quarantined": "known flaky upstream" if quarantined else None,
        "model": {"provider": "openrouter", "name": "synthetic/model", "temperature": 0.2},
        "usage": {"llm_calls": steps, "prompt_tokens": prompt_tokens,
                  "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens,
                  "cost_usd": round((prompt_tokens * 3 + completion_tokens * 15) / 1e6, 6),
                  "retries": 0, "llm_latency_ms": 800 * steps},
        "timestamps": {"started_at": "2025-01-01T00:00:00Z", "ended_at": "2025-01-01T00:10:00Z"},
        "duration_sec": round(duration, 3),
        "timings": {"setup": 5.0, "baseline": 3.0, "agent": round(duration, 3)},
        "setup": {"attempted": True, "ok": reason != "SETUP_FAILED", "duration_sec": 5.0,
                  "commands": 1},
        "baseline_validation": {"attempted": True, "failed_as_expected": True, "exit_code": 1,
                                "is_flaky": flaky, "flake_check_runs": 2},
        "agent": {"steps": steps, "tool_calls": steps * 2, "finished_by": "finish"},
        "result": {"passed": passed, "exit_code": 0 if passed else 1, "failure_reason": reason,
                   "summary": summary, "signature": failing},
        "limits": LIMITS, "image": IMAGE,
        "pytest_outcome": "passed" if passed else "failed",
        "artifact_paths": {"task_dir": task_dir},
    }


def write_run(out_dir: str | Path, records: Iterator[dict[str, Any]] | list[dict[str, Any]],
              variant: str = "baseline", run_id: str | None = None,
              harness_version: str = "0.1.0+synthetic") -> Path:
    """Write `run.json` and `attempts.jsonl`; returns the run directory."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    first_run_id = run_id
    with (out / "attempts.jsonl").open("w", encoding="utf-8") as fh:
        for rec in records:
            first_run_id = first_run_id or rec["run_id"]
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    meta = {"run_id": first_run_id or out.name, "variant": variant,
            "harness_version": harness_version, "started_at": "2025-01-01T00:00:00Z",
            "config": {"synthetic": True}}
    (out / "run.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return out


def validate_sample(run_dir: str | Path, every: int = 1000) -> int:
    """Validate every `every`-th record (and the first) with the pydantic model; returns count."""
    from pytest_agentbench.schemas.records import AttemptRecord

    checked = 0
    with (Path(run_dir) / "attempts.jsonl").open(encoding="utf-8") as fh:
        for number, line in enumerate(fh):
            if number % every == 0:
                AttemptRecord.model_validate_json(line)
                checked += 1
    return checked


def write_artifacts(run_dir: str | Path, record: dict[str, Any], steps: int = 3) -> None:
    """Drill-down artifacts for one attempt: tool calls, conversation, diffs, logs, events."""
    run = Path(run_dir)
    tdir = run / record["artifact_paths"]["task_dir"]
    for sub in ("agent", "diffs", "logs"):
        (tdir / sub).mkdir(parents=True, exist_ok=True)
    calls, convo, events = [], [], []
    base = {"run_id": record["run_id"], "task_id": record["task_id"],
            "attempt_id": record["attempt_id"], "ts": "2025-01-01T00:00:00Z"}
    seq = 0
    for step in range(1, steps + 1):
        calls.append({"step": step, "tool": "read_file", "input": {"path": "src/mod.py"},
                      "output": f"def f():\n    return {step}  # <script>alert(1)</script>"})
        convo.append({"role": "assistant", "content": f"Step {step}: reading src/mod.py"})
        for etype, extra in (("tool_call_started", {"inputs_sha256": "0" * 64}),
                             ("tool_call_finished", {"ok": True, "duration_ms": 12,
                                                     "outputs_sha256": "1" * 64})):
            events.append({**base, "event_version": 1, "event_id": f"e{seq}", "seq": seq,
                           "mono_ms": seq * 100, "actor": "tool", "type": etype,
                           "tool": "read_file", "step": step, **extra})
            seq += 1
        (tdir / "diffs" / f"step_{step:04d}.patch").write_text(
            f"--- a/src/mod.py\n+++ b/src/mod.py\n@@ -1 +1 @@\n-    return {step - 1}\n"
            f"+    return {step}\n", encoding="utf-8")
    events.append({**base, "event_version": 1, "event_id": f"e{seq}", "seq": seq,
                   "mono_ms": seq * 100, "actor": "harness", "type": "task_finished",
                   "passed": record["result"]["passed"],
                   "failure_reason": record["result"]["failure_reason"], "duration_ms": 1000})
    for name, rows in (("tool_calls.jsonl", calls), ("conversation.jsonl", convo)):
        (tdir / "agent" / name).write_text("".join(json.dumps(r) + "\n" for r in rows),
                                           encoding="utf-8")
    (tdir / "logs" / "passing_stdout.txt").write_text("1 passed in 0.01s\n", encoding="utf-8")
    with (run / "events.jsonl").open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(e) + "\n" for e in events)
