"""Issue 23 item 5: a predictions file that cannot be scored is refused before any task runs,
with one line naming the file, the line and the field (no traceback, exit 4), since a prediction
that silently went missing would be scored as a failure of the agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.plugin_runs import PluginRunner

USAGE_ERROR = 4


@pytest.mark.parametrize(("lines", "expected"), [
    (['{"instance_id": "fix-mean-off-by-one", "model_patch": "x"}', '{"instance_id": '],
     "line 2: not valid JSON"),
    ([json.dumps({"model_patch": "x"})], "line 1: instance_id (or task_id): required"),
    ([json.dumps({"instance_id": "fix-mean-off-by-one", "model_patch": 3})],
     "line 1: model_patch: expected a string or null, got int"),
    ([json.dumps({"instance_id": "a", "model_patch": "x"}),
      json.dumps({"instance_id": "a", "model_patch": "y"})],
     "line 2: instance_id 'a' given twice (first at line 1)"),
    ([json.dumps({"instance_id": "a"})], "line 1: model_patch: required"),
])
def test_a_bad_predictions_file_is_one_line(tmp_path: Path, lines: list[str],
                                            expected: str) -> None:
    """issue 23 item 5: each bad entry is named by line and field, and nothing runs."""
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("\n".join(lines) + "\n")
    run = PluginRunner(tmp_path, sandbox="local").run(
        "-k", "fix-mean-off-by-one", f"--agentbench-predictions={predictions}")
    assert run.returncode == USAGE_ERROR, run.tail()
    assert f"predictions file {predictions}: {expected}" in run.text, run.tail()
    assert "Traceback" not in run.text
    assert not list((tmp_path / "runs").glob("*/attempts.jsonl"))


def test_a_missing_predictions_file_and_a_variant_beside_it(tmp_path: Path) -> None:
    """issue 23 item 5: a file that is not there, and two agents asked for at once."""
    runner = PluginRunner(tmp_path, sandbox="local")
    missing = runner.run("--agentbench-variant=predictions:nowhere.jsonl")
    assert missing.returncode == USAGE_ERROR, missing.tail()
    assert f"predictions file {tmp_path / 'nowhere.jsonl'}: not found" in missing.text
    (tmp_path / "p.jsonl").write_text('{"instance_id": "a", "model_patch": null}\n')
    both = runner.run("--agentbench-predictions=p.jsonl", "--agentbench-variant=nop")
    assert both.returncode == USAGE_ERROR, both.tail()
    assert "--agentbench-predictions=p.jsonl and --agentbench-variant=nop: give one" in both.text
    assert "Traceback" not in missing.text + both.text
