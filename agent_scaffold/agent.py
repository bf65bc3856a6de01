"""The agent loop: prompt, then turns of (sample, parse, act, observe) until an ending.

Endings (`Episode.termination`): submitted, max_turns, context_exhausted, timeout, format_errors, repeated
(`EpisodeLimits.max_repeats`: one action answered the same, turn after turn), sandbox_error. A
`SandboxError` ends the episode as `sandbox_error` with `infra_failure=True`, so it is never scored as a
model failure. Errors of the policy backend (HTTP failures after retries, ...) are not
caught: there is no trajectory worth keeping from a sampler that failed mid-turn.

With `EpisodeLimits.submit_on_limit`, an episode that runs out of turns, context or time submits the
sandbox's state as it stands (SWE-agent's autosubmission): its ending stays the limit it hit, and its
submission is graded like any other.

When the context budget would overflow, the episode ends (`context_exhausted`, the default) or, with
`EpisodeLimits.on_context_full="compact"`, older observations are replaced by a marker in a new context.
Turns are never dropped from the trajectory: a compacted episode is several token-exact *segments*
(`Trajectory.segments`), each to be trained as its own sequence (`Trajectory.sequences()`), because the
policy conditioned the later turns on the compacted context, not on the full history.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from agent_scaffold.actions import FormatError, parse_action
from agent_scaffold.artifact_kit import KIT_STRATEGY, KitView, install_kit
from agent_scaffold.localize import Localizer
from agent_scaffold.policy import TRAINING, Policy, SamplingParams
from agent_scaffold.repeats import RepeatCounter
from agent_scaffold.roles import ARTIFACT_FILES, EpisodeLimits, RoleConfig, render_template
from agent_scaffold.tools import Toolbox
from agent_scaffold.trajectory import TRUNCATED, Termination, Trajectory
from agent_scaffold.transcript import Transcript
from sandboxes.errors import DiffTooLarge, SandboxError
from sandboxes.sandbox import Sandbox

log = logging.getLogger(__name__)
LOCALIZE_HINT = (" The ```localize``` action, an empty block like ```submit```, runs the tests of the diff above "
                 "with line tracing and lists the lines of code their failing tests run, most suspicious first.")
"""The solver prompt's `localize_hint` in an episode that has the tool (empty otherwise: the prompt is then
unchanged, token for token)."""
LIMIT_ENDINGS: tuple[Termination, ...] = (*TRUNCATED, "timeout")
"""Endings where `EpisodeLimits.submit_on_limit` submits the sandbox's state."""
AGENT_ENV = {"PYTEST_ADDOPTS": "-p no:cacheprovider"}
"""The environment of an agent's sandbox on a repository we did not build (a SWE-bench instance, `selfplay
solve`): no .pytest_cache in the tree, since the cache never belongs in a patch (the sandbox's diff leaves it
out as well, `sandboxes.shell.DIFF_EXCLUDES`)."""


@dataclass(frozen=True)
class Episode:
    """The outcome of `run_episode`."""

    trajectory: Trajectory
    """Token-exact record (its `termination` equals `termination`)."""
    termination: Termination
    """One of `agent_scaffold.trajectory.TERMINATIONS`."""
    submission: str | dict[str, str] | None
    """Solver: the repo's git diff. Injector: {artifact file name: content} of the files that exist.
    None unless the episode ended with `submitted`, or hit a limit with `EpisodeLimits.submit_on_limit` and
    a complete submission in the sandbox (then `trajectory.metadata["submitted_on_limit"]` is True)."""
    infra_failure: bool = False
    """True when the sandbox failed: not the model's fault, never to be scored."""
    error: str | None = None
    """The infrastructure error message, if any."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds: wall, model (sampling), sandbox (tool execution), scaffold (the rest)."""
    turns: int = 0
    """Assistant turns taken."""
    format_errors: int = 0
    """Malformed replies in total."""


