"""Docker sandboxes of real repositories: images, containers, pools."""

from sandboxes.errors import EngineUnavailable, ImageBuildError, SandboxDead, SandboxError
from sandboxes.sandbox import BASE_TAG, ExecResult, PatchResult, Sandbox

__all__ = ["BASE_TAG", "EngineUnavailable", "ExecResult", "ImageBuildError", "PatchResult", "Sandbox",
           "SandboxDead", "SandboxError"]
