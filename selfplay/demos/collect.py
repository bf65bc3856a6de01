"""`make_demos`: seed procedural tasks on a repo, run the scripted solver on each, keep what the real
grader scores +1, and store it (task, trajectory file, attempt with source "demo").

Tasks whose spec is too long for a short demonstration (`solver.fits`) are skipped; seeding goes on in
rounds (a new seed each) until `n` tasks fit or `max_rounds` is reached; the length check runs before
validation too (`solver.artifact_fits`), so a too-long task costs no suite run. Seeds come through the seed cache
(`seed_cache.cached_seed`) and are validated with one run of the original suite instead of two
(`SEED_VALIDATION`): the second run only detects flaky tests, and a demonstration on a task with a flaky
F2P test fails its real grade and is dropped, so the saving costs at most a dropped demonstration.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_scaffold.embedded import default_model_dir
from agent_scaffold.roles import EpisodeLimits
from agent_scaffold.trajectory import save_jsonl
from repos.spec import RepoSpec
from sandboxes.images import repo_image
from selfplay.demos.injector import INJECTOR_LIMITS, run_injector_demo
from selfplay.demos.seed_cache import cached_seed
from selfplay.demos.solver import (
    DEMO_LIMITS,
    SolverDemo,
    artifact_fits,
    demo_limits,
    fits,
    fits_key,
    run_solver_demo,
)
from selfplay.demos.solver_plan import LOCALIZE_RANKS
from selfplay.errors import DiffError, NotDemonstrable
from selfplay.procedural.seed import SeedConfig
from selfplay.procedural.seed import seed as run_seed
from selfplay.store.rows import artifact_id_for
from selfplay.validation import ValidationConfig

if TYPE_CHECKING:
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)
SEED_VALIDATION_RUNS = 1
"""`ValidationConfig.original_runs` when seeding demonstration tasks (the default is 2)."""
RETRIES = 2
"""Extra attempts, with other seeded choices, for a demonstration that ran out of its token budget."""
VISIBLE_OVERSEED = 3
"""With `visible_only`, tasks seeded in a round per demonstrated task still wanted: in the default warm
start's first FORMAT 12 rounds, 6 of 14 seeded tasks' specs never named the bug's function and 4 more had
it too far from its `def` to view whole; a round short of `n` is made up by the next."""


@dataclass
class DemoReport:
    """What one `make_demos` call did."""

    repo: str
    tasks: list[str] = field(default_factory=list)
    """Task ids that got a demonstration attempt."""
    skipped_long: int = 0
    """Seeded tasks skipped because their spec does not fit a short demonstration."""
    skipped_hidden: int = 0
    """Tasks skipped because their spec never names the bug's function (`visible_only`)."""
    kept: list[str] = field(default_factory=list)
    """Trajectory files of the demonstrations graded +1."""
    dropped: list[str] = field(default_factory=list)
    """`task_id: reason` of the demonstrations not graded +1."""
    tokens: list[int] = field(default_factory=list)
    """Token count of each kept solver demonstration."""
    injector_kept: list[str] = field(default_factory=list)
    """Trajectory files of the injector demonstrations whose artifact validated."""
    seed_time: float = 0.0
    """Seconds spent seeding (pre-screen and validation of mutants, or reading the seed cache)."""
    seed_rounds_cached: int = 0
    """Seeding rounds served from the seed cache."""
    wall_time: float = 0.0


