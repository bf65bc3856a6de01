"""Solver demonstrations: the scripted expert solves a task through the real tools in a real sandbox,
and only a demonstration whose final diff the real grader scores +1 is kept.

The expert's actions (`solver_plan.solver_actions`) are replayed by the `scripted` policy backend with
the embedded model's tokenizer, so the trajectory is token-exact like any policy's: the prompt rendered
by the chat template, each action's tokens plus `<|im_end|>` with loss mask 1, observations mask 0.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from dataclasses import dataclass, replace
from typing import Any

from agent_scaffold.agent import run_episode
from agent_scaffold.editor import EditError, Editor
from agent_scaffold.localize import LocalizeError, failed_count, run_spectrum
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
from repos.spec import RepoSpec
from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image
from selfplay.demos.bug import parse_hunks
from selfplay.demos.solver_plan import (
    LOCALIZE_RANKS,
    OBSERVATION_CHARS,
    SolverTask,
    expert_plan,
    visible_target,
)
from selfplay.diffs import reverse_diff
from selfplay.errors import NotDemonstrable, SelfPlayError
from selfplay.judge.grader import build_buggy_state, grade
from selfplay.task import Task

log = logging.getLogger(__name__)

DEMO_LIMITS = EpisodeLimits(max_turns=14, max_new_tokens=768, max_context_tokens=2048, command_timeout=60.0,
                            wall_clock=600.0, max_observation_chars=OBSERVATION_CHARS)
"""Budgets of a demonstration: at most 2,048 tokens in all (SmolLM2 tokenizer and chat template), so a
2-core CPU can train on it; a demonstration that does not fit ends `context_exhausted` and is dropped."""


@dataclass(frozen=True)
class SolverDemo:
    """One demonstration attempt and its grade."""

    task_id: str
    trajectory: Any
    """agent_scaffold.trajectory.Trajectory, with reward and metadata (task_id, repo, source=demo)."""
    reward: float
    """The real grader's reward for the final diff (-1 when the episode did not submit)."""
    termination: str
    reason: str
    """The grader's reason, or why the episode ended."""
    wall_time: float

    @property
    def kept(self) -> bool:
        return self.reward > 0


REPRODUCE_MAX_SPEC_TOKENS = 200
"""The expert quotes the spec again to reproduce the failure only when the spec is at most this long."""
PLAN_RESERVE_TOKENS = 1300
"""Tokens a demonstration needs besides the spec (prompt ~490, actions and observations); tasks whose
spec leaves less than this of the context budget are skipped (`fits`)."""


def spec_tokens(task: Task, tokenizer: Any) -> int:
    return len(tokenizer.encode(task.spec, add_special_tokens=False))


def fits(task: Task, tokenizer: Any, limits: EpisodeLimits = DEMO_LIMITS) -> bool:
    """Whether a demonstration on `task` can fit `limits.max_context_tokens` (long specs cannot)."""
    return spec_tokens(task, tokenizer) + PLAN_RESERVE_TOKENS <= limits.max_context_tokens


def artifact_fits(artifact: Any, tokenizer: Any, limits: EpisodeLimits = DEMO_LIMITS) -> bool:
    """`fits` for the task an artifact would make, before it is validated (the spec is its reversed
    test_weaken.diff): seeding asks this so a too-long task costs no suite run."""
    spec = reverse_diff(artifact.test_weaken)
    return len(tokenizer.encode(spec, add_special_tokens=False)) + PLAN_RESERVE_TOKENS <= limits.max_context_tokens


def fits_key(tokenizer: Any, limits: EpisodeLimits = DEMO_LIMITS) -> str:
    """Names the `artifact_fits` filter, for cache keys."""
    return f"fits:{getattr(tokenizer, 'name_or_path', type(tokenizer).__name__)}:{limits.max_context_tokens}:" \
           f"{PLAN_RESERVE_TOKENS}"


def demo_limits(max_context_tokens: int = DEMO_LIMITS.max_context_tokens) -> EpisodeLimits:
    return replace(DEMO_LIMITS, max_context_tokens=max_context_tokens)


