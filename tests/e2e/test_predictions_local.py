"""The `predictions` agent (issue 23 item 5) end to end: a predictions file in SWE-bench's
format, given by --agentbench-predictions, scored through the plugin on four bundled custom-dev
tasks with the local sandbox; each task's patch goes through the tools like any agent's edit.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.plugin_runs import SUITE, TASKPACKS, PluginRunner

MODEL = "my-agent@v3"
WRONG_PATCH = """\
--- a/minilib/mathx.py
+++ b/minilib/mathx.py
@@ -1,3 +1,3 @@
-this line is not in the file
+nor is this one
 def nothing():
"""


def test_a_predictions_file_is_scored_task_by_task(tmp_path: Path) -> None:
    """issue 23 item 5: the oracle's patch as a prediction passes (the model name recorded); an
    empty patch, a patch that does not apply and a task with no prediction fail, each with its
    own reason, and none of them passes."""
    oracle = (TASKPACKS / SUITE / "fix-mean-off-by-one" / "oracle.patch").read_text()
    lines = [
        {"instance_id": "fix-mean-off-by-one", "model_patch": oracle,
         "model_name_or_path": MODEL},
        {"task_id": "fix-parse-size-units", "model_patch": "", "model_name_or_path": MODEL},
        {"instance_id": "restore-slug-module", "model_patch": WRONG_PATCH,
         "model_name_or_path": MODEL},
        {"instance_id": "not-a-task-of-this-suite", "model_patch": oracle},
    ]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = PluginRunner(tmp_path, sandbox="local").run(
        "-k", "fix-mean-off-by-one or fix-parse-size-units or restore-slug-module or "
        "remove-stale-override", f"--agentbench-predictions={predictions}")
    run.assert_outcomes(passed=1, failed=3, deselected=4)
    records = run.run_dir.records_by_task()
    passed = records["fix-mean-off-by-one"]
    assert passed["result"]["passed"] and passed["model"]["name"] == MODEL
    assert passed["model"]["provider"] == "predictions"
    assert passed["variant"] == "predictions"
    expected = {
        "fix-parse-size-units": ("AGENT_GAVE_UP", "EMPTY_PREDICTION"),
        "restore-slug-module": ("TOOL_ERROR", "PATCH_REJECTED"),
        "remove-stale-override": ("AGENT_GAVE_UP", "NO_PREDICTION"),
    }
    for task_id, (reason, sub_reason) in expected.items():
        result = records[task_id]["result"]
        assert not result["passed"], task_id
        assert (result["failure_reason"], result["sub_reason"]) == (reason, sub_reason), result
