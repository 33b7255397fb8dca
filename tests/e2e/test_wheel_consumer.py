"""Issue 11, first "Done when": the harness as a consumer project uses it. In a fresh directory
outside this repository, with its own git repository and pyproject.toml: install the built wheel
into a new venv, copy in one bundled task, `agentbench image build` (the image already built from
this checkout is reused: same context hash), `pytest --agentbench-suite mine` with the oracle;
commit; run again; `agentbench gate` pairs the two runs once the `reports` extra is installed
(before, it says in one line how to get it; the runs need none of it). Both runs carry the same
harness version, which is not the consumer's commit (it used to be, and the gate refused to pair
them).

Dependencies come from uv's cache (or the index), pinned to this project's uv.lock.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from pytest_agentbench import __version__
from pytest_agentbench.sandbox.docker.image import context_hash, default_context
from tests.support.plugin_runs import RunDir
from tests.support.wheels import REPO, build_wheel, outside_env, run, uv_or_skip

TASK = "fix-mean-off-by-one"
SUITE = "mine"
GIT_ID = ["-c", "user.name=consumer", "-c", "user.email=consumer@example.invalid"]


def _consumer(root: Path) -> Path:
    """A project of its own: git repository, pyproject.toml, and one task in its own suite."""
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "consumer-app"\nversion = "0.0.1"\n'
    )
    (root / ".gitignore").write_text(".venv/\nreports/\n")
    task = root / "taskpacks" / SUITE / TASK
    shutil.copytree(REPO / "taskpacks" / "custom-dev" / TASK, task)
    spec = task / "task.yaml"
    spec.write_text(spec.read_text().replace("suite: custom-dev", f"suite: {SUITE}"))
    (root / "taskpacks" / "_shared").mkdir()
    shutil.copy(REPO / "taskpacks" / "_shared" / "minilib.bundle", root / "taskpacks" / "_shared")
    env = outside_env()
    run(["git", "init", "-q"], root, env)
    run(["git", "add", "-A"], root, env)
    run(["git", *GIT_ID, "commit", "-qm", "consumer: first commit"], root, env)
    return root


def _install(uv: str, wheel: Path, consumer: Path, tmp: Path, extra: str = "") -> Path:
    """The wheel (with `extra`, e.g. "[reports]") in the consumer's venv (made when missing),
    dependencies pinned to this project's lock."""
    env = outside_env()
    pins = tmp / "constraints.txt"
    run([uv, "export", "--frozen", "--no-dev", "--all-extras", "--no-emit-project", "--no-hashes",
         "--quiet", "--output-file", str(pins)], REPO, env)
    venv = consumer / ".venv"
    if not venv.exists():
        run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], consumer, env)
    run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
         "--constraint", str(pins), f"pytest-agentbench{extra} @ {wheel.as_uri()}"],
        consumer, env)
    return venv / "bin"


def _site_packages_mib(venv: Path) -> float:
    (site,) = venv.glob("lib/python*/site-packages")
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file()) / 2**20


def _build_commit(wheel: Path) -> str | None:
    """The commit the wheel says it was built from (tests/unit/test_wheel_contents.py checks
    that it is this checkout's HEAD), or None when built without git."""
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read("pytest_agentbench/_build_info.py").decode() \
            if "pytest_agentbench/_build_info.py" in zf.namelist() else ""
    found = re.search(r"^COMMIT = '([0-9a-f]{40})'$", text, re.M)
    return found.group(1) if found else None


