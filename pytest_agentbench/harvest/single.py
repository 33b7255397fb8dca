"""`agentbench task new`: one change of the user's repository becomes one validated task, through
the harvest's own stages (candidates.build, runs.run_candidate, verdict.judge, statement,
taskfiles, gate.Gate), past the filters a harvest walks its history with: the user chose the
change. The change is a fix commit against its first parent, or `--bug A --fix B`.

A change without a test part (the fix touches only source, the tests that catch the bug were
already there) is a task too: its tests are `--tests` or every test module of the repository.
The repository is named portably: `../../..`-style, the git repository that holds the taskpacks
(paths/own_repo.py), or a git bundle `_shared/<suite>.bundle` in the taskpacks that keeps one
ref pair per task (`refs/agentbench/tasks/<id>/{bug,fix}`), so tasks of one suite share it.

Nothing is written unless the task validates: the files go to a staging directory beside the
taskpacks directory (so relative paths resolve the same), the oracle+nop gate runs there, and
only then are the bundle and the task folder renamed into place.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench.harvest import history, statement, taskfiles
from pytest_agentbench.harvest.candidates import build, modules_beside, task_id
from pytest_agentbench.harvest.classify import Split, is_test_path, split
from pytest_agentbench.harvest.gate import Gate
from pytest_agentbench.harvest.runs import Bench, Runs, run_candidate
from pytest_agentbench.harvest.task_yaml import documented
from pytest_agentbench.harvest.verdict import CandidateVerdict, judge
from pytest_agentbench.paths.own_repo import containing_repository
from pytest_agentbench.repos.gitcmd import GitFailed, run_git

GIT_TIMEOUT_SEC = 600.0
_TEST_MODULE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")


class TaskNewError(Exception):
    """Why no task was written (one line for the user); `code` 2 for a bad option, else 1."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Request:
    repo: Path  # the top of the user's work tree
    fix: str  # revisions as the user wrote them
    bug: str | None
    suite: str
    out: Path  # the taskpacks directory
    task_id: str | None = None
    setup: tuple[str, ...] = ()
    statement: str = "commit"  # commit | tests | the description itself
    tests: tuple[str, ...] = ()  # test modules to run; default: the change's, else all
    repo_ref: str = "auto"  # auto | path | bundle
    force: bool = False


def make_task(request: Request, bench: Bench, gate: Gate,
              say: Callable[[str], None] = print) -> Path:
    """Make, validate and write the task; returns its folder. Raises TaskNewError."""
    fix = _rev(request.repo, request.fix, "--fix" if request.bug else "COMMIT")
    bug = _rev(request.repo, request.bug, "--bug") if request.bug else None
    mirror, _ = bench.mirrors.ensure_commit(bench.url, fix)
    if bug:
        bench.mirrors.ensure_commit(bench.url, bug)
    [commit] = history.first_parent_commits(mirror, fix, 1)
    parent = bug or (commit.parents[0] if commit.parents else None)
    if parent is None:
        raise TaskNewError(f"{fix[:10]} is the first commit: give the buggy one with --bug")
    name = request.task_id or task_id(_prefix(request.suite), commit)
    final = request.out / request.suite / name
    if final.exists() and not request.force:
        raise TaskNewError(f"{final} exists (pass --force to replace it, or --id another name)")
    mode, url = reference(request, final)
    parts = split(history.changes(mirror, parent, fix))
    if not parts.source:
        raise TaskNewError(f"{parent[:10]}..{fix[:10]} changes no source file (only tests, "
                           "docs, CI or packaging): there is nothing for an agent to fix")
    modules = _modules(request, mirror, fix, parts)
    candidate = build(mirror, commit, parent, parts, modules, request.setup)
    fix_text = candidate.fix_patch.decode("utf-8", "replace")
    leaked = (statement.leaked_code(request.statement, fix_text)
              if request.statement not in ("commit", "tests") else None)
    if leaked is not None:
        raise TaskNewError(f"--statement repeats the fix's code ({leaked[:60]!r}): describe the "
                           "symptom, not the fix", 2)
    say(f"task new: {name}: tests before and after the fix in the sandbox "
        f"({', '.join(modules[:3])}{' ...' if len(modules) > 3 else ''}; "
        f"setup: {candidate.plan.source})")
    runs = run_candidate(bench, name, parent, candidate.plan, list(modules),
                         candidate.tests_patch, candidate.fix_patch)
    verdict = judge(runs)
    if verdict.reason is not None:
        raise TaskNewError(_explain(verdict, runs, modules))
    task = taskfiles.HarvestedTask(
        task_id=name, suite=request.suite, repo_url=url, parent=parent, commit=fix,
        date=commit.date, source=url, description=_description(request, commit, verdict,
                                                                fix_text),
        statement_source=request.statement if request.statement in ("commit", "tests")
        else "given", plan=candidate.plan, verdict=verdict, fix_patch=candidate.fix_patch,
        tests_patch=candidate.tests_patch, labels=("task-new",))
    if taskfiles.commands(task) is None:
        raise TaskNewError(f"{len(verdict.pass_to_pass)} passing tests make the test command "
                           "too long: name fewer test modules with --tests")
    say(f"task new: {len(verdict.fail_to_pass)} tests fail before the fix and pass after it, "
        f"{len(verdict.pass_to_pass)} pass in both; validating (oracle and nop)")
    _write_validated(request, bench, gate, task, mode, final, mirror)
    if mode == "path":
        _note_unshared(request.repo, fix, say)
    return final


