"""Rewards for both roles (SSR section 2.4, Eq. 1).

Solver: +1 if resolved, else -1. Injector, per Eq. 1 (adapted from Absolute Zero):
    -1             if consistency validation failed
    -alpha         if the solve rate s is 0 or 1
    1 - (1+alpha)s otherwise
with alpha = 0.8 and s the fraction of G = 8 solver attempts that resolved the bug. The paper's
ablation reward, binary on consistency alone (+1 valid, -1 invalid), is `injector_mode="consistency"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

InjectorMode = Literal["ssr", "consistency"]
INJECTOR_MODES: tuple[str, ...] = ("ssr", "consistency")


@dataclass(frozen=True)
class RewardConfig:
    """How the two roles are rewarded."""

    alpha: float = 0.8
    """SSR Eq. 1's alpha in (0, 1): the reward of a valid bug that every or no solver attempt fixes is -alpha."""
    group_size: int = 8
    """G: solver attempts per bug that the solve rate is computed over."""
    injector_mode: InjectorMode = "ssr"
    """"ssr" for Eq. 1; "consistency" for the paper's ablation (+1 valid, -1 invalid)."""
    reward_duplicates: bool = False
    """Reward a valid bug that the store already holds like a new one: the same bug diff as an older task
    (the same text on the same lines, `selfplay.diffs.site_hash`), or the same bug in other words (a
    changed line of the repo in common, breaking the same tests, also with an unrelated edit beside it: `selfplay.task.same_bug`). Off: it gets the invalid reward. On, RL at 135M learned to write one
    known-valid bug again and again, and then reworded it (docs/benchmarks.md, fifth attempt). A bug is judged
    against the store as the iteration found it: episodes of one iteration that write the same new bug are all
    rewarded as new (which of them finished first is timing), and from the next iteration on it is held."""

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"RewardConfig.alpha must lie in (0, 1), got {self.alpha}")
        if self.group_size < 1:
            raise ValueError(f"RewardConfig.group_size must be >= 1, got {self.group_size}")
        if self.injector_mode not in INJECTOR_MODES:
            raise ValueError(f"RewardConfig.injector_mode must be one of {INJECTOR_MODES}, "
                             f"got {self.injector_mode!r}")


def solver_reward(resolved: bool) -> int:
    """+1 if the attempt resolved the bug, else -1; every `GradeResult.reward` is this."""
    return 1 if resolved else -1


def solve_rate(resolved: Sequence[bool]) -> float:
    """Fraction of attempts that resolved the bug; raises ValueError on no attempts."""
    if not resolved:
        raise ValueError("solve_rate needs at least one solver attempt")
    return sum(bool(r) for r in resolved) / len(resolved)


def injector_reward(valid: bool, s: float | None = None, config: RewardConfig = RewardConfig()) -> float:
    """SSR Eq. 1 (or the binary consistency reward). `s` may be None only when invalid or in consistency mode."""
    if not valid:
        return -1.0
    if config.injector_mode == "consistency":
        return 1.0
    if s is None or not 0.0 <= s <= 1.0:
        raise ValueError(f"injector_reward needs a solve rate in [0, 1] for a valid bug, got {s!r}")
    if s == 0.0 or s == 1.0:
        return -config.alpha
    return 1.0 - (1.0 + config.alpha) * s
