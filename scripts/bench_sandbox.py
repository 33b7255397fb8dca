#!/usr/bin/env python3
"""Measure the Docker sandbox's costs in one run: create+start time, and the latency of `true`
through DockerSandbox.exec against raw docker-py `exec_run` on a plain container.

    uv run python scripts/bench_sandbox.py [--starts 5] [--execs 50]
    uv run python scripts/bench_sandbox.py --smoke   # 1 start, 5 execs: it runs and prints

The exec ratio prints a PASS/FAIL line against the toolbox's target (<= 1.05, issue 25): the
sandbox's exec is the larger part of a toolbox `run`. A slow figure never fails the script; an
exec that does not exit 0 is printed and makes it exit 1 after every figure is out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import docker

from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
from pytest_agentbench.sandbox.docker.image import ensure_image
from pytest_agentbench.sandbox.port import SandboxSpec

LABELS = {"agentbench.bench": "1"}
TARGET = 1.05


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--execs", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="1 start, 5 execs")
    args = parser.parse_args()
    if args.smoke:
        args.starts, args.execs = 1, 5
    problems: list[str] = []
    image = ensure_image(quiet=True).name
    factory = DockerSandboxFactory()
    client = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        spec = SandboxSpec(image=image, workspace=workspace, env_dir=Path(tmp) / "env",
                           lifetime_sec=600, labels=LABELS)
        starts, closes = [], []
        for _ in range(args.starts):
            t0 = time.perf_counter()
            sandbox = factory.open(spec)
            t1 = time.perf_counter()
            sandbox.close()
            starts.append(t1 - t0)
            closes.append(time.perf_counter() - t1)
        sandbox = factory.open(spec)
        plain = client.containers.run(image, ["sleep", "600"], detach=True, labels=LABELS)
        try:
            for _ in range(3):  # warm up both paths
                sandbox.exec("true", timeout_sec=30)
                plain.exec_run(["true"])
            ours, raw = [], []
            for _ in range(args.execs):
                t0 = time.perf_counter()
                code = sandbox.exec("true", timeout_sec=30).exit_code
                ours.append(time.perf_counter() - t0)
                if code != 0:
                    problems.append(f"DockerSandbox.exec(true) exited {code}")
                t0 = time.perf_counter()
                code = plain.exec_run(["true"]).exit_code
                raw.append(time.perf_counter() - t0)
                if code != 0:
                    problems.append(f"exec_run(true) exited {code}")
        finally:
            sandbox.close()
            plain.remove(force=True)
    print(f"sandbox create+start   median {ms(statistics.median(starts))}  "
          f"(n={len(starts)}, min {ms(min(starts))}, max {ms(max(starts))})")
    print(f"sandbox close (remove) median {ms(statistics.median(closes))}")
    print(f"exec `true` DockerSandbox.exec   median {ms(statistics.median(ours))}  "
          f"p95 {ms(p95(ours))}  (n={len(ours)})")
    print(f"exec `true` raw exec_run         median {ms(statistics.median(raw))}  "
          f"p95 {ms(p95(raw))}  (n={len(raw)})")
    ratio = statistics.median(ours) / statistics.median(raw)
    print(f"ratio sandbox/raw                median {ratio:.2f}x  p95 {p95(ours) / p95(raw):.2f}x")
    print(f"{'PASS' if ratio <= TARGET else 'FAIL'} exec true sandbox/raw: {ratio:.2f}x "
          f"(target <= {TARGET}x)")
    print(f"leftover bench containers: {factory.sweep(LABELS)}")
    for line in problems:
        print(f"HARNESS ERROR: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
