"""Issue 23 item 4: aider, installed from PyPI by the bundled `aider` variant (once per runner
image, with the network, before any agent's clock), solves fix-mean-off-by-one inside the Docker
sandbox (network none) through pytest and the model gateway, against a real loopback HTTP server
that speaks OpenAI chat and scripts the model: it names the file (aider adds it to the chat and
asks again, with the file's text), then answers with a SEARCH/REPLACE edit; aider applies it and
runs the failing command as its test. Its calls are events and `usage`, its chat history is
collected, nothing of aider's is left in the diff, and the key planted on the host is in no file
of the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Reply
from tests.support.command_agents import PLANTED_KEY, run_variant

ASK_FOR_FILE = "The bug is in the mean function of minilib/mathx.py; I need to see that file."
EDIT = """The mean divides by n - 1; it must divide by n.

minilib/mathx.py
```python
<<<<<<< SEARCH
    return sum(values) / (len(values) - 1)
=======
    return sum(values) / len(values)
>>>>>>> REPLACE
```
"""
USAGE = {"prompt_tokens": 1500, "completion_tokens": 60, "total_tokens": 1560}


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def scripted_model(request: dict[str, Any]) -> Reply:
    """The edit once aider has put mathx.py's text in the conversation, else ask for the file."""
    seen = "\n".join(_text(m) for m in request.get("messages", []))
    if "(len(values) - 1)" in seen and "minilib/mathx.py" in seen and ASK_FOR_FILE in seen:
        return Reply(EDIT, usage=USAGE)
    return Reply(ASK_FOR_FILE, usage=USAGE)


def test_aider_solves_a_task_in_the_sandbox(tmp_path: Path, docker_client: Any) -> None:
    run = run_variant("aider", tmp_path / "out", scripted_model)
    record, requests, logs = run.record, run.requests, run.program_logs()
    assert record["result"]["passed"] is True, (record["result"], logs)
    # the file request, then the edit; aider's test run passed, so it asked nothing more
    assert [r.json["messages"][-1]["role"] for r in requests] == ["user", "user"], logs
    assert record["usage"]["llm_calls"] == len(requests) == 2
    assert record["usage"]["prompt_tokens"] == 2 * USAGE["prompt_tokens"]
    assert all(r.headers.get("authorization") == f"Bearer {PLANTED_KEY}" for r in requests)
    assert any("def mean(values)" in _text(m) for m in requests[1].json["messages"])
    kinds = [e["type"] for e in run.events()]
    assert kinds.count("llm_request") == 2 and kinds.count("llm_response") == 2, kinds
    history = (run.task_dir / "agent" / "trajectory.md").read_text()
    assert "SEARCH" in history and "minilib/mathx.py" in history
    diff = (run.task_dir / "diffs" / "final.patch").read_text()
    assert "+    return sum(values) / len(values)" in diff
    changed = [x.split(" b/", 1)[1] for x in diff.splitlines() if x.startswith("diff --git")]
    assert changed == ["minilib/mathx.py"], diff  # no .aider* file, no .gitignore line
    assert run.leaks() == []
