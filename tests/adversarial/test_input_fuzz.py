"""Issue 8 item 9, the sweep: several hundred malformed task.yaml files and variant YAML files.

Every one must give clear lines, each naming the file (and, for a field, the field), with no
traceback, no newline inside a line and a bounded length; the malformed task files all sit in
one suite beside a valid task, which must still load. The cases are plain, deterministic
parameters: wrong types, huge and non-finite numbers, Unicode, binary bytes, empty files, a list
at the top level, duplicate keys, alias bombs, deep nesting, very long strings, hostile URLs and
paths. `SWEEP_SIZE` below counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentbench.agents.variants import VariantError, load_variant
from pytest_agentbench.tasks.discovery import discover
from pytest_agentbench.tasks.loader import MAX_PROBLEMS, LoadResult

SUITE = "fuzz"
MAX_LINE = 400
DEEP = 3000
LONG = "x" * 200_001

VALID: dict[str, Any] = {
    "task_spec_version": 1,
    "id": "ID",
    "suite": SUITE,
    "description": "a task",
    "labels": ["one"],
    "repo": {"url": "https://example.invalid/r.git", "commit": "abcdef1"},
    "environment": {"workdir": "/workspace", "cpu_limit": 1, "mem_limit_mb": 1024,
                    "pids_limit": 256, "disk_limit_mb": 512, "timeout_sec": 300,
                    "tool_timeout_sec": 60, "setup_timeout_sec": 60,
                    "network_policy": "none", "docker_image": "debian:12"},
    "setup": {"commands": ["true"], "capture": ["pip freeze"]},
    "validation": {"failing_command": "false", "passing_command": "true",
                   "expected_exit_codes": [1], "expected_failure_regex": "x",
                   "disallowed_failure_regex": "ImportError",
                   "expected_failing_tests": ["tests/test_a.py::test_a"], "baseline_runs": 2,
                   "results": "auto"},
    "agent": {"max_steps": 10, "allow_file_write": True,
              "editable_globs": ["src/**"], "readonly_globs": ["tests/**"],
              "max_changed_files": 3, "max_lines_changed": 50,
              "forbidden_commands": ["curl"], "protect_test_infra": True},
    "artifacts": {"keep_workspace": False, "redact": ["TOKEN"]},
    "oracle": {"patch": "oracle.patch"},
}

STRINGS = ["id", "suite", "description", "repo.url", "repo.commit", "environment.workdir",
           "environment.docker_image", "environment.python", "validation.failing_command",
           "validation.passing_command", "validation.expected_failure_regex",
           "agent.entrypoint", "oracle.patch", "harness_min_version", "quarantine"]
NUMBERS = ["environment.cpu_limit", "environment.mem_limit_mb", "environment.pids_limit",
           "environment.disk_limit_mb", "environment.timeout_sec", "environment.tool_timeout_sec",
           "environment.setup_timeout_sec", "validation.baseline_runs", "agent.max_steps",
           "agent.max_changed_files", "agent.max_lines_changed"]
BOOLS = ["agent.allow_file_write", "agent.protect_test_infra", "artifacts.keep_workspace"]
LISTS = ["labels", "setup.commands", "setup.capture", "validation.expected_exit_codes",
         "validation.expected_failing_tests", "agent.editable_globs", "agent.readonly_globs",
         "agent.forbidden_commands", "artifacts.redact"]
LITERALS = ["task_spec_version", "environment.network_policy", "validation.results"]
SECTIONS = ["repo", "environment", "setup", "validation", "agent", "artifacts", "oracle"]

# Raw YAML for a value that is wrong for the field's kind (strings need no quoting in YAML).
BAD_FOR_STRING = {"list": "[a, b]", "mapping": "{a: 1}", "date": "2024-01-01",
                  "nul": '"a\\0b"', "surrogate": '"\\ud800"', "long": LONG,
                  "binary": "!!binary AAEC/w==", "set": "!!set {a, b}"}
BAD_FOR_NUMBER = {"word": "ten", "list": "[1]", "mapping": "{a: 1}", "true": "true",
                  "inf": ".inf", "neg-inf": "-.inf", "nan": ".nan", "1e300": "1.0e+300",
                  "1e19": "1e19", "huge-int": "9" * 40, "giant-int": "9" * 5000, "negative": "-5",
                  "zero": "0", "null": "null", "date": "2024-01-01", "hex-huge": "0x" + "f" * 40}
BAD_FOR_BOOL = {"word": "maybe", "number": "5", "list": "[true]", "mapping": "{a: 1}",
                "null": "null", "date": "2024-01-01"}
BAD_FOR_LIST = {"string": "just-a-string", "mapping": "{a: 1}", "nested": "[[a]]",
                "number": "5", "null-items": "[null]", "huge": "[" + ", ".join(["a"] * 2000) + "]",
                "deep": "[" * DEEP + "]" * DEEP, "true": "true"}
BAD_FOR_LITERAL = {"word": "bogus", "number": "7", "list": "[none]", "null": "null",
                   "unicode": "\"\u00e9t\u00e9 \U0001f600\""}
BAD_FOR_SECTION = {"string": "text", "list": "[a]", "number": "3", "deep": "[" * DEEP + "]" * DEEP,
                   "unknown-key": "{bogus_key: 1}", "typo": "{timout_sec: 3}"}

HOSTILE = {
    "repo.url": ["--upload-pack=sh -c 'touch /tmp/pwned';true:x", "ext::sh -c touch% /tmp/x",
                 "fd::3", "evil::x", "ssh://-oProxyCommand=x/y", "-oProxyCommand=x:y",
                 "gopher://example.invalid/r", "/etc", "~/repo", "../../../../etc",
                 "file://remote-host/r", "http://", "https://[bad/r", " https://x/r",
                 "https://x/r\n--upload-pack=x"],
    "oracle.patch": ["/etc/shadow", "../../etc/shadow", "../x.patch", "a/../../b",
                     "~/.ssh/id_rsa", "", " oracle.patch", "a\tb"],
    "environment.workdir": ["/env", "/tmp", "/proc", "/sys/x", "/dev", "/etc/x", "/usr",
                            "/home/runner", "/", "rel", "/a/../b", "/a//b", "/a/", "/a b",
                            "/a:b", "/" + "a" * 300],
    "environment.docker_image": ["--privileged", "-it", "a b", "image\n"],
    "id": ["../evil", "-x", "a/b", "a" * 200, "\u00e9t\u00e9", "", " x"],
    "repo.commit": ["HEAD", "--all", "main", "abc", "g" * 40, "a" * 41],
    "validation.expected_failure_regex": ["(", "[", "(" * 600 + ")" * 600, "a{99999999999}"],
    "agent.forbidden_commands": ["[\"(\"]", "[\"" + "(" * 600 + ")" * 600 + "\"]"],
    "artifacts.redact": ["[\"a b\"]", "[\"$(id)\"]", "[\"\"]"],
    "labels": ["[\"\"]", "[" + LONG + "]"],
    "validation.expected_exit_codes": ["[-1]", "[256]", "[1.5]", "[true]"],
}


def whole_files() -> dict[str, bytes]:
    valid = yaml.safe_dump(VALID, sort_keys=False)
    laughs = "lol0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"lol{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10)
    )
    return {
        "empty": b"",
        "whitespace": b"   \n\n\t\n",
        "comment": b"# nothing here\n",
        "list": b"- task_spec_version: 1\n- id: x\n",
        "scalar": b"just text\n",
        "number": b"42\n",
        "null": b"~\n",
        "bool": b"true\n",
        "two-documents": (valid + "---\n" + valid).encode(),
        "binary": bytes(range(256)) * 4,
        "png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "utf16": valid.encode("utf-16"),
        "latin1": "description: \u00e9t\u00e9\n".encode("latin-1"),
        "raw-nul": valid.encode() + b"x: \x00\n",
        "raw-control": valid.encode() + b"x: \x07\n",
        "tabs": b"task_spec_version: 1\nrepo:\n\turl: x\n",
        "unclosed-quote": b'id: "abc\n',
        "unclosed-bracket": b"labels: [a, b\n",
        "bad-indent": b"repo:\n  url: x\n   commit: abc\n",
        "undefined-alias": b"id: *nothing\n",
        "duplicate-anchor": b"a: &x 1\nb: &x 2\n",
        "unknown-tag": b"id: !custom x\n",
        "python-tag": b"id: !!python/object/apply:os.system [id]\n",
        "python-name": b"id: !!python/name:os.system\n",
        "complex-key": b"? [a, b]\n: c\n",
        "merge-scalar": b"<<: 1\n",
        "huge-file": valid.encode() + b"#" + b"x" * (2 << 20) + b"\n",
        "long-line": valid.encode() + b"description2: " + b"x" * 900_000 + b"\n",
        "deep-flow-list": ("x: " + "[" * DEEP + "]" * DEEP + "\n").encode(),
        "deep-flow-map": ("x: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n").encode(),
        "deep-block-map": "".join(" " * i + f"k{i}:\n" for i in range(100)).encode(),
        "deep-block-list": "".join(" " * i + "-\n" for i in range(100)).encode(),
        "deep-whole": ("[" * DEEP + "]" * DEEP).encode(),
        "billion-laughs": (valid + laughs).encode(),
        "recursive-alias": (valid + "extra: &r [*r]\n").encode(),
        "recursive-map": (valid.replace("labels:\n- one\n", "") + "labels: &r {a: *r}\n").encode(),
        "duplicate-top": (valid + "id: again\n").encode(),
        "duplicate-nested": valid.replace("  commit: abcdef1\n",
                                          "  commit: abcdef1\n  commit: abcdef2\n").encode(),
        "int-key": (valid + "1: x\n").encode(),
        "null-key": (valid + "~: x\n").encode(),
        "nul-key": (valid + '"a\\0b": x\n').encode(),
        "surrogate-key": (valid + '"\\ud800": x\n').encode(),
        "unknown-top": (valid + "bogus: 1\n").encode(),
        "typo-top": valid.replace("validation:", "validaton:").encode(),
        "missing-repo": yaml.safe_dump({k: v for k, v in VALID.items() if k != "repo"}).encode(),
        "missing-all": b"description: x\n",
        "newer-version": valid.replace("task_spec_version: 1", "task_spec_version: 99").encode(),
        "future-harness": (valid + "harness_min_version: '999.0'\n").encode(),
        "suite-mismatch": valid.replace(f"suite: {SUITE}", "suite: other").encode(),
        "bom-utf32": valid.encode("utf-32"),
        "emoji-only": "\U0001f600\U0001f600\n".encode(),
        "rtl-override": "id: \u202eevil\n".encode(),
    }


def set_raw(path: str, raw: str) -> str:
    """The valid task with the value at dotted `path` replaced by raw YAML text."""
    data = yaml.safe_load(yaml.safe_dump(VALID))
    node = data
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    node[last] = "@@RAW@@"
    return yaml.safe_dump(data, sort_keys=False, width=10**9).replace("'@@RAW@@'", raw)


def field_cases() -> Iterator[tuple[str, str, str]]:
    """(case name, task.yaml text, the field its line must name)."""
    groups = ((STRINGS, BAD_FOR_STRING), (NUMBERS, BAD_FOR_NUMBER), (BOOLS, BAD_FOR_BOOL),
              (LISTS, BAD_FOR_LIST), (LITERALS, BAD_FOR_LITERAL), (SECTIONS, BAD_FOR_SECTION))
    for fields, bad in groups:
        for field in fields:
            for kind, raw in bad.items():
                if (field, kind) in ALLOWED:
                    continue
                yield f"{field}={kind}", set_raw(field, raw), field
    for field, values in HOSTILE.items():
        for index, value in enumerate(values):
            raw = value if value.startswith("[") else yaml.safe_dump(value).strip()
            if raw.endswith("\n..."):
                raw = raw[: -len("\n...")]
            yield f"{field}=hostile{index}", set_raw(field, raw), field


# Values that are valid input for the field after all (an optional number may be null).
ALLOWED = {("agent.max_changed_files", "null"), ("agent.max_lines_changed", "null")}


def task_cases() -> dict[str, tuple[bytes, str | None]]:
    cases: dict[str, tuple[bytes, str | None]] = {
        f"file:{name}": (content, None) for name, content in whole_files().items()
    }
    for name, text, field in field_cases():
        cases[f"field:{name}"] = (text.encode("utf-8"), field)
    return cases


TASK_CASES = task_cases()
NAMES = {case: f"c{index:04d}" for index, case in enumerate(sorted(TASK_CASES))}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LoadResult]:
    root = tmp_path_factory.mktemp("fuzz") / "taskpacks"
    for case, (content, _) in TASK_CASES.items():
        path = root / SUITE / NAMES[case] / "task.yaml"
        path.parent.mkdir(parents=True)
        path.write_bytes(content.replace(b"id: ID", f"id: {NAMES[case]}".encode()))
    good = root / SUITE / "zz-good" / "task.yaml"
    good.parent.mkdir()
    good.write_text(yaml.safe_dump({**VALID, "id": "zz-good"}))
    (good.parent / "oracle.patch").write_text("")  # a file task.yaml names must be there
    return root, discover(root, None)


def test_the_valid_task_loads_beside_all_the_malformed_ones(
    sweep: tuple[Path, LoadResult],
) -> None:
    _, result = sweep
    assert [task.id for task in result.tasks] == ["zz-good"]


@pytest.mark.parametrize("case", sorted(TASK_CASES))
def test_malformed_task_file_gives_clear_lines(sweep: tuple[Path, LoadResult], case: str) -> None:
    root, result = sweep
    path = root / SUITE / NAMES[case] / "task.yaml"
    lines = [str(p) for p in result.problems if p.path == path]
    assert lines, f"{case}: loaded without a problem"
    assert len(lines) <= MAX_PROBLEMS
    for line in lines:
        assert line.startswith(f"{path}: "), line
        assert "\n" not in line and "\r" not in line, line
        assert "Traceback" not in line and "Error(" not in line, line
        assert len(line) <= MAX_LINE, line
    field = TASK_CASES[case][1]
    if field is not None:
        named = [line for line in lines if f": {field}" in line or ": line " in line]
        assert named, (field, lines)


# --------------------------------------------------------------------------- variant files


def variant_cases() -> dict[str, bytes]:
    valid = "name: v1\nagent: oracle\nparams: {a: 1}\nmodel: {name: m}\nbudgets: {max_steps: 3}\n"
    cases = {
        "empty": b"",
        "list": b"- agent: oracle\n",
        "scalar": b"oracle\n",
        "number": b"3\n",
        "binary": bytes(range(256)),
        "utf16": valid.encode("utf-16"),
        "raw-nul": b"agent: oracle\x00\n",
        "deep": f"agent: oracle\nparams: {'[' * DEEP}{']' * DEEP}\n".encode(),
        "deep-map": ("agent: oracle\nparams: " + "{a: " * DEEP + "1" + "}" * DEEP).encode(),
        "laughs": ("agent: oracle\nparams:\n  l0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"  l{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10)
        )).encode(),
        "recursive": b"agent: oracle\nparams: &p {self: *p}\n",
        "duplicate": b"agent: oracle\nagent: nop\n",
        "unknown-key": (valid + "bogus: 1\n").encode(),
        "int-key-top": (valid + "1: 2\n").encode(),
        "no-agent": b"name: v\n",
        "agent-list": b"agent: [oracle]\n",
        "agent-empty": b"agent: ''\n",
        "agent-nul": b'agent: "or\\0acle"\n',
        "name-list": b"agent: oracle\nname: [a]\n",
        "name-slash": b"agent: oracle\nname: ../../x\n",
        "name-long": ("agent: oracle\nname: " + "n" * 500 + "\n").encode(),
        "description-map": b"agent: oracle\ndescription: {a: 1}\n",
        "params-list": b"agent: oracle\nparams: [1]\n",
        "model-string": b"agent: oracle\nmodel: gpt\n",
        "budgets-number": b"agent: oracle\nbudgets: 5\n",
        "params-int-key": b"agent: oracle\nparams: {1: a}\n",
        "params-date": b"agent: oracle\nparams: {d: 2024-01-01}\n",
        "params-binary": b"agent: oracle\nparams: {b: !!binary AAEC}\n",
        "params-set": b"agent: oracle\nparams: {s: !!set {a}}\n",
        "params-nan": b"agent: oracle\nparams: {n: .nan}\n",
        "budgets-inf": b"agent: oracle\nbudgets: {max_cost_usd: .inf}\n",
        "params-surrogate": b'agent: oracle\nparams: {s: "\\ud800"}\n',
        "giant-int": ("agent: oracle\nparams: {n: " + "9" * 5000 + "}\n").encode(),
        "python-tag": b"agent: !!python/object/apply:os.system [id]\n",
        "unclosed": b"agent: [oracle\n",
        "tabs": b"agent: oracle\nparams:\n\ta: 1\n",
        "huge-file": b"agent: oracle\n#" + b"x" * (2 << 20) + b"\n",
        "two-docs": (valid + "---\n" + valid).encode(),
    }
    return cases


VARIANT_CASES = variant_cases()


@pytest.mark.parametrize("case", sorted(VARIANT_CASES))
def test_malformed_variant_file_gives_one_clear_line(tmp_path: Path, case: str) -> None:
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(VARIANT_CASES[case])
    with pytest.raises(VariantError) as info:
        load_variant(str(path))
    line = str(info.value)
    assert line.startswith(f"variant file {path}: "), line
    assert "\n" not in line and "Traceback" not in line, line
    assert len(line) <= MAX_LINE, line


def test_variant_directory_and_fifo_are_refused(tmp_path: Path) -> None:
    import os

    (tmp_path / "dir.yaml").mkdir()
    os.mkfifo(tmp_path / "fifo.yaml")
    for name in ("dir.yaml", "fifo.yaml"):
        with pytest.raises(VariantError, match=r"not a regular file"):
            load_variant(str(tmp_path / name))


SWEEP_SIZE = len(TASK_CASES) + len(VARIANT_CASES)