def make_demos(spec: RepoSpec, n: int, store: TaskStore, out_dir: str | Path, *, seed: int = 0, per_task: int = 1,
               max_context_tokens: int = DEMO_LIMITS.max_context_tokens, max_rounds: int = 3,
               tokenizer: Any = None, on_demo: Callable[[SolverDemo], None] | None = None,
               injector: int = 0, injector_max_context_tokens: int = INJECTOR_LIMITS.max_context_tokens,
               short_share: float = 0.0, seed_cache: bool | Path = True,
               injector_operators: Sequence[str] = (), visible_only: bool = False,
               localize: bool = False, localize_ranks: int = LOCALIZE_RANKS,
               injector_strategy: str = "direct") -> DemoReport:
    """Up to `n` tasks of `spec`, `per_task` demonstrations each; +1 ones saved under `out_dir` and stored.
    Also up to `injector` injector demonstrations within `injector_max_context_tokens`, one per seeded
    artifact (more artifacts are seeded when `injector` > `n`), kept when the artifact they submit validates;
    `injector_operators`: the injector demonstrations' bugs are seeded on their own, with only these
    procedural operators (empty: every operator, from the solver's seeds); `short_share`: the share of solver
    demonstrations (a seeded draw each) that follow the 4-turn plan (`solver_plan.SolverTask.short`); `seed_cache`: True
    reads/writes the seed cache in its default place, a path puts it there, False seeds afresh into
    `out_dir`/seeds; `visible_only`: only tasks whose spec names the bug's function are demonstrated
    (`solver_plan.SolverTask.visible_only`), so each round seeds `VISIBLE_OVERSEED` tasks for every one still
    wanted and demonstrates them in an order that balances their operators (`balanced_next`); `localize`: the
    solver episodes have the `localize` tool and the expert locates with it (`solver_plan.localize_actions`:
    only tasks whose bug's line it lists among its first `localize_ranks`), seeded and ordered as with
    `visible_only`; `injector_strategy`: the injector demonstrations' strategy (direct, or kit: the artifact
    kit writes the fixed parts, `agent_scaffold.artifact_kit`)."""
    if n < 1 or per_task < 1 or injector < 0:
        raise ValueError(f"-n and --per-task must be >= 1, injector >= 0 (got {n}, {per_task}, {injector})")
    start = time.monotonic()
    tokenizer, out = _prepared(tokenizer, out_dir)
    limits = demo_limits(max_context_tokens)
    injector_limits = replace(INJECTOR_LIMITS, max_context_tokens=injector_max_context_tokens)
    report = DemoReport(spec.name)
    image = repo_image(spec)
    tasks = []
    validation = ValidationConfig(original_runs=SEED_VALIDATION_RUNS)
    def seed_round(config: SeedConfig, need: int) -> list[Any]:
        t0 = time.monotonic()
        if seed_cache is not False:
            seeded, hit = cached_seed(spec, need, image=image, config=config, validation=validation,
                                      accept=lambda a: artifact_fits(a, tokenizer, limits),
                                      accept_key=fits_key(tokenizer, limits),
                                      cache=None if seed_cache is True else Path(seed_cache))
            report.seed_rounds_cached += hit
        else:
            seeded = run_seed(spec, need, out / "seeds", config=config, validation=validation,
                              accept=lambda a: artifact_fits(a, tokenizer, limits))
        report.seed_time += time.monotonic() - t0
        return seeded

    def demonstrate(task: Any) -> None:
        """`per_task` demonstrations of `task`, the +1 ones stored; none (and the task not counted) when the
        expert cannot demonstrate it."""
        demos: list[SolverDemo] = []
        try:
            for j in range(per_task):
                short = random.Random(f"short:{seed}:{task.task_id}:{j}").random() < short_share
                for retry in range(RETRIES + 1):
                    # a variant that ran out of context is retried with other choices (shorter views, no reproduction)
                    rng = random.Random(f"{seed}:{task.task_id}:{j}" + (f":{retry}" if retry else ""))
                    demo = run_solver_demo(task, spec, tokenizer, rng, limits=limits, image=image, short=short,
                                           visible_only=visible_only, localize=localize,
                                           localize_ranks=localize_ranks)
                    if demo.termination != "context_exhausted":
                        break
                demos.append(demo)
        except NotDemonstrable as exc:
            report.skipped_hidden += 1
            log.info("task %s not demonstrated: %s", task.task_id, exc)
            return
        report.tasks.append(task.task_id)
        for j, demo in enumerate(demos):
            if on_demo:
                on_demo(demo)
            _store_demo(demo, store, out / "trajectories" / f"{task.task_id}-s{seed}-{j}.jsonl", report)

    operator_of: dict[str, str] = {}
    demonstrated: Counter[str] = Counter()
    # each round seeds for what is still wanted, then demonstrates its new tasks, so a round whose tasks the
    # expert cannot demonstrate (visible_only) is made up by the next one
    for rnd in range(max_rounds):
        solver_need = (n - len(report.tasks)) * (VISIBLE_OVERSEED if visible_only or localize else 1)
        injector_need = injector - len(report.injector_kept)
        if solver_need <= 0 and injector_need <= 0:
            break
        # without injector_operators the injector demonstrations draw on the solver's seeded artifacts too,
        # so seed for whichever wants more; with them the injector's bugs are seeded on their own
        need = solver_need if injector_operators else max(solver_need, injector_need)
        fresh = []
        if need > 0:
            for result in seed_round(SeedConfig(seed=seed * 1000 + rnd), need):
                task_id = store.record_validation(result.artifact, spec.name, result.report, origin="procedural",
                                                  strategy=result.operator)
                if task_id is None or any(t.task_id == task_id for t in tasks):
                    continue
                task = store.get_task(task_id)
                if fits(task, tokenizer, limits):
                    tasks.append(task)
                    fresh.append(task)
                    operator_of[task_id] = result.operator
                else:
                    report.skipped_long += 1
                if not injector_operators:
                    _injector_demo(result.artifact, spec, store, out, tokenizer, image, seed, report,
                                   injector_limits, wanted=injector, strategy=injector_strategy)
        if injector_operators and injector_need > 0:
            for result in seed_round(SeedConfig(seed=seed * 1000 + rnd, operators=tuple(injector_operators)),
                                     injector_need):
                _injector_demo(result.artifact, spec, store, out, tokenizer, image, seed, report, injector_limits,
                               wanted=injector, strategy=injector_strategy)
        while fresh and len(report.tasks) < n:
            task = balanced_next(fresh, operator_of, demonstrated) if visible_only or localize else fresh[0]
            fresh.remove(task)
            before = len(report.tasks)
            demonstrate(task)
            demonstrated[operator_of[task.task_id]] += len(report.tasks) - before
    report.wall_time = time.monotonic() - start
    return report


