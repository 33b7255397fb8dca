"""`agentbench harvest` end to end on small synthetic histories (tests/support/harvest_shapes.py),
run as a user runs it (the CLI in a subprocess, the local sandbox), then the harvested tasks run
through the plugin: the oracle passes every one and nop fails every one.

The gate runs once per task here (`--gate-runs 1`) to keep the tests short; the gate itself is
the real oracle+nop validation either way.
"""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.harvest_history import (
    clean_env,
    harvest,
    harvest_command,
    plugin_records,
    reasons_by_sha,
    report_of,
)
from tests.support.harvest_shapes import (
    MISSING_PACKAGE,
    OFFLINE_PIP_CONF,
    Made,
    shapes,
    small,
    verdicts,
)

GATE = ("--gate-runs", "1")


@dataclass
class Harvested:
    made: Made
    out: Path
    suite: str
    stdout: str

    @property
    def report(self) -> dict[str, Any]:
        return report_of(self.out, self.suite)

    def task_dir(self, sha: str) -> Path:
        return self.out / self.suite / f"{self.suite}-{sha[:10]}"

    def provenance(self, sha: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.task_dir(sha) / "harvest.json").read_text())
        return data


def offline_home(path: Path) -> Path:
    """A HOME whose pip has no index: a setup that needs a package cannot work."""
    conf = path / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(OFFLINE_PIP_CONF)
    return path


def run_harvest(base: Path, made: Made, suite: str, out: Path) -> Harvested:
    done = harvest(made.history.repo, suite, out, offline_home(base / "home"), *GATE)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr
    return Harvested(made, out, suite, done.stdout)


@pytest.fixture(scope="module")
def taskpacks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("taskpacks")


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory, taskpacks: Path) -> Harvested:
    base = tmp_path_factory.mktemp("shapes")
    return run_harvest(base, shapes(base / "repo"), "shapes", taskpacks)


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory, taskpacks: Path) -> Harvested:
    base = tmp_path_factory.mktemp("verdicts")
    return run_harvest(base, verdicts(base / "repo"), "verdicts", taskpacks)


def assert_funnel_accounts_for_every_commit(harvested: Harvested) -> None:
    report = harvested.report
    shas = [c["sha"] for c in report["commits"]]
    assert sorted(shas) == sorted(harvested.made.history.commits)  # each walked commit once
    assert reasons_by_sha(report) == harvested.made.expected
    dropped = sum(n for stage in report["funnel"] for n in stage["dropped"].values())
    assert dropped + report["validated"] == report["walked"] == len(shas)
    assert report["funnel"][-1]["left"] == report["validated"]
    assert report["unexpected_reasons"] == {}


def test_every_shape_of_change_gets_its_one_reason(shaped: Harvested) -> None:
    """A merge, a fix and its test apart, a renamed test file, binary test data, the same fix
    twice, a release and a docs change: each commit's reason is the one it was made to show."""
    assert_funnel_accounts_for_every_commit(shaped)
    kinds = {c["sha"]: c["kind"] for c in shaped.report["commits"] if c["reason"] == "VALIDATED"}
    assert kinds == shaped.made.kinds


def test_a_merge_is_its_diff_against_the_first_parent(shaped: Harvested) -> None:
    merge = shaped.made.history.commits[1]
    history = shaped.made.history
    first_parent = history.git("rev-parse", f"{merge}^1")
    provenance = shaped.provenance(merge)
    assert provenance["parent"] == first_parent and provenance["commit"] == merge
    assert provenance["fail_to_pass"] == ["tests/test_calc.py::test_add"]
    assert provenance["pass_to_pass"] == ["tests/test_calc.py::test_sub_of_zero"]
    oracle = (shaped.task_dir(merge) / "oracle.patch").read_text()
    assert "+    return a + b" in oracle and "tests/" not in oracle
    assert "+def test_add():" in (shaped.task_dir(merge) / "tests.patch").read_text()


def test_a_renamed_test_file_runs_under_its_new_name(shaped: Harvested) -> None:
    renamed = shaped.made.history.commits[4]
    tests_patch = (shaped.task_dir(renamed) / "tests.patch").read_text()
    assert "deleted file mode" in tests_patch and "+++ b/tests/test_arith.py" in tests_patch
    assert shaped.provenance(renamed)["fail_to_pass"] == ["tests/test_arith.py::test_neg"]


def test_binary_test_data_travels_in_the_hidden_tests(shaped: Harvested) -> None:
    binary = shaped.made.history.commits[5]
    tests_patch = (shaped.task_dir(binary) / "tests.patch").read_bytes()
    assert b"GIT binary patch" in tests_patch and b"tests/data/blob.bin" in tests_patch
    assert b"blob.bin" not in (shaped.task_dir(binary) / "oracle.patch").read_bytes()
    assert shaped.provenance(binary)["fail_to_pass"] == [
        "tests/test_checksum.py::test_checksum_of_blob"]


