"""Errors of the selfplay package, rooted in the project's `SelfPlayError`.

Artifact problems are the injector's fault (they make an artifact invalid); infrastructure problems
(sandbox died, engine gone) are nobody's fault and must never turn into a negative reward.
"""

from repos.errors import SelfPlayError


class ArtifactError(SelfPlayError, ValueError):
    """A bug artifact is missing a file or a file is malformed; the message names the file."""


class DiffError(SelfPlayError, ValueError):
    """A diff cannot be parsed; the message names the diff and the parser's complaint."""


class ValidationInfraError(SelfPlayError):
    """Validation or grading could not run (sandbox or engine failure), so no verdict was reached."""


class NotDemonstrable(SelfPlayError):
    """A scripted expert's plan cannot demonstrate this task or artifact (the demonstration is skipped, not
    failed)."""
