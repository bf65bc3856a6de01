"""Errors of the learner, rooted in the project's `SelfPlayError`."""

from repos.errors import SelfPlayError


class LearnerError(SelfPlayError):
    """The learner cannot go on; the message names the trajectory, field or option at fault."""


class BatchError(LearnerError, ValueError):
    """Training data is malformed (reward missing, lengths disagree, version from the future)."""


class WeightSyncError(LearnerError):
    """A rollout engine did not take the new weights; the message names the engine and its answer."""
