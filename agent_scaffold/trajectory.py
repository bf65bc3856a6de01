"""`Trajectory`: one episode at the token level, the learner's training datum.

Assistant tokens are exactly the sampled ids with their behaviour logprobs (loss_mask 1). Everything
else (system/user prompt, observations, chat-template glue) has loss_mask 0 and logprob 0.0.

A trajectory whose context was compacted (`EpisodeLimits.on_context_full="compact"`) holds several
*segments* back to back: each is a complete context the policy actually saw, so a learner must score each
one as its own sequence (`sequences()`); scoring the concatenation would condition later turns on tokens
the policy never saw and corrupt the importance ratios. Every sampled token has mask 1 in exactly one
segment, the one it was sampled in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

Termination = Literal["submitted", "max_turns", "context_exhausted", "timeout", "format_errors", "repeated",
                      "sandbox_error"]
"""Why an episode ended; `agent_scaffold.agent.run_episode` produces exactly these (see its docstring)."""
TERMINATIONS: tuple[Termination, ...] = get_args(Termination)
TRUNCATED: tuple[Termination, ...] = ("context_exhausted", "max_turns")
"""Endings where the episode ran out of room before the model finished (what overlong handling treats
as truncated). A turn cut at max_new_tokens is not one: the episode goes on with the next turn."""


@dataclass(frozen=True)
class Trajectory:
    input_ids: tuple[int, ...]
    """Every token of the episode in order: prompt, then alternating sampled turns and observations (for a
    compacted episode, its segments one after another; see `segments`)."""
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
    termination: Termination
    """Why the episode ended: one of `TERMINATIONS`."""
    reward: float | None = None
    """Scalar reward, filled in after grading."""
    messages: tuple[dict[str, Any], ...] = ()
    """Readable view: the chat messages the tokens render."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """task_id, repo, strategy, group id, wall time, compactions (count), ..."""
    segments: tuple[tuple[int, int], ...] = ()
    """[start, end) offsets of each segment in input_ids when the context was compacted; each segment is a
    separate training sequence starting with its own prompt. Empty: one segment, the whole trajectory."""

    def sequences(self) -> list[tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]]:
        """(input_ids, loss_mask, logprobs) of each segment: the sequences a learner trains on."""
        spans = self.segments or ((0, len(self.input_ids)),)
        return [(self.input_ids[s:e], self.loss_mask[s:e], self.logprobs[s:e]) for s, e in spans]

    # --- serialisation (JSON lines) and a readable view -------------------------------------------------

    def to_json(self) -> str:
        """One line of JSON (no newlines inside), loadable by `from_json`."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        data = json.loads(line)
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown trajectory fields {sorted(unknown)}; written by a newer version?")
        data["input_ids"] = tuple(data["input_ids"])
        data["loss_mask"] = tuple(data["loss_mask"])
        data["logprobs"] = tuple(data["logprobs"])
        data["turn_spans"] = tuple(tuple(s) for s in data["turn_spans"])
        data["messages"] = tuple(data.get("messages", ()))
        data["segments"] = tuple(tuple(s) for s in data.get("segments", ()))
        return cls(**data)

    def to_text(self) -> str:
        """The messages as plain text, one section per message, for people to read."""
        head = (f"# {self.role} episode: termination={self.termination} reward={self.reward} "
                f"policy_version={self.policy_version} tokens={len(self.input_ids)} "
                f"sampled={sum(self.loss_mask)}" + (f" segments={len(self.segments)}" if self.segments else ""))
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
