"""`Trajectory`: one episode at the token level, the learner's training datum.

Assistant tokens are exactly the sampled ids with their behaviour logprobs (loss_mask 1). Everything
else (system/user prompt, observations, chat-template glue) has loss_mask 0 and logprob 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Trajectory:
    input_ids: tuple[int, ...]
    """Every token of the episode in order: prompt, then alternating sampled turns and observations."""
    loss_mask: tuple[int, ...]
    """1 on sampled assistant tokens, 0 elsewhere; same length as input_ids."""
    logprobs: tuple[float, ...]
    """Behaviour (sampling) logprob of each token; 0.0 where loss_mask is 0."""
    turn_spans: tuple[tuple[int, int], ...]
    """[start, end) token offsets of each assistant turn."""
    policy_version: int
    """Version of the weights that sampled the assistant tokens (the oldest, if it changed mid-episode)."""
    role: str
    """"injector" or "solver" (or "eval")."""
    termination: str
    """Why the episode ended: submitted, max_turns, context_exhausted, timeout, format_errors, sandbox_error."""
    reward: float | None = None
    """Scalar reward, filled in after grading."""
    messages: tuple[dict[str, Any], ...] = ()
    """Readable view: the chat messages the tokens render."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """task_id, repo, strategy, group id, wall time, ..."""
