"""`run_selfplay`: SSR's self-play loop over a repo list, with learning, resume and metrics.

Per iteration: procedural seeds while the store is thin, injector episodes (validated and recorded), tasks
drawn (fresh first), G solver attempts per task (graded, recorded, higher-order tasks stored), Eq. 1
injector rewards, then one learner update (`learning.PolicyLearner`: batch, train_step, weight sync,
checkpoint) and metrics + summary.json. `rollouts.IterationRollouts` plays and records the episodes.

Modes: sync generates, then trains (Nebius). async plays iteration i+1's rollouts in a background thread
while the learner trains on iteration i (a pipeline one iteration deep, so rollouts are about one version
stale; anything older than `learner.batch.max_staleness` is dropped and counted).

Resume (`resume=run_dir`): the store, state.json and the newest checkpoint (policy and learner at its
version) are reloaded, containers labelled with this run id whose owner is gone are removed, and the
unfinished iterations are played again with the same episode ids: episodes the store has attempts of are
skipped. `resume.check_resumable` vets the directory first (state.json, the store, the checkpoint), and a
resume that fails before its loop starts leaves state.json and summary.json as they were. Ctrl-C sets the
status "interrupted" (resumable); an exception sets "failed" with the error.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selfplay.config.loader import RESUME_SAFE_KEYS, dump_config
from selfplay.config.run_config import RunConfig
from selfplay.dir_lock import DirLock
from selfplay.errors import SelfPlayError
from selfplay.orchestration.budget import fits_budget
from selfplay.orchestration.components import (
    build_executor,
    build_learner,
    open_run_store,
    reap_containers,
    resume_checkpoint,
    warm_start_record,
)
from selfplay.orchestration.iteration_metrics import iteration_record
from selfplay.orchestration.ledger import RunLedger, RunObserver
from selfplay.orchestration.metrics import make_metrics
from selfplay.orchestration.outcome import IterationOutcome
from selfplay.orchestration.resume import check_resumable
from selfplay.orchestration.rollouts import IterationRollouts
from selfplay.orchestration.rundir import (
    RunDir,
    attach_log_file,
    detach_log_file,
    new_run_id,
    prune_files,
    recorded_episode,
    write_json_atomic,
)
from selfplay.orchestration.state import LoopState

if TYPE_CHECKING:
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)

class RunError(SelfPlayError):
    """A self-play run stopped on an error; the message names the run directory and its log."""


def run_selfplay(config: RunConfig, *, resume: Path | None = None, observer: RunObserver | None = None,
                 runner: Any = None) -> Path:
    """Run (or resume) a self-play run; returns its directory. `runner` replaces the rollout worker
    (`worker.build_runner`), for tests with a documented test double."""
    run = SelfPlayRun(config, resume=resume, observer=observer, runner=runner)
    run.execute()
    return run.dir.path


class SelfPlayRun:
    def __init__(self, config: RunConfig, *, resume: Path | None, observer: RunObserver | None,
                 runner: Any) -> None:
        self.config, self.resumed = config, resume is not None
        if resume is not None:
            check_resumable(resume, config)  # before anything in the directory is written
            self.dir = RunDir.open(resume)
            self._lock = DirLock.acquire(self.dir.path)  # before state.json is read: a live run still writes it
            if self.dir.state.is_file():
                state = LoopState.load(self.dir.state)
            else:  # `resume.check_resumable` allows this only for a run that did nothing yet
                log.warning("%s has no state.json and no finished work: resuming at iteration 0", resume)
                state = LoopState(self.dir.run_id)
        else:
            self.dir = RunDir.create(config.runs_dir, new_run_id(config.name))
            self._lock = DirLock.acquire(self.dir.path)
            self.dir.config.write_text(dump_config(config))
            state = LoopState(self.dir.run_id, started_at=time.time())
        self.ledger = RunLedger(state, self.dir.state, self.dir.path, observer)
        # state.json's id, not the directory's name: the store's attempts and the episode ids carry it, and a
        # copied or moved run directory keeps it under another name
        self.run_id = self.ledger.run_id
        self.started = not self.resumed
        """Whether state.json and summary.json may be written on the way out: a resume that fails in `setup`
        leaves the previous process's record as it was (a new run has none to keep)."""
        self.log_handler = attach_log_file(self.dir.logs / "run.log")
        self._runner = runner
        self.store: TaskStore | None = None
        self.metrics: Any = None
        self.executor: Any = None
        self.learner: Any = None
        self.policy: Any = None
        self._iteration_mark = time.monotonic()

    # --- bookkeeping -----------------------------------------------------------------------------------
    @property
    def state(self) -> LoopState:
        """The loop state, held by the ledger (change it through `ledger.change()`)."""
        return self.ledger.state

    def write_summary(self) -> dict[str, Any]:
        # counted here, not per episode event: a scan of a large store is not free
        try:
            self.ledger.tasks_in_store = len(self.store.task_stats()) if self.store is not None else None
        except Exception:  # the summary is written on failure paths too
            pass
        data = self.ledger.summary()
        write_json_atomic(self.dir.summary, data)
        return data

    # --- setup -----------------------------------------------------------------------------------------
    def setup(self) -> None:
        self.store = open_run_store(self.config, self.dir)
        self.store.register_run(self.run_id, {"name": self.config.name, "repos": list(self.config.repos)})
        self.metrics = make_metrics(self.config.metrics, self.dir.metrics, self.dir.logs / "tensorboard",
                                    run_id=self.run_id, run_config={"name": self.config.name},
                                    resume=self.resumed)
        recorded: set[str] = set()
        checkpoint = None
        if self.resumed:
            reap_containers(self.run_id)
            attempts = self.store.attempts(run_id=self.run_id)
            recorded = {e for a in attempts if (e := recorded_episode(a.trajectory_path))}
            checkpoint, version = resume_checkpoint(self.dir)
            # a kill between a store write and the state write must not skew the totals: the store decides
            solver = [a for a in attempts if a.role == "solver"]
            with self.ledger.change() as state:
                state.counters.update(solver_attempts=len(solver), solved=sum(a.solved for a in solver))
                state.policy_version = version
            log.info("resuming %s at iteration %d, policy version %d (%d attempts recorded)", self.run_id,
                     self.state.completed, version, len(recorded))
        self.policy, self.learner = build_learner(self.config, self.dir, self.store, self.run_id, checkpoint,
                                                  self.state, rollout_policy=self._runner is None)
        self.ledger.warm_start = warm_start_record(self.config)
        self.executor = build_executor(self.config, self.policy, self.run_id, self._runner)
        self.rollouts = IterationRollouts(self.config, self.dir, self.store, self.ledger, self.executor, recorded)
        self.started = True
        self.write_summary()

    # --- the loop --------------------------------------------------------------------------------------
    def execute(self) -> None:
        ledger = self.ledger
        try:
            self.setup()
            self.loop()
            ledger.stop_if_signalled("the run's end")
            ledger.status = "finished"
        except KeyboardInterrupt:
            ledger.status = "interrupted"
            log.warning("run %s interrupted; resume with `selfplay run --resume %s`", self.run_id, self.dir.path)
            raise
        except Exception as exc:
            ledger.status, ledger.error = "failed", f"{exc.__class__.__name__}: {exc}"
            log.exception("run %s failed", self.run_id)
            if isinstance(exc, SelfPlayError):
                raise
            raise RunError(f"run {self.run_id} failed: {ledger.error}; see {self.dir.logs / 'run.log'}. "
                           f"{self._advice()}") from exc
        finally:
            self.close()

    def _advice(self) -> str:
        """What to do after a failure: a resume keeps the run's work but may change only RESUME_SAFE_KEYS, so
        a cause in any other key needs a new run, which loses nothing while no iteration has finished."""
        keys = ", ".join(RESUME_SAFE_KEYS)
        resume = f"`selfplay run --resume {self.dir.path}`"
        if self.state.completed == 0 and not self.resumed:
            return (f"Fix the cause, then {resume}; if the cause is a config value (a resume may change only "
                    f"{keys}), start a new run with it fixed: no iteration of this one finished, so nothing is lost")
        return (f"Fix the cause, then {resume} ({self.state.completed} iteration(s) done are kept; a resume may "
                f"change only {keys}: a cause in another config key needs a new run)")

    def _more(self, iteration: int) -> bool:
        if self.config.iterations and iteration >= self.config.iterations:
            self.ledger.stopped_by = "iterations"
            return False
        if self.config.max_hours is not None:
            spent, slowest = self.ledger.wall_s(), self.state.slowest_iteration_s
            if not fits_budget(spent, slowest, self.config.max_hours * 3600):
                self.ledger.stopped_by = "max_hours"
                log.info("max_hours: stopping after %d iterations at %.1f min; another, at the slowest one's "
                         "%.1f min, would end past %.1f min", iteration, spent / 60, slowest / 60,
                         self.config.max_hours * 60)
                return False
        return True

    def loop(self) -> None:
        """Seed, inject, validate, solve, grade, reward (`play`); update, record (`finish`). In async mode
        the next iteration's `play` runs in the background while this one's `finish` trains."""
        iteration = self.state.completed
        self._iteration_mark = time.monotonic()
        if not self._more(iteration):
            return
        background = ThreadPoolExecutor(1, thread_name_prefix="rollouts") if self.config.learner.mode == "async" \
            else None
        stopped = True
        try:
            pending: Future | None = None
            outcome = self.play(iteration)
            while True:
                if background is not None and self._more(iteration + 1):
                    pending = background.submit(self.play, iteration + 1)
                self.finish(outcome)
                iteration += 1
                if pending is not None:
                    outcome, pending = pending.result(), None
                elif self._more(iteration):
                    outcome = self.play(iteration)
                else:
                    break
            stopped = False
        finally:
            if background is not None:
                # on an error or Ctrl-C the rollouts in flight are not waited for: a resume redoes them
                background.shutdown(wait=not stopped, cancel_futures=True)

    def play(self, iteration: int) -> IterationOutcome:
        t0 = time.monotonic()
        self.ledger.phase(iteration, "rollouts")
        outcome = self.rollouts.play(iteration, self.state.policy_version)
        outcome.phase_s["rollout_wall"] = time.monotonic() - t0
        return outcome

    def finish(self, outcome: IterationOutcome) -> None:
        """The learner update of an iteration whose rollouts are recorded, then metrics and summary."""
        it, ledger = outcome.iteration, self.ledger
        t0 = time.monotonic()
        learner_metrics = self.update(outcome) if self.learner is not None else {}
        outcome.phase_s["learner"] = time.monotonic() - t0
        t1 = time.monotonic()
        if self.config.retention.retire_every and (it + 1) % self.config.retention.retire_every == 0:
            self.store.retire_exhausted(self.config.curriculum.sampling)
        prune_files(self.dir.trajectories, self.config.retention.keep_trajectory_files)
        now = time.monotonic()
        with ledger.change() as state:
            state.completed = it + 1
            state.progress.pop(it, None)
            state.slowest_iteration_s = max(state.slowest_iteration_s, now - self._iteration_mark)
        self._iteration_mark = now
        summary = self.write_summary()
        outcome.phase_s["bookkeeping"] = time.monotonic() - t1
        record = iteration_record(outcome, learner_metrics, self.store, summary, self.config)
        self.metrics.log(record, step=it)
        ledger.emit("iteration", it, f"iteration {it} done", summary)

    def update(self, outcome: IterationOutcome) -> dict[str, float]:
        """One learner update on the iteration's trajectories (skipped when the newest checkpoint already
        holds it: a resume after the update, before the iteration was marked done); its metrics."""
        it, ledger = outcome.iteration, self.ledger
        prog = self.state.progress[it]
        if prog.version_before_train is not None and self.state.policy_version > prog.version_before_train:
            log.info("iteration %d: its update is in the checkpoint already", it)
            return {}
        with ledger.change() as state:
            prog.version_before_train = state.policy_version
        ledger.phase(it, "learner update")
        update = self.learner.update(outcome.trajectories)
        with ledger.change() as state:
            state.policy_version = update.version
            state.baseline = self.learner.baseline.state_dict()
            state.count("learner_updates", int(update.trained))
            state.count("skipped_batches", int(not update.trained))
            state.count("staleness_dropped", int(update.metrics.get("batch/dropped_stale", 0)))
        ledger.emit("learner", it, f"policy version {update.version}" if update.trained
                    else "empty batch: update skipped")
        if update.checkpoint is not None:
            ledger.emit("checkpoint", it, str(update.checkpoint))
        return update.metrics

    def _release_models(self) -> None:
        """The rollout policy's decode thread keeps its weights and KV cache alive, and the learner its model
        and optimizer state: a process that runs loops one after another (the learning experiment's arms)
        would hold every one of them."""
        policy, learner, self.policy, self.learner = self.policy, self.learner, None, None
        try:
            close_policy = getattr(policy, "close", None)
            if callable(close_policy):
                close_policy()
        finally:
            if learner is not None:
                learner.close()

    def close(self) -> None:
        try:
            self.ledger.bank_wall_time()
            if self.started and self.dir.path.exists():
                self.ledger.save()
            try:
                if self.executor is not None:
                    self.executor.close()
            finally:
                try:
                    self._release_models()
                finally:
                    summary = self.write_summary() if self.started else self.ledger.summary()
                    if self.metrics is not None:
                        self.metrics.close()
                    if self.store is not None:
                        self.store.close()
                    self.ledger.emit("done", self.state.completed, f"run {self.ledger.status}", summary)
                    detach_log_file(self.log_handler)
        finally:
            self._lock.release()  # last: until here this process still writes the directory
