#!/usr/bin/env python3
"""Is the harness right every time? Many attempts per bundled task under oracle and nop.

Runs `pytest --agentbench-suite S --agentbench-attempts K` once per variant over the bundled
suites (Docker sandbox, `-n` workers) and counts, per task, what the records say. Every valid task
must pass every oracle attempt and fail every nop attempt; the two tasks that are broken on purpose
(invalid, flaky) must come out as task errors every time. A miss is printed with its reason and
attempt directory; the script exits 1 if there is any, 0 otherwise, and never stops early.

    uv run python scripts/reliability.py --attempts 50 -n 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("custom-dev", "custom-heldout")
BROKEN_ON_PURPOSE = {"baseline-already-passes": "BASELINE_NOT_FAILING",
                     "flaky-baseline": "BASELINE_FLAKY"}


def run_variant(variant: str, attempts: int, workers: int, out: Path) -> list[dict]:
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header",
            f"--rootdir={ROOT}", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
            f"--agentbench-out={out}", f"--agentbench-variant={variant}",
            f"--agentbench-attempts={attempts}", "-n", str(workers)]
    for suite in SUITES:
        args += ["--agentbench-suite", suite]
    subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    records = []
    for path in out.glob("*/attempts.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def misses(variant: str, records: list[dict]) -> list[str]:
    found = []
    for record in records:
        task, result = record["task_id"], record["result"]
        if task in BROKEN_ON_PURPOSE:
            ok = result["failure_reason"] == BROKEN_ON_PURPOSE[task]
        else:
            ok = result["passed"] is (variant == "oracle")
        if not ok:
            found.append(f"{variant} {task}#{record['attempt_index']}: passed={result['passed']} "
                         f"{result['failure_reason']} {result.get('sub_reason')} "
                         f"{result['summary'][:160]} ({record['artifact_paths'].get('task_dir')})")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=50)
    parser.add_argument("-n", "--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here")
    parser.add_argument("--variants", nargs="+", default=["oracle", "nop"],
                        choices=["oracle", "nop"])
    opts = parser.parse_args()
    out = opts.out or Path(tempfile.mkdtemp(prefix="agentbench-reliability-"))
    all_misses: list[str] = []
    for variant in opts.variants:
        start = time.monotonic()
        records = run_variant(variant, opts.attempts, opts.workers, out / variant)
        by_task: dict[str, Counter[str]] = defaultdict(Counter)
        for record in records:
            result = record["result"]
            by_task[record["task_id"]]["passed" if result["passed"] else
                                       str(result["failure_reason"])] += 1
        found = misses(variant, records)
        expected = opts.attempts * sum(
            len(list((ROOT / "taskpacks" / suite).glob("*/task.yaml"))) for suite in SUITES)
        if len(records) != expected:
            found.append(f"{variant}: {len(records)} records, expected {expected}")
        all_misses += found
        print(f"{variant}: {len(records)} attempts in {time.monotonic() - start:.0f}s, "
              f"{len(found)} wrong")
        for task in sorted(by_task):
            counts = ", ".join(f"{k} {v}" for k, v in sorted(by_task[task].items()))
            print(f"  {task:32} {counts}")
    for line in all_misses:
        print("WRONG", line)
    print(f"runs kept in {out}")
    return 1 if all_misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
