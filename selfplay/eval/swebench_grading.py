"""Grading a prediction with the swebench package's own functions on a log we produce.

Two graders, one verdict format (the harness's per-instance `report.json`):

- `grade_local` runs the harness's steps in our own Docker sandbox from the instance image: apply the patch
  (`git apply`, logging the harness's `>>>>> Applied Patch` / `>>>>> Patch Apply Failed` markers), run
  `make_test_spec(instance).eval_script` (which records `>>>>> Test Exit Code: N` after the
  `>>>>> Start/End Test Output` markers), save the log, and grade it with `get_eval_report` (which calls
  `get_logs_eval` and the instance's `PARSER_REGISTRY` parser). Used where the official images cannot be
  pulled, and by CI on the offline dataset.
- `selfplay.eval.harness` runs the official `swebench.harness.run_evaluation` and reads its reports back.

Departure from the harness: it tries `git apply`, then `--3way`, `--reject` and `patch --fuzz=5`; we try
`git apply` and then `patch --fuzz=5`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from sandboxes.docker import DockerSandbox, DockerSandboxConfig
from sandboxes.sandbox import WORKDIR, Sandbox
from selfplay.eval.guard import as_root
from selfplay.eval.predictions import Prediction

log = logging.getLogger(__name__)
CONDA_BIN = "/opt/miniconda3/envs/testbed/bin"


def sandbox_config(instance: dict[str, Any], **overrides: Any) -> DockerSandboxConfig:
    """No network; the instance's environment first on PATH (conda `testbed` in official images, the
    repo's virtualenv in ours)."""
    ours = str(instance["image"]).startswith("selfplay-task-")
    return DockerSandboxConfig(network=False, venv_bin="/opt/venv/bin" if ours else CONDA_BIN, **overrides)


def _apply(sb: Sandbox, patch: str) -> tuple[bool, str]:
    res = sb.apply_patch(patch)
    if res.applied:
        return True, f"git apply: {', '.join(res.files)}"
    fallback = as_root(sb, "cat > /tmp/patch.diff && patch --batch --forward --fuzz=5 -p1 -i /tmp/patch.diff",
                        120, stdin=patch)
    if fallback.ok:
        return True, f"patch --fuzz=5:\n{fallback.output}"
    return False, f"{res.error}\n{fallback.output}"


def grade_local(instance: dict[str, Any], pred: Prediction, log_dir: Path, *, timeout: float = 1800.0,
                sandbox: Sandbox | None = None) -> dict[str, Any]:
    """The harness report entry of `pred` (`{patch_exists, patch_successfully_applied, resolved, ...}`),
    graded in a fresh sandbox of the instance image; the log, patch, eval.sh and report.json go to
    `log_dir`, as the harness lays them out."""
    from swebench.harness.constants import APPLY_PATCH_FAIL, APPLY_PATCH_PASS
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    iid = instance["instance_id"]
    spec = make_test_spec(instance)
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "patch.diff").write_text(pred.model_patch)
    (log_dir / "eval.sh").write_text(spec.eval_script)
    log_path = log_dir / "test_output.txt"
    pred_dict = {"instance_id": iid, "model_name_or_path": pred.model_name_or_path,
                 "model_patch": pred.model_patch}
    if not pred.model_patch.strip():  # the harness skips empty patches; so do we
        entry = {"patch_is_None": False, "patch_exists": False, "patch_successfully_applied": False,
                 "resolved": False, "infra_failure": False, "empty_patch": True}
        _save(log_dir, iid, entry)
        return entry
    own = sandbox is None
    sb = sandbox or DockerSandbox.create(instance["image"], workdir=WORKDIR, config=sandbox_config(instance))
    try:
        applied, detail = _apply(sb, pred.model_patch)
        if not applied:
            log_path.write_text(f"{APPLY_PATCH_FAIL}:\n{detail}\n")
        else:
            as_root(sb, "cat > /tmp/eval.sh", 60, stdin=spec.eval_script)
            run = as_root(sb, "bash /tmp/eval.sh", timeout, workdir=WORKDIR)
            text = f"{APPLY_PATCH_PASS}:\n{detail}\n{run.output}"
            if run.timed_out:
                from swebench.harness.constants import TESTS_TIMEOUT

                text += f"\n{TESTS_TIMEOUT}: {timeout} seconds exceeded.\n"
            log_path.write_text(text)
    finally:
        if own:
            sb.close()
    entry = get_eval_report(spec, pred_dict, str(log_path), include_tests_status=True)[iid]
    _save(log_dir, iid, entry)
    return entry


def _save(log_dir: Path, iid: str, entry: dict[str, Any]) -> None:
    tmp = log_dir / "report.json.tmp"
    tmp.write_text(json.dumps({iid: entry}, indent=2))
    tmp.replace(log_dir / "report.json")


def read_report(log_dir: Path, iid: str) -> dict[str, Any] | None:
    """The saved report entry of `iid` in `log_dir`, None when there is none (not graded yet)."""
    path = log_dir / "report.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())[iid]
    except (json.JSONDecodeError, KeyError):
        return None
