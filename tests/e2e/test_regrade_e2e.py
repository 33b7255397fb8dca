"""--agentbench-regrade end to end on the bundled custom-verifier suite (issue 14, point 3).

`flaky-verifier`'s passing tests, once fixed, assert on the iteration order of a set of strings:
they pass under PYTHONHASHSEED=0 (the grading's) and fail under 1, 2 and 3 (the regrades').
`stable-verifier` is the same bug with a passing test that sorts. With the oracle agent:

- in Docker, `--agentbench-regrade 3` ends flaky-verifier VERIFIER_FLAKY (category flaky, out of
  the pass rate) and passes stable-verifier with its 3 regrade runs recorded; the same run
  without the option passes both and records no regrade;
- an attempt whose pre-agent copy is a view of an environment-cache entry regrades from that
  entry (in Docker through the plugin, and on the local sandbox through the pipeline itself);
- on the local sandbox, a failing grading that the regrades confirm keeps its reason, and
  regrade 0 runs nothing.

The Docker tests skip without a daemon (fail under CI=true); the local ones need none.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentbench.reporting.load import load_run
from tests.support.attempts import attempt_config
from tests.support.plugin_runs import (
    TASKPACKS,
    PytestRun,
    containers_of,
    run_env,
    run_pytest,
)

SUITE = "custom-verifier"
FLAKY, STABLE = "flaky-verifier", "stable-verifier"
REGRADES = 3


def run_suite(root: Path, *extra: str, taskpacks: Path = TASKPACKS) -> PytestRun:
    out = root / "runs"
    args = ["-p", "no:cacheprovider", "--agentbench-suite", SUITE,
            f"--agentbench-taskpacks={taskpacks}", f"--agentbench-out={out}",
            "--agentbench-variant=oracle", *extra]
    return run_pytest(args, cwd=root, env=run_env(root / "home"), out=out)


# --------------------------------------------------------------------------- Docker


@pytest.fixture(scope="module")
def regraded(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> PytestRun:
    return run_suite(tmp_path_factory.mktemp("regrade"), "--agentbench-regrade", str(REGRADES))


@pytest.fixture(scope="module")
def plain(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> PytestRun:
    return run_suite(tmp_path_factory.mktemp("plain"))


def test_regrade_3_ends_the_flaky_verifier_verifier_flaky_and_passes_the_stable_one(
    regraded: PytestRun, docker_client: Any
) -> None:
    regraded.assert_outcomes(passed=1, errors=1)
    assert regraded.returncode == 1  # pytest's rule: the task's ERROR fails the session
    assert "Traceback" not in regraded.text
    records = regraded.run_dir.records_by_task()
    flaky, stable = records[FLAKY]["result"], records[STABLE]["result"]
    assert (flaky["passed"], flaky["failure_reason"], flaky["sub_reason"]) == (
        False, "VERIFIER_FLAKY", "PASS_FAIL_MIX")
    assert flaky["summary"].endswith("; the agent's patch is the reference solution")
    assert flaky["exit_code"] == 0  # the grading itself passed, under seed 0
    assert [(r["hash_seed"], r["passed"]) for r in flaky["regrades"]] == [
        ("1", False), ("2", False), ("3", False)]
    for run in flaky["regrades"]:
        assert run["signature"] == ["FAILED tests/test_tags.py::test_format_tags"], run
        assert run["exit_code"] == 1 and run["duration_sec"] > 0
    assert stable["passed"] and stable["failure_reason"] is None
    assert [(r["hash_seed"], r["passed"], r["exit_code"]) for r in stable["regrades"]] == [
        ("1", True, 0), ("2", True, 0), ("3", True, 0)]
    assert "1 VERIFIER_FLAKY" in regraded.stdout
    assert regraded.run_dir.meta["config"]["regrade"] == REGRADES
    assert containers_of(docker_client, regraded.run_dir.run_id) == []


def test_verifier_flaky_is_counted_flaky_and_stays_out_of_the_pass_rate(
    regraded: PytestRun
) -> None:
    frame = load_run(regraded.run_dir.path).attempts.set_index("task_id")
    assert frame.loc[FLAKY, "category"] == "flaky"
    assert frame.loc[STABLE, "category"] == "scored"
    scored = frame[frame["category"] == "scored"]
    assert (len(scored), int(scored["passed"].sum())) == (1, 1)
    assert "pass rate 100.0%: 1/1 scored attempts passed" in regraded.stdout


def test_each_regrade_ran_in_a_fresh_sandbox_under_its_hash_seed(regraded: PytestRun) -> None:
    import json

    run_dir = regraded.run_dir
    for task in (FLAKY, STABLE):
        task_dir = run_dir.task_dir(task)
        env = json.loads((task_dir / "meta" / "environment.json").read_text())
        sandboxes = {s["phase"]: s["facts"] for s in env["sandboxes"]}
        containers = {facts["container_id"] for facts in sandboxes.values()}
        assert len(containers) == len(sandboxes) == 2 + REGRADES  # agent, score, regrades
        seeds = {phase: facts["create_args"]["environment"]["PYTHONHASHSEED"]
                 for phase, facts in sandboxes.items()}
        assert seeds == {"agent": "0", "score": "0", "regrade-1": "1", "regrade-2": "2",
                         "regrade-3": "3"}
        report = {"requested": REGRADES, "seeds": ["1", "2", "3"], "problem": None}
        if task == FLAKY:  # the oracle's own patch: there is no other reference to grade
            report["reference"] = {"graded": False,
                                   "why": "the agent's patch is the reference solution"}
        assert env["regrade"] == report
        for index in range(1, REGRADES + 1):
            assert (task_dir / "logs" / f"regrade-{index}_stdout.txt").stat().st_size > 0
        commands = [e for e in run_dir.events()
                    if e["type"] == "command_finished" and e["phase"] == "regrade"
                    and e["task_id"] == task]
        assert len(commands) == REGRADES


def test_without_regrade_both_pass_and_nothing_is_regraded(
    plain: PytestRun, regraded: PytestRun
) -> None:
    plain.assert_outcomes(passed=2)
    assert plain.returncode == 0
    records = plain.run_dir.records_by_task()
    for task in (FLAKY, STABLE):
        assert records[task]["result"]["passed"], records[task]["result"]
        assert records[task]["result"]["regrades"] == []
        assert "regrade" not in records[task]["timings"]
    assert "regrade" not in plain.run_dir.meta["config"]
    # what the regrades added to each attempt: reported by the test run (-s shows it)
    for task, record in regraded.run_dir.records_by_task().items():
        runs = record["result"]["regrades"]
        added = record["timings"]["regrade"]
        print(f"\n{task}: {REGRADES} regrades added {added:.2f}s ({added / REGRADES:.2f}s each; "
              f"passing command {sum(r['duration_sec'] for r in runs) / REGRADES:.2f}s, whole "
              f"regrade {sum(r['wall_sec'] for r in runs) / REGRADES:.2f}s on average); "
              f"attempt {record['duration_sec']:.1f}s vs {records[task]['duration_sec']:.1f}s "
              "without")


def test_regrades_from_an_env_cache_view_in_docker(
    docker_client: Any, tmp_path: Path
) -> None:
    """A task with a setup: its second attempt's pre-agent copy is a view of the env-cache
    entry (an overlay where the host allows it), and its regrade starts from that entry."""
    packs = copy_suite(tmp_path, {FLAKY: ["echo built > setup-made.txt"]})
    run = run_suite(tmp_path, "-k", FLAKY, "--agentbench-attempts=2", "--agentbench-regrade=1",
                    f"--agentbench-env-cache={tmp_path / 'envs'}", taskpacks=packs)
    assert run.outcomes == {"errors": 2, "deselected": 2}, run.tail()
    records = sorted(run.run_dir.records(), key=lambda r: r["attempt_index"])
    assert [r["setup"]["env_cache"] for r in records] == ["built", "hit"]
    for record in records:
        result = record["result"]
        assert result["failure_reason"] == "VERIFIER_FLAKY", result
        assert [(r["hash_seed"], r["passed"]) for r in result["regrades"]] == [("1", False)]


# --------------------------------------------------------------------------- local sandbox


def copy_suite(tmp_path: Path, setups: dict[str, list[str]]) -> Path:
    """A copy of the suite (and the bundles) with these setup commands added to these tasks."""
    packs = tmp_path / "taskpacks"
    if not packs.exists():
        shutil.copytree(TASKPACKS / SUITE, packs / SUITE)
        shutil.copytree(TASKPACKS / "_shared", packs / "_shared")
    for task_id, setup in setups.items():
        task_file = packs / SUITE / task_id / "task.yaml"
        spec = yaml.safe_load(task_file.read_text())
        spec["setup"] = {"commands": setup}
        task_file.write_text(yaml.safe_dump(spec))
    return packs


# stable-verifier fixed, but with a format_tags whose order depends on the environment: the
# agent's own nondeterminism (it passes under PYTHONHASHSEED 0 and 1, fails under 2)
Q = '"' * 3
FLAKY_FIX_PATCH = "\n".join([
    "diff --git a/minilib/tags.py b/minilib/tags.py",
    "--- a/minilib/tags.py",
    "+++ b/minilib/tags.py",
    "@@ -1,11 +1,13 @@",
    f" {Q}Tags: the distinct labels of a comma-separated list.{Q}",
    " ",
    "+import os",
    "+",
    " ",
    " def parse_tags(text):",
    f"     {Q}The distinct tags of `text`: stripped, lower-cased, empty ones dropped.{Q}",
    '-    return {tag.strip() for tag in text.split(",") if tag.strip()}',
    '+    return {tag.strip().lower() for tag in text.split(",") if tag.strip()}',
    " ",
    " ",
    " def format_tags(tags):",
    f"     {Q}The tags as one comma-separated line, sorted.{Q}",
    '-    return ", ".join(sorted(tags))',
    '+    return ", ".join(sorted(tags, reverse=os.environ.get("PYTHONHASHSEED") == "2"))',
    "",
])


class FlakyFixAgent:
    """Applies FLAKY_FIX_PATCH through the tools, as the oracle applies its patch."""

    name = "flaky-fix"

    def run(self, ctx: Any) -> Any:
        from pytest_agentbench.agents.port import AgentOutcome

        result = ctx.toolbox.call("apply_patch", {"unified_diff": FLAKY_FIX_PATCH})
        assert result.ok, result.error_message
        return AgentOutcome("done", summary="applied a flaky fix", steps=1)


class EditsTestsAgent:
    """Edits a test file through `run` (read-only under protect_test_infra): the rules decide
    the verdict, so the attempt is never regraded."""

    name = "test-editor"

    def run(self, ctx: Any) -> Any:
        from pytest_agentbench.agents.port import AgentOutcome

        ctx.toolbox.call("run", {"command": "echo '# edited' >> tests/test_tags.py"})
        return AgentOutcome("done", summary="edited a test", steps=1)


def local_attempt(tmp_path: Path, task_id: str, index: int, agent_name: str,
                  regrade: int, setup: list[str] | None = None) -> dict[str, Any]:
    """One attempt through the pipeline on the local sandbox, from a copy of the suite (a setup
    command added when given); attempts of one tmp_path share an environment cache."""
    from pytest_agentbench.agents.builtin import NopAgent, OracleAgent
    from pytest_agentbench.core.envcache import EnvCache
    from pytest_agentbench.core.pipeline import AttemptPipeline
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.sandbox.local import LocalSandboxFactory
    from pytest_agentbench.tasks.loader import load_task

    packs = copy_suite(tmp_path, {task_id: setup} if setup else {})
    task = load_task(packs / SUITE / task_id / "task.yaml")
    run_dir = tmp_path / "run"
    cfg = attempt_config(tmp_path, "regrade", run_dir=run_dir, attempt_index=index,
                         attempt_label=f"{task_id}-{index}", regrade=regrade,
                         env_cache=EnvCache(tmp_path / "env-cache"))
    agents = {"oracle": OracleAgent, "nop": NopAgent, "flaky-fix": FlakyFixAgent,
              "test-editor": EditsTestsAgent}
    agent = agents[agent_name]()
    record = AttemptPipeline(task, cfg, LocalSandboxFactory(), MirrorCache(tmp_path / "git"),
                             agent).run()
    return record.to_json_dict()


def test_local_regrades_from_an_env_cache_entry_find_the_flaky_verifier(tmp_path: Path) -> None:
    setup = ["echo built > setup-made.txt"]  # cacheable: the second attempt is a cache hit
    miss = local_attempt(tmp_path, FLAKY, 0, "oracle", 2, setup)
    hit = local_attempt(tmp_path, FLAKY, 1, "oracle", 2, setup)
    assert (miss["setup"]["env_cache"], hit["setup"]["env_cache"]) == ("built", "hit")
    for record in (miss, hit):
        result = record["result"]
        assert result["failure_reason"] == "VERIFIER_FLAKY", result
        assert [(r["hash_seed"], r["passed"]) for r in result["regrades"]] == [
            ("1", False), ("2", False)]
    assert not list((tmp_path / "work").glob("*/regrade-*")), "regrade copies are removed"


def test_local_a_failing_grading_the_regrades_confirm_keeps_its_reason(tmp_path: Path) -> None:
    record = local_attempt(tmp_path, STABLE, 0, "nop", 2)
    result = record["result"]
    assert (result["passed"], result["failure_reason"]) == (False, "TESTS_FAILED")
    assert [(r["passed"], r["exit_code"]) for r in result["regrades"]] == [(False, 1), (False, 1)]
    assert result["regrades"][0]["signature"] == result["signature"]


def test_local_regrade_0_runs_nothing(tmp_path: Path) -> None:
    record = local_attempt(tmp_path, FLAKY, 0, "oracle", 0)
    assert record["result"]["passed"] and record["result"]["regrades"] == []
    assert "regrade" not in record["timings"]


def test_local_a_fix_that_is_flaky_where_the_reference_is_stable_is_the_agents_failure(
    tmp_path: Path
) -> None:
    record = local_attempt(tmp_path, STABLE, 0, "flaky-fix", 2)
    result = record["result"]
    assert (result["passed"], result["failure_reason"], result["sub_reason"]) == (
        False, "TESTS_FAILED", "FLAKY_FIX"), result
    assert [(r["hash_seed"], r["passed"]) for r in result["regrades"]] == [
        ("1", True), ("2", False)]
    assert "the reference solution passes under every one (PYTHONHASHSEED=0, 1, 2)" in (
        result["summary"])
    run_dir = tmp_path / "run"
    env_file = next(run_dir.rglob("meta/environment.json"))
    import json

    reference = json.loads(env_file.read_text())["regrade"]["reference"]
    assert reference["graded"] and reference["stable_pass"]
    assert [(r["hash_seed"], r["passed"]) for r in reference["runs"]] == [
        ("0", True), ("1", True), ("2", True)]
    phases = [s["phase"] for s in json.loads(env_file.read_text())["sandboxes"]]
    assert phases[-3:] == ["reference-0", "reference-1", "reference-2"]
    assert not list((tmp_path / "work").glob("*/re*-*")), "regrade copies are removed"


def test_local_an_attempt_the_rules_decide_copies_no_regrade_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_agentbench.core.regrade as regrade_mod

    bases: list[Path] = []
    keep_base = regrade_mod.keep_base

    def spy(at: Any) -> Path:
        bases.append(keep_base(at))
        return bases[-1]

    monkeypatch.setattr(regrade_mod, "keep_base", spy)
    record = local_attempt(tmp_path, STABLE, 0, "test-editor", 2)
    result = record["result"]
    assert (result["failure_reason"], result["sub_reason"]) == ("TOOL_ERROR", "EDIT_NOT_ALLOWED")
    assert result["regrades"] == [] and bases == []  # no copy made for nothing
    regraded = local_attempt(tmp_path, STABLE, 1, "nop", 1)
    assert len(regraded["result"]["regrades"]) == 1 and len(bases) == 1
    assert not bases[0].exists()  # removed once the regrades are done
