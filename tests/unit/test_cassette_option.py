"""--agentbench-cassette-replay RUN_DIR (issue 23 item 6): it becomes the command agent's
`params.cassette` (and part of the variant's hash), is refused in one line for an agent that is
not a command or a path that does not exist, lets the variant resolve with no key, and an
attempt whose task has no cassette in that run is LLM_ERROR CASSETTE_MISSING."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.command import CommandAgent
from pytest_agentbench.agents.port import AgentContext, AgentError
from pytest_agentbench.agents.variants import agent_builder
from pytest_agentbench.run.settings import build_settings
from pytest_agentbench.schemas.taxonomy import Reason


def _settings(tmp_path: Path, **options: Any) -> Any:
    variant = tmp_path / "program.yaml"
    variant.write_text(json.dumps({"name": "prog", "agent": "command",
                                   "model": {"preset": "openrouter", "name": "x/y"},
                                   "params": {"command": "true"}}))
    given = {"out": str(tmp_path / "runs"), "variant": str(variant), **options}
    return build_settings(given.get, {}.get, suites=["a"], rootpath=tmp_path,
                          invocation_dir=tmp_path)


def test_the_option_is_the_command_agents_cassette(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENTBENCH_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "rec").mkdir()
    plain, replay = _settings(tmp_path), _settings(tmp_path, cassette_replay="rec")
    assert replay.variant.params["cassette"] == str((tmp_path / "rec").resolve())
    assert plain.variant_hash() != replay.variant_hash()
    from pytest_agentbench.agents.variants import VariantError
    with pytest.raises(VariantError, match="needs an API key"):  # a model run needs its key
        agent_builder(plain.variant)
    agent = agent_builder(replay.variant)()  # a replay does not
    assert isinstance(agent, CommandAgent) and agent.cassette == (tmp_path / "rec").resolve()


@pytest.mark.parametrize(("options", "says"), [
    ({"cassette_replay": "nowhere"}, "--agentbench-cassette-replay=nowhere: no such run "
                                     "directory or cassette file"),
    ({"cassette_replay": ".", "variant": "oracle"}, "--agentbench-cassette-replay=.: cassettes "
                                                    "replay command agents; variant oracle "
                                                    "runs agent 'oracle'"),
])
def test_a_bad_replay_option_is_one_line(tmp_path: Path, options: dict[str, str],
                                         says: str) -> None:
    with pytest.raises(ValueError) as caught:
        _settings(tmp_path, **options)
    assert str(caught.value).startswith(says), caught.value


def test_a_task_without_a_cassette_in_the_run_is_cassette_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTBENCH_API_KEY", raising=False)
    (tmp_path / "rec" / "tasks" / "other" / "agent").mkdir(parents=True)
    agent = agent_builder(_settings(tmp_path, cassette_replay="rec").variant)()
    task = type("Task", (), {"id": "t-1"})()
    ctx = AgentContext(task=task, task_dir=tmp_path, toolbox=None, events=None,  # type: ignore[arg-type]
                       failing_output="", failing_command="", deadline=time.monotonic() + 30,
                       max_steps=5, artifacts_dir=tmp_path / "run" / "tasks" / "t-1" / "agent",
                       gateway_dir=tmp_path, programs=object())  # type: ignore[arg-type]
    with pytest.raises(AgentError) as caught:
        agent.run(ctx)
    assert (caught.value.reason, caught.value.sub_reason) == (Reason.LLM_ERROR,
                                                              "CASSETTE_MISSING")
    assert str(caught.value) == (f"cassette {(tmp_path / 'rec').resolve()}/tasks/t-1/agent/"
                                 "cassette.jsonl: no such file (the run replayed has no "
                                 "cassette of task t-1)")
