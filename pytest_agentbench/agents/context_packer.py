"""context_packer: llm_v0 whose first observation also carries the code the failure points at.

Before the first model call it parses the failing command's output (traceback frames, test ids,
test files, modules an ImportError names), reads those files and the workspace modules they
import through the toolbox (`list_files`, `read_file`, `search`: the sandbox's rules hold and
the calls are recorded), packs them under `context_budget_tokens` (characters / 4 a token) and
writes `<artifacts>/context_manifest.json`: every file and line range considered, included or
not, why, and its estimated tokens. A `context_packed` note carries the totals. The rest is llm_v0.

A bad `params:` value stops the attempt with LLM_ERROR / MODEL_CONFIG (a configuration error,
like llm_v0's model settings), naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agentbench.agents.context_pack.manifest import manifest, pack_entry, write_manifest
from pytest_agentbench.agents.context_pack.packing import Packed, Source, pack, render_packed
from pytest_agentbench.agents.context_pack.params import (
    ContextPackerParams,
    ContextPackParamsError,
)
from pytest_agentbench.agents.context_pack.plan import plan
from pytest_agentbench.agents.context_pack.traceback_refs import parse_failing_output
from pytest_agentbench.agents.llm_config import LLMAgentConfig
from pytest_agentbench.agents.llm_v0 import LLMAgent, _Run
from pytest_agentbench.agents.port import AgentContext, AgentError, Tools
from pytest_agentbench.llm import ModelConfigError
from pytest_agentbench.schemas.events import Note
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.redaction import Redactor

AGENT_NAME = "context_packer"


class ContextPackerAgent(LLMAgent):
    name = AGENT_NAME

    @staticmethod
    def check_params(params: Mapping[str, Any]) -> None:
        """Before the run starts (agents.variants.agent_builder): one line naming a bad
        param."""
        try:
            ContextPackerParams.parse(params)
        except ContextPackParamsError as exc:
            raise ModelConfigError(str(exc)) from None

    @property
    def run_state(self) -> type[_Run]:
        return _PackerRun


class _PackerRun(_Run):
    agent_name = AGENT_NAME

    def __init__(self, ctx: AgentContext, config: LLMAgentConfig, redactor: Redactor | None,
                 transport: Any) -> None:
        try:
            self.pack_params = ContextPackerParams.parse(ctx.params or {})
        except ContextPackParamsError as exc:
            raise AgentError(Reason.LLM_ERROR, f"variant {AGENT_NAME}: {exc}",
                             "MODEL_CONFIG") from None
        super().__init__(ctx, config, redactor, transport)

    def _first_observation(self) -> str:
        base = super()._first_observation()
        packed = self._pack()
        code = render_packed(packed)
        if not code:
            return base
        budget = packed.budget_tokens
        return (f"{base}\n\nThe code this output points at (packed by {AGENT_NAME}: "
                f"~{packed.used_tokens} of {budget} tokens; read_file shows more):\n\n{code}")

    def _pack(self) -> Packed:
        params = self.pack_params
        workspace = WorkspaceFiles(self.ctx.toolbox)
        refs = parse_failing_output(self.ctx.failing_output)
        candidates, sources = plan(refs, workspace, workspace.read, params.plan_params(),
                                   workspace.search)
        packed = pack(candidates, sources, params.context_budget_tokens)
        if self.ctx.artifacts_dir is not None:
            write_manifest(self.ctx.artifacts_dir, manifest(
                AGENT_NAME, params.context_budget_tokens, [pack_entry(1, packed)]))
        included, excluded = len(packed.included), len(packed.excluded)
        self.ctx.events.emit(Note(
            kind="context_packed",
            message=f"packed {included} code ranges (~{packed.used_tokens} of "
                    f"{packed.budget_tokens} tokens), excluded {excluded}",
            data={"used_tokens": packed.used_tokens, "items": included, "excluded": excluded}),
            actor="agent")
        return packed


class WorkspaceFiles:
    """The workspace's .py files as the toolbox lists them (`path in files`) and reads them.
    When the listing is cut short or unavailable, membership is decided by reading the file."""

    def __init__(self, toolbox: Tools) -> None:
        self.toolbox = toolbox
        self.sources: dict[str, Source | None] = {}
        listing = toolbox.call("list_files", {"glob": "*.py"})
        files = listing.data.get("files") if listing.ok else None
        self.listed = set(files) if isinstance(files, list) else set()
        self.complete = isinstance(files, list) and not listing.stdout_truncated

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        if self.complete:
            return path in self.listed
        return self.read(path) is not None

    def search(self, regex: str) -> list[tuple[str, int]]:
        """(path, line) of each match of `regex` in the .py files (the `search` tool)."""
        result = self.toolbox.call("search", {"query": regex, "regex": True, "glob": "*.py",
                                              "max_results": 50})
        found = []
        for line in result.stdout.splitlines() if result.ok else []:
            path, _, rest = line.partition(":")
            number = rest.partition(":")[0]
            if number.isdigit():
                found.append((path, int(number)))
        return found

    def read(self, path: str) -> Source | None:
        if path not in self.sources:
            if self.complete and path not in self.listed:
                self.sources[path] = None
            else:
                result = self.toolbox.call("read_file", {"path": path})
                self.sources[path] = (Source.from_text(path, result.stdout, result.total_lines)
                                      if result.ok else None)
        return self.sources[path]
