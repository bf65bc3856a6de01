"""`cached_seed`: validated procedural seeds, reused across warm starts with the same inputs.

Seeding dominates a cold warm start (every mutant is pre-screened and validated through several suite
runs), yet its output depends only on the repo image, the seed and validation configs and `k`. Those go
into the key of `<selfplay cache>/seeds/<key>/`, so a warm start whose expert or SFT recipe changed (a new
warm-start key) does not validate the same mutants again. A cached entry is written whole or not at all
(built in a temporary directory, then renamed) under a per-key file lock, so concurrent callers wait for
one build; an unreadable entry is rebuilt. A seeding run that found nothing is not cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from repos.cache import cache_root, file_lock
from repos.spec import RepoSpec
from selfplay.artifact import load_artifact
from selfplay.procedural.seed import SeedResult
from selfplay.procedural.seed import seed as run_seed
from selfplay.validation import ValidationReport
from selfplay.validation.report import CheckResult

log = logging.getLogger(__name__)

FORMAT = 1
"""Version of the entry layout; part of the key."""


def seed_key(spec: RepoSpec, image: str, k: int, config: Any, validation: Any, accept_key: str = "") -> str:
    """Hash of everything a seeding run's output depends on (`config`/`validation`: dataclasses;
    `accept_key` names the pre-validation filter, "" for none)."""
    blob = json.dumps({"repo": spec.name, "image": image, "test_command": spec.test_command, "k": k,
                       "seed": asdict(config), "validation": asdict(validation), "accept": accept_key,
                       "format": FORMAT},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def report_from_json(data: dict[str, Any]) -> Any:
    """The `ValidationReport` of a `report.json` written by seeding (`ValidationReport.to_json`)."""
    return ValidationReport(valid=bool(data["valid"]), fail_to_pass=tuple(data["fail_to_pass"]),
                            pass_to_pass=tuple(data["pass_to_pass"]), error=data.get("error"),
                            flaky=tuple(data.get("flaky", ())),
                            checks=tuple(CheckResult(c["name"], bool(c["passed"]), c["detail"])
                                         for c in data["checks"]))


def _load(entry: Path) -> list[Any]:
    out = []
    for row in json.loads((entry / "index.json").read_text()):
        directory = entry / row["dir"]
        out.append(SeedResult(directory, load_artifact(directory),
                              report_from_json(json.loads((directory / "report.json").read_text())),
                              operator=row["operator"], file=row["file"]))
    return out


def cached_seed(spec: RepoSpec, k: int, *, image: str, config: Any, validation: Any,
                accept: Callable[[Any], bool] | None = None, accept_key: str = "",
                cache: Path | None = None) -> tuple[list[Any], bool]:
    """`selfplay.procedural.seed.seed(spec, k, ...)`, from the cache when an entry exists.

    `accept` filters artifacts before validation and `accept_key` names it (both or neither). Returns
    (the SeedResults, whether they came from the cache). `cache` defaults to `<selfplay cache>/seeds`.
    """
    if (accept is None) != (not accept_key):
        raise ValueError("cached_seed: give `accept` together with an `accept_key` naming it (or neither)")

    base = cache or cache_root() / "seeds"
    key = seed_key(spec, image, k, config, validation, accept_key)
    root = base / key
    # Two runs starting at once (a loop and a bench) would otherwise seed the same entry into one temp dir.
    with file_lock(base / f"{key}.lock"):
        if (root / "index.json").is_file():
            try:
                results = _load(root)
                log.info("seeds for %s: %d from the cache %s", spec.name, len(results), root)
                return results, True
            except (OSError, ValueError, KeyError) as exc:  # a damaged entry costs one rebuild, nothing else
                log.warning("seed cache entry %s unreadable (%s); seeding again", root, exc)
                shutil.rmtree(root, ignore_errors=True)
        tmp = root.with_name(f"{key}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        results = run_seed(spec, k, tmp, config=config, validation=validation, accept=accept)
        if not results:  # not stored: a later call seeds again instead of reading "none" back forever
            shutil.rmtree(tmp, ignore_errors=True)
            log.warning("seeding %s found no valid bug; nothing cached, so the next call seeds again", spec.name)
            return [], False
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "index.json").write_text(json.dumps([{"dir": r.directory.name, "operator": r.operator,
                                                     "file": r.file} for r in results], indent=1) + "\n")
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
        return _load(root), False
