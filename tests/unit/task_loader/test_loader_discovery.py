"""Finding task files (tasks/discovery.py, tasks/loader.py): suites and directories that are
missing or wrong, a mix of valid and broken tasks, the order, load_task, paths in messages."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_agentbench.tasks.discovery import discover
from pytest_agentbench.tasks.loader import (
    TaskProblem,
    TaskSpecError,
    load_task,
)
from tests.support.task_files import (
    MINIMAL,
    SUITE,
    only_line,
    task_data,
    write_task,
    write_text,
)


def test_relative_repo_url_that_exists_loads(tmp_path: Path) -> None:
    path = write_task("t1", task_data(repo={"url": "repo.bundle", "commit": "abcdef1"}))
    (path.parent / "repo.bundle").write_bytes(b"bundle")
    write_task("t2", task_data(id="t2", repo={"url": "../_shared/r.git", "commit": "abcdef1"}))
    (tmp_path / "taskpacks" / SUITE / "_shared" / "r.git").mkdir(parents=True)
    write_task("t3", task_data(id="t3", repo={"url": "git@host:org/r.git", "commit": "abcdef1"}))
    write_task("t4", task_data(id="t4", repo={"url": "file:///nowhere/r.git", "commit": "abcdef1"}))
    result = discover(Path("taskpacks"), None)
    assert result.problems == []
    assert [task.id for task in result.tasks] == ["t1", "t2", "t3", "t4"]


def test_missing_suite_is_a_problem_naming_the_existing_ones() -> None:
    write_task("t1", MINIMAL)
    write_task("t1", task_data(id="h1", suite="custom-heldout"), suite="custom-heldout")
    result = discover(Path("taskpacks"), ["custom-dve", SUITE])
    assert [task.id for task in result.tasks] == ["t1"]
    assert only_line(result.problems) == (
        "taskpacks/custom-dve: no such suite 'custom-dve' (did you mean 'custom-dev'?); "
        "existing suites: custom-dev, custom-heldout"
    )


def test_missing_taskpacks_directory_and_path_like_suite_names() -> None:
    assert only_line(discover(Path("nowhere"), None).problems) == (
        "nowhere: taskpacks directory not found"
    )
    write_task("t1", MINIMAL)
    line = only_line(discover(Path("taskpacks"), ["../etc"]).problems)
    assert line == "taskpacks: '../etc' is not a suite name (a directory name)"


def test_task_directory_without_task_yaml_is_reported() -> None:
    write_task("t1", MINIMAL)
    Path("taskpacks", SUITE, "t2").mkdir()
    Path("taskpacks", SUITE, "t2", "task.yml").write_text("id: t2\n")
    Path("taskpacks", SUITE, "_shared").mkdir()
    Path("taskpacks", SUITE, ".cache").mkdir()
    result = discover(Path("taskpacks"), None)
    assert [task.id for task in result.tasks] == ["t1"]
    assert only_line(result.problems) == (
        f"taskpacks/{SUITE}/t2: no task.yaml in this task directory "
        "(found task.yml: rename it to task.yaml)"
    )


MALFORMED_TEXTS = {
    "b-unknown": yaml.safe_dump(task_data(id="b-unknown", agent={"max_stepz": 3})),
    "c-yaml": "id: [unclosed\n",
    "d-empty": "",
    "e-enum": yaml.safe_dump(task_data(id="e-enum", environment={"network_policy": "open"})),
    "f-version": yaml.safe_dump(task_data(id="f-version", task_spec_version=2)),
}


def test_mixed_directory_loads_the_valid_tasks_and_reports_the_rest() -> None:
    write_task("a", task_data(id="a"))
    write_task("g", task_data(id="g"))
    for name, text in MALFORMED_TEXTS.items():
        write_text(name, text)
    result = discover(Path("taskpacks"), [SUITE])
    assert [task.id for task in result.tasks] == ["a", "g"]
    assert len(result.problems) == 5
    assert [problem.path.parent.name for problem in result.problems] == sorted(MALFORMED_TEXTS)


def test_discovery_order_does_not_depend_on_creation_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["b", "a", "C", "c10", "c2", "a_b", "a-b"]
    orders = []
    for attempt, creation in enumerate([names, list(reversed(names))]):
        root = tmp_path / f"attempt{attempt}"
        root.mkdir()
        monkeypatch.chdir(root)
        for name in creation:
            write_task(name, task_data(id=name))
            write_task(f"h-{name}", task_data(id=f"h-{name}", suite="custom-heldout"),
                       "custom-heldout")
        orders.append([task.id for task in discover(Path("taskpacks"), None).tasks])
    assert orders[0] == orders[1]
    assert orders[0][: len(names)] == sorted(names)
    assert orders[0][len(names) :] == [f"h-{name}" for name in sorted(names)]


def test_load_task_raises_with_every_problem() -> None:
    path = write_task("t1", task_data(suite="foo", agent={"max_stepz": 3}))
    with pytest.raises(TaskSpecError) as caught:
        load_task(path)
    assert [problem.field for problem in caught.value.problems] == ["suite", "agent.max_stepz"]
    assert str(caught.value) == "\n".join(str(p) for p in caught.value.problems)
    assert caught.value.problems[0] == TaskProblem(
        path, "suite", f"'foo' does not match its directory '{SUITE}'"
    )


def test_load_task_of_a_frozen_copy_skips_the_layout_checks(tmp_path: Path) -> None:
    frozen = tmp_path / "runs" / "r1" / "tasks" / "t1" / "task.yaml"
    frozen.parent.mkdir(parents=True)
    frozen.write_text(yaml.safe_dump(task_data(repo={"url": "repo.bundle", "commit": "abcdef1"})))
    with pytest.raises(TaskSpecError):
        load_task(frozen)
    assert load_task(frozen, check_layout=False).id == "t1"


def test_paths_outside_the_current_directory_print_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_task("t1", task_data(suite="foo")).absolute()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(TaskSpecError) as caught:
        load_task(path)
    assert str(caught.value).startswith(f"{path}: suite: ")


