"""Errors of the sandbox layer. All are infrastructure failures, never agent failures."""

from repos.errors import SelfPlayError


class SandboxError(SelfPlayError):
    """The sandbox (container, engine or image) failed; the agent is not to blame."""


class EngineUnavailable(SandboxError):
    """No Docker engine answers at DOCKER_HOST (or the default socket)."""


class ImageBuildError(SandboxError):
    """Building a base or repo image failed; the message names the build log."""


class SandboxDead(SandboxError):
    """The container is gone (killed, OOM, removed) and cannot run commands."""


class FileTooLarge(SelfPlayError, OSError):
    """A file asked for is bigger than the read cap; caused by what is in the sandbox (which a model may
    have written), so it is not a SandboxError: the agent sees it as an observation."""


class DiffTooLarge(SelfPlayError, ValueError):
    """The working tree's diff (or one file in it) is over `max_diff_bytes`: what the model wrote is at
    fault, not the sandbox, so this is not a SandboxError. A solver's submission that raises it is empty."""