def reference(request: Request, final: Path) -> tuple[str, str]:
    """("path", `../../..`) when the taskpacks directory lies inside the repository (below its
    top) and `--repo-ref` allows it; else ("bundle", `../../_shared/<suite>.bundle`)."""
    top = containing_repository(request.out.parent)
    inside = top is not None and top == Path(os.path.realpath(request.repo))
    if request.repo_ref == "path" and not inside:
        raise TaskNewError(f"--repo-ref path: the taskpacks directory {request.out} is not "
                           f"inside the repository {request.repo} (below its top directory)")
    if request.repo_ref == "bundle" or not inside:
        return "bundle", f"../../_shared/{request.suite}.bundle"
    where = Path(os.path.realpath(request.out)) / final.parent.name / final.name
    return "path", os.path.relpath(os.path.realpath(request.repo), where)


def _write_validated(request: Request, bench: Bench, gate: Gate, task: taskfiles.HarvestedTask,
                     mode: str, final: Path, mirror: Path) -> None:
    staging = request.out.parent / f".agentbench-task-new-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        task_dir = staging / request.suite / task.task_id
        task_dir.mkdir(parents=True)
        bundle = staging / "_shared" / f"{request.suite}.bundle"
        if mode == "bundle":
            bundle.parent.mkdir()
            _write_bundle(mirror, request.out / "_shared" / bundle.name, bundle, task,
                          bench.work_root)
        spec = taskfiles.spec(task)
        spec["oracle"] = {"patch": taskfiles.ORACLE}
        taskfiles.write_files(task, task_dir, documented(spec))
        reason, detail = gate.check(task_dir)
        if reason is not None:
            raise TaskNewError(f"nothing written: the task did not validate ({reason}): {detail}")
        final.parent.mkdir(parents=True, exist_ok=True)
        if mode == "bundle":
            (request.out / "_shared").mkdir(exist_ok=True)
            os.replace(bundle, request.out / "_shared" / bundle.name)
        if final.exists():  # --force
            shutil.rmtree(final)
        task_dir.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_bundle(mirror: Path, existing: Path, target: Path, task: taskfiles.HarvestedTask,
                  scratch: Path) -> None:
    """The suite's bundle: the refs it had (other tasks') plus this task's bug and fix."""
    work = scratch / f"bundle-{uuid.uuid4().hex[:6]}.git"
    git = ["--git-dir", str(work)]
    run_git(["init", "-q", "--bare", "--", str(work)], timeout=GIT_TIMEOUT_SEC)
    try:
        if existing.is_file():
            run_git([*git, "fetch", "-q", "--no-write-fetch-head", "--", str(existing),
                     "+refs/*:refs/*"], timeout=GIT_TIMEOUT_SEC)
        ref = f"refs/agentbench/tasks/{task.task_id}"
        run_git([*git, "fetch", "-q", "--no-write-fetch-head", "--", str(mirror),
                 f"+{task.parent}:{ref}/bug", f"+{task.commit}:{ref}/fix"],
                timeout=GIT_TIMEOUT_SEC)
        run_git([*git, "bundle", "create", "-q", str(target), "--all"], timeout=GIT_TIMEOUT_SEC)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _rev(repo: Path, rev: str, option: str) -> str:
    if rev.startswith("-"):
        raise TaskNewError(f"{option} {rev!r}: not a commit", 2)
    try:
        return run_git(["-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                        f"{rev}^{{commit}}"], timeout=60).strip()
    except GitFailed:
        raise TaskNewError(f"{option} {rev!r}: no such commit in {repo}", 2) from None


def _modules(request: Request, mirror: Path, fix: str, parts: Split) -> tuple[str, ...]:
    files = history.files_at(mirror, fix)
    if request.tests:
        missing = [t for t in request.tests if t not in files]
        if missing:
            raise TaskNewError(f"--tests {missing[0]}: no such file at {fix[:10]} (give test "
                               "module paths relative to the repository's top)")
        return tuple(request.tests)
    found = parts.test_files or (modules_beside(parts, files) if parts.tests else [
        f for f in files if _TEST_MODULE.search(f) and is_test_path(f)])
    if not found:
        raise TaskNewError(f"no Python test module (test_*.py, *_test.py) at {fix[:10]}: "
                           "name the tests with --tests")
    return tuple(found)


def _description(request: Request, commit: history.Commit, verdict: CandidateVerdict,
                 fix: str) -> str:
    if request.statement == "commit":
        return statement.from_commit(commit.subject, commit.body, fix)
    if request.statement == "tests":
        return statement.from_tests(verdict.fail_to_pass)
    return request.statement.strip()


def _explain(verdict: CandidateVerdict, runs: Runs, modules: tuple[str, ...]) -> str:
    shown = ", ".join(modules[:3]) + (" ..." if len(modules) > 3 else "")
    reason = verdict.reason
    if reason == "NO_FAIL_TO_PASS":
        return (f"no test fails before the fix and passes after it ({shown}); name the tests "
                "that catch the bug with --tests")
    if reason == "FLAKY_TESTS":
        return f"the tests that change outcome are flaky: {', '.join(verdict.flaky[:5])}"
    if reason == "TESTS_NOT_RUN":
        return f"no test result after the fix from {shown}"
    if reason == "SETUP_FAILED":
        return f"the setup failed ({runs.detail}); give the commands with --setup"
    return f"{reason}: {runs.detail}"


def _prefix(suite: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", suite).strip("-.") or "task"


def _note_unshared(repo: Path, fix: str, say: Callable[[str], None]) -> None:
    """A task that names the repository by path needs its commits in the other clones."""
    try:
        refs = run_git(["-C", str(repo), "for-each-ref", "--count=1", "--contains", fix,
                        "refs/heads", "refs/tags", "refs/remotes"], timeout=60)
    except GitFailed:
        return
    if not refs.strip():
        say(f"task new: note: {fix[:10]} is on no branch or tag; another clone will not have "
            "it (commit it to a branch, or use --repo-ref bundle)")
