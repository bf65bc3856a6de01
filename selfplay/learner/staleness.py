"""Staleness filter: drop samples sampled by weights too many versions old (pure Python).

SSR discards rollouts more than 8 off-policy steps stale; we do the same per sample
(staleness = current_version - trajectory.policy_version). A sample is kept iff
0 <= staleness <= max_staleness. A version newer than the learner's is a bookkeeping bug and raises.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_scaffold.trajectory import Trajectory
from selfplay.learner.errors import BatchError


def filter_stale(trajectories: Sequence[Trajectory], current_version: int,
                 max_staleness: int = 8) -> tuple[list[Trajectory], dict[str, float]]:
    """Keep trajectories at most `max_staleness` versions behind `current_version`."""
    if max_staleness < 0:
        raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
    kept: list[Trajectory] = []
    ages: list[int] = []
    for t in trajectories:
        age = current_version - t.policy_version
        if age < 0:
            raise BatchError(f"trajectory {t.metadata.get('id', '?')} has policy_version {t.policy_version}, "
                             f"newer than the learner's {current_version}; rollout workers must report the "
                             "version they were given")
        ages.append(age)
        if age <= max_staleness:
            kept.append(t)
    return kept, {"batch/dropped_stale": float(len(trajectories) - len(kept)),
                  "batch/staleness_mean": sum(ages) / len(ages) if ages else 0.0,
                  "batch/staleness_max": float(max(ages, default=0))}