def _prepared(tokenizer: Any, out_dir: str | Path) -> tuple[Any, Path]:
    """`tokenizer`, the embedded model's when None, and `out_dir` with its trajectories folder made."""
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    out = Path(out_dir)
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    return tokenizer, out


def _store_demo(demo: SolverDemo, store: TaskStore, path: Path, report: DemoReport) -> None:
    """A +1 demonstration saved at `path` and stored as a "demo" attempt; any other counted as dropped."""
    if not demo.kept:
        report.dropped.append(f"{demo.task_id}: {demo.reason}")
        log.info("demo on %s dropped: %s", demo.task_id, demo.reason)
        return
    save_jsonl([demo.trajectory], path, append=False)
    traj = demo.trajectory
    store.record_attempt(demo.task_id, role="solver", policy_version=traj.policy_version,
                         reward=demo.reward, turns=len(traj.turn_spans), tokens=len(traj.input_ids),
                         termination=demo.termination, trajectory_path=str(path.resolve()),
                         wall_time=demo.wall_time, source="demo")
    report.kept.append(str(path))
    report.tokens.append(len(traj.input_ids))


RECOVERY_CONTEXT_TOKENS = 3072
"""Token budget of a recovery demonstration (`recovery_demos`): its wrong edit, second `localize` and undo
add 300-500 tokens to the 1,600-1,900 of a rank-1 one."""


