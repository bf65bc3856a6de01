"""Small trajectory builders shared by the learner tests."""

from __future__ import annotations

from agent_scaffold.trajectory import Trajectory


def traj(reward: float | None, *, group: str = "g", role: str = "solver", version: int = 0,
         termination: str = "submitted", sampled: int = 3, turns: int = 1, prompt: int = 2,
         meta: dict | None = None) -> Trajectory:
    n = prompt + sampled
    per_turn = max(sampled // max(turns, 1), 1)
    spans = tuple((prompt + i * per_turn, prompt + (i + 1) * per_turn) for i in range(turns))
    return Trajectory(input_ids=tuple(range(1, n + 1)), loss_mask=(0,) * prompt + (1,) * sampled,
                      logprobs=(0.0,) * prompt + (-0.5,) * sampled, turn_spans=spans, policy_version=version,
                      role=role, termination=termination, reward=reward,
                      metadata={"group_id": group, **(meta or {})})