def test_verdicts_feature_flaky_and_offline_setup(judged: Harvested) -> None:
    """A feature is labelled so, a test that flips between runs is dropped, a setup that cannot
    work offline drops its commit with SETUP_FAILED and the walk goes on to older commits."""
    assert_funnel_accounts_for_every_commit(judged)
    report = judged.report
    by_sha = {c["sha"]: c for c in report["commits"]}
    feature = judged.made.history.commits[1]
    assert by_sha[feature]["kind"] == "feature"
    assert json.loads((judged.task_dir(feature) / "harvest.json").read_text())["kind"] == "feature"
    flaky = by_sha[judged.made.history.commits[2]]
    assert flaky["detail"] == "flaky: tests/test_retry.py::test_retry_gives_up"
    setup = by_sha[judged.made.history.commits[4]]
    assert setup["stage"] == "setup" and MISSING_PACKAGE in setup["detail"]
    assert report["setups_run"] == 1  # only the commit whose parent declares a dependency


@pytest.mark.parametrize("variant", ["oracle", "nop"])
def test_the_plugin_passes_every_task_under_the_oracle_and_fails_it_under_nop(
        shaped: Harvested, judged: Harvested, taskpacks: Path, variant: str,
        tmp_path: Path) -> None:
    validated = {f"{h.suite}-{c['sha'][:10]}" for h in (shaped, judged)
                 for c in h.report["commits"] if c["reason"] == "VALIDATED"}
    assert len(validated) == 6
    records, text = plugin_records(taskpacks, "shapes", variant, "local", tmp_path,
                                   "--agentbench-suite", "verdicts")
    assert set(records) == validated, text
    passed = {task: r["result"]["passed"] for task, r in records.items()}
    assert passed == dict.fromkeys(validated, variant == "oracle"), text
    if variant == "nop":
        assert {r["result"]["failure_reason"] for r in records.values()} == {"TESTS_FAILED"}


def test_an_interrupted_harvest_resumes_without_redoing_a_decision(
        judged: Harvested, tmp_path: Path) -> None:
    """SIGINT after the first candidate's decision, then the same command: the decided commits
    are not run again and the report is the uninterrupted run's."""
    made = verdicts(tmp_path / "repo")
    assert made.history.commits == judged.made.history.commits  # the same history, same ids
    out, home = tmp_path / "taskpacks", offline_home(tmp_path / "home")
    command = harvest_command(made.history.repo, "verdicts", out, *GATE)
    env = clean_env(home, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    first_run = []
    assert proc.stdout is not None
    for line in proc.stdout:
        first_run.append(line)
        if line.startswith("[1/"):
            proc.send_signal(signal.SIGINT)
            break
    rest, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(first_run) + rest + err
    assert "interrupted; run the same command to resume" in err and "Traceback" not in err
    state = out / ".harvest" / "verdicts" / "state.jsonl"
    decided = [json.loads(line)["sha"] for line in state.read_text().splitlines()]
    assert len(decided) < len(made.history.commits)
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"{len(decided)} decided before" in resumed.stdout
    runs = [line for line in resumed.stdout.splitlines() if line.startswith("[")]
    assert not [line for line in runs if any(f"verdicts-{s[:10]}" in line for s in decided)]
    lines = [json.loads(line)["sha"] for line in state.read_text().splitlines()]
    assert sorted(lines) == sorted(made.history.commits)  # each decided exactly once
    assert comparable(report_of(out, "verdicts")) == comparable(judged.report)


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without its timings."""
    keep = ("sha", "reason", "stage", "task_id", "kind", "setup_ran")
    return {
        "commits": sorted(tuple(c[k] for k in keep) for c in report["commits"]),
        "funnel": [(s["stage"], s["dropped"], s["left"]) for s in report["funnel"]],
        **{k: report[k] for k in ("walked", "validated", "validated_by_kind", "setups_run",
                                  "candidates")},
    }


def test_the_docker_sandbox_harvests_and_gates(tmp_path: Path, docker_client: Any) -> None:
    """The same stages in the runner image: a setup that cannot find its package fails with
    SETUP_FAILED, the older fix is validated by the oracle+nop gate in Docker."""
    made = small(tmp_path / "repo")
    out = tmp_path / "taskpacks"
    done = harvest(made.history.repo, "small", out, offline_home(tmp_path / "home"), *GATE,
                   AGENTBENCH_HARVEST_SANDBOX="docker")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = report_of(out, "small")
    assert reasons_by_sha(report) == made.expected, report["commits"]
    assert report["setups_run"] == 1
