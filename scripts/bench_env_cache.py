#!/usr/bin/env python3
"""The environment cache and the harness's own cost, measured in one run (issue 10 item 6).

1. Cold vs warm setup phase of a task with a slow setup (default custom-setups/slow-setup-20s):
   one attempt on an empty env cache (the pip cache stays warm, as on any second run), then
   warm attempts served from the cache. Reported: `setup.duration_sec` and prepare+setup.
2. A warm attempt's wall time against a minimal docker-py script doing the same container work
   on the same cached environment: an overlay view of the cached workspace and /env read-only,
   one container for the failing command (twice) and the oracle patch, a fresh container on a
   fresh view with the patch for the passing command, both removed.
3. Per-step overhead of the LLM agent, from scripts/bench_agent_step.py (`--steps`).

    uv run python scripts/bench_env_cache.py [--task SUITE/ID] [--rounds 3] [--steps 20]
    uv run python scripts/bench_env_cache.py --smoke   # a one-line setup, 1 round, 2 steps

--smoke (CI's benchmark tier, tests/e2e/test_bench_smoke.py) runs custom-dev/fix-mean-off-by-one
from a copy of the taskpacks given a one-line setup that writes to /env: no network, seconds.

Nothing here exits non-zero on a slow or noisy number: targets print as PASS/FAIL lines. An
attempt that does not pass, or a per-step run that failed, is listed after every figure is
printed, and the script then exits 1.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import docker
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness_attempts import bench_config, timed_attempt  # noqa: E402

from pytest_agentbench.agents.builtin import OracleAgent  # noqa: E402
from pytest_agentbench.core.envcache import EnvCache  # noqa: E402
from pytest_agentbench.repos.mirror import MirrorCache  # noqa: E402
from pytest_agentbench.run.hostenv import owner_uid, pip_cache_dir, resolve_ca_bundle  # noqa: E402
from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory  # noqa: E402
from pytest_agentbench.sandbox.docker.image import ensure_image  # noqa: E402
from pytest_agentbench.tasks.discovery import discover  # noqa: E402

SMOKE_TASK = "custom-dev/fix-mean-off-by-one"
TARGETS = {"warm setup": 1.0, "cold/warm": 20.0, "warm/raw": 1.15, "step ms": 40.0}


def harness_attempt(task: Any, image: Any, factory: Any, mirrors: MirrorCache, cache: EnvCache,
                    work: Path, n: int, problems: list[str]) -> tuple[float, Any]:
    ca = resolve_ca_bundle("auto")
    cfg = bench_config(work, image, run_id=f"bench-{n}", variant="oracle", attempt_index=n,
                       attempt_label=f"a{n}", owner_uid=owner_uid("docker"),
                       pip_cache=pip_cache_dir(), ca_bundle=Path(ca) if ca else None,
                       env_cache=cache)
    return timed_attempt(task, cfg, factory, mirrors, OracleAgent(), f"harness attempt {n}",
                         problems)


def _mount_view(base: Path, where: Path) -> Path:
    merged, upper, workdir = where / "merged", where / "upper", where / "work"
    for d in (merged, upper, workdir):
        d.mkdir(parents=True)
    info = base.stat()
    subprocess.run(["chown", f"{info.st_uid}:{info.st_gid}", str(upper)], check=True)
    upper.chmod(info.st_mode & 0o7777)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={base},upperdir={upper},workdir={workdir}", str(merged)], check=True)
    return merged


def raw_attempt(task: Any, image: Any, client: Any, entry: Path, work: Path, uid: int,
                problems: list[str]) -> float:
    """The same container work as a warm harness attempt, with nothing else around it."""
    spec = task.spec
    patch = (task.task_dir / "oracle.patch").read_bytes()
    start = time.perf_counter()
    stamp = time.monotonic_ns()
    views = [_mount_view(entry / "repo", work / f"raw-{stamp}-{i}") for i in (0, 1)]
    containers = []
    try:
        for i, view in enumerate(views):
            (view / ".oracle.patch").write_bytes(patch)
            container = client.containers.create(
                image.name, ["sleep", "600"], user=f"{uid}:{uid}", network_mode="none",
                working_dir="/workspace", read_only=True, tmpfs={"/tmp": ""}, cap_drop=["ALL"],
                volumes={str(view): {"bind": "/workspace", "mode": "rw"},
                         str(entry / "env"): {"bind": "/env", "mode": "ro"}})
            containers.append(container)
            container.start()
            if i == 0:
                for _ in range(2):
                    code, _ = container.exec_run(["bash", "-c", spec.validation.failing_command])
                    if code == 0:
                        problems.append("raw: the failing command passed")
            code, out = container.exec_run(["git", "apply", ".oracle.patch"])
            if code != 0:
                problems.append(f"raw: git apply exited {code}: {out[-200:]!r}")
            if i == 1:
                code, _ = container.exec_run(["bash", "-c", spec.validation.passing_command])
                if code != 0:
                    problems.append(f"raw: the passing command exited {code}")
    finally:
        for container in containers:
            container.remove(force=True)
        for view in views:
            subprocess.run(["umount", str(view)], check=False)
            subprocess.run(["rm", "-rf", str(view.parent)], check=False)
    return time.perf_counter() - start


def step_overhead(steps: int, problems: list[str]) -> str:
    """The per-step summary of scripts/bench_agent_step.py (its own process: its own sandbox)."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_agent_step.py"),
                           "--steps", str(steps)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        problems.append(f"scripts/bench_agent_step.py exited {proc.returncode}: {last}")
    return proc.stdout.strip() or proc.stderr.strip()[-2000:]