def run_episode(policy: Policy, sandbox: Sandbox, role: RoleConfig, variables: dict[str, Any], *,
                limits: EpisodeLimits | None = None, sampling: SamplingParams | None = None,
                on_turn: Callable[[int, str], None] | None = None, localizer: Localizer | None = None,
                kit_view: KitView | None = None,
                submit_check: Callable[[str | dict[str, str]], str | None] | None = None) -> Episode:
    """Run one episode of `role` with `policy` in `sandbox`. `variables` fill the role's templates.
    `on_turn(turn, what)` is told after each turn what the model did (`bash: CMD`, `edit ...`, `submit`,
    `format error`), for a caller that shows progress. `localizer` gives the episode the `localize` tool
    (a solver with a spec of failing tests), and its prompt a `localize_hint` that says so. `kit_view` is what
    a `kit` injector's kit is told of the store and of its round (`artifact_kit.KitView`). `submit_check` is a
    caller's own check of a complete submission (what is wrong with it, as the policy is told it, or None):
    while `limits.refused_submits` allows, a submit it faults is refused as an incomplete one is, and the
    episode goes on.

    The context budget (`limits.max_context_tokens`) is clamped to the policy's window (`context_window`)
    so that no caller plans past what the model can attend to."""
    limits = fit_context_window(limits or role.limits, policy)
    sampling = sampling or TRAINING
    values = _prompt_values(role, variables, sandbox.workdir, limits, localizer is not None)
    tr = Transcript(policy.tokenizer, _opening(role, values))
    tools = Toolbox(sandbox, limits.command_timeout, limits.max_observation_chars, localizer)
    stop_ids = tuple(sorted({*sampling.stop_token_ids, *tr.format.stop_ids}))
    start = time.monotonic()
    model_s = sandbox_s = 0.0
    turns = format_errors = consecutive = refused = 0
    repeats = RepeatCounter()
    termination, submission, error = "max_turns", None, None
    notes: dict[str, Any] = {}
    compactions: list[list[int]] = []  # per compaction, the (1-based) turns whose observations it elided
    batch_sizes: Counter[int] = Counter()  # sampled tokens by the decode batch size they were sampled in
    engine: Counter[str] = Counter()  # prefill_tokens, prefill_s, decode_s, batch_fill, from backends that report them
    try:
        if role.name == "injector" and role.strategy == KIT_STRATEGY:
            install_kit(sandbox, str(values["artifact_dir"]), kit_view)
        while True:
            if turns >= limits.max_turns:
                termination = "max_turns"
                break
            remaining = limits.wall_clock - (time.monotonic() - start)
            if remaining <= 0:
                termination = "timeout"
                break
            budget = limits.max_context_tokens - len(tr)
            if budget < limits.min_turn_tokens:
                termination = "context_exhausted"
                break
            params = sampling.with_(max_new_tokens=min(limits.max_new_tokens, budget), stop_token_ids=stop_ids)
            t0 = time.monotonic()
            completion = policy.generate([tr.context_ids], params)[0]
            model_s += time.monotonic() - t0
            batch_sizes.update(completion.batch_sizes)
            engine.update(prefill_tokens=completion.prefill_tokens, prefill_s=completion.prefill_s,
                          decode_s=completion.decode_s, batch_fill=completion.batch_fill, drafted=completion.drafted,
                          drafts_kept=completion.drafts_kept)
            content = tr.add_completion(completion)
            turns += 1
            try:
                action = parse_action(content)
            except FormatError as exc:
                if on_turn is not None:
                    on_turn(turns, "format error")
                format_errors += 1
                consecutive += 1
                repeats.malformed()
                if consecutive >= limits.max_format_errors:
                    termination = "format_errors"
                    break
                observation = f"Format error: {exc}"
            else:
                consecutive = 0
                if on_turn is not None:
                    on_turn(turns, f"{action.tool}: {action.command.strip().splitlines()[0][:100]}"
                            if action.command.strip() else action.tool)
                tools.command_timeout = max(1.0, min(limits.command_timeout, remaining))
                t0 = time.monotonic()
                outcome = tools.run(action)
                observation = outcome.observation
                if outcome.submitted:
                    submission = _submission(sandbox, role, values)
                    problem = None
                    if refused < limits.refused_submits:
                        problem = incomplete_submission(submission, values)
                        if problem is None and submit_check is not None:
                            problem = submit_check(submission)
                    if problem is not None:
                        refused += 1
                        observation = (f"Submit refused ({refused} of {limits.refused_submits}): {problem}; "
                                       "then submit again. The next submit after the last refusal ends the "
                                       "episode as it is.")
                        submission = None
                sandbox_s += time.monotonic() - t0
                if submission is not None:
                    termination = "submitted"
                    break
                run = repeats.see(action, observation)
                if limits.max_repeats is not None and run >= limits.max_repeats:
                    notes["unsent_observation"] = observation
                    termination = "repeated"
                    break
            obs_ids = tr.observation_ids(observation)
            limit = limits.max_context_tokens - limits.min_turn_tokens
            if len(tr) + len(obs_ids) <= limit:
                tr.add_observation(observation, obs_ids)
                continue
            elided = (tr.compact(observation, obs_ids, limits.keep_observations, limit)
                      if limits.on_context_full == "compact" else None)
            if elided is None:
                notes["unsent_observation"] = observation  # kept for reading, not part of the tokens
                termination = "context_exhausted"
                break
            compactions.append(elided)
            log.debug("context compacted at turn %d: observations of turns %s elided", turns, elided)
        if termination in LIMIT_ENDINGS and limits.submit_on_limit:
            submission = _submission_on_limit(sandbox, role, values)
            notes["submitted_on_limit"] = submission is not None
    except SandboxError as exc:
        termination, error = "sandbox_error", f"{exc.__class__.__name__}: {exc}"
        log.warning("episode ended by an infrastructure failure: %s", error)
    wall = time.monotonic() - start
    timings = {"wall": wall, "model": model_s, "sandbox": sandbox_s, "scaffold": wall - model_s - sandbox_s}
    metadata = {"strategy": role.strategy, "turns": turns, "format_errors": format_errors,
                "max_context_tokens": limits.max_context_tokens,
                "infra_failure": error is not None, "error": error, "timings": timings,
                "policy_versions": sorted(set(tr.versions)), "compactions": len(compactions),
                "refused_submits": refused, **notes}
    if compactions:
        metadata["elided_observations"] = compactions
    if batch_sizes:  # backends that report it (hf); the run's rollout/batch_size_* metrics come from these
        metadata["batch_sizes"] = {str(b): n for b, n in sorted(batch_sizes.items())}
    if engine["prefill_s"] or engine["decode_s"]:  # where the engine's time went (rollout/prefill_* metrics)
        metadata["engine"] = dict(engine)
    traj = Trajectory(input_ids=tuple(tr.input_ids), loss_mask=tuple(tr.loss_mask), logprobs=tuple(tr.logprobs),
                      turn_spans=tuple(tr.turn_spans), policy_version=min(tr.versions, default=policy.version),
                      role=role.name, termination=termination, messages=tuple(tr.messages), metadata=metadata,
                      segments=tuple(tr.segments) if compactions else ())
    return Episode(traj, termination, submission, infra_failure=error is not None, error=error, timings=timings,
                   turns=turns, format_errors=format_errors)