def _pytest_run(bin_dir: Path, consumer: Path, out: Path, env: dict[str, str]) -> RunDir:
    proc = subprocess.run(
        [str(bin_dir / "python"), "-m", "pytest", "--agentbench-suite", SUITE,
         "-p", "no:cacheprovider", f"--agentbench-out={out}"],
        cwd=consumer, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout, proc.stdout[-4000:]
    runs = [p for p in out.iterdir() if p.is_dir() and not p.is_symlink()]  # not `latest`
    assert len(runs) == 1, runs
    return RunDir(runs[0])


def _harness_versions(run_dir: RunDir) -> set[str]:
    records: list[dict[str, Any]] = run_dir.records()
    assert [r["task_id"] for r in records] == [TASK]
    assert all(r["result"]["passed"] for r in records), records
    return {r["harness_version"] for r in records} | {run_dir.meta["harness_version"]}


def test_a_consumer_project_installs_the_wheel_runs_commits_and_gates(
    tmp_path: Path, docker_client: Any
) -> None:
    uv = uv_or_skip()
    timings: dict[str, float] = {}
    start = time.monotonic()
    wheel = build_wheel(tmp_path / "dist")
    built_from = _build_commit(wheel)
    consumer = _consumer(tmp_path / "consumer")
    bin_dir = _install(uv, wheel, consumer, tmp_path)
    timings["wheel+venv"] = time.monotonic() - start
    env = outside_env(HOME=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()

    where = run([str(bin_dir / "python"), "-c", "import pytest_agentbench; "
                 "print(pytest_agentbench.__file__)"], consumer, env).stdout.strip()
    assert Path(where).is_relative_to(consumer / ".venv"), where  # the wheel, not this checkout
    version = run([str(bin_dir / "agentbench"), "--version"], consumer, env).stdout.strip()
    assert version.startswith(f"agentbench {__version__}"), version

    mark = time.monotonic()
    built = run([str(bin_dir / "agentbench"), "image", "build"], consumer, env).stdout
    timings["image build"] = time.monotonic() - mark
    assert f"context hash: {context_hash(default_context())}" in built, built
    assert "up to date" in built, built  # the image of this checkout, reused by content hash

    mark = time.monotonic()
    first = _pytest_run(bin_dir, consumer, tmp_path / "runs-a", env)
    timings["first run"] = time.monotonic() - mark
    (consumer / "app.py").write_text("VALUE = 2\n")
    run(["git", "add", "app.py"], consumer, env)
    run(["git", *GIT_ID, "commit", "-qm", "consumer: second commit"], consumer, env)
    consumer_head = run(["git", "rev-parse", "HEAD"], consumer, env).stdout.strip()
    first_head = run(["git", "rev-parse", "HEAD~1"], consumer, env).stdout.strip()
    second = _pytest_run(bin_dir, consumer, tmp_path / "runs-b", env)

    versions = _harness_versions(first) | _harness_versions(second)
    assert len(versions) == 1, versions
    (harness,) = versions
    assert harness.startswith(__version__), harness
    assert consumer_head[:7] not in harness and first_head[:7] not in harness, harness
    if built_from:  # a wheel built from a checkout names that checkout's commit
        assert harness.startswith(f"{__version__}+g{built_from[:12]}"), (harness, built_from)

    # the plugin alone: the run path needs no numpy or pandas (a test environment that pins its
    # own keeps them); the run's summary says how to make the reports, the report commands say
    # it in one line, and installing the extra makes them
    assert not list((consumer / ".venv").glob("lib/python*/site-packages/pandas")), "pandas"
    notice = (first.path / "report_summary.md").read_text()
    assert "pytest-agentbench[reports]" in notice and str(first.path) in notice, notice
    assert not (first.path / "report_error.txt").exists()
    gate_args = [str(bin_dir / "agentbench"), "gate", "--baseline", str(first.path),
                 "--candidate", str(second.path), "--format", "json", "--inconclusive-ok"]
    bare = subprocess.run(gate_args, cwd=consumer, env=env, capture_output=True, text=True,
                          timeout=300)
    assert bare.returncode == 2, bare.stdout[-2000:] + bare.stderr[-2000:]
    assert bare.stderr.count("\n") == 1 and "pytest-agentbench[reports]" in bare.stderr, \
        bare.stderr
    sizes = {"plugin alone": _site_packages_mib(consumer / ".venv")}
    _install(uv, wheel, consumer, tmp_path, "[reports]")
    sizes["with reports"] = _site_packages_mib(consumer / ".venv")
    print("wheel consumer site-packages: "
          + ", ".join(f"{k} {v:.0f} MiB" for k, v in sizes.items()))

    mark = time.monotonic()
    gate = subprocess.run(gate_args, cwd=consumer, env=env, capture_output=True, text=True,
                          timeout=300)
    timings["gate"] = time.monotonic() - mark
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-3000:]
    assert json.loads(gate.stdout)["outcome"] in ("ok", "inconclusive"), gate.stdout[:2000]
    timings["total"] = time.monotonic() - start
    print("wheel consumer timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
