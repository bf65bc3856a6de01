"""Higher-order bugs (SSR section 2.5): a failed solver attempt on a validated bug becomes a new task.

The new buggy state is the parent's (bug + weakening + the parent's own failed prediction, if any) plus
the failed patch. FAIL_TO_PASS is recomputed by running the oracle tests in that state: of the parent's
F2P ∪ P2P, the tests that now fail (or vanish) are F2P, those that pass are P2P. The task is kept only
if at least one oracle test still fails. Departures/choices where SSR is silent: the failed patch is
first stripped of its test-infrastructure sections (as the grader would), so a conftest.py hook cannot
become part of a buggy state; duplicates are refused by normalised diff hash; the order cap defaults
to 2 (the paper's) and is configurable.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from repos.spec import RepoSpec
from sandboxes.sandbox import Sandbox
from selfplay.config.bounds import check_bounds
from selfplay.diffs import drop_infrastructure, normalised_hash
from selfplay.errors import DiffError
from selfplay.jobs import Job, check, git_env_line, prepare, run_job
from selfplay.judge.grader import GraderConfig, apply_layers
from selfplay.task import Task, make_task_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HigherOrderConfig:
    """Which failed attempts become new tasks."""

    max_order: int = 2
    """Highest order created (SSR: 2, i.e. no third-order bugs)."""
    min_failing_tests: int = 1
    """Keep the new task only if at least this many oracle tests (1 or more) fail in its buggy state."""

    def __post_init__(self) -> None:
        if self.max_order < 1:
            raise ValueError(f"HigherOrderConfig.max_order must be >= 1, got {self.max_order}")
        # 0 would keep a "task" whose buggy state fails no test: every submission would solve it
        check_bounds(self, at_least={"min_failing_tests": 1})


def refuse_reason(parent: Task, failed_patch: str, seen: set[str], config: HigherOrderConfig) -> str | None:
    """Why `failed_patch` cannot make a higher-order task of `parent` (cheap checks, no sandbox), or None."""
    if parent.order >= config.max_order:
        return f"order cap: the parent is order {parent.order}, max_order is {config.max_order}"
    if not failed_patch.strip():
        return "the failed patch is empty (the buggy state would not change)"
    if normalised_hash(failed_patch) in seen:
        return "duplicate: a failed patch with the same normalised hash was already used"
    return None


def derive_task(parent: Task, layer: str, statuses: Mapping[str, str],
                config: HigherOrderConfig = HigherOrderConfig()) -> Task | None:
    """Pure: the higher-order task from the oracle run in the new state, or None when nothing fails."""
    oracle = list(dict.fromkeys([*parent.fail_to_pass, *parent.pass_to_pass]))
    f2p = tuple(t for t in oracle if statuses.get(t) != "passed")
    p2p = tuple(t for t in oracle if statuses.get(t) == "passed")
    if len(f2p) < config.min_failing_tests:
        return None
    return Task(task_id=make_task_id(parent.repo, parent.artifact, layer), repo=parent.repo,
                artifact=parent.artifact, fail_to_pass=f2p, pass_to_pass=p2p, origin="higher_order",
                order=parent.order + 1, parent_id=parent.task_id, pred_patch=layer,
                metadata={"parent_origin": parent.origin})


def _combined_layer(sb: Sandbox, parent: Task, failed: str) -> str:
    """The prediction layer of the new task: parent's layer (if any) then `failed`, as one diff."""
    if not parent.pred_patch:
        return failed
    # Index trick: snapshot the bug+weakening tree, apply both layers, diff against the snapshot.
    res = sb.exec(f"{git_env_line()}; git add -A -f && git write-tree", timeout=60, user="root")
    check(res, "snapshotting the buggy tree")
    tree = res.output.strip().splitlines()[-1]
    for diff in (parent.pred_patch, failed):
        applied = sb.apply_patch(diff)
        if not applied.applied:
            raise DiffError(f"a prediction layer does not apply: {applied.error}")
    res = sb.exec(f"{git_env_line()}; git add -A -f && git diff --cached --binary --no-color --no-ext-diff "
                  f"--no-textconv --no-renames {tree} && git reset -q", timeout=60, user="root")
    check(res, "diffing the combined prediction layers")
    return res.output


def make_higher_order_task(parent: Task, failed_patch: str, *, spec: RepoSpec, sb: Sandbox, seen: set[str],
                           config: HigherOrderConfig = HigherOrderConfig(),
                           grader_config: GraderConfig = GraderConfig()) -> Task | None:
    """Build, run and keep-or-refuse a higher-order task from `failed_patch` in sandbox `sb` (reset first).

    Adds the patch's hash to `seen` when a task is made, and records it in the task's metadata
    (`failed_patch_hash`). Returns None (and logs why) when refused.
    """
    reason = refuse_reason(parent, failed_patch, seen, config)
    if reason is None:
        try:
            failed = drop_infrastructure(failed_patch, test_files=parent.artifact.test_files,
                                         test_patterns=spec.test_patterns, script=parent.artifact.test_script)
        except DiffError as exc:
            failed, reason = None, f"the failed patch is not a valid diff: {exc}"
        if failed is not None and not failed.kept.strip():
            reason = "nothing is left of the failed patch once test-infrastructure sections are dropped"
    if reason is not None:
        log.info("no higher-order task from %s: %s", parent.task_id, reason)
        return None
    sb.reset()
    layer = failed.kept
    if parent.pred_patch:
        apply_layers(sb, parent.artifact)
        try:
            layer = _combined_layer(sb, parent, failed.kept)
        except DiffError as exc:
            log.info("no higher-order task from %s: the failed patch does not apply (%s)", parent.task_id, exc)
            return None
    prepare(sb, parent.artifact, **{"layer.diff": layer})
    job = Job(patches=("bug_inject.diff", "test_weaken.diff", "layer.diff"), restore=parent.artifact.test_files)
    run = run_job(sb, parent.artifact, job, suite_timeout=grader_config.suite_timeout,
                  parser_timeout=grader_config.parser_timeout, max_output=grader_config.max_test_output)
    if run.apply_error:
        log.info("no higher-order task from %s: does not apply (%s)", parent.task_id, run.apply_error)
        return None
    if run.statuses is None:
        log.info("no higher-order task from %s: the oracle run failed (%s)", parent.task_id, run.error)
        return None
    task = derive_task(parent, layer, run.statuses, config)
    if task is None:
        log.info("no higher-order task from %s: no oracle test fails with the failed patch", parent.task_id)
        return None
    seen.add(normalised_hash(failed_patch))
    # Persisted with the task, so `TaskStore.used_failed_patches` rebuilds `seen` after a restart.
    return replace(task, metadata={**task.metadata, "failed_patch_hash": normalised_hash(failed_patch)})
