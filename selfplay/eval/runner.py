"""`evaluate`: the solver role on each instance's `problem_statement` in its image, K runs, graded, reported.

Per run k (folder `DIR/run-k`): for each instance not yet in `predictions.jsonl` (resume), a sandbox from
the instance image (no network) has its history stripped to base_commit (`selfplay.eval.guard`), the
solver episode runs with the issue-text prompt, and its diff is appended to `predictions.jsonl` (harness
format) with the episode's details in `episodes.jsonl` and the trajectory in `trajectories.jsonl`. An
episode that ended in an infrastructure failure is recorded but writes no prediction, so a re-run retries it.
Then every prediction without a report is graded: `grader="local"` with swebench's functions on a log from
our sandbox (`selfplay.eval.swebench_grading`), `grader="harness"` by the official `run_evaluation`
(`selfplay.eval.harness`). `DIR/report.json` holds the metrics (`selfplay.eval.report`).

Decoding defaults to SSR's evaluation setting (`agent_scaffold.policy.SSR_SAMPLING`: temperature 1.0, top-p
0.95), one attempt per run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_scaffold.agent import AGENT_ENV, run_episode
from agent_scaffold.policies import make_policy
from agent_scaffold.policy import SSR_SAMPLING, Policy, SamplingParams
from agent_scaffold.roles import EpisodeLimits, RoleConfig, load_role, solver_variables
from agent_scaffold.trajectory import save_jsonl
from sandboxes.docker import DockerSandbox
from sandboxes.sandbox import WORKDIR
from selfplay.code_revision import code_revision
from selfplay.dir_lock import DirLock
from selfplay.eval.guard import strip_history
from selfplay.eval.harness import read_harness_reports, run_harness
from selfplay.eval.predictions import Prediction, append_prediction, read_predictions
from selfplay.eval.progress import EvalProgress, EvalStep, episode_outcome, grade_outcome
from selfplay.eval.report import EvalReport, InstanceResult
from selfplay.eval.swebench_grading import grade_local, read_report, sandbox_config
from selfplay.eval.task_image import ensure_instance_image

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation."""

    out_dir: Path
    """DIR: dataset.jsonl, run-k/ folders and report.json go here; an existing DIR is resumed."""
    model_name: str = "selfplay"
    """`model_name_or_path` of the predictions (names the harness's log folder)."""
    runs: int = 1
    """K independent runs of every instance (mean ± standard error and pass@K over them)."""
    workers: int = 1
    """Instances solved (and graded) at once."""
    grader: Literal["local", "harness"] = "local"
    """local: swebench's grading functions on logs from our sandboxes; harness: official run_evaluation."""
    sampling: SamplingParams = SSR_SAMPLING
    """Decoding of every turn."""
    seed: int | None = None
    """Base seed; run k, instance i samples with seed + 1000 * k + i."""
    max_turns: int | None = None
    """Override of the solver role's turn limit."""
    max_new_tokens: int | None = None
    """Override of the tokens per turn."""
    max_context: int | None = None
    """Override of the context budget."""
    max_repeats: int | None = None
    """End an episode when this many turns in a row repeat the one before, the same action answered the
    same (`EpisodeLimits.max_repeats`, ending `repeated`); None, the solver role's default, never does."""
    test_timeout: int = 1800
    """Seconds the eval script may run per instance (the harness's default)."""
    sandbox: dict[str, Any] = field(default_factory=dict)
    """DockerSandboxConfig overrides of the solver sandbox (cpus, mem_limit, ...); network stays off."""


def lock_names(out: Path) -> tuple[str, str]:
    """The command that works in `out` and how to go on there, as `DirLock` names them to a second one."""
    return "selfplay eval swebench", f"selfplay eval swebench ... --out {out}"


PolicyFor = Callable[[str], Policy]
"""Policy for one instance id (the scripted backend replays per-instance actions; others share one)."""


def evaluate(instances: list[dict[str, Any]], policy_for: PolicyFor, config: EvalConfig, *,
             on_step: EvalProgress | None = None) -> EvalReport:
    """Run, grade and report `config.runs` runs over `instances` (normalised; see selfplay.eval.dataset).
    `on_step` is told when each phase of a run starts and each instance finishes (`selfplay.eval.progress`)."""
    solver_limits(load_role("solver"), config)  # an override out of range fails here, before any instance
    out = config.out_dir
    out.mkdir(parents=True, exist_ok=True)
    # a second evaluation into DIR would solve the same instances again and append to the same predictions
    lock = DirLock.acquire(out, *lock_names(out))
    try:
        return _evaluate(instances, policy_for, config, on_step or _ignore)
    finally:
        lock.release()


