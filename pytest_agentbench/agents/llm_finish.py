"""llm_v0 does not take `finish` at its word (`verify_finish`): the failing command runs
through the toolbox (recorded like any call) and while it fails the finish is refused, the model
gets the output's tail and goes on; after `max_unverified_finish` refusals the run ends
(AGENT_GAVE_UP / UNVERIFIED_FINISH). A passing run of exactly that command by the model, with
nothing run or edited since, is check enough; with under MIN_VERIFY_SEC left the finish stands
unchecked (the grading runs anyway). Each decision is a `note` event."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pytest_agentbench.agents.llm_config import LLMParams
from pytest_agentbench.agents.llm_messages import finish_refused, finish_refused_for_good
from pytest_agentbench.agents.port import AgentContext, AgentOutcome
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.signatures import signature
from pytest_agentbench.text.truncation import truncate

MIN_VERIFY_SEC = 2.0  # below this much task time left, a finish stands unchecked


class FinishCheck:
    def __init__(self, ctx: AgentContext, cfg: LLMParams,
                 note: Callable[[str, str, dict[str, Any]], None], offers_write: bool) -> None:
        self.ctx, self.cfg, self.note, self.offers_write = ctx, cfg, note, offers_write
        self.refusals = 0

    def check(self, clean_pass: bool) -> tuple[str | None, AgentOutcome | None]:
        """(None, None) when the finish stands; else the observation refusing it, and the
        outcome that ends the run when the refusals are used up."""
        command = self.ctx.failing_command
        if not self.cfg.verify_finish or not command.strip():
            return None, None
        if clean_pass:
            self.note("finish_verified", "the model's own run of the failing command passed",
                       {"by": "model_run"})
            return None, None
        remaining = self.ctx.remaining()
        if remaining < MIN_VERIFY_SEC:
            self.note("finish_unverified", f"{remaining:.1f}s left: no time to run the failing "
                       "command; the finish stands", {"remaining_sec": round(remaining, 3)})
            return None, None
        started = time.monotonic()
        result = self.ctx.toolbox.call("run", {"command": command,
                                               "timeout_sec": max(1.0, remaining - 1.0)})
        duration_ms = int((time.monotonic() - started) * 1000)
        if result.exit_code == 0 and result.error_type is None:
            self.note("finish_verified", "the failing command passes", {
                "by": "verify_run", "duration_ms": duration_ms})
            return None, None
        self.refusals += 1
        final = self.refusals > self.cfg.max_unverified_finish
        sig = signature(result.exit_code if result.exit_code is not None else -1,
                        result.stdout, result.stderr)
        self.note("finish_refused", f"finish refused ({self.refusals}): the failing "
                   f"command still fails (exit {result.exit_code})", {
                       "refusals": self.refusals, "final": final,
                       "exit_code": result.exit_code, "error_type": result.error_type,
                       "signature": sig[:5], "duration_ms": duration_ms})
        tail = truncate(result.to_observation(), head_lines=2, tail_lines=80,
                        max_bytes=self.cfg.verify_output_chars).text.rstrip()
        if final:
            return finish_refused_for_good(tail), AgentOutcome(
                "unverified_finish", Reason.AGENT_GAVE_UP, "UNVERIFIED_FINISH",
                f"finish called {self.refusals} times while `{command}` still failed "
                f"(last exit code {result.exit_code})")
        chances = self.cfg.max_unverified_finish - self.refusals
        return finish_refused(command, tail, chances, self.offers_write), None

