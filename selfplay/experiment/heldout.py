"""Held-out tasks and the evaluation of a checkpoint on them.

The split: procedural tasks seeded on repos that fed no demonstration, SFT or RL step, kept only if their
prompt fits the 2,048-token budget the warm start trained on. It is fixed by `seed`: seeding rounds use
SeedConfig seeds `1000 * seed + 500 + round`, disjoint from the warm start's `1000 * seed + round`, and
the tasks are listed in `<work>/tasks.json` so every arm and every phase sees the same ones.

Evaluation follows SSR's protocol: the solver sees only the weakened-test spec (no file, line or operator
hint), in a fresh buggy sandbox, and a submitted diff is graded by the real grader. Each task is played
greedily once and `samples` times at the training temperature (seeded per task and sample, so two
checkpoints with equal weights play equal episodes: 45 of 45 in two runs of the experiment, 2026-11-29);
episodes run `workers` at a time through one `BatchingPolicy`.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from agent_scaffold.agent import run_episode
from agent_scaffold.policies.batching import BatchingPolicy
from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policy import GREEDY, TRAINING
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
from repos.listfile import get_repo, load_repo_list
from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image
from selfplay.artifact import load_artifact
from selfplay.config.bounds import check_bounds
from selfplay.demos.collect import SEED_VALIDATION_RUNS
from selfplay.demos.seed_cache import cached_seed
from selfplay.demos.solver import artifact_fits, fits, fits_key
from selfplay.demos.solver_plan import OBSERVATION_CHARS
from selfplay.demos.warm_start_config import HELDOUT_SEED_OFFSET
from selfplay.diffs import touched_files
from selfplay.experiment.failures import (
    EpisodeFacts,
    classify,
    empty_or_unchanged,
    missing_paths,
    recovery_moves,
    search_refusals,
    turn_kinds,
    turn_table,
    with_unsent,
)
from selfplay.experiment.search_sources import SEARCH_KINDS, bug_lines, search_sources
from selfplay.experiment.stats import wilson
from selfplay.judge.grader import build_buggy_state, grade
from selfplay.procedural.seed import SeedConfig
from selfplay.rollout.policy_factory import resolve_device
from selfplay.task import Task, make_task_id
from selfplay.validation import ValidationConfig

log = logging.getLogger(__name__)

def heldout_seed(seed: int, round_: int) -> int:
    """SeedConfig seed of held-out seeding round `round_`; the warm start's rounds stay below the offset
    (`WarmStartConfig.max_rounds` is capped there), so the two never coincide."""
    return 1000 * seed + HELDOUT_SEED_OFFSET + round_


@dataclass(frozen=True)
class EvalSettings:
    """Budgets of a held-out evaluation."""

    max_turns: int = 6
    """Turns per episode."""
    max_new_tokens: int = 128
    """Tokens per turn."""
    max_context_tokens: int = 2048
    """Context budget (the warm start's)."""
    samples: int = 2
    """Episodes per task at `temperature` (pass@k with k = samples); 0 runs greedy only."""
    temperature: float = 1.0
    """Sampling temperature of those episodes: the training run's `rollout.temperature`."""
    greedy: bool = True
    """Also play each task once greedily."""
    workers: int = 4
    """Episodes in flight at once."""
    localize: bool = False
    """Give the solver the `localize` tool (`agent_scaffold.localize`), as a `locate: localize` warm start's
    demonstrations had it; the tool ranks lines from the spec's tests only, so SSR's protocol still holds."""
    sample_seed: int = 0
    """Varies the sampled episodes' seeds (`episode_seed`). 0 keeps the seeds every earlier evaluation used,
    so a checkpoint evaluated twice plays the same episodes; give each replicate of an experiment its own,
    and its evaluations are independent samples of the same checkpoints."""
    submit_on_limit: bool = False
    """Grade the sandbox's diff when an episode runs out of turns or context (`EpisodeLimits.submit_on_limit`,
    SWE-agent's autosubmission); its ending and failure label stay the limit's, a solve counts as solved."""
    max_repeats: int | None = None
    """End an episode when this many turns in a row repeat the one before, the same action answered the same
    (`EpisodeLimits.max_repeats`, ending and failure label `repeated`), as the training rollouts of the
    `default` preset do with 2. None, as in every evaluation before it existed, never does; it is part of
    the draws' identity (`recheck.draw_settings`) only when set."""
    device: str = "auto"
    """Where the checkpoint samples: a torch device, or auto (cuda when torch sees a GPU, as the training
    rollouts' `policy.device` resolves). It changes the numerics, not the draws' seeds."""

    def __post_init__(self) -> None:
        if self.max_repeats is not None and self.max_repeats < 1:
            raise ValueError(f"EvalSettings.max_repeats must be 1 or more, or None (never), got {self.max_repeats}")
        check_bounds(self, at_least={"max_turns": 1, "max_new_tokens": 1, "max_context_tokens": 1, "workers": 1,
                                     "samples": 0})
        if not self.samples and not self.greedy:
            raise ValueError("EvalSettings: samples is 0 and greedy is off, so no episode would be played; "
                             "give samples >= 1 or keep greedy")
        if self.samples and not 0 < self.temperature <= 2:
            raise ValueError(f"EvalSettings.temperature must be in (0, 2] for sampled episodes (greedy ones "
                             f"ignore it), got {self.temperature}")


def shown_task_ids(model_dirs: Sequence[str | Path]) -> frozenset[str]:
    """Ids of every task in the stores of the warm starts these checkpoints are: the store.db beside a warm
    start's model directory lists the tasks it demonstrated and the ones seeded while it was built. A
    checkpoint with no store beside it (an RL run's) adds none: its run's own store is not consulted."""
    from selfplay.store import open_store  # lazy: the store's SQL machinery

    ids: set[str] = set()
    for model in model_dirs:
        store = Path(model).expanduser().resolve().parent / "store.db"
        if store.is_file():
            with open_store(str(store), create=False) as s:
                ids.update(t.task_id for t in s.task_stats())
    return frozenset(ids)


def unlisted_repos(names: Sequence[str], repo_list: str | Path | None = None) -> str | None:
    """Why `names` cannot be held out from `repo_list` (None: the bundled list), naming the repos it does not
    list and the ones it does, or None when every one is listed. RepoError when the list cannot be read."""
    listed = [s.name for s in load_repo_list(repo_list)]
    unknown = [r for r in names if r not in listed]
    if not unknown:
        return None
    where = repo_list or "the bundled repos/default.toml"
    return f"held-out repos {', '.join(map(repr, unknown))} are not in {where}; valid names: {', '.join(listed)}"


def heldout_tasks(repos: Sequence[str], n: int, seed: int, out: Path, tokenizer: Any,
                  exclude: Collection[str] = frozenset(), repo_list: str | Path | None = None) -> list[tuple[Any, Any]]:
    """(RepoSpec, Task) pairs, `n` per repo, seeded once and listed in `out`/tasks.json. A task whose id is
    in `exclude` (`shown_task_ids` of the checkpoints to be measured) is never held out: seeding skips it,
    and a listed one is dropped with a warning, since a checkpoint that was built on it is not measured on
    unseen work there. `repo_list`: the list file that names `repos` (None: the bundled one); tasks.json
    records it beside each task, so a listed split reads back from the list it was seeded from."""
    cache = out / "tasks.json"
    if cache.is_file():
        specs: dict[tuple[str, str | None], Any] = {}  # one list lookup per repo, not one per task

        def spec_of(e: dict[str, Any]) -> Any:
            key = (e["repo"], e.get("repo_list"))
            if key not in specs:
                specs[key] = get_repo(*key)
            return specs[key]

        try:
            listed = [(spec_of(e), Task(e["task_id"], e["repo"], load_artifact(e["dir"]),
                                        tuple(e["f2p"]), tuple(e["p2p"]), origin="procedural"))
                      for e in json.loads(cache.read_text())]
        except (OSError, ValueError, KeyError, TypeError) as e:  # ArtifactError and RepoNotFound among them
            raise ValueError(f"{cache} lists the held-out tasks, but they cannot be read back ({e}); move it "
                             "aside to seed the split again (an experiment that listed it can then no longer "
                             "be resumed with these tasks)") from None
        dropped = [t.task_id for _, t in listed if t.task_id in exclude]
        if dropped:
            log.warning("%s: %d of its %d held-out tasks are in the measured warm start's store and are left out: "
                        "%s", cache, len(dropped), len(listed), ", ".join(dropped))
        return [(sp, t) for sp, t in listed if t.task_id not in exclude]
    tasks: list[tuple[Any, Any]] = []
    dirs: dict[str, str] = {}
    listed_in = str(Path(repo_list).expanduser().resolve()) if repo_list else None
    for repo in repos:
        spec = get_repo(repo, listed_in)
        found: list[Any] = []
        for rnd in range(5):
            try:
                seeded, _ = cached_seed(spec, n, image=repo_image(spec), config=SeedConfig(seed=heldout_seed(seed, rnd)),
                                        validation=ValidationConfig(original_runs=SEED_VALIDATION_RUNS),
                                        accept=lambda a: artifact_fits(a, tokenizer), accept_key=fits_key(tokenizer))
            except ValueError as exc:  # e.g. no code file with a same-named test file
                log.warning("held-out repo %s cannot be seeded: %s", repo, exc)
                break
            for r in seeded:
                t = Task(make_task_id(repo, r.artifact), repo, r.artifact, tuple(r.report.fail_to_pass),
                         tuple(r.report.pass_to_pass), origin="procedural")
                if t.task_id in exclude:
                    log.info("held-out seeding: %s is in the measured warm start's store; skipped", t.task_id)
                elif fits(t, tokenizer) and all(x.task_id != t.task_id for x in found):
                    found.append(t)
                    dirs[t.task_id] = str(r.directory)
            if len(found) >= n:
                break
        tasks += [(spec, t) for t in found[:n]]
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps([{"repo": sp.name, "task_id": t.task_id, "dir": dirs[t.task_id],
                                  "f2p": list(t.fail_to_pass), "p2p": list(t.pass_to_pass),
                                  **({"repo_list": listed_in} if listed_in else {})} for sp, t in tasks]))
    return tasks


