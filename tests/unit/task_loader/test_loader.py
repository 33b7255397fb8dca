"""The task loader (tasks/loader.py): a valid task loads; each problem in a task file is one
line naming the file and field, none lost. Finding task files: test_loader_discovery.py."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentbench import __version__
from pytest_agentbench.tasks.discovery import discover
from pytest_agentbench.tasks.loader import (
    LoadedTask,
    load_task,
    spec_hash,
)
from tests.support.task_files import (
    FILE,
    MINIMAL,
    SUITE,
    only_line,
    task_data,
    write_task,
    write_text,
)


def mutate(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set (or with value=DELETE remove) a dotted key in the task data."""

    def apply(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        if value is DELETE:
            del node[last]
        else:
            node[last] = value

    return apply


DELETE = object()


def test_valid_minimal_task_loads() -> None:
    path = write_task("t1", MINIMAL)
    result = discover(Path("taskpacks"), [SUITE])
    assert result.problems == []
    [task] = result.tasks
    assert isinstance(task, LoadedTask)
    assert (task.id, task.spec.suite, task.spec.environment.network_policy) == ("t1", SUITE, "none")
    assert task.path == path
    assert task.task_dir == path.parent
    assert task.raw_text == path.read_text(encoding="utf-8")
    assert re.fullmatch(r"[0-9a-f]{64}", task.spec_hash)
    assert task.spec_hash == spec_hash(task.spec)


def test_spec_hash_ignores_formatting_but_not_content() -> None:
    first = load_task(write_task("t1", MINIMAL))
    reordered = "# a comment\n" + yaml.safe_dump(dict(reversed(list(MINIMAL.items()))))
    second = load_task(write_text("t1", reordered))
    assert first.spec_hash == second.spec_hash
    changed = load_task(write_task("t1", task_data(description="now different")))
    assert changed.spec_hash != first.spec_hash


SINGLE_PROBLEMS = [
    pytest.param(
        mutate("agent.max_stepz", 3),
        "agent.max_stepz: unknown key (did you mean 'max_steps'?)",
        id="unknown-key",
    ),
    pytest.param(
        mutate("agent.max_steps", "many"),
        "agent.max_steps: expected a whole number, got 'many'",
        id="wrong-type",
    ),
    pytest.param(
        mutate("validation.failing_command", DELETE),
        "validation.failing_command: field required",
        id="missing-field",
    ),
    pytest.param(
        mutate("environment.network_policy", "open"),
        "environment.network_policy: expected one of 'none', 'setup_only', 'always', got 'open'",
        id="bad-enum",
    ),
    pytest.param(
        mutate("validation.expected_failure_regex", "(Assertion"),
        "validation.expected_failure_regex: not a valid regular expression: missing ), "
        "unterminated subpattern at position 0 (in '(Assertion')",
        id="bad-regex",
    ),
    pytest.param(
        mutate("harness_min_version", "99.0.0"),
        f"harness_min_version: requires harness >= 99.0.0, this is {__version__}",
        id="harness-too-old",
    ),
    pytest.param(
        mutate("suite", "foo"),
        f"suite: 'foo' does not match its directory '{SUITE}'",
        id="suite-mismatch",
    ),
    pytest.param(
        mutate("environment.python", 3.11),
        "environment.python: expected a string, got 3.11 (quote it in YAML)",
        id="number-for-string",
    ),
    pytest.param(
        mutate("environment.cpu_limit", 0),
        "environment.cpu_limit: expected a number > 0, got 0",
        id="bound",
    ),
    pytest.param(
        mutate("repo.commit", "main"),
        "repo.commit: expected a string matching ^[0-9a-f]{7,40}$, got 'main'",
        id="pattern",
    ),
    pytest.param(
        mutate("setup.commands", ["ok", 5]),
        "setup.commands[1]: expected a string, got 5 (quote it in YAML)",
        id="list-item",
    ),
    pytest.param(
        mutate("task_spec_version", DELETE),
        "task_spec_version: field required (add 'task_spec_version: 1')",
        id="no-version",
    ),
    pytest.param(
        mutate("repo.url", "bundles/repo.bundle"),
        f"repo.url: no such file or directory: taskpacks/{SUITE}/t1/bundles/repo.bundle",
        id="relative-repo-missing",
    ),
]


@pytest.mark.parametrize(("change", "expected"), SINGLE_PROBLEMS)
def test_each_malformed_case_is_one_line_naming_file_and_field(
    change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    data = task_data()
    change(data)
    write_task("t1", data)
    result = discover(Path("taskpacks"), [SUITE])
    assert result.tasks == []
    assert only_line(result.problems) == f"{FILE}: {expected}"


def test_newer_task_spec_version_is_one_line_even_with_unknown_fields() -> None:
    write_task("t1", task_data(task_spec_version=2, brand_new_section={"x": 1}))
    line = only_line(discover(Path("taskpacks"), None).problems)
    assert line.startswith(f"{FILE}: task_spec_version: task spec version 2 is newer than")
    assert "upgrade pytest-agentbench" in line


def test_yaml_syntax_error_names_line_and_column() -> None:
    text = yaml.safe_dump(MINIMAL, sort_keys=False) + "agent:\n  max_steps: [1, 2\n"
    write_text("t1", text)
    broken_line = text.splitlines().index("  max_steps: [1, 2") + 1
    line = only_line(discover(Path("taskpacks"), None).problems)
    assert re.fullmatch(rf"{re.escape(FILE)}: line \d+, column \d+: YAML syntax error: .+", line)
    reported = int(re.search(r"line (\d+)", line).group(1))  # type: ignore[union-attr]
    assert broken_line <= reported <= broken_line + 1


def test_yaml_error_line_is_exact_for_a_bad_indent() -> None:
    text = "task_spec_version: 1\nid: t1\nsuite: custom-dev\nrepo:\n  url: x\n   commit: abc\n"
    write_text("t1", text)
    line = only_line(discover(Path("taskpacks"), None).problems)
    assert line.startswith(f"{FILE}: line 6, column 10: YAML syntax error: ")


def test_duplicate_yaml_key_is_reported_not_silently_overwritten() -> None:
    text = yaml.safe_dump(MINIMAL, sort_keys=False) + "id: t1-again\n"
    write_text("t1", text)
    line = only_line(discover(Path("taskpacks"), None).problems)
    last_line = len(text.splitlines())
    assert line.startswith(f"{FILE}: line {last_line}, column 1: duplicate key 'id'")


def test_task_id_must_match_its_directory() -> None:
    """A task whose id differs from its folder is refused in one line (issue 22): -k, the
    records and replay name it by its id, a person by its folder. Within a suite that also
    rules out a duplicate id."""
    write_task("t2", task_data(id="same"))
    write_task("t1", task_data(id="t1"))
    result = discover(Path("taskpacks"), [SUITE])
    assert [task.path.parent.name for task in result.tasks] == ["t1"]
    assert only_line(result.problems) == (
        f"taskpacks/{SUITE}/t2/task.yaml: id: 'same' does not match its directory 't2'"
    )


def test_duplicate_task_id_across_suites() -> None:
    write_task("t1", task_data(suite="custom-heldout"), suite="custom-heldout")
    write_task("t1", MINIMAL)
    result = discover(Path("taskpacks"), ["custom-heldout", SUITE])
    assert [task.spec.suite for task in result.tasks] == [SUITE]
    assert "duplicate task id 't1'" in only_line(result.problems)


def test_a_typo_in_a_required_section_is_one_line() -> None:
    data = task_data()
    data["validaton"] = data.pop("validation")
    write_task("t1", data)
    line = only_line(discover(Path("taskpacks"), None).problems)
    assert line == f"{FILE}: validaton: unknown key (did you mean 'validation'?)"


def test_unknown_key_without_close_match_lists_the_allowed_keys() -> None:
    write_task("t1", task_data(artifacts={"zzz": True}))
    line = only_line(discover(Path("taskpacks"), None).problems)
    assert line == f"{FILE}: artifacts.zzz: unknown key (expected one of: keep_workspace, redact)"


def test_every_error_in_a_file_is_reported_one_line_each() -> None:
    data = task_data(labels="flaky", agent={"max_steps": 0, "allow_file_write": "maybe"})
    del data["repo"]["commit"]
    write_task("t1", data)
    lines = [str(problem) for problem in discover(Path("taskpacks"), None).problems]
    assert lines == [
        f"{FILE}: labels: expected a list, got 'flaky'",
        f"{FILE}: repo.commit: field required",
        f"{FILE}: agent.max_steps: expected a number >= 1, got 0",
        f"{FILE}: agent.allow_file_write: expected true or false, got 'maybe'",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "file is empty (expected a mapping with"),
        ("# only a comment\n", "file is empty (expected a mapping with"),
        ("- id: t1\n", "expected a mapping of task fields at the top level, got a list"),
        ("just a string\n", "expected a mapping of task fields at the top level, got 'just a"),
    ],
)
def test_file_level_problems(text: str, expected: str) -> None:
    write_text("t1", text)
    assert only_line(discover(Path("taskpacks"), None).problems).startswith(f"{FILE}: {expected}")


