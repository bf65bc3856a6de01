"""Repo lists and sources: which real repositories the system trains on and how to fetch them."""

from repos.errors import RepoError, RepoNotFound, SelfPlayError
from repos.spec import RepoSpec

__all__ = ["RepoError", "RepoNotFound", "RepoSpec", "SelfPlayError"]
