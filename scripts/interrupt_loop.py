#!/usr/bin/env python3
"""Ctrl-C at random moments of `-n 2` runs on the bundled suite: does every run stop promptly
and leave nothing behind?

Each of N runs is `pytest --agentbench-suite custom-dev -n 2` (oracle) in a session of its own;
after a random delay SIGINT goes to its whole process group, as a terminal's Ctrl-C does
(controller, xdist workers and their children). A run is

- *prompt* when it exits within --prompt-sec of the signal with pytest's INTERRUPTED (2), or was
  killed by the signal itself (Python not started yet), or exits cleanly (0/1) because every
  attempt of the run was already recorded (the run was ending);
- *lost* when it exits 0/1 although attempts were left to run (the Ctrl-C was swallowed);
- *slow* when it needs more than --prompt-sec (killed with SIGKILL after --kill-sec).

After each run the containers of that run (its run id, or created by one of its processes) are
counted, as are its work directories. With --sigint-ignored each run starts with SIGINT
ignored, as a background job of a script does (`pytest ... &`). The delays are uniform in
[0, --max-delay]; by default --max-delay is the duration of one uninterrupted run measured
first.

    uv run --frozen python scripts/interrupt_loop.py [--runs 50] [--max-delay SEC]
                                                     [--sigint-ignored] [--seed N]

Prints one line per run, then the totals and PASS/FAIL lines; exit 1 on any FAIL.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
SUITE = "custom-dev"


@dataclass
class Outcome:
    index: int
    delay: float
    returncode: int | None = None
    signalled: bool = False  # SIGINT sent while the run was still going
    to_exit: float = 0.0  # seconds from SIGINT to exit
    recorded: int = 0
    expected: int = 0
    containers: list[str] = field(default_factory=list)
    workdirs: list[str] = field(default_factory=list)
    verdict: str = ""
    log: Path | None = None


def group_pids(pgid: int) -> set[int]:
    """The processes of a process group now (from /proc)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) == pgid:
                pids.add(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def run_ids(out: Path) -> list[str]:
    return sorted(p.parent.name for p in out.glob("*/run.json") if not p.parent.is_symlink())


def recorded_attempts(out: Path) -> int:
    total = 0
    for run_id in run_ids(out):
        path = out / run_id / "attempts.jsonl"
        if path.is_file():
            total += sum(1 for line in path.read_bytes().splitlines() if line.strip())
    return total


def containers_left(client: docker.DockerClient, ids: list[str], pids: set[int]) -> list[str]:
    host = socket.gethostname()
    owners = {f"{host}:{pid}" for pid in pids}
    left = []
    for info in client.api.containers(all=True, filters={"label": "agentbench=1"}):
        labels = info.get("Labels") or {}
        if labels.get("agentbench.run_id") in ids or labels.get("agentbench.owner") in owners:
            left.append(str(info["Id"])[:12])
    return left


def pytest_command(out: Path, workers: int, ignored: bool) -> list[str]:
    # `trap '' INT` then exec: the run inherits SIGINT ignored, as a script's background job does
    wrapper = ["sh", "-c", "trap '' INT; exec \"$@\"", "sh"] if ignored else []
    return [*wrapper, sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
            "--agentbench-suite", SUITE, f"--agentbench-out={out}", "-n", str(workers), "-q"]


def one_run(client: docker.DockerClient, index: int, delay: float | None, args: argparse.Namespace,
            scratch: Path, expected: int) -> Outcome:
    """One run, interrupted after `delay` seconds (None: not at all)."""
    from pytest_agentbench.run.hostenv import work_root

    out = scratch / f"run{index}"
    log = scratch / f"run{index}.log"
    outcome = Outcome(index, delay or 0.0, expected=expected, log=log)
    pids: set[int] = set()
    with log.open("wb") as sink:
        command = pytest_command(out, args.workers, args.sigint_ignored)
        proc = subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
        pids.add(proc.pid)
        started = time.monotonic()
        sent = None
        while proc.poll() is None:
            now = time.monotonic()
            pids |= group_pids(proc.pid)
            if sent is None and delay is not None and now - started >= delay:
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                    sent = time.monotonic()
                    outcome.signalled = True
                except ProcessLookupError:
                    break
            if sent is not None and now - sent > args.kill_sec:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.05)
        proc.wait()
        ended = time.monotonic()
    outcome.returncode = proc.returncode
    outcome.to_exit = ended - sent if sent is not None else 0.0
    outcome.recorded = recorded_attempts(out)
    ids = run_ids(out)
    outcome.containers = containers_left(client, ids, pids)
    outcome.workdirs = [run_id for run_id in ids if work_root(run_id).exists()]
    if not outcome.signalled:
        outcome.verdict = "finished" if delay is not None else "baseline"
    elif outcome.to_exit > args.prompt_sec:
        outcome.verdict = "SLOW"
    elif proc.returncode in (2, -signal.SIGINT, 128 + signal.SIGINT):
        outcome.verdict = "interrupted"
    elif proc.returncode in (0, 1) and outcome.recorded >= expected:
        outcome.verdict = "finished"  # the signal came as the run was ending
    else:
        outcome.verdict = "LOST" if proc.returncode in (0, 1) else "BAD-EXIT"
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return outcome


