"""Docker sandboxes of real repositories: images, containers, pools."""

from sandboxes.errors import EngineUnavailable, ImageBuildError, SandboxDead, SandboxError
from sandboxes.sandbox import ExecResult, PatchResult, Sandbox

__all__ = ["EngineUnavailable", "ExecResult", "ImageBuildError", "PatchResult", "Sandbox", "SandboxDead",
           "SandboxError"]
