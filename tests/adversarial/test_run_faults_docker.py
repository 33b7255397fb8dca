"""Issue 8 item 7 (faults): SIGTERM to an xdist controller, and a Docker engine lost mid-run.

On 4a9ba26 SIGTERM killed the controller on the spot (no report, no merged events), and when the
engine went away the label sweep in pytest_sessionfinish raised, so report.html and
report_summary.md were never written.

Both tests run real `python -m pytest -n 2` subprocesses on a small synthetic suite with the
Docker sandbox. The daemon-loss test starts a second dockerd of its own (own data root, exec
root, pid file and socket, no bridge), loads the runner image into it, points the run at it with
DOCKER_HOST and stops that daemon while attempts are running.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_agentbench.sandbox.image import DEFAULT_IMAGE
from pytest_agentbench.spec.records import AttemptRecord

pytestmark = [pytest.mark.adversarial, pytest.mark.docker, pytest.mark.e2e]

SLOW = "sleep 2; grep -qx good value.txt"  # each attempt: two baseline runs and one score run
ORACLE_PATCH = """\
diff --git a/value.txt b/value.txt
--- a/value.txt
+++ b/value.txt
@@ -1 +1 @@
-bad
+good
"""


def _docker(*args: str, host: str | None = None, timeout: float = 60) -> str:
    env = {**os.environ, **({"DOCKER_HOST": host} if host else {})}
    out = subprocess.run(["docker", *args], env=env, capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"docker {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


@pytest.fixture(scope="module")
def docker_engine() -> None:
    try:
        _docker("info", timeout=20)
        _docker("image", "inspect", DEFAULT_IMAGE, timeout=20)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true but Docker or the runner image is missing: {exc}")
        pytest.skip(f"needs Docker and the runner image ({exc}); run scripts/bootstrap")


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    out: Path
    log: Path

    @property
    def run_dir(self) -> Path:
        dirs = [p for p in self.out.iterdir() if p.is_dir()] if self.out.is_dir() else []
        assert len(dirs) == 1, dirs
        return dirs[0]

    def records(self) -> list[dict[str, object]]:
        path = self.run_dir / "attempts.jsonl"
        lines = path.read_text("utf-8").splitlines() if path.exists() else []
        for line in lines:
            AttemptRecord.model_validate_json(line)  # whole and valid, every line
        return [json.loads(line) for line in lines]

    def text(self) -> str:
        return self.log.read_text("utf-8", "replace")


def _start(tmp: Path, *extra: str, env_extra: dict[str, str] | None = None) -> Run:
    root = tmp / "taskpacks"
    repo = root / "_repos" / "tiny"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "value.txt").write_text("bad\n")
    _git(repo, "add", "value.txt")
    _git(repo, "commit", "-q", "-m", "broken")
    commit = _git(repo, "rev-parse", "HEAD")
    for task_id in ("slow-a", "slow-b"):
        task = root / "synth" / task_id / "task.yaml"
        task.parent.mkdir(parents=True)
        task.write_text(
            f"task_spec_version: 1\nid: {task_id}\nsuite: synth\n"
            f"repo:\n  url: ../../_repos/tiny\n  commit: {commit}\n"
            f"validation:\n  failing_command: {json.dumps(SLOW)}\n"
            f"  passing_command: {json.dumps(SLOW)}\n"
        )
        (task.parent / "oracle.patch").write_text(ORACLE_PATCH)
    home, out, log = tmp / "home", tmp / "out", tmp / "pytest.log"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(HOME=str(home), **(env_extra or {}))
    args = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
        "--agentbench-suite", "synth", f"--agentbench-taskpacks={root}",
        f"--agentbench-out={out}", "--agentbench-env-cache=none", f"--basetemp={tmp / 'bt'}",
        *extra,
    ]
    with log.open("wb") as handle:  # its own session: every process of the run is findable
        proc = subprocess.Popen(args, cwd=tmp, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return Run(proc, out, log)


def _wait(what: str, condition: Callable[[], bool], timeout: float, run: Run) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline or run.proc.poll() is not None:
            raise AssertionError(f"gave up waiting for {what}:\n{run.text()[-4000:]}")
        time.sleep(0.2)


def _session_processes(sid: int) -> list[int]:
    """Processes still alive in the run's session (the controller's and its workers')."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":  # fields[3]: session id
                alive.append(int(entry.name))
    return alive


def _wait_gone(sid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.5)


def _containers(run_id: str, host: str | None = None) -> list[str]:
    out = _docker("ps", "-aq", "--filter", "label=agentbench=1",
                  "--filter", f"label=agentbench.run_id={run_id}", host=host)
    return out.split()


