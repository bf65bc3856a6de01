"""Overlong handling: what happens to trajectories that ran out of room (pure Python).

Modes (`OverlongConfig.mode`):

- ``mask``     DeepSWE "compact filtering": truncated trajectories get no loss (dropped from the batch;
               they do not enter their group's statistics either).
- ``negative`` Nebius: keep truncated trajectories as negatives, their reward set to `negative_reward`.
               Nebius found that masking them hides the looping they should punish.
- ``soft``     DAPO soft overlong punishment (Eq. 13) on the length L of the sampled (assistant) tokens:
               R += 0                               if L <= L_max - L_cache
               R += ((L_max - L_cache) - L)/L_cache if L_max - L_cache < L <= L_max
               R += -1                              if L > L_max
- ``turns``    Nebius turn-based penalty on the number of assistant turns n:
               R += 0 if n < L_thr else (L_thr - n) / (T_max - L_thr)     (reaches -1 at T_max).
- ``none``     leave rewards and masks alone.

Departures: in multi-turn episodes "length" for ``soft`` is the number of sampled tokens (loss_mask 1),
not the total context, since observations are not the policy's doing; DAPO was single-turn. ``soft`` and
``turns`` apply to every trajectory (they are length shaping), ``mask``/``negative`` only to truncated ones.
Truncated means an episode ending of `agent_scaffold.trajectory.TRUNCATED` (context_exhausted, max_turns);
a single turn cut at max_new_tokens (a completion's finish_reason "length") is not an episode ending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from agent_scaffold.trajectory import TERMINATIONS, TRUNCATED, Trajectory
from selfplay.learner.errors import BatchError

MODES = ("none", "mask", "negative", "soft", "turns")


@dataclass(frozen=True)
class OverlongConfig:
    mode: str = "negative"
    """One of none, mask, negative, soft, turns (see the module docstring)."""
    truncated_terminations: tuple[str, ...] = TRUNCATED
    """Trajectory.termination values that count as truncated (each one of
    `agent_scaffold.trajectory.TERMINATIONS`)."""
    negative_reward: float = -1.0
    """Reward given to truncated trajectories in `negative` mode (the solver's failure reward)."""
    l_max: int = 20480
    """`soft`: hard length limit L_max in sampled tokens (DAPO: 20,480)."""
    l_cache: int = 4096
    """`soft`: width of the soft punishment zone below L_max (DAPO: 4,096)."""
    turn_threshold: int = 10
    """`turns`: L_thr, turns allowed before the penalty starts (Nebius: 10)."""
    max_turns: int = 40
    """`turns`: T_max, where the penalty reaches -1 (Nebius: 40 in stage 1, 80 in stage 2)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"overlong mode {self.mode!r} is unknown; choose one of {MODES}")
        unknown = [t for t in self.truncated_terminations if t not in TERMINATIONS]
        if unknown:  # a typo here would silently train on truncated episodes as if they had finished
            raise ValueError(f"OverlongConfig.truncated_terminations has {unknown}, which no episode ends "
                             f"with; use some of {TERMINATIONS}")
        if not 0 < self.l_cache <= self.l_max:
            raise ValueError(f"need 0 < l_cache <= l_max, got l_cache={self.l_cache}, l_max={self.l_max}")
        if not 0 <= self.turn_threshold < self.max_turns:
            raise ValueError(f"need 0 <= turn_threshold < max_turns, got {self.turn_threshold}, {self.max_turns}")


def soft_overlong_penalty(length: int, l_max: int, l_cache: int) -> float:
    """DAPO Eq. 13."""
    start = l_max - l_cache
    if length <= start:
        return 0.0
    if length <= l_max:
        return (start - length) / l_cache
    return -1.0


def turn_penalty(turns: int, threshold: int, max_turns: int) -> float:
    """Nebius R_length: 0 below the threshold, then linear down to -1 at max_turns (and beyond)."""
    if turns < threshold:
        return 0.0
    return (threshold - turns) / (max_turns - threshold)


def shape_overlong(trajectories: Sequence[Trajectory],
                   config: OverlongConfig) -> tuple[list[Trajectory], dict[str, float]]:
    """Apply the overlong mode; returns the kept trajectories (rewards adjusted) and metrics."""
    kept: list[Trajectory] = []
    truncated = masked = 0
    penalty_sum = 0.0
    for t in trajectories:
        if t.reward is None:
            raise BatchError(f"trajectory {t.metadata.get('id', '?')} ({t.role}) has no reward; grade it "
                             "before handing it to the learner")
        is_truncated = t.termination in config.truncated_terminations
        truncated += is_truncated
        reward = t.reward
        if config.mode == "mask" and is_truncated:
            masked += 1
            continue
        if config.mode == "negative" and is_truncated:
            reward = config.negative_reward
        elif config.mode == "soft":
            reward += soft_overlong_penalty(sum(t.loss_mask), config.l_max, config.l_cache)
        elif config.mode == "turns":
            reward += turn_penalty(len(t.turn_spans), config.turn_threshold, config.max_turns)
        penalty_sum += reward - t.reward
        kept.append(t if reward == t.reward else replace(t, reward=reward))
    n = max(len(trajectories), 1)
    return kept, {"batch/truncated_frac": truncated / n, "batch/dropped_overlong": float(masked),
                  "batch/overlong_penalty_mean": penalty_sum / n}
