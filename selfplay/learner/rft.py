"""Rejection fine-tuning data (Nebius RFT): successful trajectories from the store -> SFT samples (pure
Python apart from reading trajectory files).

Kept: solver attempts with reward > 0 (`source` "success": the policy's own, "demo": the scripted
experts', "all": both), and optionally injector attempts whose artifact validated. Deduplicated by their
token ids, capped per task (lowest attempt ids first, so the choice is reproducible). Loss mask: only
assistant turns that parse as a valid action (`agent_scaffold.actions.parse_action`); format-error turns,
prompts and observations carry no loss (Nebius masks format-error turns the same way).
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_scaffold.actions import FormatError, parse_action
from agent_scaffold.trajectory import Trajectory, load_jsonl
from selfplay.learner.batch import Sample
from selfplay.learner.errors import LearnerError
from selfplay.orchestration.rundir import read_trajectories, recorded_episode

if TYPE_CHECKING:
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)

SOURCES = ("success", "demo", "all")
"""--source: the policy's own successes, the scripted experts' demonstrations, or both."""


class RFTDataError(LearnerError):
    """The store holds nothing to fine-tune on."""


@dataclass(frozen=True)
class RFTData:
    """What `collect` found."""

    trajectories: tuple[Trajectory, ...]
    """Kept trajectories (reward > 0 or validated injector artifacts), deduplicated and capped."""
    stats: dict[str, int]
    """rft/attempts, rft/successes, rft/duplicates, rft/capped, rft/missing_files, rft/kept."""


class _TrajectoryFiles:
    """Reads attempts' `trajectory_path`s, each file once. A run's attempts point at one episode of an
    iteration's gzip file (`<file>#<episode id>`, `selfplay.orchestration.rollouts`); a demonstration's at a
    plain JSON-lines file of its own."""

    def __init__(self) -> None:
        self._files: dict[Path, list[Trajectory]] = {}

    def _read(self, file: Path) -> list[Trajectory]:
        if file not in self._files:
            # a run writes gzip members (`append_trajectories`), `save_jsonl` plain lines
            self._files[file] = (list(read_trajectories(file)) if file.suffix == ".gz"
                                 else load_jsonl(file) if file.is_file() else [])
        return self._files[file]

    def load(self, ref: str, attempt: Any) -> Trajectory | None:
        """The trajectory `attempt` recorded at `ref`, or None when its file or episode is not there."""
        episode = recorded_episode(ref)
        if episode is not None and not Path(ref).is_file():  # a '#' in a directory name is no fragment
            found = self._read(Path(ref[:-len(episode) - 1]))
            same = [t for t in found if t.metadata.get("id") == episode]
            return same[-1] if same else None  # the last, as a resume reads it (an episode replayed after a crash)
        found = self._read(Path(ref))
        if len(found) == 1:
            return found[0]
        # several episodes in one file, none named: the one this attempt recorded
        same = [t for t in found if t.metadata.get("attempt_id") == attempt.id
                or (t.metadata.get("task_id") == attempt.task_id and t.reward == attempt.reward)]
        return same[0] if same else None


def collect(store: TaskStore, *, source: str = "all", max_per_task: int = 4, injector: bool = False) -> RFTData:
    """Successful trajectories of `store`; RFTDataError when there are none."""
    if source not in SOURCES:
        raise ValueError(f"--source must be one of {', '.join(SOURCES)}, got {source!r}")
    if max_per_task < 1:
        raise ValueError(f"--max-per-task must be >= 1, got {max_per_task}")
    attempts = store.attempts()
    if not attempts:
        raise RFTDataError(f"store {store.url} has no attempts; make demonstrations first "
                           f"(`selfplay demos --repo toolz -n 8 --store {store.url}`) or run episodes")
    wanted = {"success": ("policy",), "demo": ("demo",), "all": ("policy", "demo")}[source]
    good = [a for a in attempts if a.source in wanted and (
        (a.role == "solver" and a.reward > 0)
        or (injector and a.role == "injector" and a.artifact_id and store.get_artifact(a.artifact_id).valid))]
    if not good:
        raise RFTDataError(f"store {store.url} has {len(attempts)} attempts but no successful one from source "
                           f"{source!r} (solver reward > 0{', or a validated injector artifact' if injector else ''}); "
                           "try --source all, or make demonstrations with `selfplay demos`")
    stats = {"rft/attempts": len(attempts), "rft/successes": len(good), "rft/duplicates": 0, "rft/capped": 0,
             "rft/missing_files": 0}
    seen: set[str] = set()
    per_task: dict[str, int] = defaultdict(int)
    kept: list[Trajectory] = []
    files = _TrajectoryFiles()
    for a in sorted(good, key=lambda a: a.id):
        traj = files.load(a.trajectory_path, a) if a.trajectory_path else None
        if traj is None:
            stats["rft/missing_files"] += 1
            log.warning("attempt %d: trajectory %s not found; skipped", a.id, a.trajectory_path)
            continue
        digest = hashlib.sha256(repr(traj.input_ids).encode()).hexdigest()
        if digest in seen:
            stats["rft/duplicates"] += 1
            continue
        key = a.task_id or a.artifact_id or f"attempt-{a.id}"
        if per_task[key] >= max_per_task:
            stats["rft/capped"] += 1
            continue
        seen.add(digest)
        per_task[key] += 1
        kept.append(replace(traj, reward=a.reward, metadata={**traj.metadata, "attempt_id": a.id, "task_id": key}))
    if not kept:
        raise RFTDataError(f"store {store.url}: {len(good)} successful attempts, but none has a readable "
                           f"trajectory (the first: {good[0].trajectory_path}; see the warnings). A run stores "
                           "paths relative to the folder it ran in: run rft from that folder, and keep the run's "
                           "trajectories/ beside its store")
    stats["rft/kept"] = len(kept)
    return RFTData(tuple(kept), stats)


LOSS_TURNS = ("valid", "edit")
"""Which assistant turns carry loss: every valid action, or only valid `edit` actions (view, str_replace)."""


def valid_turn_mask(traj: Trajectory, turns: str = "valid") -> tuple[int, ...]:
    """`traj.loss_mask` with every turn that does not parse as a valid action zeroed (with `turns`
    "edit", also every action that is not an `edit`), and the turns its metadata lists as `unlearned_turns`
    (a recovery demonstration's wrong first edit, `selfplay.demos.solver_plan.Plan.unlearned`)."""
    if turns not in LOSS_TURNS:
        raise ValueError(f"loss turns must be one of {LOSS_TURNS}, got {turns!r}")
    mask = list(traj.loss_mask)
    replies = [m["content"] for m in traj.messages if m.get("role") == "assistant"]
    if len(replies) != len(traj.turn_spans):
        raise LearnerError(f"trajectory has {len(traj.turn_spans)} turn spans but {len(replies)} assistant "
                           "messages; it was not recorded by agent_scaffold.run_episode")
    unlearned = set(traj.metadata.get("unlearned_turns") or ())
    for i, ((start, end), text) in enumerate(zip(traj.turn_spans, replies)):
        try:
            keep = (parse_action(text).tool == "edit" or turns == "valid") and i not in unlearned
        except FormatError:
            keep = False
        if not keep:
            mask[start:end] = [0] * (end - start)
    return tuple(mask)


def sft_samples(trajectories: tuple[Trajectory, ...] | list[Trajectory], turns: str = "valid") -> list[Sample]:
    """One Sample per trajectory segment, loss on valid assistant turns only (`turns` "edit": only the
    valid edit turns); advantage 1, unused by SFT."""
    out = []
    for traj in trajectories:
        masked = replace(traj, loss_mask=valid_turn_mask(traj, turns))
        for ids, mask, lps in masked.sequences():
            if any(mask):
                out.append(Sample(input_ids=ids, loss_mask=mask, old_logprobs=lps, advantage=1.0, role=traj.role))
    return out
