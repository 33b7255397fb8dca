#!/usr/bin/env python3
"""Time the reports on large synthetic runs against issue 14's targets (1 s in-process, 2 s cold).

    uv run python scripts/bench_reports.py [--records 100000] [--dir DIR] [--repeat 3] [--check]
    uv run python scripts/bench_reports.py --smoke   # 200 records, once: it runs and prints

Makes two paired runs of `--records` attempts each (unless `--dir` already holds `baseline/` and
`candidate/`; without `--dir` they are made in a temporary directory removed at the end), then
times, in this process after imports:
- loading one run: parsed with no cache, with a cold cache (parse + write the frame cache,
  reporting/frame_cache.py) and with a warm one, for the summary's fields and for all fields;
- summary (target 1 s): a warm load + summarize + markdown (what `report summary` does);
- paired (target 1 s): warm loads of both runs + pairing checks + McNemar + 10,000-resample
  bootstrap + markdown; gate: the same plus the verdict;
- the summarize, compare and rendering steps on their own;
and then `agentbench report summary` as a cold process (target 2 s, with the cache warm and
every module's bytecode cached; also with no bytecode, and with the cache cold) and a cold
`agentbench gate`. Child processes keep their bytecode under DIR/pycache (PYTHONPYCACHEPREFIX):
the environment's own site-packages is never written. A cold process's CPU is the child's:
compare it, not wall time, on a busy box. Wall and CPU seconds (CPU includes child processes)
are printed, min and median of `--repeat` runs, and each target's ratio (best wall / target:
<= 1.00 meets it).
Nothing here aborts on a slow or failed step: it is printed, each target's PASS/FAIL line after
the table. A step that raised makes the script exit 1 once everything is printed; `--check` also
exits 1 when a target is missed (only when asked).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

IN_PROCESS_TARGET = 1.0
COLD_PROCESS_TARGET = 2.0


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any], repeat: int, before: Callable[[], Any] | None = None
          ) -> tuple[list[float], list[float], str]:
    """Wall and CPU seconds of `repeat` calls (`before` runs untimed ahead of each), and the
    error of a call that failed ("" when none did)."""
    walls, cpus, error = [], [], ""
    for _ in range(repeat):
        if before is not None:
            before()
        wall, cpu = time.perf_counter(), _cpu()
        try:
            fn()
        except Exception as exc:  # a benchmark prints a failure and goes on
            error = f"{type(exc).__name__}: {exc}"
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu() - cpu)
    return walls, cpus, error


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


def drop_caches(*runs: Path, fields: str = "*") -> None:
    """Remove the runs' frame caches of `fields` (a cold cache)."""
    for run in runs:
        for cache in run.glob(f".attempts.{fields}.frame"):
            cache.unlink()


def agentbench_command() -> list[str]:
    """The console script of this interpreter's environment (what a user runs)."""
    script = shutil.which("agentbench", path=str(Path(sys.executable).parent))
    if script:
        return [script]
    return [sys.executable, "-c", "import sys; from pytest_agentbench.cli.main import main; "
                                  "sys.exit(main())"]