def _prompt_values(role: RoleConfig, variables: dict[str, Any], workdir: str, limits: EpisodeLimits,
                   localize: bool) -> dict[str, Any]:
    return {**role.defaults, "workdir": workdir, "command_timeout": f"{limits.command_timeout:g}", **variables,
            **({"localize_hint": LOCALIZE_HINT} if localize else {})}


def _opening(role: RoleConfig, values: dict[str, Any]) -> list[dict[str, str]]:
    return [{"role": "system", "content": render_template(role.system_template, values)},
            {"role": "user", "content": render_template(role.task_template, values)}]


def first_turn_room(policy: Policy, role: RoleConfig, variables: dict[str, Any], workdir: str,
                    limits: EpisodeLimits | None = None, localize: bool = False) -> int:
    """Tokens `run_episode` would leave for the first turn of `role` with `variables` (its prompt rendered
    and tokenized exactly as the episode would, in a sandbox at `workdir`, with the `localize` tool or
    without). Below `limits.min_turn_tokens`, the episode would end `context_exhausted` before sampling
    anything: a caller can refuse such an episode (a bug whose spec no solver can read) without playing it."""
    limits = fit_context_window(limits or role.limits, policy)
    prompt = Transcript(policy.tokenizer, _opening(role, _prompt_values(role, variables, workdir, limits, localize)))
    return limits.max_context_tokens - len(prompt)


