"""The run's time budget (`RunConfig.max_hours`): whether one more iteration fits.

An iteration is projected to take as long as the slowest one so far. The first iteration of a process has
no such figure, so it starts whenever the budget is not yet spent. A run can still overrun by the amount
an iteration exceeds every earlier one, e.g. when it trains on more samples."""

from __future__ import annotations


def fits_budget(spent_s: float, slowest_iteration_s: float, budget_s: float) -> bool:
    """Whether an iteration started now, lasting `slowest_iteration_s`, ends within `budget_s` of run time."""
    return spent_s < budget_s and spent_s + slowest_iteration_s <= budget_s
