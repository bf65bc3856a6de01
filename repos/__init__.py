"""Repo lists and sources: which real repositories the system trains on and how to fetch them."""

from repos.errors import RepoError, RepoNotFound, SelfPlayError
from repos.listfile import DEFAULT_LIST, get_repo, load_repo_list
from repos.spec import RepoSpec

__all__ = ["DEFAULT_LIST", "RepoError", "RepoNotFound", "RepoSpec", "SelfPlayError", "get_repo",
           "load_repo_list"]
