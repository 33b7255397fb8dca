#!/usr/bin/env python3
"""Local engine vs remote engine, measured in one run: sandbox open+close (with a workspace to
ship), `true` through exec, the file tools (read, write, list, a search's batch read), and the
wall time of whole attempts (a task with a pip setup and one without) run through pytest on
each engine. Prints each figure and the remote/local ratio.

    uv run python scripts/bench_engines.py [--execs 50] [--remote CONTEXT_OR_URL]
    uv run python scripts/bench_engines.py --smoke [--remote ...]   # each figure once or twice,
                                             # one attempt of the task without a setup per engine

Without --remote it starts the tests' second engine (tests/support/engines.py: its own dockerd
in its own network and mount namespaces, reached over TLS as a Docker context) and removes it
after. The local engine uses bind mounts, the remote one archive transfer. A failed step is
printed and the rest still run: the benchmark measures, it does not judge; the script exits 1
after printing everything when a step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_agentbench.sandbox.docker.engines import connect, parse_engine  # noqa: E402
from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory  # noqa: E402
from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE, ensure_image  # noqa: E402
from pytest_agentbench.sandbox.port import SandboxSpec  # noqa: E402

LABELS = {"agentbench.bench": "engines"}
TASKS = ("fix-toml-nested-lookup", "fix-mean-off-by-one")  # with a pip setup; without


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(fn: Callable[[], Any], times: int) -> list[float]:
    out = []
    for _ in range(times):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def workspace(root: Path, files: int = 200, size: int = 20_000) -> Path:
    ws = root / "workspace"
    for i in range(files):
        path = ws / f"pkg{i % 10}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE_{i} = {i}\n" + "# filler line\n" * (size // 14))
    return ws


def measure_sandbox(factory: DockerSandboxFactory, execs: int, smoke: bool = False
                    ) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}

    def times(n: int) -> int:
        return min(n, 2) if smoke else n

    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        ws = workspace(Path(tmp))
        spec = SandboxSpec(image=DEFAULT_IMAGE, workspace=ws, env_dir=Path(tmp) / "env",
                           lifetime_sec=600, labels=LABELS, sync_back=False)
        figures["open+close (4 MB workspace)"] = timed(lambda: factory.open(spec).close(),
                                                       times(3))
        sandbox = factory.open(spec)
        try:
            sandbox.exec("true", timeout_sec=30)
            figures["exec true"] = timed(lambda: sandbox.exec("true", timeout_sec=30), execs)
            files = sandbox.files
            figures["read_bytes (20 KB)"] = timed(lambda: files.read_bytes("pkg1/mod1.py"),
                                                  times(30))
            figures["write_bytes (20 KB)"] = timed(
                lambda: files.write_bytes("pkg1/new.py", b"x" * 20_000), times(30))
            figures["list (201 files)"] = timed(lambda: files.list(".", None, 1000), times(10))
            names = [f"pkg{i % 10}/mod{i}.py" for i in range(200)]
            many = getattr(files, "read_many", None)
            if many is not None:
                figures["search reads (200 files)"] = timed(lambda: list(many(names, 2 << 20)),
                                                            times(5))
            else:
                figures["search reads (200 files)"] = timed(
                    lambda: [files.read_bytes(n, 2 << 20) for n in names], times(5))
        finally:
            sandbox.close()
    return figures


def measure_attempts(engine_arg: str, env: dict[str, str], out: Path, smoke: bool = False
                     ) -> dict[str, list[float]]:
    """Both tasks with oracle, through pytest, on one engine; seconds per attempt and phase
    (smoke: one attempt of the task without a setup)."""
    tasks = TASKS[1:] if smoke else TASKS
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
            "--agentbench-suite", "custom-dev", "-k", " or ".join(tasks),
            f"--agentbench-engine={engine_arg}", f"--agentbench-out={out}",
            "--agentbench-env-cache=none", "--agentbench-attempts", "1" if smoke else "2"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    proc = subprocess.run(args, cwd=ROOT, env={**clean, **env}, capture_output=True,
                          text=True, timeout=1800)
    runs = [p for p in out.iterdir() if p.is_dir() and not p.is_symlink()] \
        if out.is_dir() else []
    if not runs:
        raise RuntimeError(f"no run directory; pytest said:\n{proc.stdout[-2000:]}"
                           f"{proc.stderr[-2000:]}")
    figures: dict[str, list[float]] = {}
    for line in (runs[0] / "attempts.jsonl").read_text().splitlines():
        record = json.loads(line)
        task = record["task_id"]
        verdict = record["result"]["failure_reason"] or "passed"
        figures.setdefault(f"attempt {task} ({verdict})", []).append(record["duration_sec"])
    return figures


def show(local: dict[str, list[float]], remote: dict[str, list[float]], unit_ms: bool) -> None:
    for name in sorted(set(local) | set(remote), key=lambda n: (n not in local, n)):
        parts = []
        for values in (local.get(name), remote.get(name)):
            if values:
                med = statistics.median(values)
                parts.append(f"{med * 1000:8.1f} ms (p95 {p95(values) * 1000:7.1f})" if unit_ms
                             else f"{med:7.2f} s (n={len(values)})")
            else:
                parts.append(f"{'-':>24}")
        ratio = ""
        if local.get(name) and remote.get(name):
            ratio = f"x{statistics.median(remote[name]) / statistics.median(local[name]):.2f}"
        print(f"  {name:38} local {parts[0]:26} remote {parts[1]:26} {ratio}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--execs", type=int, default=50)
    parser.add_argument("--remote", help="a Docker context name or URL (default: start one)")
    parser.add_argument("--skip-attempts", action="store_true")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny size: 5 execs, each file figure twice, one attempt each")
    args = parser.parse_args()
    if args.smoke:
        args.execs = 5
    ensure_image(quiet=True)
    second = None
    env: dict[str, str] = {}
    remote_arg = args.remote
    if remote_arg is not None and "DOCKER_CONFIG" in os.environ:  # where its context is stored
        env = {"DOCKER_CONFIG": os.environ["DOCKER_CONFIG"]}
    if remote_arg is None:
        from tests.support.engines import open_engine

        second = open_engine(DEFAULT_IMAGE)
        env = {"DOCKER_CONFIG": str(second.docker_config)}  # its context store
        remote_arg = second.context
        print(f"second engine started in {second.timings.get('start', 0):.1f} s, runner image "
              f"loaded in {second.timings.get('image_load', 0):.1f} s; reached as context "
              f"{second.context} ({second.tls_url}, TLS)")
    failures = 0
    try:
        local_f = DockerSandboxFactory(connect(parse_engine("unix:///var/run/docker.sock")))
        remote_f = DockerSandboxFactory(
            connect(parse_engine(remote_arg), environ={**os.environ, **env}),
            transfer="archive", engine=remote_arg)
        print(f"\nsandbox and file tools (median of runs; local: bind mounts, remote: archive "
              f"transfer over TLS), {args.execs} execs:")
        local_s: dict[str, list[float]] = {}
        remote_s: dict[str, list[float]] = {}
        for figures, factory in ((local_s, local_f), (remote_s, remote_f)):
            try:
                figures.update(measure_sandbox(factory, args.execs, args.smoke))
            except Exception:  # noqa: BLE001 - a benchmark reports, never aborts
                failures += 1
                traceback.print_exc()
        show(local_s, remote_s, unit_ms=True)
        if not args.skip_attempts:
            print(f"\nwhole attempts through pytest (oracle, {1 if args.smoke else 2} attempt(s) "
                  "per task, no env cache):")
            local_a: dict[str, list[float]] = {}
            remote_a: dict[str, list[float]] = {}
            with tempfile.TemporaryDirectory(prefix="agentbench-bench-runs-") as tmp:
                # the controller's own engine stays the local one (DOCKER_CONTEXT=default):
                # the second engine's context store makes its context the current one
                remote_env = {**env, "DOCKER_CONTEXT": "default"} if env else {}
                for figures, engine, name, extra in (
                        (local_a, "default", "local", {}),
                        (remote_a, remote_arg, "remote", remote_env)):
                    try:
                        figures.update(measure_attempts(engine, extra, Path(tmp) / name,
                                                        args.smoke))
                        for label in figures:
                            if not label.endswith("(passed)"):  # the oracle always passes
                                failures += 1
                                print(f"{name}: {label}: an oracle attempt did not pass")
                    except Exception:  # noqa: BLE001
                        failures += 1
                        traceback.print_exc()
            show(local_a, remote_a, unit_ms=False)
    finally:
        if second is not None:
            second.close()
    print(f"\n{failures} step(s) failed" if failures else "\nall steps measured")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
