"""Test results as evidence for scoring, read from pytest's junit XML rather than from its output.

The exit code alone can be forged by code the tests import (`os._exit(0)` at import, an `atexit`
hook that exits 0 after pytest reported failures). pytest writes the junit file from its own
session-finish hook, so a run cut short by such code leaves no file, and a run whose exit status
was rewritten afterwards leaves a file that contradicts it. The harness asks for the file through
`PYTEST_ADDOPTS` (so any pytest invocation writes it, whatever the task's command line) at a
random path in the scoring sandbox's /tmp, and reads it after the test process and everything it
started have been killed: the Docker sandbox's wrapper reads it back at the end of the same exec
(sandbox/docker/policy.py COLLECT, a symlink counting as no file), else a command of its own.

What it cannot stop: code under test that knows the harness and rewrites the file from inside the
pytest process before exiting 0. The protected test infrastructure (core/protection.py) and the
expected-tests check make that harder to do by accident or in passing, not impossible.
"""

from __future__ import annotations

import re
import secrets
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from pytest_agentbench.sandbox.port import Sandbox

MAX_RESULTS_BYTES = 64 * 1024 * 1024
_PYTEST = re.compile(r"(?<![\w.-])py\.?test(?![\w-])")


@dataclass(frozen=True)
class JunitResults:
    """Counts and per-test outcomes from one junit file. Outcome per junit id: passed, failed,
    error, skipped. A test that passed and then errored in teardown counts as an error."""

    __test__ = False  # not a pytest test class, whatever its name

    tests: int
    failed: int
    errors: int
    skipped: int
    passed: int
    outcomes: dict[str, str] = field(default_factory=dict)

    def outcome_of(self, node_id: str) -> str | None:
        """The outcome of a pytest node id (`tests/test_x.py::TestA::test_b[p]`), or None if the
        run did not report it. pytest prints node ids relative to the current directory but
        names junit test cases relative to its rootdir, so where the exact name is missing, a
        test case whose dotted name ends with the node id's (or the other way round) counts, if
        only one does."""
        wanted = junit_id(node_id)
        if wanted in self.outcomes:
            return self.outcomes[wanted]
        near = [name for name in self.outcomes
                if name.endswith("." + wanted) or wanted.endswith("." + name)]
        return self.outcomes[near[0]] if len(near) == 1 else None

    def failing(self) -> tuple[str, ...]:
        """junit names of the tests that failed or errored."""
        return tuple(sorted(n for n, o in self.outcomes.items() if o in ("failed", "error")))


class EvidenceError(Exception):
    """The results file exists but cannot be read as junit XML."""


def runs_pytest(command: str) -> bool:
    return bool(_PYTEST.search(command))


def results_path() -> str:
    return f"/tmp/agentbench-results-{secrets.token_hex(12)}.xml"


def results_env(path: str) -> dict[str, str]:
    """Environment for the scored command: pytest writes its junit XML to `path`."""
    return {"PYTEST_ADDOPTS": f"--junitxml={path} -o junit_family=xunit2"}


def junit_id(node_id: str) -> str:
    """A node id as junit `classname.name`, the way pytest maps it (mangle_test_address)."""
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names)


def collect(sandbox: Sandbox, path: str, timeout_sec: float = 60) -> JunitResults | None:
    """The results the scored command left at `path`, or None if it left none."""
    result = sandbox.exec(
        f"test -f {path} && cat {path}", timeout_sec=timeout_sec, full_output=True
    )
    if not result.ok:
        return None
    text = result.full_stdout if result.full_stdout is not None else result.stdout
    return parse(text)


def from_bytes(data: bytes | None) -> JunitResults | None:
    """The results from a file's bytes as the sandbox read them back (None: no file), decoded
    as `collect` decodes a command's output."""
    if data is None:
        return None
    if len(data) > MAX_RESULTS_BYTES:
        raise EvidenceError(f"results file larger than {MAX_RESULTS_BYTES} bytes")
    return parse(data.decode("utf-8", errors="replace"))


def parse(text: str) -> JunitResults:
    if len(text) > MAX_RESULTS_BYTES:
        raise EvidenceError(f"results file larger than {MAX_RESULTS_BYTES} bytes")
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise EvidenceError("results file declares a DTD or entities")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise EvidenceError(f"results file is not XML: {exc}") from exc
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if root.tag not in ("testsuite", "testsuites"):
        raise EvidenceError(f"results file root is <{root.tag}>, not <testsuites>")
    outcomes: dict[str, str] = {}
    counts = {"failed": 0, "errors": 0, "skipped": 0, "passed": 0, "tests": 0}
    for suite in suites:
        for case in suite.iter("testcase"):
            outcome = _case_outcome(case)
            counts["tests"] += 1
            counts[{"error": "errors"}.get(outcome, outcome)] += 1
            name = f"{case.get('classname', '')}.{case.get('name', '')}".lstrip(".")
            if outcomes.get(name) not in ("failed", "error"):  # worst outcome wins
                outcomes[name] = outcome
    return JunitResults(outcomes=outcomes, **counts)


def _case_outcome(case: ET.Element) -> str:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "error"
    if "failure" in tags:
        return "failed"
    if "skipped" in tags:
        return "skipped"
    return "passed"