def line(o: Outcome) -> str:
    extra = ""
    if o.containers:
        extra += f" containers left: {' '.join(o.containers)}"
    if o.workdirs:
        extra += f" work dirs left: {' '.join(o.workdirs)}"
    if o.verdict not in ("interrupted", "finished", "baseline"):
        extra += f" (log {o.log})"
    return (f"run {o.index:3d}: SIGINT at {o.delay:6.2f}s -> exit {o.returncode} after "
            f"{o.to_exit:5.2f}s, {o.recorded}/{o.expected} recorded: {o.verdict}{extra}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-delay", type=float, default=None, metavar="SEC",
                        help="latest moment of the SIGINT (default: one run's duration)")
    parser.add_argument("--prompt-sec", type=float, default=30.0,
                        help="longest time from SIGINT to exit that counts as prompt")
    parser.add_argument("--kill-sec", type=float, default=120.0,
                        help="SIGKILL the run's group this long after the SIGINT")
    parser.add_argument("--budget", type=float, default=None, metavar="SEC",
                        help="start no run after this many seconds (the totals cover those run)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--sigint-ignored", action="store_true",
                        help="start each run with SIGINT ignored, as a shell without job control "
                        "starts a background job (`pytest ... &` in a script)")
    parser.add_argument("--keep", action="store_true", help="keep each run's output directory")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    client = docker.from_env(timeout=60)
    scratch = Path(tempfile.mkdtemp(prefix="agentbench-interrupt-loop-"))
    expected = len([p for p in (ROOT / "taskpacks" / SUITE).glob("*/task.yaml")])
    print(f"interrupt loop: {args.runs} run(s) of {SUITE} with -n {args.workers}; "
          f"logs in {scratch}"
          + ("; runs start with SIGINT ignored" if args.sigint_ignored else ""), flush=True)
    max_delay = args.max_delay
    if max_delay is None:
        started = time.monotonic()
        base = one_run(client, 0, None, args, scratch, expected)
        max_delay = time.monotonic() - started
        print(line(base) + f" (uninterrupted, {max_delay:.1f}s: the delays' range)", flush=True)
    outcomes = []
    began = time.monotonic()
    for index in range(1, args.runs + 1):
        if args.budget is not None and time.monotonic() - began > args.budget:
            print(f"budget of {args.budget:g}s spent: {index - 1} of {args.runs} runs done")
            break
        outcome = one_run(client, index, rng.uniform(0.0, max_delay), args, scratch, expected)
        outcomes.append(outcome)
        print(line(outcome), flush=True)
    signalled = [o for o in outcomes if o.signalled]
    prompt = [o for o in outcomes if o.verdict in ("interrupted", "finished")]
    lost = [o for o in outcomes if o.verdict == "LOST"]
    slow = [o for o in outcomes if o.verdict == "SLOW"]
    bad = [o for o in outcomes if o.verdict == "BAD-EXIT"]
    longest = max((o.to_exit for o in signalled), default=0.0)
    left = sum(len(o.containers) for o in outcomes)
    dirs = sum(len(o.workdirs) for o in outcomes)
    print(f"runs: {len(outcomes)}, SIGINT during the run: {len(signalled)}, "
          f"interrupted (exit 2): {sum(o.verdict == 'interrupted' for o in outcomes)}, "
          f"had finished: {sum(o.verdict == 'finished' for o in outcomes)}")
    times = sorted(o.to_exit for o in signalled)
    median = times[len(times) // 2] if times else 0.0
    print(f"longest SIGINT to exit: {longest:.2f}s; median {median:.2f}s")
    checks = [
        (len(prompt) == len(outcomes), f"ended promptly: {len(prompt)}/{len(outcomes)} "
         f"(lost {len(lost)}, slow {len(slow)}, other exit {len(bad)})"),
        (longest <= args.prompt_sec, f"longest SIGINT to exit {longest:.2f}s "
         f"<= {args.prompt_sec:g}s"),
        (left == 0, f"containers left behind: {left}"),
        (dirs == 0, f"work directories left behind: {dirs}"),
    ]
    for ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'} {text}")
    if all(ok for ok, _ in checks) and not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