def verdict(name: str, value: float, ok: bool) -> str:
    return f"{'PASS' if ok else 'FAIL'} {name}: {value:.2f} (target {TARGETS[name]})"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="custom-setups/slow-setup-20s")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--smoke", action="store_true",
                        help=f"a tiny size: {SMOKE_TASK} with a one-line setup, 1 round, 2 steps")
    args = parser.parse_args()
    packs = ROOT / "taskpacks"
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-packs-") as tmp:
        if args.smoke:
            args.task, args.rounds, args.steps = SMOKE_TASK, 1, 2
            packs = smoke_packs(Path(tmp))
        return measure(args, packs)


def smoke_packs(where: Path) -> Path:
    """A copy of the smoke task whose setup is one line writing to /env (no network)."""
    suite, _, task_id = SMOKE_TASK.partition("/")
    packs = where / "taskpacks"
    shutil.copytree(ROOT / "taskpacks" / "_shared", packs / "_shared")
    shutil.copytree(ROOT / "taskpacks" / suite / task_id, packs / suite / task_id)
    path = packs / suite / task_id / "task.yaml"
    spec = yaml.safe_load(path.read_text("utf-8"))
    spec["setup"] = {"commands": ["echo built > /env/marker"]}
    path.write_text(yaml.safe_dump(spec, sort_keys=False), "utf-8")
    return packs


def measure(args: argparse.Namespace, packs: Path) -> int:
    suite, _, task_id = args.task.partition("/")
    tasks = {t.id: t for t in discover(packs, [suite]).tasks}
    if task_id not in tasks:
        print(f"bench_env_cache: no task {args.task} (have: {', '.join(sorted(tasks))})")
        return 2
    task = tasks[task_id]
    image = ensure_image(quiet=True)
    factory, client = DockerSandboxFactory(), docker.from_env()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        work = Path(tmp)
        mirrors, cache = MirrorCache(work / "git"), EnvCache(work / "env-cache")
        cold_wall, cold = harness_attempt(task, image, factory, mirrors, cache, work, 0, problems)
        entries = [p for p in cache.root.iterdir() if not p.name.startswith(".")]
        if cold.setup.env_cache != "built" or len(entries) != 1:
            print(f"the cold attempt cached nothing ({cold.setup.env_cache}); see "
                  f"{work}/run for why: {cold.result.summary}")
            return 1
        entry = entries[0]
        warm_walls, warm_setups, warm_pre, raw_walls = [], [], [], []
        uid = owner_uid("docker") or 0
        for n in range(1, args.rounds + 1):  # interleaved: machine noise hits both sides alike
            wall, record = harness_attempt(task, image, factory, mirrors, cache, work, n,
                                           problems)
            warm_walls.append(wall)
            warm_setups.append(record.setup.duration_sec)
            warm_pre.append(record.setup.duration_sec + record.timings.get("prepare", 0.0))
            raw_walls.append(raw_attempt(task, image, client, entry, work, uid, problems))
    cold_setup = cold.setup.duration_sec
    cold_pre = cold_setup + cold.timings.get("prepare", 0.0)
    warm, warm_p = statistics.median(warm_setups), statistics.median(warm_pre)
    h, r = statistics.median(warm_walls), statistics.median(raw_walls)
    print(f"task {args.task}: cold attempt {cold_wall:.2f}s, {args.rounds} warm rounds")
    print(f"setup phase      cold {cold_setup:.2f}s   warm median {warm:.2f}s "
          f"(max {max(warm_setups):.2f}s)   ratio {cold_setup / warm:.1f}x")
    print(f"prepare+setup    cold {cold_pre:.2f}s   warm median {warm_p:.2f}s   "
          f"ratio {cold_pre / warm_p:.1f}x")
    print(f"warm attempt     harness median {h:.2f}s   raw docker-py median {r:.2f}s   "
          f"ratio {h / r:.2f}x")
    print(verdict("warm setup", warm, warm <= TARGETS["warm setup"]))
    print(verdict("cold/warm", cold_setup / warm, cold_setup / warm >= TARGETS["cold/warm"]))
    print(verdict("warm/raw", h / r, h / r <= TARGETS["warm/raw"]))
    print("per-step overhead (scripts/bench_agent_step.py):")
    print("  " + step_overhead(args.steps, problems).replace("\n", "\n  "))
    for line in problems:
        print(f"not passed (timed all the same): {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