def _ignore(step: EvalStep) -> None:
    pass


def _evaluate(instances: list[dict[str, Any]], policy_for: PolicyFor, config: EvalConfig,
              on_step: EvalProgress) -> EvalReport:
    out = config.out_dir
    dataset = out / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(i, default=str) + "\n" for i in instances))
    ids = [i["instance_id"] for i in instances]
    results: list[InstanceResult] = []
    for k in range(config.runs):
        run_dir = out / f"run-{k}"
        _solve_run(instances, policy_for, config, k, run_dir, on_step)
        results += _grade_run(instances, config, k, run_dir, dataset, on_step)
    report = EvalReport(tuple(ids), tuple(results), config.runs,
                        meta={"model": config.model_name, "grader": config.grader,
                              "sampling": dataclasses.asdict(config.sampling), "code": code_revision()})
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=2))
    return report


def _solve_run(instances: list[dict[str, Any]], policy_for: PolicyFor, config: EvalConfig, k: int,
               run_dir: Path, on_step: EvalProgress) -> None:
    done = read_predictions(run_dir / "predictions.jsonl")
    todo = [(i, inst) for i, inst in enumerate(instances) if inst["instance_id"] not in done]
    if len(todo) < len(instances):
        log.info("run %d: %d of %d instances already solved (resuming)", k, len(instances) - len(todo),
                 len(instances))
    lock = threading.Lock()
    done_count = len(instances) - len(todo)
    on_step(EvalStep(k, "solve", done_count, len(instances)))

    def one(item: tuple[int, dict[str, Any]]) -> None:
        nonlocal done_count
        i, inst = item
        seed = None if config.seed is None else config.seed + 1000 * k + i
        ep, traj = solve_instance(inst, policy_for(inst["instance_id"]), config, seed=seed)
        info = {"instance_id": inst["instance_id"], "termination": ep.termination, "turns": ep.turns,
                "infra_failure": ep.infra_failure, "error": ep.error, "wall_s": ep.timings.get("wall")}
        with lock:
            run_dir.mkdir(parents=True, exist_ok=True)
            with (run_dir / "episodes.jsonl").open("a") as fh:
                fh.write(json.dumps(info) + "\n")
            save_jsonl([traj], run_dir / "trajectories.jsonl")
            if not ep.infra_failure:
                patch = ep.submission if isinstance(ep.submission, str) else ""
                append_prediction(run_dir / "predictions.jsonl",
                                  Prediction(inst["instance_id"], config.model_name, patch))
            done_count += 1
            on_step(EvalStep(k, "solve", done_count, len(instances), inst["instance_id"],
                             episode_outcome(ep.termination, ep.turns, ep.timings.get("wall"),
                                             ep.error if ep.infra_failure else None)))

    with ThreadPoolExecutor(max(1, config.workers)) as pool:
        list(pool.map(one, todo))


def solver_limits(role: RoleConfig, config: EvalConfig) -> EpisodeLimits:
    """The solver role's limits with the evaluation's overrides (a ValueError names one out of range)."""
    return role.limits.overridden(max_turns=config.max_turns, max_new_tokens=config.max_new_tokens,
                                  max_context_tokens=config.max_context, max_repeats=config.max_repeats)


def solve_instance(instance: dict[str, Any], policy: Policy, config: EvalConfig, *, seed: int | None = None):
    """One solver episode on `instance` in a fresh sandbox of its image, history stripped first.
    Returns (Episode, Trajectory with the instance id in its metadata)."""
    role = load_role("solver")
    limits = solver_limits(role, config)
    image = ensure_instance_image(instance)
    cfg = sandbox_config(instance, **{k: v for k, v in config.sandbox.items() if k != "network"})
    with DockerSandbox.create(image, workdir=WORKDIR, config=cfg, env=AGENT_ENV) as sb:
        strip_history(sb, str(instance.get("base_commit") or "HEAD"))
        ep = run_episode(policy, sb, role, solver_variables(instance["problem_statement"], "issue"),
                         limits=limits, sampling=config.sampling.with_(seed=seed))
    traj = dataclasses.replace(ep.trajectory, metadata={**ep.trajectory.metadata,
                                                        "instance_id": instance["instance_id"],
                                                        "submission": ep.submission})
    return ep, traj