def interleave(tasks: Sequence[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Round-robin over repos, so a run stopped early still covers every held-out repo."""
    by_repo: dict[str, list] = {}
    for spec, task in tasks:
        by_repo.setdefault(spec.name, []).append((spec, task))
    queues = list(by_repo.values())
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


@dataclass(frozen=True)
class EpisodeRow:
    """One held-out episode."""

    task: str
    repo: str
    mode: str
    """greedy or sample."""
    sample: int
    termination: str
    reward: float
    turns: int
    format_errors: int
    failure: str
    """`failures.classify` label."""
    empty_diff: bool
    """Submitted a diff that changes no library file."""
    search_refusals: int
    wall_s: float
    actions: tuple[str, ...] = ()
    """`failures.turn_kinds` of its turns."""
    search_texts: Mapping[str, int] = field(default_factory=dict)
    """`search_sources.search_sources` of its str_replace actions (empty in rows saved before it)."""
    on_limit: bool = False
    """Its diff was taken and graded at a limit (`EvalSettings.submit_on_limit`), not submitted."""
    undos: int = 0
    """Applied edits that undo an earlier one (`failures.recovery_moves`; 0 in rows saved before it)."""
    edited_lines: int = 0
    """Distinct targets of its other applied `str_replace`s (`failures.recovery_moves`)."""
    missing_paths: tuple[str, ...] = ()
    """Paths its edits named that are not in the repo (`failures.missing_paths`; empty in rows saved before it)."""


def _observations(messages: Sequence[Any]) -> tuple[str, ...]:
    return tuple(str(m.get("content", "")) for m in messages[2:] if m.get("role") != "assistant")


def episode_seed(task_id: str, sample: int, sample_seed: int = 0) -> int:
    """The sampling seed of a task's `sample`-th episode: fixed by task and sample, so two checkpoints are
    compared on the same draws; `sample_seed` (`EvalSettings.sample_seed`) moves every draw at once."""
    key = f"{task_id}:{sample}" if sample_seed == 0 else f"{task_id}:{sample}:{sample_seed}"
    return zlib.crc32(key.encode())


def eval_limits(settings: EvalSettings) -> EpisodeLimits:
    """The solver's limits in a held-out episode."""
    return EpisodeLimits(max_turns=settings.max_turns, max_new_tokens=settings.max_new_tokens,
                         max_context_tokens=settings.max_context_tokens, command_timeout=60.0,
                         max_observation_chars=OBSERVATION_CHARS,  # the demonstrations'
                         submit_on_limit=settings.submit_on_limit, max_repeats=settings.max_repeats)


def play(policy: Any, spec: Any, task: Any, mode: str, sample: int, settings: EvalSettings,
         transcripts: Path | None = None) -> EpisodeRow:
    """One held-out episode in a fresh buggy sandbox, graded when it submits; its messages written to
    `transcripts/<task>-<mode><sample>.txt` when given (to read where it failed, turn by turn)."""
    t0 = time.monotonic()
    limits = eval_limits(settings)
    seed = episode_seed(task.task_id, sample, settings.sample_seed)
    sampling = GREEDY if mode == "greedy" else TRAINING.with_(seed=seed, temperature=settings.temperature)
    with DockerSandbox.create(repo_image(spec), workdir=spec.workdir) as sb:
        build_buggy_state(sb, task.artifact)
        ep = run_episode(policy, sb, load_role("solver"), solver_variables(task.spec, "tests"), limits=limits,
                         sampling=sampling,
                         localizer=task.localizer(spec.test_command) if settings.localize else None)
    reward = -1.0
    if ep.submission is not None and not ep.infra_failure:  # submitted, or taken at a limit
        reward = float(grade(task.artifact, ep.submission or "", task.fail_to_pass, task.pass_to_pass,
                             spec=spec).reward)
    submission = ep.submission if isinstance(ep.submission, str) else None
    messages = with_unsent(ep.trajectory.messages, ep.trajectory.metadata)
    facts = EpisodeFacts(ep.termination, reward, ep.turns, ep.format_errors, submission,
                         _observations(messages), touched_files(task.artifact.bug_inject),
                         tuple(task.artifact.test_files), ep.infra_failure)
    row = EpisodeRow(task.task_id, spec.name, mode, sample, ep.termination, reward, ep.turns, ep.format_errors,
                     classify(facts), empty_or_unchanged(facts), search_refusals(facts.observations),
                     round(time.monotonic() - t0, 1), turn_kinds(messages),
                     search_sources(messages, bug_lines(task.artifact.bug_inject)),
                     bool(ep.trajectory.metadata.get("submitted_on_limit")), *recovery_moves(messages),
                     missing_paths(facts.observations))
    if transcripts is not None:
        transcripts.mkdir(parents=True, exist_ok=True)
        (transcripts / f"{task.task_id}-{mode}{sample}.txt").write_text(
            f"# graded reward {reward:g}, failure {row.failure}\n{ep.trajectory.to_text()}")
    return row


def _play_or_infra(policy: Any, spec: Any, task: Any, mode: str, sample: int, settings: EvalSettings,
                   transcripts: Path | None) -> EpisodeRow:
    """`play`, with an infrastructure failure (a dead sandbox, a grader error) kept as a row, not raised:
    one broken episode must not end an evaluation of dozens."""
    t0 = time.monotonic()
    try:
        return play(policy, spec, task, mode, sample, settings, transcripts)
    except Exception as exc:
        log.warning("held-out episode %s/%s/%d failed on infrastructure: %s", task.task_id, mode, sample, exc)
        return EpisodeRow(task.task_id, spec.name, mode, sample, "sandbox_error", -1.0, 0, 0, "infra", False, 0,
                          round(time.monotonic() - t0, 1))


def eval_policy(model_dir: str | None, settings: EvalSettings) -> BatchingPolicy:
    """The checkpoint `model_dir` on `settings.device`, batched across `settings.workers` episode threads."""
    return BatchingPolicy(HFPolicy(model_dir, device=resolve_device(settings.device), kv_cache_mb=1024),
                          max_batch=max(1, settings.workers))


def evaluate(model_dir: str | None, tasks: Sequence[tuple[Any, Any]], settings: EvalSettings,
             on_row: Callable[[EpisodeRow], None] | None = None, transcripts: Path | None = None) -> list[EpisodeRow]:
    """Every episode of `settings` on every task with the checkpoint `model_dir` (each one's messages
    under `transcripts` when given, `play`)."""
    jobs = [(spec, task, "greedy", 0) for spec, task in tasks if settings.greedy]
    jobs += [(spec, task, "sample", k) for k in range(settings.samples) for spec, task in tasks]
    policy = eval_policy(model_dir, settings)
    rows: list[EpisodeRow] = []
    try:
        with ThreadPoolExecutor(max(1, settings.workers), thread_name_prefix="heldout") as pool:
            for row in pool.map(lambda j: _play_or_infra(policy, *j, settings, transcripts), jobs):
                rows.append(row)
                log.info("held-out %d/%d: %s %s#%d %s, %d turns, %s (%.0f s)", len(rows), len(jobs), row.task,
                         row.mode, row.sample, row.termination, row.turns, row.failure, row.wall_s)
                if on_row is not None:
                    on_row(row)
    finally:
        policy.close()
    return rows


def summarize(rows: Sequence[EpisodeRow]) -> dict[str, Any]:
    """Greedy solve rate, pass@k and the mean solve rate of the sampled episodes (each with a Wilson 95% interval), the
    format-valid turn rate beside the share of empty or unchanged submissions, and the failure counts."""
    out: dict[str, Any] = {}
    greedy = [r for r in rows if r.mode == "greedy" and r.failure != "infra"]
    sampled = [r for r in rows if r.mode == "sample" and r.failure != "infra"]
    if greedy:
        k = sum(r.reward > 0 for r in greedy)
        out["greedy"] = {"solved": k, "n": len(greedy), "rate": k / len(greedy), "ci95": wilson(k, len(greedy))}
    if sampled:
        by_task: dict[str, list[bool]] = {}
        for r in sampled:
            by_task.setdefault(r.task, []).append(r.reward > 0)
        k = sum(any(v) for v in by_task.values())
        ks = sum(r.reward > 0 for r in sampled)
        out["pass_at_k"] = {"k": max(map(len, by_task.values())), "solved": k, "n": len(by_task),
                            "rate": k / len(by_task), "ci95": wilson(k, len(by_task))}
        out["sample"] = {"solved": ks, "n": len(sampled), "rate": ks / len(sampled), "ci95": wilson(ks, len(sampled))}
    played = [r for r in rows if r.failure != "infra"]
    turns = sum(r.turns for r in played)
    out["format_valid_turn_rate"] = (turns - sum(r.format_errors for r in played)) / max(turns, 1)
    out["empty_or_unchanged_rate"] = sum(r.empty_diff for r in played) / max(len(played), 1)
    out["submit_rate"] = sum(r.termination == "submitted" for r in played) / max(len(played), 1)
    if any(r.on_limit for r in played):
        out["on_limit"] = {"graded": sum(r.on_limit for r in played),
                           "solved": sum(r.on_limit and r.reward > 0 for r in played)}
    out["failures"] = {f: sum(r.failure == f for r in rows) for f in
                       dict.fromkeys(r.failure for r in rows)}
    out["episodes"] = len(rows)
    if any(r.actions for r in rows):
        out["turns"] = turn_table([r.actions for r in played])
    undid = [r for r in played if r.undos]
    out["recovery"] = {"undid_an_edit": len(undid), "then_another_line": sum(r.edited_lines >= 2 for r in undid),
                       "solved": sum(r.reward > 0 for r in undid)}
    named = Counter(p for r in played for p in r.missing_paths)
    if named:  # what a policy names when it does not copy a path: memorised files, line numbers, inventions
        out["missing_paths"] = {"episodes": sum(bool(r.missing_paths) for r in played),
                                "refusals": sum(named.values()), "top": named.most_common(5)}
    if any(r.search_texts for r in played):
        out["search_texts"] = {k: sum(r.search_texts.get(k, 0) for r in played) for k in SEARCH_KINDS}
    return out


def row_dict(row: EpisodeRow) -> dict[str, Any]:
    return asdict(row)


def row_from_dict(data: Mapping[str, Any]) -> EpisodeRow:
    """The row `row_dict` saved, read back from JSON (sequences as tuples again); keys of a later version are
    left out. ValueError when a field it needs is missing."""
    known = {f.name for f in fields(EpisodeRow)}
    try:
        row = EpisodeRow(**{k: v for k, v in data.items() if k in known})
    except TypeError as exc:
        raise ValueError(f"a row is not a held-out episode ({exc})") from None
    return replace(row, actions=tuple(row.actions), missing_paths=tuple(row.missing_paths))
