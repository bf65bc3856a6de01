"""The injector's baseline: a running mean of past injector rewards per (repo, strategy).

SSR does not say how the injector's group is formed (papers.md 1.13/6). The solver has a natural group,
its G attempts on one bug; the injector usually makes one bug per prompt, so there is no group of
same-prompt injections to compare against. We therefore use a **running-mean baseline per
(repo, strategy)**: A = r - b[repo, strategy], where b is an exponential moving average of that key's
earlier rewards. Choices, and why:

- The baseline is read *before* the current batch updates it, so a sample never sits in its own baseline
  (that keeps the estimator unbiased; within one batch all samples of a key see the same b).
- A key seen for the first time falls back to the role-wide running mean. Before any injector reward has
  been seen there is no mean yet, so the first batch is its own baseline, leave-one-out (RLOO: each sample
  against the mean of the others). A fixed `initial` there would give every sample of a batch where most
  artifacts are invalid (reward -1) the same large negative advantage, and the first update would push
  down the whole plan the valid ones share with them. A first batch of one sample has no others, and
  falls back to `initial` (0.0, the centre of the injector reward range [-1, 1)).
- Keying by repo and strategy removes the easy variance (some repos or strategies are just harder to
  break validly), like a per-prompt group would, without sampling several injections per prompt.
- No std normalisation (Dr. GRPO style): a running std would be noisy early on.

The state is a plain dict, saved with learner checkpoints so a resumed run keeps its baselines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

GLOBAL_KEY = "*"


@dataclass
class RunningMeanBaseline:
    """Exponential moving average of rewards per key; `momentum` weighs the old value."""

    momentum: float = 0.9
    """b <- momentum * b + (1 - momentum) * batch_mean_of_key; 0 keeps only the last batch."""
    initial: float = 0.0
    """Baseline before any reward was seen."""
    values: dict[str, float] = field(default_factory=dict)
    """Current baseline per key ("repo|strategy", and "*" for the role-wide mean)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")

    def baseline(self, key: str) -> float:
        return self.values.get(key, self.values.get(GLOBAL_KEY, self.initial))

    def advantages(self, keys: Sequence[str], rewards: Sequence[float]) -> tuple[list[float], dict[str, float]]:
        """A_i = r_i - b[key_i] with b as it was before this batch (the first batch of two or more: the
        mean of the batch's other rewards); then fold the batch into b."""
        if len(keys) != len(rewards):
            raise ValueError(f"{len(keys)} keys but {len(rewards)} rewards")
        n = len(rewards)
        if GLOBAL_KEY not in self.values and n >= 2:
            total = sum(rewards)
            adv = [r - (total - r) / (n - 1) for r in rewards]
        else:
            adv = [r - self.baseline(k) for k, r in zip(keys, rewards)]
        by_key: dict[str, list[float]] = {}
        for k, r in zip(keys, rewards):
            by_key.setdefault(k, []).append(r)
        if rewards:
            by_key[GLOBAL_KEY] = list(rewards)
        for k, rs in by_key.items():
            mean = sum(rs) / len(rs)
            # A new key starts from the batch mean, not from `initial`, so one batch sets its scale.
            self.values[k] = self.momentum * self.values[k] + (1 - self.momentum) * mean if k in self.values else mean
        metrics = {"injector_baseline_keys": float(len(self.values) - (GLOBAL_KEY in self.values)),
                   "injector_baseline_global": self.values.get(GLOBAL_KEY, self.initial)}
        return adv, metrics

    def state_dict(self) -> dict[str, object]:
        return {"momentum": self.momentum, "initial": self.initial, "values": dict(self.values)}

    @classmethod
    def from_state_dict(cls, state: dict[str, object]) -> RunningMeanBaseline:
        return cls(momentum=float(state["momentum"]), initial=float(state["initial"]),  # type: ignore[arg-type]
                   values=dict(state["values"]))  # type: ignore[arg-type]


def injector_key(metadata: dict[str, object]) -> str:
    """The baseline key of an injector trajectory: "repo|strategy" from its metadata."""
    return f"{metadata.get('repo', '?')}|{metadata.get('strategy', '?')}"
