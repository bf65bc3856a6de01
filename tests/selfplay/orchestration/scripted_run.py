"""Scripted action lists for a whole run on a real repo (the `scripted` backend's JSON file): a scripted
injector that writes a known-valid procedural artifact (`selfplay.demos.injector`), and solver lists that
either fix it (the expert plan, `selfplay.demos.solver_plan`) or make a wrong change (a comment appended to
the buggy file). Used by the loop's end-to-end tests and `scripts/bench_run.py`."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selfplay.config.run_config import RunConfig


def wrong_fix(path: str) -> list[str]:
    """A solver episode that changes the buggy file without fixing it, then submits."""
    return [f"I think this is it.\n```bash\necho '# looked here' >> {path}\n```", "```submit\n```"]


def scripted_actions(spec: Any, pattern: str = "RWRW", *, seed: int = 0, rng_seed: int = 0) -> dict[str, Any]:
    """{"injector": [[...]], "solver": [...]} for `spec`'s first cached procedural seed (seeded, and cached,
    when the cache has none): one solver list per letter of `pattern`, R right, W wrong. Also returns the
    seed's task under "task" (not part of the file format; pop it before writing)."""
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.demos.bug import parse_hunks
    from selfplay.demos.injector import injector_actions
    from selfplay.demos.seed_cache import cached_seed
    from selfplay.demos.solver_plan import SolverTask, solver_actions
    from selfplay.errors import SelfPlayError
    from selfplay.judge.grader import build_buggy_state
    from selfplay.procedural.seed import SeedConfig
    from selfplay.task import Task, make_task_id
    from selfplay.validation import ValidationConfig

    image = repo_image(spec)
    seeds, _ = cached_seed(spec, 1, image=image, config=SeedConfig(seed=seed), validation=ValidationConfig())
    if not seeds:
        raise SelfPlayError(f"procedural seeding of {spec.name} (seed {seed}) found no valid bug; try another seed")
    art, report = seeds[0].artifact, seeds[0].report
    task = Task(make_task_id(spec.name, art), spec.name, art, report.fail_to_pass, report.pass_to_pass,
                origin="procedural")
    paths = sorted({h.path for h in parse_hunks(art.bug_inject)})
    with DockerSandbox.create(image, workdir=spec.workdir) as sb:
        original = {p: sb.read_file(p).decode() for p in paths}
        build_buggy_state(sb, art)
        buggy = {p: sb.read_file(p).decode() for p in paths}
    rng = random.Random(rng_seed)
    plan = SolverTask(spec=task.spec, fail_to_pass=task.fail_to_pass, bug_inject=art.bug_inject,
                      buggy_sources=buggy, reproduce=False)
    solver = [solver_actions(plan, rng) if c == "R" else wrong_fix(paths[0]) for c in pattern.upper()]
    return {"injector": [injector_actions(art, original, rng, lines_fallback=True)], "solver": solver, "task": task}


def write_actions(spec: Any, path: Path, pattern: str = "RWRW", *, seed: int = 0) -> Any:
    """Write the JSON file for `policy.scripted_actions`; returns the seed's task."""
    data = scripted_actions(spec, pattern, seed=seed)
    task = data.pop("task")
    path.write_text(json.dumps(data))
    return task


def scripted_run_config(*, name: str, runs_dir: Path, repo: str, actions: Path, model_dir: Path | None,
                        iterations: int = 1, injectors: int = 1, tasks: int = 1, group: int = 4, workers: int = 2,
                        mode: str = "sync") -> RunConfig:
    """The `RunConfig` of a run driven by the scripted action file `actions` on `repo`: generous turn limits
    (a scripted list never runs out of context), no procedural seeding, no TensorBoard. `model_dir` is the
    learner's model (a tiny random Llama in tests and benchmarks); None turns the learner off."""
    from selfplay.config.run_config import (
        CurriculumConfig,
        LearnerConfig,
        LimitsOverride,
        MetricsConfig,
        PolicyConfig,
        RolloutConfig,
        RunConfig,
    )
    from selfplay.judge.rewards import RewardConfig
    from selfplay.learner.config import EngineConfig

    return RunConfig(
        name=name, runs_dir=str(runs_dir), repos=(repo,), iterations=iterations,
        policy=PolicyConfig(backend="scripted", model_dir=str(model_dir) if model_dir else None,
                            scripted_actions=str(actions)),
        rollout=RolloutConfig(injector_episodes=injectors, solver_tasks=tasks, strategies=("direct",),
                              workers=workers, sandboxes_per_repo=max(2, workers),
                              injector_limits=LimitsOverride(max_turns=16, max_new_tokens=1536,
                                                             max_context_tokens=8192, command_timeout=90.0),
                              solver_limits=LimitsOverride(max_turns=16, max_new_tokens=1024,
                                                           max_context_tokens=8192)),
        curriculum=CurriculumConfig(seed_per_repo=0), reward=RewardConfig(group_size=group),
        learner=LearnerConfig(enabled=model_dir is not None, mode=mode, checkpoint_every=1,
                              engine=EngineConfig(lr=1e-3, warmup_steps=1, token_budget=4096)),
        metrics=MetricsConfig(tensorboard=False))
