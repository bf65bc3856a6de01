"""`Task`: a validated bug the solver is asked to fix, in SWE-bench's instance shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from selfplay.artifact import BugArtifact

Origin = Literal["injector", "procedural", "higher_order", "imported"]


@dataclass(frozen=True)
class Task:
    """A solver task derived from a valid artifact (plus, for higher orders, a failed prediction)."""

    task_id: str
    """Stable id: derived from the repo and the normalised diff hashes."""
    repo: str
    """Name in the repo list."""
    artifact: BugArtifact
    fail_to_pass: tuple[str, ...]
    """Oracle tests passing on the original code and failing in the buggy state."""
    pass_to_pass: tuple[str, ...]
    """Oracle tests passing in both."""
    origin: Origin = "injector"
    order: int = 1
    """1 for a bug from an artifact; 2 when a failed solver patch was layered on top."""
    parent_id: str | None = None
    """The task this higher-order task was derived from."""
    pred_patch: str | None = None
    """Higher-order only: the failed prediction that is part of the buggy state."""
    metadata: dict[str, str] = field(default_factory=dict, compare=False)
