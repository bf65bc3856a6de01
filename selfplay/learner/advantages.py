"""Group advantage estimators over scalar rewards (pure Python, no torch).

A group is the set of samples that share a baseline, e.g. the solver's G attempts on one task.
Each estimator maps the group's rewards to one advantage per sample; the learner broadcasts it to every
assistant token of the trajectory.

- ``grpo``:   A_i = (r_i - mean(r)) / (std(r) + eps)        (DAPO Eq. 8, Nebius; std is the sample std,
  ddof=1, as torch.std in verl and TRL; a group of one has A = 0).
- ``dr_grpo``: A_i = r_i - mean(r)                          (Dr. GRPO: no std division, no length bias).
- ``rloo``:   A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean(r))   (leave-one-out, needs G >= 2).

Departure from the papers: none in the formulas; we add `eps` to the std (DAPO writes the bare std, and
an all-equal group would divide by zero; dynamic sampling removes such groups anyway).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

Estimator = Callable[[Sequence[float], float], list[float]]


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def grpo(rewards: Sequence[float], eps: float) -> list[float]:
    m, s = _mean(rewards), _std(rewards)
    return [(r - m) / (s + eps) for r in rewards]


def dr_grpo(rewards: Sequence[float], eps: float) -> list[float]:
    m = _mean(rewards)
    return [r - m for r in rewards]


def rloo(rewards: Sequence[float], eps: float) -> list[float]:
    g = len(rewards)
    if g < 2:
        raise ValueError("rloo needs groups of at least 2 samples; use estimator 'dr_grpo' or 'grpo' "
                         "for singleton groups")
    total = sum(rewards)
    return [r - (total - r) / (g - 1) for r in rewards]


ESTIMATORS: dict[str, Estimator] = {"grpo": grpo, "dr_grpo": dr_grpo, "rloo": rloo}
"""Registry of advantage estimators, by the name used in `LearnerConfig.advantage`."""


def group_advantages(rewards: Sequence[float], estimator: str = "grpo",
                     eps: float = 1e-6) -> tuple[list[float], dict[str, float]]:
    """Advantages of one group's rewards, and metrics (mean, std, all-equal flag)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {estimator!r}; choose one of {sorted(ESTIMATORS)}")
    if not rewards:
        raise ValueError("empty group: a group needs at least one reward")
    if any(not math.isfinite(r) for r in rewards):
        raise ValueError(f"non-finite reward in group {list(rewards)}; fix the reward function")
    adv = ESTIMATORS[estimator](rewards, eps)
    return adv, {"reward_mean": _mean(rewards), "reward_std": _std(rewards),
                 "all_equal": float(max(rewards) == min(rewards))}
