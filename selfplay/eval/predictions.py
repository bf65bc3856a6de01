"""Predictions in the SWE-bench harness format: JSONL, one `{instance_id, model_name_or_path, model_patch}`
object a line (`swebench.harness.run_evaluation --predictions_path`). Nothing else goes in these lines;
episode details live beside them in `episodes.jsonl`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

KEYS = ("instance_id", "model_name_or_path", "model_patch")


@dataclass(frozen=True)
class Prediction:
    """One harness prediction."""

    instance_id: str
    model_name_or_path: str
    """Names the harness's log folder (`/` becomes `__` there)."""
    model_patch: str
    """The agent's `git diff` over the base commit; "" when it submitted nothing (harness: empty patch)."""


def append_prediction(path: Path, pred: Prediction) -> None:
    """Append one line; the line is written whole with one call, so a crash never leaves half a line
    that a later resume would trust."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(asdict(pred)) + "\n")


def read_predictions(path: Path) -> dict[str, Prediction]:
    """Predictions by instance id (the last line of an id wins); a missing file is empty. Lines that
    do not parse (a torn last line) are skipped, so resume re-solves that instance."""
    if not path.exists():
        return {}
    out: dict[str, Prediction] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            out[rec["instance_id"]] = Prediction(*(rec[k] for k in KEYS))
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return out
