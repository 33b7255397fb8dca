"""What llm_v0 says to the model when it must correct it: a reply without a tool call, code
written in prose instead of an edit, a finish while the failing command still fails. Texts
only; the loop (agents/llm_v0.py) decides when."""

from __future__ import annotations

import re
from typing import Any

_FENCE = re.compile(r"```[ \t]*([\w+.#-]*)[^\n]*\n(.*?)```", re.DOTALL)

CUT_OFF = ("Your reply was cut off at the token limit before any tool call. Reply with one short "
           "tool call.")
NO_TOOL_CALL = ("Your reply contained no tool call. Use a tool (a native tool call, or one JSON "
                'object such as {"name": "run", "arguments": {"command": "..."}}), or call '
                "finish when the tests pass.")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of the fenced code blocks in `text` that hold code, not a JSON call."""
    blocks = []
    for lang, body in _FENCE.findall(text):
        if body.strip() and lang.lower() != "json" and not body.lstrip().startswith("{"):
            blocks.append((lang.lower(), body))
    return blocks


def code_nudge(blocks: list[tuple[str, str]], offers_write: bool) -> tuple[str, dict[str, Any]]:
    """The one-time answer to code written in prose (it changed nothing: use a tool), and the
    data of its `prose_code_nudge` note."""
    langs = sorted({lang or "(none)" for lang, _ in blocks})
    is_diff = any(lang in ("diff", "patch") or body.lstrip().startswith("--- ")
                  for lang, body in blocks)
    how = ("Send that diff as the `unified_diff` argument of apply_patch." if is_diff else
           "To change a file, call apply_patch with a unified diff (as `git diff` prints it)"
           + (", or write_file with the file's whole new content." if offers_write else "."))
    text = ("Your reply has code in a code block but no tool call, so no file changed: "
            f"code in a message is not applied. {how} For example "
            '{"name": "apply_patch", "arguments": {"unified_diff": "--- a/PATH\n+++ b/PATH\n'
            '@@ ... @@\n..."}}. Then run the failing command, and call finish when it '
            "passes.")
    return text, {"code_blocks": len(blocks), "languages": langs, "diff": is_diff}


def finish_refused(command: str, tail: str, chances: int, offers_write: bool) -> str:
    """A refused finish while `chances` more refusals remain before one ends the run."""
    warning = ("The next finish while it fails ends the run." if chances == 0 else
               f"{chances} more finish(es) while it fails will be refused; then one ends "
               "the run.")
    edit = "apply_patch or write_file" if offers_write else "apply_patch"
    return (f"finish refused: the harness ran the failing command and it still fails, so "
            f"the task is not done. {warning}\n    {command}\nThe end of its output:\n```\n"
            f"{tail}\n```\nChange the code with {edit}, run the command until it passes, "
            "then call finish.")


def finish_refused_for_good(tail: str) -> str:
    return f"finish refused: the failing command still fails. The run ends.\n```\n{tail}\n```"
