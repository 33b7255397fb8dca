"""The budget checks made before every model call, one rule for every caller (llm_v0 and the
agents built on it, the subagents, the gateway): the next call is refused when the calls made,
or what was spent plus what the next call would add, would pass a budget."""

from __future__ import annotations

from typing import Protocol


class Budgets(Protocol):
    """A run's budgets (agents.llm_config.Budget): None means no limit."""

    @property
    def max_steps(self) -> int | None: ...

    @property
    def max_tokens_total(self) -> int | None: ...

    @property
    def max_cost_usd(self) -> float | None: ...

    @property
    def max_wall_sec(self) -> float | None: ...


def budget_over(budgets: Budgets, calls: int, tokens_used: int, next_tokens: int,
                spent_usd: float, last_cost_usd: float | None, elapsed_sec: float,
                last_wall_sec: float) -> tuple[str, str] | None:
    """("STEPS" | "TOKENS" | "COST" | "WALL", the detail line) of the first budget the next call
    would pass, else None. `next_tokens`: the next call's estimated prompt and completion."""
    if budgets.max_steps is not None and calls >= budgets.max_steps:
        return "STEPS", f"model calls {calls} of {budgets.max_steps}"
    token_cap = budgets.max_tokens_total
    if token_cap is not None and tokens_used + next_tokens > token_cap:
        return "TOKENS", (f"{tokens_used} tokens used + ~{next_tokens} for the next call > "
                          f"max_tokens_total={token_cap}")
    last = last_cost_usd or 0.0
    cost_cap = budgets.max_cost_usd
    if cost_cap is not None and (spent_usd >= cost_cap or spent_usd + last > cost_cap):
        return "COST", (f"${spent_usd:.4f} spent + ~${last:.4f} for the next call > "
                        f"max_cost_usd={cost_cap}")
    if budgets.max_wall_sec is not None and elapsed_sec + last_wall_sec > budgets.max_wall_sec:
        return "WALL", (f"{elapsed_sec:.1f}s elapsed + ~{last_wall_sec:.1f}s for the next call > "
                        f"max_wall_sec={budgets.max_wall_sec}")
    return None
