#!/usr/bin/env python3
"""Write synthetic run directories of valid AttemptRecord lines (for benchmarks and demos).

    uv run python scripts/make_synthetic_runs.py OUT --records 100000 [--attempts 1]
        [--runs baseline:0.0 candidate:-0.1] [--artifacts 20] [--seed 0]

Each `--runs NAME:SKILL` makes `OUT/NAME/` (run.json + attempts.jsonl); all runs share the task
facts (same --seed), so they pair. A sample of every run is validated with the pydantic model.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.synthetic import (  # noqa: E402 - after the repository root is on sys.path
    synthetic_records,
    validate_sample,
    write_artifacts,
    write_run,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--attempts", type=int, default=1, help="attempts per task")
    parser.add_argument("--runs", nargs="+", default=["baseline:0.0", "candidate:-0.05"],
                        help="NAME:SKILL pairs; skill shifts the pass probability")
    parser.add_argument("--artifacts", type=int, default=0,
                        help="write drill-down artifacts for the first N records of each run")
    parser.add_argument("--seed", type=int, default=0, help="task seed shared by all runs")
    args = parser.parse_args(argv)
    for number, spec in enumerate(args.runs, 1):
        name, _, skill = spec.partition(":")
        started = time.perf_counter()
        records = list(synthetic_records(args.records, args.attempts, variant=name,
                                         skill=float(skill or 0), task_seed=args.seed,
                                         seed=args.seed + number, run_id=f"synthetic-{name}"))
        run_dir = write_run(args.out / name, records, variant=name, run_id=f"synthetic-{name}")
        for rec in itertools.islice(records, args.artifacts):
            write_artifacts(run_dir, rec)
        checked = validate_sample(run_dir, every=max(1, len(records) // 200))
        print(f"{run_dir}: {len(records)} records ({checked} validated) in "
              f"{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
