"""Issue 8 item 9: bad input that used to crash the run, or load and fail later per attempt.

Each case is now one line naming the file and the field, with no traceback, and every other task
still runs: deep nesting (RecursionError), alias bombs, a task folder without task.yaml,
unbounded numbers (`.inf`, `1e300`, `1e19`), a workdir the sandbox owns, a binary or deeply
nested variant YAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentbench.agents.variants import VariantError, load_variant
from pytest_agentbench.tasks.discovery import discover
from pytest_agentbench.tasks.loader import TASK_FILE
from tests.support.tiny_pack import SUITE, Pack

USAGE_ERROR = 4
DEEP = 3000


def base(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "task_spec_version": 1,
        "id": "t1",
        "suite": SUITE,
        "repo": {"url": "https://example.invalid/r.git", "commit": "abcdef1"},
        "validation": {"failing_command": "false", "passing_command": "true"},
    }
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return data


@pytest.fixture
def packs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return Path("taskpacks")


def write(packs: Path, name: str, text: str) -> Path:
    path = packs / SUITE / name / TASK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def lines_for(packs: Path, name: str) -> list[str]:
    """The problem lines of one task, after checking that the sibling task `good` loaded."""
    result = discover(packs, None)
    assert "good" in [task.id for task in result.tasks]
    prefix = f"taskpacks/{SUITE}/{name}"
    lines = [str(p) for p in result.problems if str(p).startswith(prefix)]
    assert len(lines) == len(result.problems), [str(p) for p in result.problems]
    return lines


def deep_list(depth: int) -> str:
    return "[" * depth + "]" * depth


# --------------------------------------------------------------------------- nesting and bombs


@pytest.mark.parametrize(
    "text",
    [
        yaml.safe_dump(base()) + f"description: {deep_list(DEEP)}\n",
        yaml.safe_dump(base()) + "labels: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n",
        yaml.safe_dump(base()) + "".join("  " * i + f"k{i}:\n" for i in range(200)),
        deep_list(DEEP) + "\n",
    ],
    ids=["flow-list", "flow-mapping", "block-mapping", "top-level"],
)
def test_deep_nesting_is_one_line(packs: Path, text: str) -> None:
    write(packs, "good", yaml.safe_dump(base(id="good")))
    write(packs, "deep", text)
    (line,) = lines_for(packs, "deep")
    assert line.startswith(f"taskpacks/{SUITE}/deep/task.yaml: line ")
    assert "nested more than" in line


def test_alias_bomb_and_recursive_alias_are_one_line(packs: Path) -> None:
    laughs = "lol0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"lol{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10)
    )
    write(packs, "good", yaml.safe_dump(base(id="good")))
    write(packs, "bomb", yaml.safe_dump(base(id="bomb")) + laughs)
    write(packs, "loop", yaml.safe_dump(base(id="loop")) + "labels: &me [*me]\n")
    result = discover(packs, None)
    assert [task.id for task in result.tasks] == ["good"]
    lines = sorted(str(problem) for problem in result.problems)
    assert len(lines) == 2, lines
    assert "after expanding aliases" in lines[0]
    assert "refers to a value that contains it" in lines[1]


def test_deep_task_file_does_not_abort_the_run(pytester: pytest.Pytester) -> None:
    pack = Pack(pytester.path)
    pack.task("good")
    pack.write("deep", pack.task("deep").read_text() + f"description: {deep_list(DEEP)}\n")
    result = run(pytester)
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert "RecursionError" not in text
    result.assert_outcomes(passed=1, errors=1)
    assert f"taskpacks/{SUITE}/deep/task.yaml: line " in text


# --------------------------------------------------------------------------- numbers and paths


@pytest.mark.parametrize(
    ("field", "text", "expected"),
    [
        ("environment.timeout_sec", ".inf", "expected a finite number, got inf"),
        ("environment.timeout_sec", "-.inf", "expected a finite number"),
        ("environment.cpu_limit", ".nan", "expected a finite number, got nan"),
        ("environment.tool_timeout_sec", "1e300", "expected a number <= 86400"),
        ("environment.tool_timeout_sec", "1.0e+300", "expected a number <= 86400"),
        ("environment.setup_timeout_sec", "1.0e+6", "expected a number <= 86400"),
        ("environment.pids_limit", "1e19", "expected a whole number"),
        ("environment.pids_limit", "1.0e+19", "expected a whole number"),
        ("environment.pids_limit", "10000000000000000000", "expected a number <= 100000"),
        ("environment.mem_limit_mb", "99999999999", "expected a number <= 1048576"),
        ("environment.disk_limit_mb", "4194304", "expected a number <= 1048576"),
        ("environment.cpu_limit", "true", "expected a number, got true"),
        ("agent.max_steps", "1000000000000", "expected a number <= 100000"),
        ("agent.max_steps", "true", "expected a number, got true"),
        ("validation.expected_exit_codes", "[256]", "expected a number <= 255"),
        ("validation.baseline_runs", "1e3", "expected a whole number"),
        ("environment.pids_limit", "9" * 5000, "number too large"),
    ],
)
def test_numbers_have_finite_bounds(packs: Path, field: str, text: str, expected: str) -> None:
    section, key = field.split(".")
    write(packs, "good", yaml.safe_dump(base(id="good")))
    data = base()
    data.setdefault(section, {})[key] = "PLACEHOLDER"
    write(packs, "t1", yaml.safe_dump(data).replace("PLACEHOLDER", text))
    (line,) = lines_for(packs, "t1")
    assert line.startswith(f"taskpacks/{SUITE}/t1/task.yaml: ")
    assert expected in line
    if "line " not in line:  # a YAML-level refusal carries a position instead of the field
        assert f": {field}" in line


@pytest.mark.parametrize(
    "workdir",
    ["/env", "/env/x", "/tmp", "/tmp/work", "/proc/self", "/sys", "/dev/shm", "/etc",
     "/usr/local/src", "/home/runner", "/home/runner/w", "/", "workspace", "/workspace/",
     "/workspace/../etc", "//workspace", "/work space", "/work:ro", "/work\nspace"],
)
def test_workdir_is_an_absolute_normalized_path_outside_reserved_ones(
    packs: Path, workdir: str
) -> None:
    write(packs, "good", yaml.safe_dump(base(id="good")))
    write(packs, "t1", yaml.safe_dump(base(environment__workdir=workdir)))
    (line,) = lines_for(packs, "t1")
    assert line.startswith(f"taskpacks/{SUITE}/t1/task.yaml: environment.workdir: "), line


@pytest.mark.parametrize("workdir", ["/workspace", "/src/project", "/repo", "/home/user/w"])
def test_ordinary_workdirs_load(packs: Path, workdir: str) -> None:
    write(packs, "good", yaml.safe_dump(base(id="good", environment__workdir=workdir)))
    result = discover(packs, None)
    assert [str(p) for p in result.problems] == []


def test_unbounded_numbers_are_refused_before_any_attempt(pytester: pytest.Pytester) -> None:
    """They used to load, then fail every attempt as an infrastructure error."""
    pack = Pack(pytester.path)
    pack.task("good")
    for name, line in (
        ("inf", "  timeout_sec: .inf"),
        ("huge", "  tool_timeout_sec: 1e300"),
        ("pids", "  pids_limit: 1.0e+19"),
        ("envdir", "  workdir: /env"),
    ):
        text = pack.task(name).read_text().replace("environment:\n", f"environment:\n{line}\n")
        text = text.replace("  timeout_sec: 120\n", "") if name == "inf" else text
        text = text.replace("  tool_timeout_sec: 30\n", "") if name == "huge" else text
        pack.write(name, text)
    result = run(pytester)
    result.assert_outcomes(passed=1, errors=4)
    text = result.stdout.str()
    for field in ("timeout_sec", "tool_timeout_sec", "pids_limit", "workdir"):
        assert f"environment.{field}: " in text
    assert "SANDBOX_ERROR" not in text


# --------------------------------------------------------------------------- task folders


def test_task_folder_without_task_yaml_is_a_task_problem_not_a_run_problem(packs: Path) -> None:
    write(packs, "good", yaml.safe_dump(base(id="good")))
    (packs / SUITE / "renamed").mkdir()
    (packs / SUITE / "renamed" / "task.yml").write_text(yaml.safe_dump(base(id="renamed")))
    (packs / SUITE / "empty").mkdir()
    result = discover(packs, None)
    assert [task.id for task in result.tasks] == ["good"]
    assert len(result.problems) == 2
    for problem in result.problems:
        assert not problem.run_level
        assert problem.task_file == problem.path / TASK_FILE


def test_task_folder_without_task_yaml_is_one_error_and_the_run_goes_on(
    pytester: pytest.Pytester,
) -> None:
    pack = Pack(pytester.path)
    pack.task("good")
    renamed = pack.task("renamed")
    renamed.rename(renamed.with_name("task.yml"))
    (pack.root / SUITE / "empty").mkdir()
    result = run(pytester)
    assert result.ret != USAGE_ERROR, result.stderr.str()
    result.assert_outcomes(passed=1, errors=2)
    text = result.stdout.str()
    assert "found task.yml: rename it to task.yaml" in text


# --------------------------------------------------------------------------- variant files


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x00\xff\xfe\x89PNG\r\n", "not UTF-8 text"),
        (f"agent: oracle\nparams: {deep_list(DEEP)}\n".encode(), "nested more than"),
        (b"agent: oracle\nparams: &p {a: *p}\n", "refers to a value that contains it"),
        (b"agent: oracle\nparams: {when: 2024-01-01}\n", "params.when: expected a string"),
        (b"agent: oracle\nbudgets: {max_cost_usd: .nan}\n", "expected a finite number"),
        (b"agent: oracle\nparams: {1: a, b: c}\n", "keys must be strings"),
        (b"agent: oracle\nname: [x]\n", "name: expected a string"),
        (b"agent: oracle\nname: 'a/b'\n", "name: expected letters"),
        (b"agent: oracle\nagent: nop\n", "duplicate key 'agent'"),
        (b"agent: \"a\\0b\"\n", "agent: contains a NUL character"),
        (b"- agent: oracle\n", "expected a mapping at the top level"),
        (b"agent: [unclosed\n", "YAML syntax error"),
    ],
)
def test_bad_variant_file_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "variant.yaml"
    path.write_bytes(content)
    with pytest.raises(VariantError) as info:
        load_variant(str(path))
    message = str(info.value)
    assert message.startswith(f"variant file {path}: "), message
    assert expected in message
    assert "\n" not in message


def test_bad_variant_file_is_a_usage_error_not_an_internal_error(
    pytester: pytest.Pytester,
) -> None:
    pack = Pack(pytester.path)
    pack.task("good")
    for name, content in (
        ("deep.yaml", f"agent: oracle\nparams: {deep_list(DEEP)}\n".encode()),
        ("binary.yaml", b"\x00\xff\xfe\x89PNG\r\n"),
    ):
        (pytester.path / name).write_bytes(content)
        result = run(pytester, f"--agentbench-variant={pytester.path / name}")
        text = result.stdout.str() + result.stderr.str()
        assert result.ret == USAGE_ERROR, text
        assert "INTERNALERROR" not in text and "Traceback" not in text
        assert f"variant file {pytester.path / name}: " in result.stderr.str()


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(
        "--agentbench-sandbox", "local", "-p", "no:cacheprovider", "--agentbench-suite", SUITE,
        *args,
    )
