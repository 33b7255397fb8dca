"""The cost and wall-clock budget checks made before every model call, one rule for every caller
(llm_v0, the subagents and the gateway): the next call is refused when what was spent, plus what
the last call cost or took, would pass the budget."""

from __future__ import annotations


def spend_over(max_cost_usd: float | None, spent_usd: float, last_cost_usd: float | None,
               max_wall_sec: float | None, elapsed_sec: float,
               last_wall_sec: float) -> tuple[str, str] | None:
    """("COST" | "WALL", the detail line) when the next call would pass a budget, else None."""
    last = last_cost_usd or 0.0
    if max_cost_usd is not None and (spent_usd >= max_cost_usd or spent_usd + last > max_cost_usd):
        return "COST", (f"${spent_usd:.4f} spent + ~${last:.4f} for the next call > "
                        f"max_cost_usd={max_cost_usd}")
    if max_wall_sec is not None and elapsed_sec + last_wall_sec > max_wall_sec:
        return "WALL", (f"{elapsed_sec:.1f}s elapsed + ~{last_wall_sec:.1f}s for the next call > "
                        f"max_wall_sec={max_wall_sec}")
    return None
