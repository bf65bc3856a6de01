"""`solve`: issue text -> checkout -> image -> solver episode (no network) -> patch (+ branch) -> summary.

Every input is checked before any work that leaves output: the issue is read (a URL fetched) and a --branch
target checked (clean tree, new name) first; the patch file and the branch are written only after the
episode, so a failure (repo does not install, sandbox error) leaves nothing behind.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_scaffold.actions import parse_action
from agent_scaffold.agent import AGENT_ENV, run_episode
from agent_scaffold.policy import SSR_SAMPLING, Policy, SamplingParams
from agent_scaffold.roles import load_role, solver_variables
from sandboxes.docker import DockerSandbox, DockerSandboxConfig
from sandboxes.sandbox import WORKDIR
from selfplay.diffs import touched_files
from selfplay.solve.branch import check_branch_target, commit_to_branch
from selfplay.solve.checkout import check_commit, is_url, make_checkout, user_repo
from selfplay.solve.errors import SolveError
from selfplay.solve.image import build_solve_image
from selfplay.solve.issue import read_issue

log = logging.getLogger(__name__)
TEST_COMMAND = re.compile(r"\b(pytest|py\.test|unittest|tox|nox|runtests|manage\.py test|make test)\b")


@dataclass(frozen=True)
class SolveResult:
    """What `selfplay solve` prints and writes."""

    patch: str
    """The agent's diff over the commit ("" when it changed nothing)."""
    files: tuple[str, ...]
    """Files the patch changes."""
    turns: int
    termination: str
    """How the episode ended (submitted, max_turns, ...)."""
    tests_run: tuple[str, ...]
    """Test commands the agent ran (bash actions that invoke a test runner)."""
    commit: str
    """The commit the agent started from."""
    branch_commit: str | None = None
    """The commit on --branch, when one was made."""


def tests_in(messages: list[dict[str, Any]]) -> tuple[str, ...]:
    """The bash commands among the assistant's actions that run tests, in order."""
    found = []
    for msg in messages:
        if msg.get("role") != "assistant":
            continue
        try:
            action = parse_action(msg.get("content") or "")
        except Exception:  # a malformed reply ran nothing
            continue
        if action.tool == "bash" and TEST_COMMAND.search(action.command):
            found.append(action.command.strip())
    return tuple(found)


def check_inputs(repo: str, issue: str | None, *, issue_file: str | Path | None = None,
                 commit: str | None = None, branch: str | None = None) -> str:
    """The issue text, after checking everything `solve` is given that can be checked without a model or
    a sandbox: the issue, a local repo (a git repository, holding `commit`), a --branch target. SolveError
    names the input and the fix."""
    if not is_url(repo):
        local = user_repo(repo)
        if commit:
            check_commit(local, repo, commit)
    if branch:
        if is_url(repo):
            raise SolveError("--branch needs a local repository (--repo PATH); for a URL, clone it first")
        check_branch_target(Path(user_repo(repo).working_tree_dir or repo), branch)
    return read_issue(issue, file=issue_file)


def solve(repo: str, issue: str | None, policy: Policy, *, commit: str | None = None, setup: str | None = None,
          out: Path | None = None, branch: str | None = None, sampling: SamplingParams | None = None,
          max_turns: int | None = None, max_new_tokens: int | None = None, max_repeats: int | None = None,
          issue_file: str | Path | None = None, issue_text: str | None = None, on_turn: Any = None) -> SolveResult:
    """Run the solver on `issue` (URL, file or text; or `issue_file`) in `repo` (URL or local path); see the
    module docstring. `issue_text` is the text `check_inputs` returned (the inputs are then not re-read);
    `on_turn(turn, what)` is told each turn's action. `max_turns`, `max_new_tokens` and `max_repeats`
    override the solver role's limits (`EpisodeLimits`; a value out of range is a ValueError before any work)."""
    role = load_role("solver")
    limits = role.limits.overridden(max_turns=max_turns, max_new_tokens=max_new_tokens, max_repeats=max_repeats)
    text = issue_text if issue_text is not None else check_inputs(repo, issue, issue_file=issue_file,
                                                                  commit=commit, branch=branch)
    co = make_checkout(repo, commit)
    try:
        image = build_solve_image(co, setup=setup)
        with DockerSandbox.create(image, workdir=WORKDIR, config=DockerSandboxConfig(network=False),
                                  env=AGENT_ENV) as sb:
            ep = run_episode(policy, sb, role, solver_variables(text, "issue"),
                             limits=limits,
                             sampling=sampling or SSR_SAMPLING, on_turn=on_turn)
    finally:
        co.cleanup()
    if ep.infra_failure:
        raise SolveError(f"the sandbox failed during the episode ({ep.error}); nothing was written. Retry, "
                         "or check `selfplay sandboxes ls` and the Docker engine")
    patch = ep.submission if isinstance(ep.submission, str) else ""
    files = touched_files(patch) if patch.strip() else ()
    sha = None
    if branch and patch.strip():
        first = text.strip().splitlines()[0][:72] if text.strip() else "issue"
        sha = commit_to_branch(co.origin or Path(repo), co.commit, patch, branch,
                               f"selfplay solve: {first}\n\nFiles: {', '.join(files)}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(patch)
    return SolveResult(patch, tuple(files), ep.turns, ep.termination, tests_in(ep.trajectory.messages),
                       co.commit, sha)
