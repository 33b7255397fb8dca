"""Issue 8 item 2: a task file must not make the harness read host files.

`oracle.patch` may not be absolute, may not climb out with `..`, may not be a symlink that points
out of the task directory, and must be a regular file of bounded size (a FIFO would block the
host process). The loader refuses such a task with one line; the oracle agent checks again when
it reads, so a task that skipped the load-time checks (a frozen copy) is refused too, and the
file's content never reaches the tool calls, the records or the report.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentbench.agents.builtin import OracleAgent, ScriptedAgent
from pytest_agentbench.tasks.discovery import discover
from pytest_agentbench.tasks.loader import load_task
from tests.support.tiny_pack import ORACLE_PATCH, SUITE, Pack

SECRET = "root:$6$very-secret-hash:19000:0:99999:7:::"


def task_text(patch: str | None, task_id: str = "t1") -> str:
    data: dict[str, Any] = {
        "task_spec_version": 1,
        "id": task_id,
        "suite": SUITE,
        "repo": {"url": "https://example.invalid/r", "commit": "abcdef1"},
        "validation": {"failing_command": "false", "passing_command": "true"},
    }
    if patch is not None:
        data["oracle"] = {"patch": patch}
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "host" / "shadow"
    path.parent.mkdir()
    path.write_text(SECRET + "\n")
    return path


@pytest.fixture
def packs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return Path("taskpacks")


def write_task(packs: Path, name: str, patch: str | None) -> Path:
    path = packs / SUITE / name / "task.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(task_text(patch, name))
    return path


def problem_lines(packs: Path) -> dict[str, list[str]]:
    result = discover(packs, None)
    found: dict[str, list[str]] = {}
    for problem in result.problems:
        found.setdefault(problem.path.parent.name, []).append(str(problem))
    return found


# --------------------------------------------------------------------------- load time


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ("/etc/shadow", "oracle.patch: expected a path relative to task.yaml"),
        ("../../../etc/shadow", "oracle.patch: must stay inside the task directory"),
        ("sub/../../x.patch", "oracle.patch: must stay inside the task directory"),
        ("~root/.ssh/id_rsa", "oracle.patch: expected a path relative to task.yaml"),
        ("", "oracle.patch: expected a relative path"),
    ],
)
def test_oracle_path_out_of_the_task_is_one_line(packs: Path, patch: str, expected: str) -> None:
    write_task(packs, "t1", patch)
    write_task(packs, "good", None)
    lines = problem_lines(packs)
    assert list(lines) == ["t1"]
    assert len(lines["t1"]) == 1, lines
    assert lines["t1"][0].startswith(f"taskpacks/{SUITE}/t1/task.yaml: {expected}")


def test_oracle_symlink_out_of_the_task_is_refused_at_load(packs: Path, secret: Path) -> None:
    path = write_task(packs, "t1", "oracle.patch")
    (path.parent / "oracle.patch").symlink_to(secret)
    write_task(packs, "t2", "fix.patch")  # a symlink to a sibling task is out as well
    (packs / SUITE / "t2" / "fix.patch").symlink_to(Path("..", "t1", "oracle.patch"))
    inner = write_task(packs, "t3", "oracle.patch")  # a symlink inside the task is fine
    (inner.parent / "real.patch").write_text(ORACLE_PATCH)
    (inner.parent / "oracle.patch").symlink_to("real.patch")
    lines = problem_lines(packs)
    assert sorted(lines) == ["t1", "t2"]
    for name in ("t1", "t2"):
        assert len(lines[name]) == 1
        assert "oracle.patch: " in lines[name][0]
        assert "resolves outside the task directory" in lines[name][0]


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_oracle_patch_that_is_not_a_regular_file_is_refused_without_blocking(
    packs: Path, kind: str
) -> None:
    path = write_task(packs, "t1", "oracle.patch")
    target = path.parent / "oracle.patch"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    else:
        target.symlink_to("/dev/zero")  # resolves outside as well: either refusal is fine
    lines = within(10, lambda: problem_lines(packs))
    assert len(lines["t1"]) == 1
    assert lines["t1"][0].startswith(f"taskpacks/{SUITE}/t1/task.yaml: oracle.patch: ")


def test_huge_oracle_patch_is_refused(packs: Path) -> None:
    path = write_task(packs, "t1", "oracle.patch")
    with (path.parent / "oracle.patch").open("wb") as fh:
        fh.truncate(64 << 20)  # sparse: costs no disk
    (line,) = problem_lines(packs)["t1"]
    assert "oracle.patch: file is too large" in line


# --------------------------------------------------------------------------- read time


@dataclass
class RecordingToolbox:
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def call(self, name: str, arguments: Any) -> Any:
        self.calls.append((name, arguments))

        class Result:
            ok = True
            error_message = ""

        return Result()


@dataclass
class Ctx:
    task: Any
    task_dir: Path
    toolbox: RecordingToolbox
    params: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 10


def oracle_in(task_dir: Path) -> tuple[Any, RecordingToolbox]:
    loaded = load_task(task_dir / "task.yaml", check_layout=False)  # as for a frozen copy
    toolbox = RecordingToolbox()
    ctx = Ctx(loaded.spec, task_dir, toolbox)
    outcome = within(10, lambda: OracleAgent().run(ctx))  # type: ignore[arg-type]
    return outcome, toolbox


def test_oracle_agent_refuses_a_symlink_out_at_read_time(tmp_path: Path, secret: Path) -> None:
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    (task_dir / "task.yaml").write_text(task_text("oracle.patch"))
    (task_dir / "oracle.patch").symlink_to(secret)
    outcome, toolbox = oracle_in(task_dir)
    assert toolbox.calls == []
    assert outcome.sub_reason == "ORACLE_PATCH_REFUSED"
    assert SECRET not in outcome.summary


def test_oracle_agent_refuses_a_fifo_at_read_time(tmp_path: Path) -> None:
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    (task_dir / "task.yaml").write_text(task_text("oracle.patch"))
    os.mkfifo(task_dir / "oracle.patch")
    outcome, toolbox = oracle_in(task_dir)
    assert toolbox.calls == []
    assert outcome.sub_reason == "ORACLE_PATCH_REFUSED"
    assert "FIFO" in outcome.summary


def test_oracle_agent_still_applies_a_patch_inside_the_task(tmp_path: Path) -> None:
    task_dir = tmp_path / "task"
    (task_dir / "patches").mkdir(parents=True)
    (task_dir / "task.yaml").write_text(task_text("patches/fix.patch"))
    (task_dir / "patches" / "fix.patch").write_text(ORACLE_PATCH)
    outcome, toolbox = oracle_in(task_dir)
    assert toolbox.calls == [("apply_patch", {"unified_diff": ORACLE_PATCH})]
    assert outcome.finished_by == "done"


def test_scripted_agent_default_script_is_confined_too(tmp_path: Path, secret: Path) -> None:
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    (task_dir / "task.yaml").write_text(task_text(None))
    (task_dir / "scripted.yaml").symlink_to(secret)
    loaded = load_task(task_dir / "task.yaml", check_layout=False)
    toolbox = RecordingToolbox()
    outcome = ScriptedAgent().run(Ctx(loaded.spec, task_dir, toolbox))  # type: ignore[arg-type]
    assert toolbox.calls == []
    assert outcome.sub_reason == "SCRIPT_REFUSED"


# --------------------------------------------------------------------------- through pytest


def test_a_run_never_copies_a_host_file_into_its_records(
    pytester: pytest.Pytester, secret: Path
) -> None:
    pack = Pack(pytester.path)
    pack.task("good")
    evil = pack.task("evil")
    (evil.parent / "oracle.patch").unlink()
    (evil.parent / "oracle.patch").symlink_to(secret)
    absolute = pack.task("absolute", oracle=False)
    absolute.write_text(absolute.read_text() + f"oracle:\n  patch: {secret}\n")
    result = pytester.runpytest_inprocess(
        "--agentbench-sandbox", "local", "-p", "no:cacheprovider", "--agentbench-suite", SUITE
    )
    for path in (pytester.path / "reports").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text("utf-8", errors="replace"), path
    text = result.stdout.str()
    assert SECRET not in text
    result.assert_outcomes(passed=1, errors=2)
    assert "oracle.patch: " in text
    assert "Traceback" not in text


def within(seconds: float, work: Any) -> Any:
    """Run `work()` in a thread; fail (instead of hanging the suite) if it blocks."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if (fifo := next(Path.cwd().rglob("oracle.patch"), None)) is not None:
            with open(fifo, "w"):  # noqa: SIM117 - unblock the reader so the thread can end
                pass
        pytest.fail(f"blocked for more than {seconds}s")
    if "error" in box:
        raise box["error"]
    return box["value"]