class Table:
    def __init__(self) -> None:
        self.missed: list[str] = []
        self.failed: list[str] = []
        self.verdicts: list[str] = []
        print(f"\n{'step':44} {'wall min':>9} {'wall med':>9} {'cpu med':>9}  target")

    def row(self, name: str, result: tuple[list[float], list[float], str],
            target: float | None = None, note: str = "") -> None:
        walls, cpus, error = result
        mark = ""
        if target is not None:
            ratio = min(walls) / target
            meets = ratio <= 1.0 and not error
            mark = f"{target:.0f} s: {ratio:4.2f}x {'ok' if meets else 'MISSED'}"
            if not meets:
                self.missed.append(name)
            self.verdicts.append(f"{'PASS' if meets else 'FAIL'} {name.strip()}: {ratio:.2f}x "
                                 f"of its target ({min(walls):.3f} s, target {target:g} s)")
        print(f"{name:44} {min(walls):8.3f}s {statistics.median(walls):8.3f}s "
              f"{statistics.median(cpus):8.3f}s  {mark}{note}")
        if error:
            print(f"{'':44} FAILED: {error}")
            self.failed.append(f"{name.strip()}: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="attempts per run")
    parser.add_argument("--dir", type=Path, default=None, help="reuse or create runs here")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--smoke", action="store_true", help="200 records, each step once")
    args = parser.parse_args(argv)
    if args.smoke:
        args.records, args.repeat = 200, 1

    started = time.perf_counter()
    from pytest_agentbench.reporting import render
    from pytest_agentbench.reporting.gate import gate
    from pytest_agentbench.reporting.html.run_page import render_html
    from pytest_agentbench.reporting.load import Run, load_run, load_runs
    from pytest_agentbench.reporting.paired import compare
    from pytest_agentbench.reporting.summary import summarize
    imports = time.perf_counter() - started

    root = args.dir or Path(tempfile.mkdtemp(prefix="agentbench-bench-"))
    made = time.perf_counter()
    a, b = make_runs(root, args.records)
    size = (a / "attempts.jsonl").stat().st_size / 2**20
    print(f"runs: {a} and {b}, {args.records:,} attempts each, {size:.0f} MiB each "
          f"(ready in {time.perf_counter() - made:.1f} s); imports took {imports:.2f} s")

    drop_caches(a, b)
    for fields in ("summary", "pairing", "all"):  # warm every cache the steps below read
        load_runs([a, b], fields=fields)
    run_a = load_run(a)
    run_s = load_run(a, fields="summary")
    runs = load_runs([a, b])
    summary = summarize(run_s)
    paired = compare(runs[0], runs[1])
    table = Table()

    def pair() -> tuple[Run, Run]:
        loaded = load_runs([a, b])
        return loaded[0], loaded[1]

    rows: list[tuple[str, Callable[[], Any], float | None, Callable[[], Any] | None]] = [
        ("load one run, summary fields, no cache", lambda: load_run(a, fields="summary",
                                                                     cache=False), None, None),
        ("load one run, summary fields, cold cache", lambda: load_run(a, fields="summary"),
         None, lambda: drop_caches(a, fields="summary")),
        ("load one run, summary fields, warm cache", lambda: load_run(a, fields="summary"),
         None, None),
        ("load one run, all fields, cold cache", lambda: load_run(a), None,
         lambda: drop_caches(a, fields="all")),
        ("load one run, all fields, warm cache", lambda: load_run(a), None, None),
        ("summary (warm load + summarize + md)",
         lambda: render.render_summary(summarize(load_run(a, fields="summary")), "md"),
         IN_PROCESS_TARGET, None),
        ("paired (warm load A+B + compare + md)",
         lambda: render.render_paired(compare(*pair()), "md"), IN_PROCESS_TARGET,
         None),
        ("gate (warm load A+B + gate + md)",
         lambda: render.render_gate(gate(*pair()), "md"), None, None),
        ("  summarize only", lambda: summarize(run_s), None, None),
        ("  compare only (10k resamples)", lambda: compare(runs[0], runs[1]), None, None),
        ("  render summary csv (all tasks)", lambda: render.render_summary(summary, "csv"),
         None, None),
        ("  render summary json", lambda: render.render_summary(summary, "json"), None, None),
        ("  render paired csv", lambda: render.render_paired(paired, "csv"), None, None),
        ("  render html (first 1000 tasks)", lambda: render_html(run_a, summary), None, None),
    ]
    for name, fn, target, before in rows:
        table.row(name, timed(fn, args.repeat, before), target)

    cli = agentbench_command()
    compiled = root / "pycache"  # bytecode of this benchmark's child processes
    fresh = Path(tempfile.mkdtemp(prefix="agentbench-no-pycache-"))  # stays empty

    def process(argv: list[str], bytecode: bool = True) -> Callable[[], None]:
        """A cold process running `agentbench ARGV`, with the bytecode of every module cached
        (what pip's install-time compile or any earlier run gives) or with none (every import
        compiled from source: PYTHONDONTWRITEBYTECODE=1 over a venv installed without it)."""
        env = dict(os.environ, PYTHONPYCACHEPREFIX=str(compiled if bytecode else fresh))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if not bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"

        def run() -> None:
            done = subprocess.run(cli + argv, check=False, capture_output=True, text=True,
                                  env=env)
            if done.returncode not in (0, 1, 3):  # the gate: 1 regression, 3 inconclusive
                raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip()[-300:]}")
        return run

    summary_argv = ["report", "summary", "--run", str(a), "--output",
                    str(root / "bench_summary.md")]
    gate_argv = ["gate", "--baseline", str(a), "--candidate", str(b), "--output",
                 str(root / "bench_gate.md")]
    for argv in (summary_argv, gate_argv):  # compile the bytecode once, untimed
        process(argv)()
    table.row("cold process: report summary, warm cache", timed(process(summary_argv),
                                                                args.repeat),
              COLD_PROCESS_TARGET, "  (interpreter + imports + the above)")
    if not args.smoke:  # the same code path as the row above, only slower
        table.row("  the same, no bytecode (all compiled)",
                  timed(process(summary_argv, bytecode=False), args.repeat))
    table.row("cold process: report summary, cold cache",
              timed(process(summary_argv), args.repeat, lambda: drop_caches(a, fields="summary")))
    load_runs([a, b], fields="pairing")
    table.row("cold process: gate, warm cache", timed(process(gate_argv), args.repeat))
    shutil.rmtree(fresh, ignore_errors=True)
    if args.dir is None:  # made here: gone with the process, as it is no one's to reuse
        shutil.rmtree(root, ignore_errors=True)
    print()
    for line in table.verdicts:
        print(line)
    for line in table.failed:
        print(f"HARNESS ERROR: {line}")
    if table.missed:
        print(f"\ntargets missed: {', '.join(table.missed)}")
    return 1 if table.failed or (table.missed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
