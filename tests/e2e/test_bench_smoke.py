"""The benchmarks' smoke tier (issue 25 item 6): every `scripts/bench_*.py` runs at its `--smoke`
size, as a user runs it (its own process, from the repository root), so a change that breaks one
cannot land. A smoke run must exit 0, print no traceback, and print its figures: the lines named
below, each with a measured number. It need not meet its targets (a PASS or a FAIL line both do).

A new benchmark script joins the tier by getting an entry in FIGURES, or the first test fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"-?\d+(\.\d+)?"
# The lines each benchmark must print, as regular expressions (each must match some line).
FIGURES: dict[str, list[str]] = {
    "bench_agent_step.py": [
        rf"^\s*total\s+median\s+{NUMBER}\s+p90\s+{NUMBER}\s+mean\s+{NUMBER}",
        rf"^per-step overhead target: read\+run: (PASS|FAIL) \(mean {NUMBER} ms",
        rf"^per-step overhead target: edits: (PASS|FAIL) \(mean {NUMBER} ms",
    ],
    "bench_overhead.py": [
        rf"^overhead ratio \(harness / raw, medians\): {NUMBER}x",
        rf"^(PASS|FAIL) attempt harness/raw: {NUMBER}x",
        rf"^(PASS|FAIL) run\(true\) toolbox/raw: {NUMBER}x",
    ],
    "bench_env_cache.py": [
        rf"^warm attempt\s+harness median {NUMBER}s\s+raw docker-py median {NUMBER}s",
        rf"^(PASS|FAIL) warm setup: {NUMBER}",
        rf"^(PASS|FAIL) warm/raw: {NUMBER}",
        # the per-step figures of bench_agent_step.py, run by this one
        rf"^\s+per-step overhead target: read\+run: (PASS|FAIL) \(mean {NUMBER} ms",
    ],
    "bench_sandbox.py": [
        rf"^exec `true` DockerSandbox.exec\s+median\s+{NUMBER} ms",
        rf"^(PASS|FAIL) exec true sandbox/raw: {NUMBER}x",
    ],
    "bench_reports.py": [
        rf"^(PASS|FAIL) summary \(warm load \+ summarize \+ md\): {NUMBER}x",
        rf"^(PASS|FAIL) paired \(warm load A\+B \+ compare \+ md\): {NUMBER}x",
        rf"^(PASS|FAIL) cold process: report summary, warm cache: {NUMBER}x",
    ],
    "bench_engines.py": [
        rf"^\s+exec true\s+local\s+{NUMBER} ms .*remote\s+{NUMBER} ms .*x{NUMBER}",
        rf"^\s+attempt fix-mean-off-by-one \(passed\)\s+local\s+{NUMBER} s .*remote\s+{NUMBER} s",
    ],
    "bench_gateway_transport.py": [
        rf"^\s+exec\s+{NUMBER}\s+p90\s+{NUMBER}\s+\+\s*{NUMBER} ms vs local",
    ],
    "bench_gateway.py": [
        rf"^\s+gateway\s+{NUMBER}\s+p90\s+{NUMBER}\s+\+\s*{NUMBER} ms\s+ratio\s+{NUMBER}",
    ],
}
NEEDS_SECOND_ENGINE = {"bench_engines.py"}
TIMEOUT_SEC = 600


def missing_figures(output: str, patterns: list[str]) -> list[str]:
    return [p for p in patterns if not re.search(p, output, re.MULTILINE)]


def run_smoke(script: str, extra: list[str], env: dict[str, str]) -> str:
    """Runs `script --smoke`; fails the test with its output's tail when it does not exit 0,
    prints a traceback or leaves out a figure. Returns the output."""
    argv = [sys.executable, str(ROOT / "scripts" / script), "--smoke", *extra]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_SEC, check=False)
    output = done.stdout + done.stderr
    tail = output[-4000:]
    assert done.returncode == 0, f"{script} --smoke exited {done.returncode}:\n{tail}"
    assert "Traceback (most recent call last)" not in output, f"{script}: a traceback:\n{tail}"
    missing = missing_figures(done.stdout, FIGURES[script])
    assert not missing, f"{script} --smoke printed no line matching {missing}:\n{tail}"
    return output


def base_env() -> dict[str, str]:
    """The caller's environment without the outer test run's own variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}


def test_every_benchmark_script_is_in_the_smoke_tier() -> None:
    scripts = {path.name for path in (ROOT / "scripts").glob("bench_*.py")}
    assert scripts == set(FIGURES), ("every scripts/bench_*.py needs its figures in FIGURES "
                                     f"(and nothing else): {sorted(scripts ^ set(FIGURES))}")


def test_a_benchmark_that_prints_no_figure_fails_the_tier() -> None:
    """The figure check itself: a traceback where the per-step figures should be (what
    bench_env_cache.py printed when bench_agent_step.py broke) matches none of them."""
    broken = ("== mix read+run: 0 steps, harness time per step in ms, model excluded\n"
              "Traceback (most recent call last):\n"
              "AttributeError: 'AttemptRecord' object has no attribute 'reason'\n")
    assert missing_figures(broken, FIGURES["bench_agent_step.py"]) == FIGURES[
        "bench_agent_step.py"]
    good = ("  total           median   47.2  p90  116.7  mean   53.2\n"
            "per-step overhead target: read+run: FAIL (mean 53.2 ms per step, target <= 40 ms)\n"
            "per-step overhead target: edits: PASS (mean 12.0 ms per step, target <= 40 ms)\n")
    assert missing_figures(good, FIGURES["bench_agent_step.py"]) == []


@pytest.mark.parametrize("script", sorted(set(FIGURES) - NEEDS_SECOND_ENGINE))
def test_benchmark_smoke(script: str, docker_sandboxes: Any) -> None:
    run_smoke(script, [], base_env())


@pytest.mark.xdist_group("second_engine")
def test_bench_engines_smoke(second_engine: Any) -> None:
    """Against the session's second engine (tests/support/engines.py) as the remote one,
    reached through its Docker context; the local engine stays the current one."""
    env = {k: v for k, v in base_env().items() if not k.startswith("DOCKER_")}
    env.update(DOCKER_CONFIG=str(second_engine.docker_config), DOCKER_CONTEXT="default")
    run_smoke("bench_engines.py", ["--remote", second_engine.context], env)
