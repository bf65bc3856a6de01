"""The official harness: `python -m swebench.harness.run_evaluation` (swebench 5.0.2) on our predictions.

It runs in a subprocess whose working directory is the run folder, so its `logs/run_evaluation/<run_id>/
<model>/<instance>/report.json` land there; `read_harness_reports` reads them back. The dataset it grades
is the normalised `DIR/dataset.jsonl` (derived fields, rewritten image namespace), so the harness sees the
exact instances the agent was run on. It pulls each instance image when missing (registry access needed)
and caches finished instances by report.json, so re-running it resumes.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

from selfplay.eval.errors import EvalError
from selfplay.eval.swebench_grading import read_report

log = logging.getLogger(__name__)


def harness_command(dataset: Path, predictions: Path, run_id: str, *, instance_ids: list[str],
                    workers: int = 4, timeout: int = 1800) -> list[str]:
    """argv of the official harness run for these predictions."""
    return [sys.executable, "-m", "swebench.harness.run_evaluation", "--dataset_name", str(dataset),
            "--split", "test", "--predictions_path", str(predictions), "--run_id", run_id,
            "--max_workers", str(workers), "--timeout", str(timeout), "--report_dir", ".",
            "--instance_ids", *instance_ids]


def harness_log_dir(run_dir: Path, run_id: str, model: str, instance_id: str) -> Path:
    """Where the harness writes one instance's logs and report.json (relative to its working dir)."""
    return run_dir / "logs" / "run_evaluation" / run_id / model.replace("/", "__") / instance_id


def run_harness(run_dir: Path, dataset: Path, predictions: Path, run_id: str, *, instance_ids: list[str],
                workers: int = 4, timeout: int = 1800) -> None:
    """Run the official harness in `run_dir`; raises EvalError with its output's tail when it fails."""
    cmd = harness_command(dataset.resolve(), predictions.resolve(), run_id, instance_ids=instance_ids,
                          workers=workers, timeout=timeout)
    log.info("official harness: %s", " ".join(cmd))
    proc = subprocess.run(cmd, cwd=run_dir, capture_output=True, text=True)
    (run_dir / "harness.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise EvalError(f"swebench.harness.run_evaluation failed (exit {proc.returncode}); log: "
                        f"{run_dir / 'harness.log'}\n{(proc.stdout + proc.stderr)[-1500:]}")


def read_harness_reports(run_dir: Path, run_id: str, model: str,
                         instance_ids: list[str]) -> dict[str, dict[str, Any] | None]:
    """Report entry per instance (None where the harness wrote none: error, or an empty patch it skipped)."""
    return {iid: read_report(harness_log_dir(run_dir, run_id, model, iid), iid) for iid in instance_ids}
