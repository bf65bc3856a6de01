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

    @property
    def spec(self) -> str:
        """The solver's specification: the reversed test_weaken.diff (the test-suite improvement)."""
        from selfplay.diffs import reverse_diff

        return reverse_diff(self.artifact.test_weaken)

    def to_swebench(self) -> dict[str, object]:
        """The task as a SWE-bench-shaped instance (FAIL_TO_PASS/PASS_TO_PASS as JSON-encoded lists)."""
        import json

        from selfplay.diffs import reverse_diff

        return {
            "instance_id": self.task_id,
            "repo": self.repo,
            "base_commit": "selfplay-base",
            "problem_statement": self.spec,
            # a reference fix for first-order tasks (never shown to solvers); none is known for higher orders
            "patch": reverse_diff(self.artifact.bug_inject) if self.order == 1 else "",
            "test_patch": self.spec,
            "FAIL_TO_PASS": json.dumps(list(self.fail_to_pass)),
            "PASS_TO_PASS": json.dumps(list(self.pass_to_pass)),
            "origin": self.origin,
            "order": self.order,
        }


def make_task_id(repo: str, artifact: BugArtifact, pred_patch: str | None = None) -> str:
    """Stable id from the repo and the normalised diff hashes (same bug, same id)."""
    import hashlib

    from selfplay.diffs import normalised_hash

    h = hashlib.sha256(f"{repo}\0{artifact.digest()}".encode())
    if pred_patch:
        h.update(normalised_hash(pred_patch).encode())
    return f"{repo}-{h.hexdigest()[:16]}"