def context_window(policy: Policy) -> int | None:
    """The most tokens `policy` can attend to, the first known of: its `context_window` attribute; its HF
    model's `config.max_position_embeddings` (or that of the policy it wraps, `policy.policy`); its
    tokenizer's `model_max_length` when that is a real limit (HF's "no limit" is ~1e30). None when unknown
    (e.g. a remote endpoint with no tokenizer)."""
    window = getattr(policy, "context_window", None)
    if _positive(window):
        return window
    for candidate in (policy, getattr(policy, "policy", None)):
        config = getattr(getattr(candidate, "model", None), "config", None)
        window = getattr(config, "max_position_embeddings", None)
        if _positive(window):
            return window
    limit = getattr(getattr(policy, "tokenizer", None), "model_max_length", None)
    return limit if _positive(limit) and limit < 10**7 else None


def _positive(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0


def fit_context_window(limits: EpisodeLimits, policy: Policy) -> EpisodeLimits:
    """`limits` with max_context_tokens lowered to the policy's window (the injector's default of 65,536
    exceeds SmolLM2's 8,192, and sampling past the window fails or degrades silently)."""
    window = context_window(policy)
    if window is None or limits.max_context_tokens <= window:
        return limits
    log.info("context budget clamped from %d to the policy's window of %d tokens",
             limits.max_context_tokens, window)
    if limits.min_turn_tokens >= window:
        raise ValueError(f"EpisodeLimits.min_turn_tokens={limits.min_turn_tokens} does not fit the policy's "
                         f"context window of {window} tokens; lower min_turn_tokens")
    return replace(limits, max_context_tokens=window)


def incomplete_submission(submission: str | dict[str, str], values: dict[str, Any]) -> str | None:
    """What a submission lacks, as the policy is told it (None when complete): an artifact file missing or
    empty, or an empty diff. Only presence is checked; whether the artifact is valid is validation's job,
    after the episode."""
    if isinstance(submission, str):
        return None if submission.strip() else ("the diff is empty (no file of the repo is changed, or the "
                                                "change is too large to submit): edit the code")
    missing = [n for n in ARTIFACT_FILES if n not in submission]
    empty = [n for n in ARTIFACT_FILES if n in submission and not submission[n].strip()]
    if not missing and not empty:
        return None
    what = "; ".join(part for part in (f"missing: {', '.join(missing)}" if missing else "",
                                       f"empty: {', '.join(empty)}" if empty else "") if part)
    return f"the artifact in {values['artifact_dir']} is incomplete ({what}): write those files there"


def _submission_on_limit(sandbox: Sandbox, role: RoleConfig, values: dict[str, Any]) -> str | dict[str, str] | None:
    """What a submit would have taken at this point, or None when it is incomplete (an empty diff, an
    artifact file missing or empty): grading nothing costs a test run and can only fail."""
    submission = _submission(sandbox, role, values)
    return submission if incomplete_submission(submission, values) is None else None


def _submission(sandbox: Sandbox, role: RoleConfig, values: dict[str, Any]) -> str | dict[str, str]:
    if role.submit == "diff":
        try:
            return sandbox.diff()
        except DiffTooLarge as exc:  # the model's tree is at fault: an empty submission, graded -1
            log.info("submission dropped: %s", exc)
            return ""
    files = {}
    for name in ARTIFACT_FILES:
        try:
            files[name] = sandbox.read_file(posixpath.join(str(values["artifact_dir"]), name)).decode(
                "utf-8", errors="replace")
        except OSError as exc:  # missing, too large, unreadable by the agent, not a regular file
            log.info("artifact file %s not submitted: %s", name, exc)
            continue  # validation reports which files are missing
    return files