def recovery_demos(spec: RepoSpec, n: int, store: TaskStore, out_dir: str | Path, *, seed: int = 0,
                   tokenizer: Any = None, max_context_tokens: int = RECOVERY_CONTEXT_TOKENS) -> DemoReport:
    """Up to `n` recovery demonstrations (`solver_plan.recovery_plan`) on `spec`'s tasks already in `store`
    that have no demonstration: the tasks a rank-1 `localize` build seeded and could not demonstrate, whose
    bug's line the tool lists second. Nothing is seeded, so the build they extend keeps its seeds and its
    direct demonstrations; kept ones are stored as `make_demos` stores its own."""
    start = time.monotonic()
    tokenizer, out = _prepared(tokenizer, out_dir)
    limits = demo_limits(max_context_tokens)
    report = DemoReport(spec.name)
    image = repo_image(spec)
    shown = {a.task_id for a in store.attempts(source="demo")}
    pending = sorted(t.task_id for t in store.task_stats(repo=spec.name) if t.task_id not in shown)
    for task_id in pending:
        if len(report.kept) >= n:
            break
        task = store.get_task(task_id)
        if task.origin != "procedural" or task.order != 1 or not fits(task, tokenizer, limits):
            continue
        try:
            demo = run_solver_demo(task, spec, tokenizer, random.Random(f"recover:{seed}:{task_id}"), limits=limits,
                                   image=image, localize=True, localize_ranks=1, recover=True)
        except NotDemonstrable as exc:
            report.skipped_hidden += 1
            log.info("task %s: no recovery demonstration: %s", task_id, exc)
            continue
        if demo.trajectory.metadata.get("plan") != "recovery":  # a rank-1 task some earlier run left out
            report.skipped_hidden += 1
            continue
        report.tasks.append(task_id)
        _store_demo(demo, store, out / "trajectories" / f"{task_id}-s{seed}-recover.jsonl", report)
    report.wall_time = time.monotonic() - start
    return report


def balanced_next(pending: Sequence[Any], operator_of: Mapping[str, str], demonstrated: Mapping[str, int]) -> Any:
    """The pending task (it has a `task_id`) whose operator has the fewest demonstrations so far, the first
    in seed order among ties. `visible_only` demonstrations are drawn this way because in seed order the
    fifteenth attempt's 44 were 13 flip_comparison (the seeder's most common mutant), and its policy
    flipped a comparison whatever the held-out bug was."""
    return min(pending, key=lambda t: demonstrated.get(operator_of[t.task_id], 0))


def _injector_demo(artifact: Any, spec: RepoSpec, store: TaskStore, out: Path, tokenizer: Any, image: str, seed: int,
                   report: DemoReport, limits: EpisodeLimits, *, wanted: int, strategy: str = "direct") -> None:
    """One injector demonstration on `artifact`'s bug, kept in `report` when it validates; none once
    `wanted` are kept."""
    if len(report.injector_kept) >= wanted:
        return
    try:
        demo = run_injector_demo(artifact, spec, tokenizer, random.Random(f"{seed}:{artifact.digest()}"),
                                 limits=limits, image=image, strategy=strategy)
    except (DiffError, NotDemonstrable) as exc:
        report.dropped.append(f"injector: {exc}")
        return
    if not demo.kept:
        report.dropped.append(f"injector: {demo.trajectory.termination}, "
                              f"validation {demo.trajectory.metadata.get('validation')}")
        return
    store.record_validation(demo.artifact, spec.name, demo.report, origin="injector", strategy=strategy)
    traj = demo.trajectory
    path = out / "trajectories" / f"injector-{artifact.digest()[:16]}-s{seed}.jsonl"
    save_jsonl([traj], path, append=False)
    store.record_attempt(None, role="injector", policy_version=traj.policy_version, reward=1.0,
                         turns=len(traj.turn_spans), tokens=len(traj.input_ids), termination=traj.termination,
                         trajectory_path=str(path.resolve()), wall_time=demo.wall_time, source="demo",
                         artifact_id=artifact_id_for(spec.name, demo.artifact))
    report.injector_kept.append(str(path))
