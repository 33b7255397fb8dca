"""The exit status of `agentbench gate` (fixed-sample, gate.py) and of `gate --sequential`
(sequential.py): one rule for both, from the outcome (docs/exit-status.md, the gate's table).
A module of its own, with no imports, so that sequential.py (which the plugin loads during a run)
need not bring gate.py's statistics."""

from __future__ import annotations

EXIT_OK, EXIT_REGRESSION, EXIT_INCONCLUSIVE = 0, 1, 3


def outcome_of(regression: bool, inconclusive: bool) -> str:
    """One of regression, inconclusive, ok: a regression wins over inconclusive."""
    return "regression" if regression else "inconclusive" if inconclusive else "ok"


def exit_code(outcome: str, inconclusive_ok: bool = False) -> int:
    """1 for a regression, 3 for inconclusive (0 with `inconclusive_ok`), else 0."""
    if outcome == "regression":
        return EXIT_REGRESSION
    if outcome == "inconclusive" and not inconclusive_ok:
        return EXIT_INCONCLUSIVE
    return EXIT_OK
