"""`IterationRollouts`: one iteration's episodes (SSR's steps 1-5), recorded as they complete.

Injector episodes run first; each verdict is recorded (`record_artifact`, origin "injector") and noted in
the loop state. Then the tasks are drawn (and noted, so a resumed iteration attempts the same ones) and
G = `reward.group_size` solver attempts run per task, one group id per (task, iteration). Every graded
attempt is written to the iteration's trajectory file, then recorded in the store; a failed attempt's
higher-order task is stored. Last, each injector gets its Eq. 1 reward from its bug's attempts of this
iteration, and the injector trajectories and attempts are written.

With `rollout.overlap_injectors` the drawn tasks (drawn before the injectors, without them) are attempted
beside the injector episodes, on a helper thread's second executor call, and the iteration's valid bugs get
their attempts in a round of their own as soon as the injectors end (tasks numbered after the drawn ones,
seeds from their own stream). A resumed overlapped iteration plays what is left sequentially.

Episode ids are deterministic (`<run>-it<i>-<role>-<k>`), and a store attempt's `trajectory_path` is
`<file>#<episode id>`, so a resume knows from the store which episodes are done and finds their
trajectories in the file; only in-flight episodes are played again. Infrastructure failures are written
(flagged) but never recorded as attempts or trained on. A drawn task whose spec leaves the solver no turn
(`EpisodeResult.unplayable`) is retired unplayed, with nothing written or recorded.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_scaffold.artifact_kit import KIT_STRATEGY, KitView
from agent_scaffold.trajectory import Trajectory
from selfplay.config.run_config import RunConfig
from selfplay.judge.rewards import injector_reward, solve_rate
from selfplay.judge.verdict import GradeResult
from selfplay.learner.dynamic_sampling import signal_groups
from selfplay.orchestration.curriculum import draw_tasks, pick_repos, pick_strategies, seed_store
from selfplay.orchestration.ledger import RunLedger
from selfplay.orchestration.outcome import IterationOutcome, SolverAttempt
from selfplay.orchestration.rundir import RunDir, append_trajectories, read_trajectories
from selfplay.orchestration.state import InjectorVerdict, IterationProgress
from selfplay.rollout.requests import EpisodeExecutor, EpisodeRequest, EpisodeResult
from selfplay.task import Task, bug_key, keys_match, stored_lines

if TYPE_CHECKING:
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)


def episode_id(run_id: str, iteration: int, role: str, index: int) -> str:
    return f"{run_id}-it{iteration}-{role}-{index}"


def kit_shares(requests: Sequence[EpisodeRequest]) -> dict[str, tuple[int, int]]:
    """`rollout.kit_spread`: each `kit` injector request's share (k, n) among the n kit requests of its repo,
    in request order; a repo with one such request gets none."""
    by_repo: dict[str, list[str]] = {}
    for r in requests:
        if r.role == "injector" and r.strategy == KIT_STRATEGY:
            by_repo.setdefault(r.repo, []).append(r.episode_id)
    return {e: (k, len(ids)) for ids in by_repo.values() if len(ids) > 1 for k, e in enumerate(ids)}


def tag(result: EpisodeResult, iteration: int, **extra: Any) -> Trajectory | None:
    """The result's trajectory with the contract's metadata keys filled in."""
    t = result.trajectory
    if t is None:
        return None
    r = result.request
    meta = {**t.metadata, "id": r.episode_id, "repo": r.repo, "iteration": iteration,
            "infra_failure": bool(result.infra_failure), "error": result.error,
            "termination": result.termination}
    if r.role == "injector":
        v = result.validation
        meta.update(strategy=r.strategy, submission=result.submission if isinstance(result.submission, dict) else None,
                    validation=None if v is None else {
                        "valid": bool(v.valid), "failed_check": v.failed_check, "error": v.error,
                        "checks": [{"name": c.name, "passed": bool(c.passed), "detail": c.detail} for c in v.checks]})
    else:
        task = r.task
        meta.update(task_id=task.task_id if task else None, group_id=r.group_id, order=task.order if task else None,
                    submission=result.submission if isinstance(result.submission, str) else None,
                    grade=result.grade.to_json() if result.grade is not None else None)
    meta.update(extra)
    reward = float(result.grade.reward) if r.role == "solver" and result.grade is not None else t.reward
    return replace(t, metadata=meta, reward=None if result.infra_failure else reward)


def _solver_ending(result: EpisodeResult) -> str:
    """How the run's events name a solver attempt's ending."""
    if result.infra_failure:
        return "infra failure"
    if result.unplayable is not None:
        return "not played: spec too long"
    return "solved" if result.grade is not None and result.grade.resolved else "not solved"


class IterationRollouts:
    """Plays and records the episodes of iterations; shared by the sync and async loops. Every counter and
    progress note goes through the run's ledger."""

    def __init__(self, config: RunConfig, run: RunDir, store: TaskStore, ledger: RunLedger,
                 executor: EpisodeExecutor, recorded: set[str] | None = None) -> None:
        self.config, self.run, self.store, self.ledger, self.executor = config, run, store, ledger, executor
        self.recorded = recorded or set()
        """Episode ids whose attempt the store holds (filled on resume)."""
        self._solver_file = threading.Lock()  # two solver rounds write one file with `overlap_injectors`

    @property
    def run_id(self) -> str:
        return self.ledger.run_id

    def play(self, iteration: int, version: int) -> IterationOutcome:
        """Seed a thin store (once per iteration), then SSR's steps: injectors, solvers, injector rewards."""
        out = IterationOutcome(iteration)
        with self.ledger.change() as state:
            prog = state.progress.setdefault(iteration, IterationProgress(iteration, version))
        if prog.tasks is None:
            out.phase_s["validation"] = seed_store(self.config, self.store, self.ledger)
        rng = random.Random(f"{self.config.seed}:{iteration}")
        overlap = self.config.rollout.overlap_injectors
        if overlap and prog.tasks is None:
            self._overlapped(prog, rng, out)
        else:
            self._injectors(prog, rng, out)
            if overlap and prog.fresh is None:
                self._note_fresh(prog)  # a resumed overlapped iteration: its drawn tasks, then its valid bugs
            self._solvers(prog, rng, out)
        self._injector_rewards(prog, out)
        with self.ledger.change():
            prog.rollouts_done = True
        return out

    # --- injectors -------------------------------------------------------------------------------------
    def _injectors(self, prog: IterationProgress, rng: random.Random, out: IterationOutcome) -> None:
        self._play_injectors(prog, self._injector_requests(prog, rng), out)

    def _injector_requests(self, prog: IterationProgress, rng: random.Random) -> list[EpisodeRequest]:
        """The iteration's injector episodes not recorded yet (all of them are drawn from `rng`)."""
        cfg, it = self.config, prog.iteration
        n = cfg.rollout.injector_episodes
        repos, _ = pick_repos(cfg.repos, n, cfg.rollout, it * n, rng)
        strategies = pick_strategies(cfg.rollout.strategies, n, rng)
        requests = [EpisodeRequest(episode_id(self.run_id, it, "injector", i), "injector", repo, it,
                                   prog.policy_version, strategy=s, seed=rng.randrange(2**31))
                    for i, (repo, s) in enumerate(zip(repos, strategies))]
        todo = [r for r in requests if r.episode_id not in prog.injectors]
        if not cfg.rollout.kit_store_view:
            return todo
        view = {repo: self._stored_lines(repo) for repo in {r.repo for r in todo if r.strategy == KIT_STRATEGY}}
        # shares come from the whole iteration, so a resumed episode gets the share it had before the crash
        shares = kit_shares(requests) if cfg.rollout.kit_spread and cfg.rollout.kit_next_function else {}
        rotate = cfg.rollout.kit_share_by == "rotate"
        return [replace(r, kit_view=KitView(view[r.repo], cfg.rollout.kit_next_function, shares.get(r.episode_id),
                                            rotate)) if r.repo in view and r.strategy == KIT_STRATEGY else r
                for r in todo]

    def _stored_lines(self, repo: str) -> tuple[tuple[str, int], ...]:
        """The lines that the store's bugs of `repo` change (`rollout.kit_store_view`)."""
        return stored_lines(self.store.get_tasks([s.task_id for s in self.store.task_stats(repo=repo)]))

    def _play_injectors(self, prog: IterationProgress, todo: list[EpisodeRequest], out: IterationOutcome) -> None:
        it = prog.iteration
        if todo:
            self.ledger.phase(it, f"{len(todo)} injector episodes")
        for result in self.executor.run(todo):
            t0 = time.monotonic()
            out.results.append(result)
            self._record_injector(prog, result)
            out.add_time("orchestration", time.monotonic() - t0)
            self.ledger.emit("episode", it, f"injector {result.request.repo}: {result.termination}")

    def _record_injector(self, prog: IterationProgress, result: EpisodeResult) -> None:
        r, report = result.request, result.validation
        verdict = InjectorVerdict(r.episode_id, r.repo, r.strategy or "", valid=False,
                                  infra_failure=bool(result.infra_failure))
        if not result.infra_failure and result.artifact is not None and report is not None:
            stored = self.store.record_artifact(result.artifact, r.repo, report, origin="injector",
                                                strategy=r.strategy, episode_id=r.episode_id)
            verdict.artifact_id, verdict.task_id = stored.artifact_id, stored.task_id
            verdict.valid = bool(report.valid and verdict.task_id)
            verdict.created = verdict.valid and not stored.duplicate
            # Each bug is judged against the tasks held before the iteration, never those its own episodes
            # made: which of two episodes writing one bug finishes first is timing, not the policy.
            ours = {v.task_id for v in prog.injectors.values() if v.created and v.task_id}
            verdict.duplicate = verdict.valid and (
                (bool(stored.duplicate) and verdict.task_id not in ours)
                or self._near_duplicate(r.repo, verdict.task_id, exclude=ours, episode=r.episode_id))
            if not report.valid:
                verdict.failed_check = report.failed_check or "error"
        traj = tag(result, prog.iteration, task_id=verdict.task_id)
        if traj is not None:
            append_trajectories(self._pending(prog.iteration), [traj])
        with self.ledger.change() as state:  # counters and progress change together, then one atomic save
            state.count("injector_episodes")
            state.count("valid_artifacts", int(verdict.valid))
            state.count("infra_failures", int(verdict.infra_failure))
            prog.injectors[r.episode_id] = verdict

    def _pending(self, iteration: int) -> Path:
        return self.run.trajectories / f"it{iteration:05d}-injector.pending.gz"

    # --- solvers ---------------------------------------------------------------------------------------
    def _solvers(self, prog: IterationProgress, rng: random.Random, out: IterationOutcome) -> None:
        t0 = time.monotonic()
        if prog.tasks is None:
            tasks = self._draw(prog, rng, [v.task_id for v in prog.injectors.values() if v.valid and v.task_id])
        else:  # a resumed iteration: every round drawn before the crash is played again
            tasks = self.store.get_tasks(prog.tasks)
        out.tasks = list(tasks)
        out.add_time("orchestration", time.monotonic() - t0)
        self._solver_round(prog, tasks, 0, rng, out)
        self._redraw_rounds(prog, rng, out)

    def _draw(self, prog: IterationProgress, rng: random.Random, fresh: list[str]) -> list[Task]:
        """The first round's tasks (`fresh` first), and the redraw rounds' too with `redraw_ahead`; noted."""
        cfg = self.config
        rounds = 1 + (cfg.rollout.redraw_rounds if cfg.rollout.redraw_ahead else 0)
        tasks = draw_tasks(self.store, fresh, cfg.rollout.solver_tasks * rounds, cfg.curriculum, rng)
        with self.ledger.change():
            prog.tasks = [t.task_id for t in tasks]
            prog.redraws = rounds - 1  # rounds drawn ahead count as played redraws
        return tasks

    def _overlapped(self, prog: IterationProgress, rng: random.Random, out: IterationOutcome) -> None:
        """`rollout.overlap_injectors`: the injector episodes and the drawn tasks' solver attempts at once; as
        soon as the injectors end, their valid bugs' attempts (a round of their own, beside whatever drawn
        attempts are left); then dynamic sampling's redraws."""
        todo = self._injector_requests(prog, rng)
        t0 = time.monotonic()
        tasks = self._draw(prog, rng, [])
        out.tasks = list(tasks)
        out.add_time("orchestration", time.monotonic() - t0)
        side = IterationOutcome(prog.iteration)  # the helper thread's results, merged once it is done
        fresh_rng = random.Random(f"{self.config.seed}:{prog.iteration}:fresh")  # rng is the main thread's

        stopped = threading.Event()  # the drawn round raised (an error, Ctrl-C): start no fresh round

        def injectors_then_fresh() -> None:
            self._play_injectors(prog, todo, side)
            fresh = self._note_fresh(prog)
            side.tasks = list(fresh)
            if fresh and not stopped.is_set():  # else a resume plays them (they are noted in prog.tasks)
                self._solver_round(prog, fresh, len(tasks), fresh_rng, side)

        with ThreadPoolExecutor(1, thread_name_prefix="injectors") as helper:
            injectors = helper.submit(injectors_then_fresh)
            try:
                self._solver_round(prog, tasks, 0, rng, out)
            except BaseException:
                stopped.set()
                raise
            finally:
                injectors.result()  # the helper's error, if any, after the drawn round ended
        out.merge(side)
        self._redraw_rounds(prog, rng, out)

    def _note_fresh(self, prog: IterationProgress) -> list[Task]:
        """The iteration's valid bugs that are not drawn tasks already, noted after the drawn tasks."""
        drawn = set(prog.tasks or ())
        fresh = list(dict.fromkeys(v.task_id for v in prog.injectors.values()
                                   if v.valid and v.task_id and v.task_id not in drawn))
        with self.ledger.change():
            prog.fresh = fresh
            prog.tasks = [*(prog.tasks or ()), *fresh]
        return self.store.get_tasks(fresh)

    def _redraw_rounds(self, prog: IterationProgress, rng: random.Random, out: IterationOutcome) -> None:
        cfg, it = self.config, prog.iteration
        while prog.redraws < cfg.rollout.redraw_rounds and \
                (found := signal_groups(out.trajectories)) < cfg.rollout.min_signal_groups:
            more = self._redraw(prog, rng)
            if not more:
                log.info("iteration %d: no further task to redraw; training on %d signal groups", it, found)
                break
            start = len(out.tasks)
            out.tasks.extend(more)
            self.ledger.phase(it, f"redraw {prog.redraws}: {found} of {cfg.rollout.min_signal_groups} "
                                          "groups with reward variance so far")
            self._solver_round(prog, more, start, rng, out)
        out.solver_rounds = 1 + prog.redraws

    def _redraw(self, prog: IterationProgress, rng: random.Random) -> list[Task]:
        """`solver_tasks` tasks not yet drawn in this iteration, noted (with the round) before they are played."""
        cfg = self.config
        used = set(prog.tasks or ())
        n = cfg.rollout.solver_tasks
        pool = draw_tasks(self.store, [], n + len(used), cfg.curriculum, rng)
        more = [t for t in pool if t.task_id not in used][:n]
        if more:
            with self.ledger.change():
                prog.tasks = [*(prog.tasks or ()), *(t.task_id for t in more)]
                prog.redraws += 1
        return more

    def _solver_round(self, prog: IterationProgress, tasks: list[Task], start: int, rng: random.Random,
                      out: IterationOutcome) -> None:
        """G attempts on each of `tasks`, the k-th task of the iteration being `start + k`."""
        cfg, it = self.config, prog.iteration
        t0 = time.monotonic()
        g = cfg.reward.group_size
        path = self.run.trajectory_file(it, "solver")
        earlier = {t.metadata.get("id"): t for t in read_trajectories(path)} if self.recorded else {}
        requests = []
        for k, task in enumerate(tasks, start):
            # failed patches already turned into higher-order tasks of this task (persisted in the store)
            seen = frozenset(self.store.used_failed_patches(task.task_id))
            for j in range(g):
                eid = episode_id(self.run_id, it, "solver", k * g + j)
                if eid in self.recorded and eid in earlier:
                    self._replayed(earlier[eid], task, out)
                    continue
                requests.append(EpisodeRequest(eid, "solver", task.repo, it, prog.policy_version, task=task,
                                               group_id=f"{self.run_id}-it{it}-g{k}",
                                               seed=rng.randrange(2**31), seen=seen))
        out.add_time("orchestration", time.monotonic() - t0)
        if requests:
            self.ledger.phase(it, f"{len(requests)} solver attempts on {len(tasks)} tasks")
        for result in self.executor.run(requests):
            t1 = time.monotonic()
            out.results.append(result)
            traj = self._record_solver(result, path)
            if traj is not None:
                out.trajectories.append(traj)
            if not result.infra_failure and result.grade is not None:
                task = result.request.task
                out.attempts.append(SolverAttempt(result.request.episode_id, task.task_id, task.repo, task.order,
                                                  result.grade))
            out.add_time("orchestration", time.monotonic() - t1)
            self.ledger.emit("episode", it, f"solver {result.request.repo}: {_solver_ending(result)}")

    def _replayed(self, traj: Trajectory, task: Task, out: IterationOutcome) -> None:
        """An attempt played before a resume: its trajectory, and its grade read back from the file."""
        out.trajectories.append(self._clamp(traj))
        grade = traj.metadata.get("grade")
        if grade is not None and not traj.metadata.get("infra_failure"):
            out.attempts.append(SolverAttempt(str(traj.metadata.get("id")), task.task_id, task.repo, task.order,
                                              GradeResult.from_json(grade)))

    def _clamp(self, t: Trajectory) -> Trajectory:
        """A trajectory from before a crash may carry a version whose update was lost with the process."""
        v = self.ledger.state.policy_version
        return replace(t, policy_version=v) if t.policy_version > v else t

    def _record_solver(self, result: EpisodeResult, path: Path) -> Trajectory | None:
        r = result.request
        if result.unplayable is not None:  # no attempt was played: retire the task, record nothing
            self._retire_unplayable(r.task, result.unplayable)
            return None
        traj = tag(result, r.iteration)
        if traj is not None:
            with self._solver_file:
                append_trajectories(path, [traj])
        if result.infra_failure or result.grade is None:
            self.ledger.count(infra_failures=1)
            return traj
        t = result.trajectory
        self.store.record_attempt(
            r.task.task_id, role="solver", policy_version=t.policy_version if t else r.policy_version,
            reward=float(result.grade.reward), turns=len(t.turn_spans) if t else 0,
            tokens=len(t.input_ids) if t else 0, termination=result.termination,
            trajectory_path=f"{path}#{r.episode_id}", wall_time=float(result.timings.get("wall", 0.0)),
            run_id=self.run_id, solved=bool(result.grade.resolved), source="policy")
        new_task = False
        if result.higher_order is not None:
            before = self.store.has_task(result.higher_order.task_id)
            new_task = bool(self.store.add_task(result.higher_order)) and not before
        self.ledger.count(solver_attempts=1, solved=int(result.grade.resolved), higher_order_tasks=int(new_task))
        return traj

    def _retire_unplayable(self, task: Task, reason: str) -> None:
        """A stored task no solver attempt of this policy can take a turn on leaves the draw, with the reason
        (`selfplay tasks list --status retired`); the task's other attempts of the round say the same."""
        if self.store.set_status([task.task_id], "retired", reason):
            log.warning("task %s (%s) retired unplayed: %s", task.task_id, task.repo, reason)
            self.ledger.count(unreadable_tasks=1)

    # --- injector rewards ------------------------------------------------------------------------------
    def _injector_rewards(self, prog: IterationProgress, out: IterationOutcome) -> None:
        t0 = time.monotonic()
        resolved = out.resolved_by_task()
        pending = {t.metadata.get("id"): t for t in read_trajectories(self._pending(prog.iteration))}
        final = self.run.trajectory_file(prog.iteration, "injector")
        written = {t.metadata.get("id"): t for t in read_trajectories(final)}
        rewarded = []
        for eid, v in prog.injectors.items():
            out.verdicts.append(v)
            reward = self._reward(v, resolved)
            out.injector_rewards[eid] = reward
            traj = written.get(eid)
            if traj is None:
                traj = pending.get(eid)
                if traj is None:  # an infrastructure failure with no episode
                    continue
                s = resolved.get(v.task_id or "")
                traj = replace(traj, reward=reward, metadata={**traj.metadata, "task_id": v.task_id,
                                                              "solve_rate": solve_rate(s) if s else None})
                append_trajectories(final, [traj])
            rewarded.append(traj)
            if eid in self.recorded or v.infra_failure:
                continue
            self.store.record_attempt(
                v.task_id, role="injector", policy_version=traj.policy_version,
                reward=0.0 if reward is None else reward, turns=len(traj.turn_spans), tokens=len(traj.input_ids),
                termination=traj.termination, trajectory_path=f"{final}#{eid}", run_id=self.run_id,
                artifact_id=v.artifact_id, source="policy")
        out.trajectories = [self._clamp(t) for t in rewarded] + out.trajectories
        self._pending(prog.iteration).unlink(missing_ok=True)
        out.add_time("orchestration", time.monotonic() - t0)

    def _near_duplicate(self, repo: str, task_id: str | None, exclude: AbstractSet[str] = frozenset(),
                        episode: str | None = None) -> bool:
        """True when an older task of `repo`, other than those in `exclude` and those that `episode` itself
        made (its first play, recorded before a kill), is the same bug written with other text
        (`keys_match`: a changed line in common, the same failing tests)."""
        if task_id is None:
            return False
        ids = [s.task_id for s in self.store.task_stats(repo=repo)]  # oldest first
        if task_id not in ids:
            return False
        older = [t for t in ids[:ids.index(task_id)] if t not in exclude]
        if episode is not None:
            made = self.store.task_episodes(older)
            older = [t for t in older if made.get(t) != episode]
        if not older:
            return False
        new, *rest = self.store.get_tasks([task_id, *older])
        key = bug_key(new)  # each diff parsed once
        return key is not None and any(keys_match(key, bug_key(t)) for t in rest)

    def _reward(self, v: InjectorVerdict, resolved: dict[str, list[bool]]) -> float | None:
        """Eq. 1 from this iteration's attempts on the bug; None (never trained on) for an infrastructure
        failure or a valid bug that got no gradable attempt. A bug the store already held (the same diff, or
        the same changed lines breaking the same tests) is rewarded as invalid unless `reward.reward_duplicates`."""
        if v.infra_failure:
            return None
        if not v.valid or (v.duplicate and not self.config.reward.reward_duplicates):
            return injector_reward(False, None, self.config.reward)
        if self.config.reward.injector_mode == "consistency":
            return injector_reward(True, None, self.config.reward)
        attempts = resolved.get(v.task_id or "")
        return injector_reward(True, solve_rate(attempts), self.config.reward) if attempts else None
