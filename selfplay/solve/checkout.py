"""The repository to work on, as a private gitpython clone at one commit: a URL is cloned, a local
repository is cloned from (its working tree, index and refs are never touched; uncommitted changes are not
part of the clone)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git

from selfplay.solve.errors import SolveError


@dataclass(frozen=True)
class Checkout:
    """A clone at `commit` in `path` (a temporary folder the caller removes with `cleanup`)."""

    path: Path
    commit: str
    """Full sha of the commit the agent starts from."""
    origin: Path | None
    """The user's local repository (None for a URL)."""
    name: str

    def cleanup(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)


def is_url(repo: str) -> bool:
    return "://" in repo or repo.startswith("git@")


def user_repo(repo: str):
    """gitpython Repo of a local path; SolveError when it is not a git repository."""
    try:
        return git.Repo(Path(repo).expanduser(), search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise SolveError(f"--repo {repo} is not a git repository (or does not exist); pass a repository "
                         "folder or a clone URL") from exc


def check_commit(local, repo: str, commit: str) -> None:
    """SolveError when `commit` names nothing in the local repository `local` (a gitpython Repo)."""
    try:
        local.commit(commit)
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError):
        raise SolveError(f"--commit {commit} is not a commit, branch or tag of {repo}; pass one that `git -C "
                         f"{repo} log` shows, or leave out --commit for HEAD") from None


def make_checkout(repo: str, commit: str | None) -> Checkout:
    """Clone `repo` (URL or local path) into a temporary folder and check out `commit` (default HEAD)."""
    tmp = Path(tempfile.mkdtemp(prefix="selfplay-solve-"))
    target = tmp / "repo"
    origin = None
    try:
        if is_url(repo):
            clone = git.Repo.clone_from(repo, target)
        else:
            src = user_repo(repo)
            origin = Path(src.working_tree_dir or repo).resolve()
            clone = git.Repo.clone_from(str(origin), target, no_hardlinks=True)
        clone.git.checkout("-q", "--detach", commit or "HEAD")
        sha = clone.head.commit.hexsha
    except git.GitCommandError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        detail = (exc.stderr or "").strip().splitlines()
        raise SolveError(f"could not clone {repo} at {commit or 'HEAD'}: "
                         f"{detail[-1] if detail else exc.__class__.__name__}; check --repo and --commit") from exc
    except SolveError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    name = Path(repo.rstrip("/")).name.removesuffix(".git") or "repo"
    return Checkout(target, sha, origin, name)