def _kill_session(run: Run) -> None:
    """Whatever of the run is left after a failed assertion (its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.proc.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- SIGTERM


def test_sigterm_to_the_xdist_controller_ends_like_ctrl_c(
    tmp_path: Path, docker_engine: None
) -> None:
    run = _start(tmp_path, "--agentbench-attempts", "4")
    try:
        _wait("a first record", lambda: bool(run.out.is_dir() and any(run.out.iterdir())
                                             and run.records()), 240, run)
        run_id = run.run_dir.name
        _wait("containers of running attempts", lambda: bool(_containers(run_id)), 60, run)
        before = len(_containers(run_id))
        kept_before = len(run.records())
        sent = time.monotonic()
        run.proc.send_signal(signal.SIGTERM)
        code = run.proc.wait(timeout=120)
        took = time.monotonic() - sent
        survivors = _session_processes(run.proc.pid)  # workers left running by the controller
        _wait_gone(run.proc.pid, 30)  # give orphans time to notice, so the count below is fair
    finally:
        _kill_session(run)
    text = run.text()
    left = _containers(run_id)
    print(f"SIGTERM: {before} containers before, {len(left)} after; records "
          f"{kept_before} before, {len(run.records())} after; exit {code} after {took:.1f}s; "
          f"{len(survivors)} processes of the run alive when the controller was gone")
    assert code == pytest.ExitCode.INTERRUPTED, text[-4000:]
    assert "INTERNALERROR" not in text, text[-4000:]
    assert not left, f"containers left: {left}"
    assert not survivors, "workers still alive after the controller exited"
    records = run.records()
    assert len(records) >= kept_before
    assert (run.run_dir / "report.html").is_file(), text[-4000:]
    assert (run.run_dir / "report_summary.md").is_file()
    for line in (run.run_dir / "events.jsonl").read_text("utf-8").splitlines():
        assert isinstance(json.loads(line), dict)
    assert not (run.run_dir / "events").exists()  # every worker's part merged


# --------------------------------------------------------------------------- daemon loss


@dataclass
class Dockerd:
    root: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.root}/docker.sock"

    def start(self) -> None:
        args = [
            "dockerd", f"--data-root={self.root}/data", f"--exec-root={self.root}/exec",
            f"--pidfile={self.root}/docker.pid", f"-H={self.host}", "--bridge=none",
            "--iptables=false", "--ip-masq=false", f"--cgroup-parent=ab-{self.root.name}",
        ]
        with (self.root / "dockerd.log").open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                _docker("info", host=self.host, timeout=10)
                return
            except (RuntimeError, subprocess.SubprocessError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError((self.root / "dockerd.log").read_text()[-2000:]) from None
                time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@pytest.fixture
def second_dockerd(docker_engine: None) -> Iterator[Dockerd]:
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.skip("a second Docker daemon needs root and dockerd")
    root = Path(f"/tmp/ab-dockerd-{os.getpid()}")  # short: unix socket paths are limited
    root.mkdir()
    daemon = Dockerd(root)
    try:
        daemon.start()
        saved = subprocess.Popen(["docker", "save", DEFAULT_IMAGE], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", daemon.host, "load", "-q"], stdin=saved.stdout,
                       check=True, capture_output=True, timeout=600)
        assert saved.wait(timeout=60) == 0
        yield daemon
    finally:
        daemon.stop()
        subprocess.run(["umount", "-R", f"{root}/data"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_engine_lost_mid_run_still_writes_the_reports(
    tmp_path: Path, second_dockerd: Dockerd
) -> None:
    host = second_dockerd.host
    run = _start(tmp_path, "--agentbench-attempts", "3", f"--agentbench-image={DEFAULT_IMAGE}",
                 env_extra={"DOCKER_HOST": host})
    try:
        _wait("a first record", lambda: bool(run.out.is_dir() and any(run.out.iterdir())
                                             and run.records()), 240, run)
        run_id = run.run_dir.name
        _wait("containers of running attempts", lambda: bool(_containers(run_id, host)), 60, run)
        before, kept_before = len(_containers(run_id, host)), len(run.records())
        second_dockerd.stop()  # the engine goes away mid-run
        code = run.proc.wait(timeout=600)
    finally:
        _kill_session(run)
    text = run.text()
    records = run.records()
    second_dockerd.start()  # back, to count what the run could not remove
    left = _containers(run_id, host)
    print(f"engine lost: {before} containers before, {len(left)} left after; records "
          f"{kept_before} before, {len(records)} after (of 6); exit {code}")
    assert "INTERNALERROR" not in text and "Traceback" not in text, text[-4000:]
    assert code == pytest.ExitCode.TESTS_FAILED, text[-4000:]
    assert len(records) == 6, text[-4000:]  # every attempt recorded, none lost
    assert any(r["result"]["failure_reason"] == "SANDBOX_ERROR" for r in records)  # type: ignore[index]
    assert (run.run_dir / "report.html").is_file(), text[-4000:]
    assert (run.run_dir / "report_summary.md").is_file()
    failed = [line for line in text.splitlines() if line.startswith("agentbench: session end:")]
    assert len(failed) == 1 and "sweep containers" in failed[0], text[-4000:]
    assert "agentbench gc" in failed[0]
