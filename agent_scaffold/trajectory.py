"""`Trajectory`: one episode at the token level, the learner's training datum.

Assistant tokens are exactly the sampled ids with their behaviour logprobs (loss_mask 1). Everything
else (system/user prompt, observations, chat-template glue) has loss_mask 0 and logprob 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
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

    # --- serialisation (JSON lines) and a readable view -------------------------------------------------

    def to_json(self) -> str:
        """One line of JSON (no newlines inside), loadable by `from_json`."""
        import json

        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        import json

        data = json.loads(line)
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown trajectory fields {sorted(unknown)}; written by a newer version?")
        data["input_ids"] = tuple(data["input_ids"])
        data["loss_mask"] = tuple(data["loss_mask"])
        data["logprobs"] = tuple(data["logprobs"])
        data["turn_spans"] = tuple(tuple(s) for s in data["turn_spans"])
        data["messages"] = tuple(data.get("messages", ()))
        return cls(**data)

    def to_text(self) -> str:
        """The messages as plain text, one section per message, for people to read."""
        head = (f"# {self.role} episode: termination={self.termination} reward={self.reward} "
                f"policy_version={self.policy_version} tokens={len(self.input_ids)} "
                f"sampled={sum(self.loss_mask)}")
        parts = [head]
        for i, m in enumerate(self.messages):
            parts.append(f"\n## [{i}] {m['role']}\n\n{m['content']}")
        return "\n".join(parts) + "\n"




def save_jsonl(trajectories: list[Trajectory], path: str | Path, append: bool = True) -> None:
    """Write trajectories as JSON lines (appending by default, so nothing already saved is lost)."""
    with open(path, "a" if append else "w", encoding="utf-8") as fh:
        for t in trajectories:
            fh.write(t.to_json() + "\n")


def load_jsonl(path: str | Path) -> list[Trajectory]:
    with open(path, encoding="utf-8") as fh:
        return [Trajectory.from_json(line) for line in fh if line.strip()]
