"""Pure aggregation of per-run verdicts: resolved % per run, mean ± standard error over K runs, pass@K,
and the per-instance table. `EvalReport.to_json` is `DIR/report.json`.

The denominator of every rate is the number of instances asked for: an instance whose episode or grading
failed for infrastructure reasons counts as unresolved (as in the harness's own summary) and is listed
under `infra_failures`, so a re-run (resume) can pick it up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class InstanceResult:
    """One instance in one run."""

    instance_id: str
    run: int
    resolved: bool
    patch_applied: bool = False
    empty_patch: bool = False
    infra_failure: bool = False
    termination: str = ""
    """How the agent's episode ended (submitted, max_turns, ...)."""
    turns: int = 0


@dataclass(frozen=True)
class EvalReport:
    """Metrics over K runs of the same instances."""

    instance_ids: tuple[str, ...]
    results: tuple[InstanceResult, ...]
    runs: int
    meta: dict[str, Any] = field(default_factory=dict)

    def resolved_pct(self) -> list[float]:
        """Resolved % of each run, runs in order."""
        n = len(self.instance_ids)
        return [100.0 * sum(r.resolved for r in self.results if r.run == k) / n if n else 0.0
                for k in range(self.runs)]

    def mean_and_stderr(self) -> tuple[float, float]:
        """Mean of the per-run resolved % and its standard error (sample std / sqrt(K); 0 for K=1)."""
        pcts = self.resolved_pct()
        mean = sum(pcts) / len(pcts) if pcts else 0.0
        if len(pcts) < 2:
            return mean, 0.0
        var = sum((p - mean) ** 2 for p in pcts) / (len(pcts) - 1)
        return mean, math.sqrt(var / len(pcts))

    def pass_at_k(self) -> float:
        """% of instances resolved in at least one of the K runs."""
        n = len(self.instance_ids)
        hit = {r.instance_id for r in self.results if r.resolved}
        return 100.0 * len(hit & set(self.instance_ids)) / n if n else 0.0

    def table(self) -> list[dict[str, Any]]:
        """One row per instance: resolved per run, times resolved, patch applied per run."""
        rows = []
        for iid in self.instance_ids:
            mine = sorted((r for r in self.results if r.instance_id == iid), key=lambda r: r.run)
            rows.append({"instance_id": iid, "resolved": [r.resolved for r in mine],
                         "resolved_runs": sum(r.resolved for r in mine),
                         "patch_applied": [r.patch_applied for r in mine],
                         "termination": [r.termination for r in mine],
                         "infra_failure": [r.infra_failure for r in mine]})
        return rows

    def metrics(self, prefix: str = "eval/swebench") -> dict[str, float]:
        """Flat, namespaced metrics for a run's tracker (`eval/swebench/resolved_pct`, ...)."""
        mean, stderr = self.mean_and_stderr()
        return {f"{prefix}/resolved_pct": mean, f"{prefix}/resolved_pct_stderr": stderr,
                f"{prefix}/pass_at_{self.runs}": self.pass_at_k(),
                f"{prefix}/infra_failures": float(sum(r.infra_failure for r in self.results)),
                f"{prefix}/instances": float(len(self.instance_ids))}

    def to_json(self) -> dict[str, Any]:
        mean, stderr = self.mean_and_stderr()
        return {"instances": len(self.instance_ids), "runs": self.runs,
                "resolved_pct_per_run": self.resolved_pct(), "resolved_pct_mean": mean,
                "resolved_pct_stderr": stderr, "pass_at_k": self.pass_at_k(),
                "infra_failures": sorted({f"{r.instance_id}@run{r.run}" for r in self.results
                                          if r.infra_failure}),
                "per_instance": self.table(), **self.meta}
