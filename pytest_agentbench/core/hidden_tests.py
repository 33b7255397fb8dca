"""Hidden tests (`validation.hidden_tests`, SWE-bench's rule): a patch of test files the agent
never sees, applied for the baseline and at scoring, where it wins over the agent's edits.

- Baseline: the failing command runs in a sandbox of its own on a throwaway copy of the
  post-setup workspace with the hidden tests applied (`baseline_sandbox`). The copy, its sandbox
  (its /tmp, HOME and processes) and the results file go before the agent's sandbox is used, so
  nothing the hidden tests are or leave (the patch, `__pycache__`, `.pytest_cache`, junit XML,
  files the tests write) reaches the agent's workspace, its .git or anything it can read. The
  agent's workspace comes from the checkout, which holds only the task commit's history: the
  commit that added the tests is not in it.
- Scoring (and every regrade): the agent's diff without its file sections for the paths the
  hidden patch touches (`discard_agent_edits`; the harness's diffs are made with --no-renames,
  so a section is one path) is applied to the pre-agent copy, then the hidden patch. That equals
  applying the whole diff, resetting those paths to their pre-agent state and applying the hidden
  patch. The record lists the paths whose edits were discarded (`result.hidden_tests_overrode`).
- The agent is told nothing of them but the task's own words: its first observation is a note,
  not the baseline's output (pytest prints test source in tracebacks), and the hidden paths are
  not read-only for it (an edit there is discarded, never refused).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pytest_agentbench.core.attempt import Attempt, Failure
from pytest_agentbench.core.attempt_config import sandbox_spec
from pytest_agentbench.core.gitops import apply_command
from pytest_agentbench.paths.trees import remove_tree
from pytest_agentbench.sandbox.port import Sandbox, SandboxError
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.hidden_tests import (
    HiddenTests,
    HiddenTestsError,
    read_hidden_tests,
    split_sections,
)
from pytest_agentbench.tasks.taskpack_files import UnsafeFileError

HIDDEN_PATCH = ".git/agentbench-hidden.patch"  # in a scoring or baseline copy, never the agent's
BASELINE_COPY = "baseline-hidden"
FAILING_OUTPUT_NOTE = (
    "The tests that check this task are hidden: they are not in the workspace and run only "
    "when the result is scored."
)


def load(at: Attempt) -> HiddenTests | None:
    """The task's hidden tests, None when it has none; a file that cannot be used is the task's
    failure (SETUP_FAILED), whatever phase reads it."""
    name = at.spec.validation.hidden_tests
    if name is None:
        return None
    try:
        return read_hidden_tests(at.task.task_dir, name)
    except (FileNotFoundError, UnsafeFileError, HiddenTestsError, OSError) as exc:
        detail = "no such file" if isinstance(exc, FileNotFoundError) else str(exc)
        raise Failure(Reason.SETUP_FAILED, f"validation.hidden_tests {name!r}: {detail}",
                      "HIDDEN_TESTS_UNUSABLE") from None


def place(hidden: HiddenTests, at: Attempt, repo_dir: str) -> None:
    """Write the hidden patch where `apply` finds it, in a workspace copy the agent never has
    (the pre-agent copy, a regrade's or the baseline's), before a sandbox opens on it."""
    (at.workspace / repo_dir / HIDDEN_PATCH).write_text(hidden.text, "utf-8")


def apply(at: Attempt, sandbox: Sandbox, reason: Reason, when: str) -> None:
    """Apply the placed hidden patch in `sandbox`; failing that, `reason` ends the attempt."""
    applied = sandbox.exec(apply_command(HIDDEN_PATCH),
                           timeout_sec=at.spec.environment.tool_timeout_sec)
    if not applied.ok:
        raise Failure(
            reason,
            f"the hidden tests ({at.spec.validation.hidden_tests}) do not apply {when}: "
            f"{applied.stderr.strip()[-200:]}",
            "HIDDEN_TESTS_NOT_APPLICABLE",
        )


def discard_agent_edits(patch: str, hidden: HiddenTests) -> tuple[str, list[str]]:
    """(the agent's diff without its sections for the hidden paths, the paths dropped)."""
    preamble, sections = split_sections(patch)
    hidden_paths = set(hidden.paths)
    kept, dropped = [], []
    for section in sections:
        overlap = [path for path in section.paths if path in hidden_paths]
        if overlap:
            dropped += overlap
        else:
            kept.append(section.text)
    return preamble + "".join(kept), list(dict.fromkeys(dropped))


@contextlib.contextmanager
def baseline_sandbox(at: Attempt, hidden: HiddenTests) -> Iterator[Sandbox]:
    """A sandbox on a throwaway copy of the post-setup workspace with the hidden tests applied;
    on exit the sandbox is closed and the copy removed (the caller must not leave anything
    of the run in it: the results file is read and removed inside)."""
    base = at.cache_hold.repo if at.cache_hold is not None else at.workspace / "repo"
    at.provision_from(BASELINE_COPY, base)
    sandbox: Sandbox | None = None
    try:
        place(hidden, at, BASELINE_COPY)
        spec = at.spec
        sandbox = at.sandboxes.open(sandbox_spec(
            at.cfg, spec, at.workspace, network=spec.environment.network_policy == "always",
            phase="baseline", env_dir=at.env_dir, repo_dir=BASELINE_COPY,
        ))
        at.open_sandboxes.append(sandbox)  # closed at teardown too, should this one raise
        at.environment.setdefault("sandboxes", []).append(
            {"phase": BASELINE_COPY, "network": sandbox.spec.network, "facts": sandbox.facts()}
        )
        apply(at, sandbox, Reason.SETUP_FAILED, "to the task's commit")
        yield sandbox
    finally:
        if sandbox is not None:
            with contextlib.suppress(SandboxError):
                sandbox.close()
        try:
            at.sandboxes.release(at.workspace / BASELINE_COPY)
        finally:
            remove_tree(at.workspace / BASELINE_COPY)


def forget_results(sandbox: Sandbox, path: str) -> None:
    """Remove a results file (on the local sandbox /tmp is the host's, shared with the agent)."""
    if path:
        with contextlib.suppress(SandboxError):
            sandbox.exec(f"rm -f {path}", timeout_sec=30)
