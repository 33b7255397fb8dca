"""`agentbench harvest`: a repository's first-parent history becomes a validated taskpack.

Walk (git on the harness's mirror) -> cheap filters -> candidates -> in parallel, each in the
sandbox: environment (one setup per setup key), tests before and after the fix (FAIL_TO_PASS,
PASS_TO_PASS, flaky tests dropped), the task written, the oracle+nop gate -> the funnel report.
Every decision is appended to the harvest's state as it is made, so Ctrl-C loses at most the
candidates in flight, and the same command resumes.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentbench.harvest import history, report, statement, taskfiles
from pytest_agentbench.harvest.candidates import CommitCandidate, Dropped, examine, task_id
from pytest_agentbench.harvest.classify import ChangeLimits
from pytest_agentbench.harvest.gate import Gate
from pytest_agentbench.harvest.runs import Bench, run_candidate
from pytest_agentbench.harvest.state import HarvestState, Outcome
from pytest_agentbench.harvest.verdict import judge
from pytest_agentbench.repos.gitcmd import redact, run_git

HARVEST_DIR = ".harvest"
HEAD_REF = "refs/agentbench/harvest/HEAD"


@dataclass(frozen=True)
class Options:
    source: str
    suite: str
    out: Path  # the taskpacks directory written into
    rev_range: str = "HEAD"
    max_commits: int | None = None
    setup: tuple[str, ...] = ()
    workers: int = 2
    statement: str = "commit"  # commit | tests
    limits: ChangeLimits = field(default_factory=ChangeLimits)
    fresh: bool = False
    redo: frozenset[str] = frozenset()  # decide again the commits dropped for these reasons

    def decisive(self) -> dict[str, Any]:
        """What changes decisions: a resume must have the same."""
        return {"source": redact(self.source), "range": self.rev_range, "setup": self.setup,
                "statement": self.statement, "limits": vars(self.limits)}


def run_harvest(options: Options, bench: Bench, gate: Gate,
                say: Callable[[str], None] = print) -> dict[str, Any]:
    started = time.monotonic()
    state = HarvestState(options.out / HARVEST_DIR / options.suite)
    problem = state.open(options.decisive(), options.fresh, options.redo)
    if problem is not None:
        raise HarvestError(problem)
    mirror = bench.mirrors.mirror_for(bench.url)
    # the source's HEAD under a ref of ours (a bundle or a clone may name no branch at all)
    run_git(["--git-dir", str(mirror), "fetch", "-q", "--no-write-fetch-head", "--", bench.url,
             f"+HEAD:{HEAD_REF}"], timeout=600)
    rev_range = source_range(options.rev_range)
    shared = options.out / "_shared"
    shared.mkdir(parents=True, exist_ok=True)
    bundle = shared / f"{options.suite}.bundle"
    run_git(["--git-dir", str(mirror), "bundle", "create", str(bundle), "--all"],
            timeout=600)
    commits = history.first_parent_commits(mirror, rev_range, options.max_commits)
    say(f"harvest: {len(commits)} first-parent commits in {options.rev_range}, "
        f"{len(state.decided)} decided before")
    prefix = re.sub(r"[^A-Za-z0-9._-]+", "-", options.suite).strip("-.") or "task"
    seen: set[str] = set()
    todo: list[CommitCandidate] = []
    for commit in commits:
        t0 = time.monotonic()
        found = examine(mirror, commit, options.limits, options.setup, seen)
        if commit.sha in state.decided:
            continue
        if isinstance(found, Dropped):
            state.record(Outcome(commit.sha, found.reason, "filter", detail=found.detail,
                                 stage_seconds={"filter": time.monotonic() - t0}))
        else:
            todo.append(found)
    say(f"harvest: {len(todo)} candidates to run with {options.workers} workers")
    suite_dir = options.out / options.suite
    suite_dir.mkdir(parents=True, exist_ok=True)
    work = _Work(options, bench, gate, prefix, f"../../_shared/{bundle.name}", suite_dir)
    _run_all(work, todo, state, say)
    wall = time.monotonic() - started
    ordered = [state.decided[c.sha] for c in commits if c.sha in state.decided]
    candidates = sum(1 for o in ordered if o.stage != "filter")
    meta = {"source": redact(options.source), "suite": options.suite,
            "range": options.rev_range, "wall_sec": round(wall, 1),
            "candidates_per_minute": round(len(todo) / (wall / 60), 2) if todo else 0.0,
            "workers": options.workers, "limits": vars(options.limits)}
    built = report.build(ordered, meta)
    built["candidates"] = candidates
    json_path, md_path = report.write(built, suite_dir)
    say(f"harvest: {built['validated']} validated tasks in {suite_dir} "
        f"({built['setups_run']} setups run); report {md_path}")
    return built


def source_range(rev_range: str) -> str:
    """`rev_range` with the source's HEAD for HEAD (`HEAD~10..HEAD`; `v1.0..` and `..v2.0`: an
    empty side is HEAD, as git has it): the mirror's own HEAD need not be the source's."""
    parts = re.split(r"(\.{2,3})", rev_range)
    for i, part in enumerate(parts):
        if part in ("", "HEAD") or re.match(r"HEAD[~^@]", part):
            if len(parts) == 1 and part == "":
                continue
            parts[i] = HEAD_REF + part[4:]
    return "".join(parts)


class HarvestError(Exception):
    """A problem that stops the harvest before it starts (one line for the user)."""


@dataclass(frozen=True)
class _Work:
    options: Options
    bench: Bench
    gate: Gate
    prefix: str
    repo_url: str
    suite_dir: Path


def _run_all(work: _Work, todo: list[CommitCandidate], state: HarvestState,
             say: Callable[[str], None]) -> None:
    done = 0
    with ThreadPoolExecutor(max_workers=max(1, work.options.workers)) as pool:
        futures: dict[Future[Outcome], CommitCandidate] = {
            pool.submit(_one, work, c): c for c in todo}
        try:
            for future in as_completed(futures):
                try:
                    outcome = future.result()
                except Exception as exc:  # a harness bug in one candidate: recorded, walk goes on
                    commit = futures[future].commit
                    outcome = Outcome(commit.sha, "HARNESS_ERROR", "setup",
                                      detail=f"{type(exc).__name__}: {exc}"[:300])
                state.record(outcome)
                done += 1
                say(f"[{done}/{len(todo)}] {outcome.task_id or outcome.sha[:10]} "
                    f"{outcome.reason} ({outcome.seconds:.1f} s)"
                    + (f": {outcome.detail[:120]}" if outcome.reason != "VALIDATED" else ""))
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            say("harvest: interrupted; what was decided is kept, the same command resumes")
            raise


def _one(work: _Work, candidate: CommitCandidate) -> Outcome:
    t0 = time.monotonic()
    commit = candidate.commit
    name = task_id(work.prefix, commit)
    runs = run_candidate(work.bench, name, candidate.parent, candidate.plan,
                         list(candidate.modules), candidate.tests_patch, candidate.fix_patch)
    t1 = time.monotonic()
    verdict = judge(runs)
    stage = "setup" if runs.reason is not None else "tests"
    times = {"setup": t1 - t0} if stage == "setup" else {"tests": t1 - t0}
    detail = runs.detail or ("flaky: " + ", ".join(verdict.flaky) if verdict.flaky else "")
    outcome = Outcome(commit.sha, verdict.reason or "", stage, task_id=name, kind=verdict.kind,
                      setup_ran=runs.setup_ran, detail=detail[:300], stage_seconds=times)
    if verdict.reason is None:
        description = (statement.from_tests(verdict.fail_to_pass)
                       if work.options.statement == "tests" else
                       statement.from_commit(commit.subject, commit.body,
                                             candidate.fix_patch.decode("utf-8", "replace")))
        task = taskfiles.HarvestedTask(
            task_id=name, suite=work.options.suite, repo_url=work.repo_url,
            parent=candidate.parent, commit=commit.sha, date=commit.date,
            source=redact(work.options.source), description=description,
            statement_source=work.options.statement, plan=candidate.plan, verdict=verdict,
            fix_patch=candidate.fix_patch, tests_patch=candidate.tests_patch)
        if taskfiles.commands(task) is None:
            outcome.reason = "TOO_MANY_TESTS"
        else:
            outcome.reason, outcome.detail = _gated(work, task)
            outcome.stage = "done" if outcome.reason == "VALIDATED" else "gate"
            outcome.stage_seconds["gate"] = time.monotonic() - t1
    outcome.seconds = time.monotonic() - t0
    return outcome


def _gated(work: _Work, task: taskfiles.HarvestedTask) -> tuple[str, str]:
    task_dir = taskfiles.write(task, work.suite_dir)
    try:
        reason, detail = work.gate.check(task_dir)
    except Exception as exc:  # a harness bug in one task must not stop the harvest
        reason, detail = "GATE_ORACLE_FAILED", f"{type(exc).__name__}: {exc}"[:300]
        print(f"harvest: {task.task_id}: {detail}", file=sys.stderr)
    if reason is None:
        return "VALIDATED", detail
    rejected = work.suite_dir.parent / HARVEST_DIR / work.options.suite / "rejected"
    rejected.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(rejected / task.task_id, ignore_errors=True)
    task_dir.rename(rejected / task.task_id)
    return reason, detail