def run_solver_demo(task: Task, spec: RepoSpec, tokenizer: Any, rng: random.Random, *,
                    limits: EpisodeLimits = DEMO_LIMITS, image: str | None = None,
                    short: bool = False, visible_only: bool = False, localize: bool = False,
                    localize_ranks: int = LOCALIZE_RANKS, recover: bool = False) -> SolverDemo:
    """One demonstration on `task` in a fresh sandbox of the repo's image, graded by `selfplay.judge.grader.grade`;
    `short`: the 4-turn plan (`SolverTask.short`); `visible_only`: `SolverTask.visible_only` (NotDemonstrable
    for a task whose spec never names the bug's function); `localize`: the episode has the `localize` tool and
    the expert follows `solver_plan.localize_actions` (NotDemonstrable when the tool does not list the bug's
    line among its first `localize_ranks`); `recover` (with `localize`): a bug listed second is demonstrated
    with `solver_plan.recovery_plan`, its wrong first edit recorded in the trajectory's metadata
    `unlearned_turns` (NotDemonstrable when the second `localize` lists no failing test)."""
    start = time.monotonic()
    image = image or repo_image(spec)
    reproduce = spec_tokens(task, tokenizer) <= REPRODUCE_MAX_SPEC_TOKENS
    ep, unlearned = _play_demo(task, spec, tokenizer, rng, limits, image, reproduce, short, visible_only,
                               localize_ranks if localize else 0, recover and localize)
    if visible_only and not localize and reproduce and not short and ep.termination == "context_exhausted":
        # the `visible` view is a whole page (up to an observation), so quoting the spec a second time to
        # reproduce can leave no room for the repair: the same task without that step (draws of its own)
        ep, unlearned = _play_demo(task, spec, tokenizer, random.Random(rng.random()), limits, image, False, short,
                                   True, 0)
    if unlearned and ep.termination == "submitted" and not _still_failing(ep.trajectory, unlearned[-1] + 1):
        raise NotDemonstrable("the wrong first edit left no failing test, so the recovery it shows would be false")
    if ep.infra_failure:
        raise SelfPlayError(f"demonstration on {task.task_id}: sandbox failure ({ep.error}); not a model failure, "
                            "check the Docker engine and retry")
    if ep.termination != "submitted":
        reward, reason = -1.0, f"episode ended {ep.termination}"
    else:
        result = grade(task.artifact, ep.submission or "", task.fail_to_pass, task.pass_to_pass, spec=spec,
                       base_patch=task.pred_patch)
        reward, reason = float(result.reward), result.error or ("resolved" if result.resolved else "not resolved")
    traj = dataclasses.replace(ep.trajectory, reward=reward, metadata={
        **ep.trajectory.metadata, "task_id": task.task_id, "repo": task.repo, "source": "demo",
        "submission": ep.submission, "grade_reason": reason, "unlearned_turns": list(unlearned),
        "plan": ("recovery" if unlearned else "localize") if localize else "short" if short else "full"})
    return SolverDemo(task.task_id, traj, reward, ep.termination, reason, time.monotonic() - start)


def _play_demo(task: Task, spec: RepoSpec, tokenizer: Any, rng: random.Random, limits: EpisodeLimits, image: str,
               reproduce: bool, short: bool, visible_only: bool, localize_ranks: int = 0,
               recover: bool = False) -> tuple[Any, tuple[int, ...]]:
    """The expert's episode on `task` in a fresh sandbox of `image` (not graded), and the turns it plays that
    carry no loss (`solver_plan.Plan.unlearned`); with `localize_ranks` > 0 it has the `localize` tool, and the
    expert may edit the first that many lines the tool lists (with `recover`, a line listed second too)."""
    localize = localize_ranks > 0
    role = load_role("solver")
    localizer = task.localizer(spec.test_command) if localize else None
    with DockerSandbox.create(image, workdir=spec.workdir) as sb:
        build_buggy_state(sb, task.artifact, base_patch=task.pred_patch)
        paths = {h.path for h in parse_hunks(task.artifact.bug_inject)}
        ranked: tuple[tuple[str, int], ...] = ()
        if localizer is not None:  # what the episode's first `localize` will list (the run leaves no trace)
            depth = max(localize_ranks, 2) if recover else localize_ranks
            try:
                listed = run_spectrum(sb, localizer).suspects[:min(localizer.listed, depth)]
                ranked = tuple((s.path, s.line) for s in listed)
            except LocalizeError as exc:
                raise NotDemonstrable(f"localize fails on this task: {exc}") from None
            if recover:  # the wrong first edit is made in the first listed line's file
                paths |= {p for p, _ in ranked[:1]}
        # The expert's privileged knowledge of the buggy files: read before the episode, not as an action.
        sources = {p: sb.read_file(p).decode() for p in sorted(paths)}
        plan = SolverTask(spec=task.spec, fail_to_pass=task.fail_to_pass, bug_inject=task.artifact.bug_inject,
                          buggy_sources=sources, reproduce=reproduce, short=short, visible_only=visible_only,
                          localize=localize, ranked=ranked, recover=recover)
        script = expert_plan(plan, rng)
        if visible_only and not localize:
            _check_resolves(Editor(sb), plan)
        policy = ScriptedPolicy(list(script.actions), tokenizer=tokenizer)
        ep = run_episode(policy, sb, role, solver_variables(task.spec, "tests"), limits=limits, localizer=localizer)
        return ep, script.unlearned


def _still_failing(traj: Any, turn: int) -> bool:
    """Whether the observation after assistant turn `turn` is a `localize` answer with failing tests."""
    messages = traj.messages
    replies = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if turn >= len(replies) or replies[turn] + 1 >= len(messages):
        return False
    return (failed_count(str(messages[replies[turn] + 1].get("content", ""))) or 0) > 0


def _check_resolves(editor: Editor, plan: SolverTask) -> None:
    """NotDemonstrable unless the spec's call (`view CALL`) resolves to the bug's function in this sandbox:
    a bare `merge` that toolz also defines in `toolz/curried` is refused as ambiguous, and a call resolved to
    another function would show a page without the bug."""
    call, path, line = visible_target(plan)
    try:
        found = editor.definition(call)
    except EditError as exc:
        raise NotDemonstrable(f"`view {call}` is refused: {exc}") from None
    if found != (path, line):
        raise NotDemonstrable(f"`view {call}` goes to {found}, not to the bug's function at {path}:{line}")
