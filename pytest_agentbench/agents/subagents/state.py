"""What the run knows so far, from which the router's and specialists' briefs are written:
the task, the candidates the searcher found, the last patch, the last test output and a line
per round. Kept small on purpose: each call gets a fresh, bounded prompt rather than a
growing conversation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_agentbench.text.truncation import truncate


@dataclass
class CandidateFile:
    path: str
    start_line: int | None = None
    end_line: int | None = None
    snippet: str = ""
    why: str = ""

    def line(self) -> str:
        where = self.path
        if self.start_line:
            where += f":{self.start_line}" + (f"-{self.end_line}" if self.end_line else "")
        return where + (f" ({self.why})" if self.why else "")


@dataclass
class State:
    task: str
    failing_command: str
    failing_output: str
    editable: str = ""
    history: list[str] = field(default_factory=list)
    candidates: list[CandidateFile] = field(default_factory=list)
    last_patch: str = ""  # "applied to a.py: summary" / "rejected: error"
    last_test: str = ""  # the tester's or the harness's last test run, output tail
    notes: list[str] = field(default_factory=list)  # refusals of an unverified done/finish
    exhausted: set[str] = field(default_factory=set)  # roles whose budget share ran out

    def add_candidates(self, raw: Any, max_candidates: int, snippet_chars: int) -> int:
        """Candidates from a searcher's answer (malformed entries skipped); how many were new."""
        added = 0
        for item in raw if isinstance(raw, list) else []:
            if isinstance(item, str):
                item = {"path": item}
            if not isinstance(item, dict) or not isinstance(item.get("path"), str):
                continue
            path = item["path"].strip()
            if not path or any(c.path == path for c in self.candidates):
                continue
            self.candidates.append(CandidateFile(
                path, _int(item.get("start_line")), _int(item.get("end_line")),
                str(item.get("snippet") or "")[:snippet_chars], str(item.get("why") or "")[:300]))
            added += 1
        del self.candidates[max_candidates:]
        return added

    def sections(self, chars: int, *, snippets: bool) -> list[str]:
        output = truncate(self.failing_output, head_lines=60, tail_lines=120,
                          max_bytes=chars).text.rstrip()
        parts = [f"Task: {self.task}"]
        if self.editable:
            parts.append(self.editable)
        parts.append(f"Failing command:\n    {self.failing_command}\n"
                     f"Its output at the start:\n```\n{output}\n```")
        if self.candidates:
            lines = []
            for c in self.candidates:
                lines.append(f"- {c.line()}")
                if snippets and c.snippet:
                    lines.append(f"```\n{c.snippet.rstrip()}\n```")
            parts.append("Candidate files (from the searcher):\n" + "\n".join(lines))
        if self.last_patch:
            parts.append(f"Last patch: {self.last_patch}")
        if self.last_test:
            tail = truncate(self.last_test, head_lines=20, tail_lines=60,
                            max_bytes=chars // 2).text.rstrip()
            parts.append(f"Last test run:\n```\n{tail}\n```")
        return parts


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
