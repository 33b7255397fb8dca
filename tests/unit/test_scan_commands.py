"""The scanners see a command agent's commands (reporting/scan_commands.py): the ones the model
told it to run, from the replies the gateway recorded on the host, and, labelled as written by
the agent, the ones its own trajectory shows; each finding says its evidence's source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.scan import scan_run
from pytest_agentbench.reporting.scan_commands import (
    MODEL_REPLY,
    TRAJECTORY,
    model_reply_commands,
    trajectory_commands,
)


def _tool_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": "c1", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def _call(step: int, content: str = "", calls: list[dict[str, Any]] | None = None
          ) -> dict[str, Any]:
    reply: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        reply["tool_calls"] = calls
    return {"step": step, "messages": [{"role": "user", "content": "```bash\ngit reflog\n```"}],
            "reply": reply}


def _run(tmp_path: Path, model_calls: list[dict[str, Any]] | None = None,
         trajectory: tuple[str, str] | None = None, passed: bool = True) -> Path:
    run = tmp_path / "run"
    agent = run / "tasks" / "t" / "agent"
    agent.mkdir(parents=True)
    if model_calls is not None:
        (agent / "model_calls.jsonl").write_text("".join(json.dumps(c) + "\n"
                                                         for c in model_calls))
    if trajectory is not None:
        (agent / f"trajectory{trajectory[0]}").write_text(trajectory[1])
    record = {"attempt_id": "r:t:v:0", "task_id": "t", "result": {"passed": passed},
              "artifact_paths": {"task_dir": "tasks/t"}}
    (run / "attempts.jsonl").write_text(json.dumps(record) + "\n")
    return run


def test_commands_of_model_replies_tool_calls_and_fenced_blocks() -> None:
    calls = [_call(1, "Look first.\n```bash\ncat a.py\n```"),
             _call(2, "", [_tool_call("bash", {"command": "git log --all"})]),
             _call(3, "", [_tool_call("shell", {"command": ["bash", "-lc", "pip install x"]})]),
             _call(4, "", [_tool_call("Read", {"file_path": "a.py"})]),
             _call(5, "done")]
    got = [(c.source, c.step, c.text) for c in model_reply_commands(calls)]
    assert got == [(MODEL_REPLY, 1, "cat a.py"), (MODEL_REPLY, 2, "git log --all"),
                   (MODEL_REPLY, 3, "bash -lc pip install x")]


def test_a_model_reply_command_is_a_finding_with_its_source(tmp_path: Path) -> None:
    run = _run(tmp_path, [_call(1, "```bash\ncat a.py\n```"),
                          _call(2, "Check history.\n```bash\ngit log --all --oneline\n```"),
                          _call(3, "", [_tool_call("bash", {"command": "curl -s https://x.test"})])])
    found = {(f.rule, f.source, f.evidence) for f in scan_run(run)}
    assert found == {("git-history", MODEL_REPLY, "step 2 model reply: git log --all --oneline"),
                     ("network", MODEL_REPLY, "step 3 model reply: curl -s https://x.test")}


def test_what_the_agent_sent_is_not_taken_for_what_the_model_asked(tmp_path: Path) -> None:
    """The request's messages (the program's own text, tool output) are not commands."""
    assert scan_run(_run(tmp_path, [_call(1, "All done.")])) == []


def test_trajectory_commands_are_labelled_and_skip_what_a_reply_shows(tmp_path: Path) -> None:
    mini = {"info": {"config": {"agent": {"instance_template": "```bash\ngit fetch\n```"}}},
            "notes": "```bash\ncurl https://x.test\n```",  # not an assistant's turn
            "messages": [
        {"role": "user", "content": "```bash\npip install nothing-from-a-user\n```"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "bash", "arguments": json.dumps({"command": "git reflog"})}}]},
        {"role": "tool", "content": "git fetch origin  # output, not a command"},
        {"role": "assistant", "content": "```bash\ngit log --all\n```"}]}
    run = _run(tmp_path, [_call(1, "```bash\ngit log --all\n```")], (".json", json.dumps(mini)))
    found = sorted((f.source, f.evidence) for f in scan_run(run))
    assert found == [(MODEL_REPLY, "step 1 model reply: git log --all"),
                     (TRAJECTORY, "step 1 trajectory: git reflog")]


def test_trajectory_shapes_of_the_bundled_agents() -> None:
    claude = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "name": "Bash", "input": {"command": "git log --all"}}]}}
    claude_result = {"type": "user", "message": {"content": [
        {"type": "tool_result", "content": "```bash\ngit fetch\n```"}]}}
    codex = {"type": "item.completed", "item": {"type": "command_execution",
                                                 "command": "bash -lc 'git reflog'",
                                                 "aggregated_output": "```sh\ncurl x\n```"}}
    opencode = {"type": "tool_use", "part": {"tool": "bash", "state": {
        "input": {"command": "pip install y"}, "output": "wget z"}}}
    text = "\n".join(json.dumps(x) for x in (claude, claude_result, codex, opencode))
    got = [c.text for c in trajectory_commands(text, ".jsonl")]
    assert got == ["git log --all", "bash -lc 'git reflog'", "pip install y"]
    aider = "#### fix it\n\nRun:\n```bash\ngit log --all\n```\n```python\nx = 1\n```\n"
    assert [c.text for c in trajectory_commands(aider, ".md")] == ["git log --all"]
    assert list(trajectory_commands("{not json", ".json")) == []


def test_a_forged_trajectory_does_not_hide_the_model_reply(tmp_path: Path) -> None:
    """The agent can write a clean trajectory; the gateway's record still shows the command."""
    run = _run(tmp_path, [_call(1, "", [_tool_call("bash", {"command": "git log --all"})])],
               (".json", json.dumps({"messages": [{"role": "assistant", "content": "ok"}]})))
    assert [(f.rule, f.source) for f in scan_run(run)] == [("git-history", MODEL_REPLY)]
