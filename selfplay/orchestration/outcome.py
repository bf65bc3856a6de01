"""`IterationOutcome`: what one iteration's rollouts produced, typed, for the injector rewards, the learner
and the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_scaffold.trajectory import Trajectory
from selfplay.judge.verdict import GradeResult
from selfplay.orchestration.state import InjectorVerdict
from selfplay.rollout.requests import EpisodeResult
from selfplay.task import Task


@dataclass(frozen=True)
class SolverAttempt:
    """One graded solver attempt of the iteration (infrastructure failures are not attempts)."""

    episode_id: str
    task_id: str
    repo: str
    order: int | None
    """The task's order (1: an injected bug; 2+: higher-order)."""
    grade: GradeResult


@dataclass
class IterationOutcome:
    """What an iteration's rollouts produced. A resumed iteration's attempts from before the crash are
    here too, read back from its trajectory file once (`SolverAttempt` from the stored grade)."""

    iteration: int
    trajectories: list[Trajectory] = field(default_factory=list)
    """Every trajectory of the iteration (infrastructure failures flagged in metadata)."""
    results: list[EpisodeResult] = field(default_factory=list)
    """Results played by this process (a resumed iteration's earlier ones are in `trajectories` only)."""
    attempts: list[SolverAttempt] = field(default_factory=list)
    """Every graded solver attempt, this process's and a resumed iteration's earlier ones."""
    tasks: list[Task] = field(default_factory=list)
    verdicts: list[InjectorVerdict] = field(default_factory=list)
    injector_rewards: dict[str, float | None] = field(default_factory=dict)
    phase_s: dict[str, float] = field(default_factory=dict)
    """Seconds of this iteration by phase (seeding, injector, solver, orchestration)."""
    solver_rounds: int = 1
    """Solver rounds played: 1 plus the dynamic-sampling redraws (`rollout.redraw_rounds`)."""

    def merge(self, other: IterationOutcome) -> None:
        """Add the episodes, tasks and phase times of `other` (played beside this one: same iteration)."""
        self.trajectories += other.trajectories
        self.results += other.results
        self.attempts += other.attempts
        self.tasks += other.tasks
        for phase, seconds in other.phase_s.items():
            self.add_time(phase, seconds)

    def add_time(self, phase: str, seconds: float) -> None:
        self.phase_s[phase] = self.phase_s.get(phase, 0.0) + seconds

    def resolved_by_task(self) -> dict[str, list[bool]]:
        """Each task's attempts of this iteration, solved or not (Eq. 1's solve rate)."""
        out: dict[str, list[bool]] = {}
        for a in self.attempts:
            out.setdefault(a.task_id, []).append(a.grade.resolved)
        return out
