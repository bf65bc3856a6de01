"""Curriculum sampling: which tasks the solver sees next. A pure function over `TaskStats`.

SSR (paper section 2.4) keeps only bugs whose solve rate lies strictly between 0 and 1 and rewards the
injector most near a solve rate of 0.2; it does not describe how solver tasks are drawn from a growing
pool. Departures, all configurable: we draw from a solve-rate band (default 0.2-0.5), reserve a share of
each batch for tasks nobody has attempted, retire tasks that became trivial (solved in all of the last K
attempts) or hopeless (never solved after M), cap how many tasks of one repo or one family (a parent
artifact and its higher-order descendants) enter one batch, and keep one task per normalised diff hash.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from selfplay.config.bounds import check_bounds
from selfplay.store.records import TaskStats


@dataclass(frozen=True)
class SamplingConfig:
    band: tuple[float, float] = (0.2, 0.5)
    """Target solve-rate band [low, high]; tasks inside it are drawn before tasks outside."""
    rate: Literal["recent", "overall"] = "recent"
    """Which solve rate the band applies to: over the recent window, or over all attempts."""
    unseen_share: float = 0.5
    """Up to this share of a batch goes to never-attempted tasks first (1.0: all unseen before any band)."""
    retire_solved_last_k: int = 4
    """Retire a task solved in all of its last K attempts (0 disables)."""
    retire_unsolved_after_m: int = 16
    """Retire a task never solved after M attempts (0 disables)."""
    max_repo_share: float = 0.5
    """At most this share of a batch (rounded up) from one repo."""
    max_per_family: int = 2
    """At most this many tasks of one family (parent artifact and its higher-order tasks) per batch."""
    relax_caps_when_short: bool = True
    """When the caps would leave the batch short, fill the rest ignoring them (a one-repo run still gets
    full batches); False keeps the caps strict and returns fewer tasks."""
    pool_factor: int = 4
    """The store pre-selects up to pool_factor * n random candidates per tier with indexed queries."""

    def __post_init__(self) -> None:
        low, high = self.band
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"band must satisfy 0 <= low <= high <= 1, got {self.band}; fix `band`")
        if not 0.0 <= self.unseen_share <= 1.0:
            raise ValueError(f"unseen_share must lie in [0, 1], got {self.unseen_share}")
        if not 0.0 < self.max_repo_share <= 1.0:
            raise ValueError(f"max_repo_share must lie in (0, 1], got {self.max_repo_share}")
        if self.max_per_family < 1:
            raise ValueError(f"max_per_family must be >= 1, got {self.max_per_family}")
        check_bounds(self, at_least={"retire_solved_last_k": 0, "retire_unsolved_after_m": 0})
        if self.rate not in ("recent", "overall"):
            raise ValueError(f"rate must be 'recent' or 'overall', got {self.rate!r}")
        if self.pool_factor < 1:
            raise ValueError(f"pool_factor must be >= 1, got {self.pool_factor}")


@dataclass(frozen=True)
class SampleResult:
    chosen: tuple[str, ...]
    """Task ids, in draw order."""
    retire: tuple[tuple[str, str], ...] = ()
    """(task id, reason) of candidates that the retirement rules remove."""
    duplicates: tuple[str, ...] = field(default=())
    """Candidates skipped because another task has the same normalised diff hash."""


def retirement_reason(stats: TaskStats, config: SamplingConfig) -> str | None:
    """Why `stats` should be retired now, or None."""
    k, m = config.retire_solved_last_k, config.retire_unsolved_after_m
    if k and len(stats.recent) >= k and stats.recent[-k:] == "1" * k:
        return f"solved in all of the last {k} attempts"
    if m and stats.attempts >= m and stats.solves == 0:
        return f"never solved in {stats.attempts} attempts"
    return None


def band_distance(stats: TaskStats, config: SamplingConfig) -> float:
    """0 inside the band, else how far the task's solve rate lies outside it (inf when unseen)."""
    rate = stats.recent_rate if config.rate == "recent" else stats.solve_rate
    if rate is None:
        return math.inf
    low, high = config.band
    return max(low - rate, rate - high, 0.0)


def sample(
    candidates: Sequence[TaskStats],
    n: int,
    config: SamplingConfig | None = None,
    rng: random.Random | None = None,
) -> SampleResult:
    """Draw up to `n` distinct active tasks from `candidates` (see the module docstring for the rules)."""
    config = config or SamplingConfig()
    rng = rng or random.Random()
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    retire: list[tuple[str, str]] = []
    by_hash: dict[tuple[str, str], TaskStats] = {}
    duplicates: list[str] = []
    # Stable order first, so dedup keeps the same representative whatever order the pool came in.
    for stats in sorted(candidates, key=lambda s: (-s.attempts, s.task_id)):
        if stats.status != "active":
            continue
        reason = retirement_reason(stats, config)
        if reason is not None:
            retire.append((stats.task_id, reason))
            continue
        key = (stats.repo, stats.diff_hash)
        if key in by_hash:
            if by_hash[key].task_id != stats.task_id:
                duplicates.append(stats.task_id)
            continue
        by_hash[key] = stats
    eligible = list(by_hash.values())
    rng.shuffle(eligible)  # random order within each tier below (sorts are stable)
    unseen = [s for s in eligible if s.attempts == 0]
    seen = sorted((s for s in eligible if s.attempts > 0), key=lambda s: band_distance(s, config))
    quota = math.ceil(config.unseen_share * n)
    order = (
        unseen[:quota]
        + [s for s in seen if band_distance(s, config) == 0.0]
        + unseen[quota:]
        + [s for s in seen if band_distance(s, config) > 0.0]
    )

    chosen = _take_capped(order, n, config)
    if len(chosen) < n and config.relax_caps_when_short:
        taken = set(chosen)
        chosen += [s.task_id for s in order if s.task_id not in taken][: n - len(chosen)]
    return SampleResult(tuple(chosen), tuple(retire), tuple(duplicates))


def _take_capped(order: Sequence[TaskStats], n: int, config: SamplingConfig) -> list[str]:
    repo_cap = max(1, math.ceil(config.max_repo_share * n))
    repos: Counter[str] = Counter()
    families: Counter[str] = Counter()
    chosen: list[str] = []
    for stats in order:
        if len(chosen) >= n:
            break
        if repos[stats.repo] >= repo_cap or families[stats.family] >= config.max_per_family:
            continue
        repos[stats.repo] += 1
        families[stats.family] += 1
        chosen.append(stats.task_id)
    return chosen
