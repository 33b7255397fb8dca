#!/usr/bin/env python3
"""Time the summary and paired reports on large synthetic runs (target: <= 5 s each).

    uv run python scripts/bench_reports.py [--records 100000] [--dir DIR] [--repeat 3] [--check]

Makes two paired runs of `--records` attempts each (unless `--dir` already holds `baseline/` and
`candidate/`), then times, in this process after imports:
- summary: load one run + summarize + render markdown (what `report summary` and the plugin do);
- paired: load both runs + pairing checks + McNemar + 10,000-resample bootstrap + markdown;
- gate: the same as paired plus the verdict;
and the csv / json / html renderings on their own, plus cold `report summary` and `gate`
processes (their CPU is that of the child process: compare it, not wall time, on a busy box).
Wall and CPU seconds (CPU includes forked loader workers) are printed; min and median of
`--repeat` runs. `--check` exits 1 when the best summary or paired wall time exceeds the target.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGET_SEC = 5.0


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), _cpu()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu() - cpu)
    return walls, cpus


def make_runs(root: Path, records: int) -> tuple[Path, Path]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
    from tests.support.synthetic import synthetic_records, validate_sample, write_run

    dirs = []
    for number, (name, skill) in enumerate((("baseline", 0.0), ("candidate", -0.03)), 1):
        run = root / name
        if not (run / "attempts.jsonl").is_file():
            write_run(run, synthetic_records(records, variant=name, skill=skill, task_seed=0,
                                             seed=number, run_id=f"synthetic-{name}"),
                      variant=name, run_id=f"synthetic-{name}")
            validate_sample(run, every=max(1, records // 200))
        dirs.append(run)
    return dirs[0], dirs[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="attempts per run")
    parser.add_argument("--dir", type=Path, default=None, help="reuse or create runs here")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="exit 1 above the 5 s target")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    from pytest_agentbench.reporting import render
    from pytest_agentbench.reporting.gate import gate
    from pytest_agentbench.reporting.html import render_html
    from pytest_agentbench.reporting.load import load_run, load_runs
    from pytest_agentbench.reporting.paired import compare
    from pytest_agentbench.reporting.summary import summarize
    imports = time.perf_counter() - started

    root = args.dir or Path(tempfile.mkdtemp(prefix="agentbench-bench-"))
    made = time.perf_counter()
    a, b = make_runs(root, args.records)
    size = (a / "attempts.jsonl").stat().st_size / 2**20
    print(f"runs: {a} and {b}, {args.records:,} attempts each, {size:.0f} MiB each "
          f"(ready in {time.perf_counter() - made:.1f} s); imports took {imports:.2f} s")

    run_a = load_run(a)
    run_s = load_run(a, fields="summary")
    runs = load_runs([a, b])
    summary = summarize(run_s)
    paired = compare(*runs)
    benches: list[tuple[str, Callable[[], Any], bool]] = [
        ("summary (load + summarize + md)",
         lambda: render.render_summary(summarize(load_run(a, fields="summary")), "md"), True),
        ("paired (load A+B + compare + md)",
         lambda: render.render_paired(compare(*load_runs([a, b])), "md"), True),
        ("gate (load A+B + gate + md)",
         lambda: render.render_gate(gate(*load_runs([a, b])), "md"), False),
        ("  load one run, summary fields", lambda: load_run(a, fields="summary"), False),
        ("  load one run, all fields", lambda: load_run(a), False),
        ("  summarize only", lambda: summarize(run_s), False),
        ("  compare only (10k resamples)", lambda: compare(*runs), False),
        ("  render summary csv (all tasks)", lambda: render.render_summary(summary, "csv"), False),
        ("  render summary json", lambda: render.render_summary(summary, "json"), False),
        ("  render paired csv", lambda: render.render_paired(paired, "csv"), False),
        ("  render html (first 1000 tasks)", lambda: render_html(run_a, summary), False),
    ]
    failed = False
    print(f"\n{'step':36} {'wall min':>9} {'wall med':>9} {'cpu med':>9}")
    for name, fn, gated in benches:
        walls, cpus = timed(fn, args.repeat)
        over = gated and min(walls) > TARGET_SEC
        failed |= over
        mark = "  OVER 5 s TARGET" if over else ("  <= 5 s" if gated else "")
        print(f"{name:36} {min(walls):8.2f}s {statistics.median(walls):8.2f}s "
              f"{statistics.median(cpus):8.2f}s{mark}")
    cli = [sys.executable, "-m", "pytest_agentbench.reporting.cli"]
    for name, argv in (
        ("cold process: report summary", ["report", "summary", "--run", str(a), "--output",
                                          str(root / "bench_summary.md")]),
        ("cold process: gate", ["gate", "--baseline", str(a), "--candidate", str(b),
                                "--output", str(root / "bench_gate.md")]),
    ):
        walls, cpus = timed(lambda argv=argv: subprocess.run(cli + argv, check=False,
                                                            capture_output=True), args.repeat)
        print(f"{name:36} {min(walls):8.2f}s {statistics.median(walls):8.2f}s "
              f"{statistics.median(cpus):8.2f}s  (interpreter + imports + the above)")
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