def test_no_message_leaks_tracebacks_or_pydantic_wording() -> None:
    int_key: dict[Any, Any] = {1: "int key", **task_data()}
    bad_values: list[dict[Any, Any]] = [
        task_data(agent={"max_stepz": 3, "max_steps": 2.5}),
        task_data(environment={"network_policy": "open", "mem_limit_mb": "lots"}),
        task_data(validation={"failing_command": "", "disallowed_failure_regex": "[a-"}),
        task_data(task_spec_version="1", id="bad id!", setup=[1]),
        task_data(repo=None, labels={"a": 1}, quarantine=["x"]),
        int_key,
    ]
    for index, data in enumerate(bad_values):
        write_task(f"t{index}", data)
    write_text("t-yaml", "a: b: c\n")
    write_text("t-binary", "id: t\nsuite: x\x01\n")
    Path("taskpacks", SUITE, "t-utf8", "task.yaml").parent.mkdir()
    Path("taskpacks", SUITE, "t-utf8", "task.yaml").write_bytes(b"id: \xff\n")
    result = discover(Path("taskpacks"), None)
    assert result.tasks == []
    lines = [str(problem) for problem in result.problems]
    assert len(lines) > len(bad_values) + 3
    for line in lines:
        assert "\n" not in line
        for leak in ("Traceback", "pydantic", "For further information", "Input should", "Error"):
            assert leak not in line, line
        assert line.startswith(f"taskpacks/{SUITE}/t"), line
    assert (
        f"taskpacks/{SUITE}/t-binary/task.yaml: line 2, column 9: YAML syntax error: "
        "unacceptable character #x0001: special characters are not allowed"
    ) in lines


