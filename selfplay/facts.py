"""`TaskFacts`: what validation measured about a task's own runs, which grading then holds predictions to
(docs/security.md, classes 5 and 4).

- *Budgets.* A prediction that hangs or fork-bombs would hold a grading sandbox for the whole suite
  timeout, so each prediction gets a wall-time and a CPU-time budget derived from the task's validated
  suite: `factor x` the slowest validated run plus `floor` seconds (`Budget`), never more than the suite
  timeout. Past it the run is -1 with the reason, unless a control run (the empty prediction) exceeds the
  same budget too, which marks the task broken.
- *Canaries that must report.* When every validation run reported its canary tests, an absent canary in
  grading means the run was cut short or rewritten: -1 (tampering), not "inconclusive".

Pure data and arithmetic; the store keeps the facts in a task's metadata (`to_metadata`/`from_metadata`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """How grading's time budgets derive from a task's validated suite time."""

    factor: float = 5.0
    """Multiple of the validated suite time (wall and CPU alike) a prediction's run may take."""
    floor: float = 20.0
    """Seconds added to it, so a fast suite on a loaded machine is not cut off."""

    def __post_init__(self) -> None:
        if self.factor < 1 or self.floor < 0:
            raise ValueError(f"Budget: factor must be >= 1 and floor >= 0, got {self.factor} and {self.floor}")

    def seconds(self, measured: float | None, cap: float) -> float:
        """The budget for a run whose validated time is `measured` (None: unknown, so `cap`)."""
        return cap if measured is None else min(cap, self.factor * measured + self.floor)


@dataclass(frozen=True)
class TaskFacts:
    """What the validation of a task measured."""

    suite_time: float | None = None
    """Wall seconds of the slowest validated run of the task's test_script.sh (None: not measured)."""
    suite_cpu: float | None = None
    """CPU seconds of the most CPU-hungry validated run (None: not measured)."""
    canaries_reported: bool = False
    """Every validation run reported its canary tests, so grading requires them."""

    def to_metadata(self) -> dict[str, str]:
        """Task metadata entries (strings, as the store keeps them)."""
        meta = {"canaries_reported": "1" if self.canaries_reported else "0"}
        if self.suite_time is not None:
            meta["suite_time"] = f"{self.suite_time:.3f}"
        if self.suite_cpu is not None:
            meta["suite_cpu"] = f"{self.suite_cpu:.3f}"
        return meta

    @classmethod
    def from_metadata(cls, meta: Mapping[str, object]) -> TaskFacts:
        """The facts stored in a task's metadata; missing or malformed entries read as unknown."""
        def num(key: str) -> float | None:
            try:
                value = float(meta[key])  # type: ignore[arg-type]
            except (KeyError, TypeError, ValueError):
                return None
            return value if value >= 0 else None

        return cls(num("suite_time"), num("suite_cpu"), str(meta.get("canaries_reported", "0")) == "1")
