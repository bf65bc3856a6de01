"""Episodes of a run for the report: every trajectory file read once, a short summary of each episode (the
length plots), and bounded viewer records of the newest ones (the trajectory viewer).

Trajectory files are `trajectories/it<iteration:05d>-<role>.jsonl.gz` (the run directory contract). A file
cut short by a crash, or a line that does not parse, costs only what cannot be read: the rest is kept and
the problem is listed on the page.
"""

from __future__ import annotations

import gzip
import logging
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_scaffold.actions import FormatError, parse_action
from agent_scaffold.trajectory import Trajectory
from selfplay.config.bounds import check_bounds

log = logging.getLogger(__name__)
CUT_MARK = "\n[… {n} more characters not shown: the report keeps {keep} per text]"
MAX_ITEMS = 200  # entries kept of any list or mapping (a grade's test map can hold thousands)


@dataclass(frozen=True)
class EpisodeLimits:
    """How much of the episodes the page embeds (the page must stay small enough to open)."""

    max_episodes: int = 200
    """Episodes the viewer carries in full, the newest first; older ones count in the plots only."""
    max_text_chars: int = 4000
    """Characters kept of each message, submitted file, grading reason or check detail; the rest is cut
    with a marker saying how much."""
    max_episode_chars: int = 40_000
    """Characters of messages kept per episode; the messages after this budget are replaced by one marker."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"max_episodes": 0, "max_text_chars": 0, "max_episode_chars": 0})


@dataclass(frozen=True)
class EpisodeSummary:
    """What the length plots need of one episode."""

    role: str
    repo: str
    iteration: int | None
    turns: int
    tokens: int
    reward: float | None
    termination: str


@dataclass(frozen=True)
class EpisodeSet:
    """Every episode's summary and the viewer records of the newest."""

    summaries: tuple[EpisodeSummary, ...]
    records: tuple[dict[str, Any], ...]
    """JSON-ready viewer records, newest first (see `episode_record`)."""
    problems: tuple[str, ...]
    """Unreadable files and lines, one sentence each."""
    cut_texts: int
    """How many texts in `records` were shortened."""


def read_episodes(run_dir: Path, limits: EpisodeLimits) -> EpisodeSet:
    """Read every trajectory file of `run_dir` (newest iteration first)."""
    files = sorted((run_dir / "trajectories").glob("*.jsonl.gz"), reverse=True)
    summaries: list[EpisodeSummary] = []
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: set[str] = set()
    clip = TextClipper(limits.max_text_chars)
    for path in files:
        file_records = []
        for lineno, traj in _trajectories(path, problems):
            summaries.append(summarise(traj))
            if len(records) + len(file_records) < limits.max_episodes:
                record = episode_record(traj, f"{path.name}:{lineno}", limits, clip)
                record["id"] = _unique(record["id"], seen)
                file_records.append(record)
        records.extend(reversed(file_records))  # the last line of a file is its newest episode
    return EpisodeSet(tuple(summaries), tuple(records), tuple(problems), clip.cut)


def _trajectories(path: Path, problems: list[str]) -> Iterator[tuple[int, Trajectory]]:
    lineno = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield lineno, Trajectory.from_json(line)
                except (ValueError, TypeError, KeyError) as exc:
                    problems.append(f"{path.name} line {lineno} skipped: not a trajectory ({exc})")
    except (OSError, EOFError, zlib.error) as exc:
        problems.append(f"{path.name} cut short after line {lineno} ({exc.__class__.__name__}: {exc}); "
                        "the lines before it are shown")
    log.debug("read %s (%d lines)", path, lineno)


def _unique(episode_id: str, seen: set[str]) -> str:
    candidate, n = episode_id, 1
    while candidate in seen:  # a retried episode written twice keeps both copies apart
        n += 1
        candidate = f"{episode_id}~{n}"
    seen.add(candidate)
    return candidate