def _episodes(run_dir: Path) -> dict[str, dict[str, Any]]:
    path = run_dir / "episodes.jsonl"
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
                out[rec["instance_id"]] = rec
            except (json.JSONDecodeError, KeyError):
                continue
    return out


def _patch(preds: dict[str, Prediction], iid: str) -> str | None:
    return preds[iid].model_patch if iid in preds else None


def _grade_run(instances: list[dict[str, Any]], config: EvalConfig, k: int, run_dir: Path,
               dataset: Path, on_step: EvalProgress) -> list[InstanceResult]:
    preds = read_predictions(run_dir / "predictions.jsonl")
    episodes = _episodes(run_dir)
    ids = [i["instance_id"] for i in instances]
    on_step(EvalStep(k, "grade", 0, len(ids)))
    if config.grader == "harness":
        # Unique per output folder: the harness names containers by run id and instance, so two evaluations
        # sharing a run id would collide; deterministic, so a resumed evaluation finds its reports.
        digest = hashlib.sha256(str(config.out_dir.resolve()).encode()).hexdigest()[:8]
        run_id = f"{config.out_dir.name}-{digest}-run{k}"
        graded = [i for i in ids if i in preds and preds[i].model_patch.strip()]
        if graded:
            run_harness(run_dir, dataset, run_dir / "predictions.jsonl", run_id, instance_ids=graded,
                        workers=config.workers, timeout=config.test_timeout)
        reports = read_harness_reports(run_dir, run_id, config.model_name, ids)
        for n, iid in enumerate(ids, 1):  # the harness grades them all in one call
            on_step(EvalStep(k, "grade", n, len(ids), iid, grade_outcome(reports.get(iid), _patch(preds, iid))))
    else:
        by_id = {i["instance_id"]: i for i in instances}
        lock, graded_count = threading.Lock(), 0

        def one(iid: str) -> tuple[str, dict[str, Any] | None]:
            nonlocal graded_count
            log_dir = run_dir / "logs" / iid
            rep = None if iid not in preds else read_report(log_dir, iid) or grade_local(
                by_id[iid], preds[iid], log_dir, timeout=config.test_timeout)
            with lock:
                graded_count += 1
                on_step(EvalStep(k, "grade", graded_count, len(ids), iid, grade_outcome(rep, _patch(preds, iid))))
            return iid, rep

        with ThreadPoolExecutor(max(1, config.workers)) as pool:
            reports = dict(pool.map(one, ids))
    results = []
    for iid in ids:
        rep, ep = reports.get(iid), episodes.get(iid, {})
        pred = preds.get(iid)
        results.append(InstanceResult(
            iid, k, resolved=bool(rep and rep.get("resolved")),
            patch_applied=bool(rep and rep.get("patch_successfully_applied")),
            empty_patch=bool(pred is not None and not pred.model_patch.strip()),
            # no prediction (the episode failed), or a non-empty one the grader produced no report for
            infra_failure=pred is None or (rep is None and bool(pred.model_patch.strip()))
            or bool(rep and rep.get("infra_failure")),
            termination=ep.get("termination", ""), turns=int(ep.get("turns") or 0)))
    return results


def evaluate_checkpoint(checkpoint: Path, instances: list[dict[str, Any]], out_dir: Path, *, backend: str = "hf",
                        runs: int = 1, prefix: str = "eval/swebench", on_step: EvalProgress | None = None,
                        **config: Any) -> dict[str, float]:
    """Evaluate one checkpoint directory (`hf` or `vllm` backend, in process) on `instances` and return the
    report's flat metrics, for a training loop to log when it writes a checkpoint (`selfplay run
    eval.every=N`: `selfplay.orchestration.learning`); see docs/eval.md."""
    policy = make_policy(backend, model_dir=str(checkpoint))
    cfg = EvalConfig(out_dir=out_dir, model_name=checkpoint.name, runs=runs, **config)
    return evaluate(instances, lambda _iid: policy, cfg, on_step=on_step).metrics(prefix)
