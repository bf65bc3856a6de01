"""The patch as a commit on a new local branch of the user's repository, made through gitpython in a
temporary index file: the working tree, the real index and HEAD stay as they were."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import git

from selfplay.solve.errors import SolveError


def check_branch_target(repo_path: Path, branch: str) -> None:
    """Raise SolveError, before any work, when --branch cannot be honoured: a dirty working tree, an
    existing branch, or an invalid name."""
    repo = git.Repo(repo_path)
    if repo.is_dirty(untracked_files=True):
        raise SolveError(f"{repo_path} has uncommitted changes; commit or stash them before using --branch "
                         "(or leave out --branch and apply the patch file yourself)")
    try:
        repo.git.check_ref_format("--branch", branch)
    except git.GitCommandError as exc:
        raise SolveError(f"--branch {branch!r} is not a valid branch name") from exc
    if branch in [h.name for h in repo.heads]:
        raise SolveError(f"branch {branch!r} already exists in {repo_path}; pick another --branch")


def commit_to_branch(repo_path: Path, base: str, patch: str, branch: str, message: str) -> str:
    """Commit `patch` on top of `base` as new branch `branch`; returns the commit sha."""
    repo = git.Repo(repo_path)
    fd, index = tempfile.mkstemp(prefix="selfplay-index-")
    os.close(fd)
    os.unlink(index)  # git creates it; an empty file is not a valid index
    env = {"GIT_INDEX_FILE": index}
    reader = repo.config_reader()
    if not reader.has_option("user", "name") or not reader.has_option("user", "email"):
        # no identity configured: name the commit after the tool rather than fail
        env.update(GIT_AUTHOR_NAME="selfplay", GIT_AUTHOR_EMAIL="selfplay@localhost",
                   GIT_COMMITTER_NAME="selfplay", GIT_COMMITTER_EMAIL="selfplay@localhost")
    try:
        with repo.git.custom_environment(**env):
            repo.git.read_tree(base)
            with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False) as fh:
                fh.write(patch if patch.endswith("\n") else patch + "\n")
            try:
                repo.git.apply("--cached", "--binary", fh.name)
            finally:
                os.unlink(fh.name)
            tree = repo.git.write_tree()
            sha = repo.git.commit_tree(tree, "-p", base, "-m", message)
        repo.git.branch(branch, sha)
    except git.GitCommandError as exc:
        raise SolveError(f"could not commit the patch to branch {branch!r}: {exc.stderr.strip() or exc}") from exc
    finally:
        if os.path.exists(index):
            os.unlink(index)
    return sha