def summarise(traj: Trajectory) -> EpisodeSummary:
    md = traj.metadata
    turns = md.get("turns")
    return EpisodeSummary(
        role=str(traj.role),
        repo=str(md.get("repo") or ""),
        iteration=md["iteration"] if isinstance(md.get("iteration"), int) else None,
        turns=turns if isinstance(turns, int) else len(traj.turn_spans),
        tokens=len(traj.input_ids),
        reward=_finite(traj.reward),
        termination=str(traj.termination),
    )


def episode_record(traj: Trajectory, source: str, limits: EpisodeLimits, clip: TextClipper) -> dict[str, Any]:
    """The viewer's record of one episode: plain JSON values, every model-written text bounded."""
    md = traj.metadata
    s = summarise(traj)
    record: dict[str, Any] = {
        "id": str(md.get("id") or source), "source": source, "role": s.role, "repo": s.repo,
        "iteration": s.iteration, "reward": s.reward, "termination": s.termination, "turns": s.turns,
        "tokens": s.tokens, "sampled_tokens": sum(traj.loss_mask), "policy_version": traj.policy_version,
    }
    for key in ("task_id", "group_id", "strategy", "order", "infra_failure", "error", "format_errors"):
        if md.get(key) is not None:
            record[key] = clip.value(md[key])
    record["messages"] = _messages(traj, limits, clip)
    for key in ("submission", "grade", "validation", "unsent_observation"):
        if md.get(key) is not None:
            record[key] = clip.value(md[key])
    return record


def _messages(traj: Trajectory, limits: EpisodeLimits, clip: TextClipper) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    budget = limits.max_episode_chars
    for i, message in enumerate(traj.messages):
        if budget <= 0:
            rest = len(traj.messages) - i
            out.append({"role": "note", "content": f"[{rest} more messages not shown: the report keeps "
                                                   f"{limits.max_episode_chars} characters per episode]"})
            clip.cut += 1
            break
        content = str(message.get("content", "")) if isinstance(message, dict) else str(message)
        text = clip.text(content[:budget] if len(content) > budget else content, full=len(content))
        budget -= len(text)
        entry: dict[str, Any] = {"role": str(message.get("role", "?")) if isinstance(message, dict) else "?",
                                 "content": text}
        if entry["role"] == "assistant":
            entry["command"] = clip.text(_command(content))
        out.append(entry)
    return out


def _command(content: str) -> str:
    """The action an assistant turn asked for, as the scaffold parsed it (or why it did not parse)."""
    try:
        action = parse_action(content)
    except FormatError as exc:
        return f"(format error) {str(exc).splitlines()[0]}"
    if action.tool == "bash":
        return action.command
    if action.tool == "edit":
        return " ".join(p for p in ("edit", action.command, action.path) if p)
    return action.tool


def _finite(value: Any) -> float | None:
    # NaN and infinities are not JSON; the page shows them as "none"
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


class TextClipper:
    """Bounds texts and containers, counting what it shortened."""

    def __init__(self, keep: int):
        self.keep = keep
        self.cut = 0

    def text(self, text: str, full: int | None = None) -> str:
        full = len(text) if full is None else full
        if full <= self.keep and len(text) == full:
            return text
        self.cut += 1
        kept = text[: self.keep]
        return kept + CUT_MARK.format(n=full - len(kept), keep=self.keep)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bool) or value is None or isinstance(value, int):
            return value
        if isinstance(value, float):
            return _finite(value)
        if isinstance(value, dict):
            items = list(value.items())
            out = {str(k)[: self.keep]: self.value(v) for k, v in items[:MAX_ITEMS]}
            if len(items) > MAX_ITEMS:
                self.cut += 1
                out["…"] = f"{len(items) - MAX_ITEMS} more entries not shown"
            return out
        if isinstance(value, (list, tuple)):
            out_list = [self.value(v) for v in value[:MAX_ITEMS]]
            if len(value) > MAX_ITEMS:
                self.cut += 1
                out_list.append(f"… {len(value) - MAX_ITEMS} more entries not shown")
            return out_list
        return self.text(str(value))