@pytest.mark.parametrize(("environment", "message"), [
    ({"python": "3.12"}, "environment.python: '3.12' is not provided by the runner image "
                         "(supported: 3.11); for another version name an image that has it in "
                         "environment.docker_image and leave python out"),
    ({"docker_image": "python:3.12-slim", "python": "3.12"},
     "environment.python: cannot be chosen with docker_image (the image's own Python runs): "
     "leave python out (in '3.12')"),
])
def test_a_python_the_sandbox_does_not_run_is_refused(
    environment: dict[str, str], message: str
) -> None:
    """`python: "3.12"` was accepted and the task silently ran 3.11 (issue 22 item 10)."""
    write_task("t1", task_data(environment=environment))
    assert only_line(discover(Path("taskpacks"), [SUITE]).problems) == f"{FILE}: {message}"


def test_the_runner_images_python_and_an_image_of_ones_own_load() -> None:
    write_task("t1", task_data(environment={"python": "3.11"}))
    write_task("t2", task_data(id="t2", environment={"docker_image": "python:3.12-slim"}))
    result = discover(Path("taskpacks"), [SUITE])
    assert not result.problems
    assert [t.spec.environment.python for t in result.tasks] == ["3.11", "3.11"]


def test_a_per_task_agent_entrypoint_is_refused_not_ignored() -> None:
    """`agent.entrypoint` was accepted and never read: the run's variant is the agent."""
    write_task("t1", task_data(agent={"entrypoint": "oracle"}))
    assert only_line(discover(Path("taskpacks"), [SUITE]).problems) == (
        f"{FILE}: agent.entrypoint: not supported: the agent is chosen per run "
        "(--agentbench-variant), not per task; remove this field (in 'oracle')")
