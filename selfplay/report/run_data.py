"""`RunData`: what the report reads from a run directory (`runs/<run_id>/`, see the run loop's contract).

Everything is optional except that the directory must look like a run: a run still going, or one killed
mid-write, has a partial metrics line or a cut trajectory file; those are skipped, listed in `problems`,
and the rest is reported.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selfplay.config.yaml_io import read_yaml  # the dialect dump_config writes
from selfplay.report.episodes import EpisodeLimits, EpisodeSet, read_episodes
from selfplay.report.errors import ReportError
from selfplay.store import open_store
from selfplay.store.records import TaskStats

log = logging.getLogger(__name__)
RUN_FILES = ("summary.json", "metrics.jsonl", "config.yaml", "trajectories")


@dataclass(frozen=True)
class RunData:
    """One run directory, read."""

    run_dir: Path
    run_id: str
    summary: dict[str, Any]
    """summary.json (empty when missing)."""
    config: dict[str, Any]
    """config.yaml as plain data (empty when missing)."""
    metrics: tuple[dict[str, Any], ...]
    """metrics.jsonl lines, in file order."""
    tasks: tuple[TaskStats, ...] | None
    """Every task's solve statistics from the store; None when the run has no store to read."""
    store: str
    """Where the tasks came from (URL without password), or why there are none."""
    episodes: EpisodeSet
    problems: tuple[str, ...]
    """What could not be read, one sentence each (shown on the page)."""


def load_run(run_dir: str | Path, limits: EpisodeLimits | None = None) -> RunData:
    """Read `run_dir`; raises ReportError when it is not a run directory."""
    path = Path(run_dir)
    if not path.is_dir():
        raise ReportError(f"{path} is not a directory; pass a run directory such as runs/<run_id>/")
    if not any((path / name).exists() for name in RUN_FILES):
        raise ReportError(f"{path} holds none of {', '.join(RUN_FILES)}: it is not a run directory "
                          "(`selfplay run` writes them under runs/<run_id>/)")
    problems: list[str] = []
    summary = _read_json(path / "summary.json", problems)
    config = _read_config(path / "config.yaml", problems)
    metrics = _read_metrics(path / "metrics.jsonl", problems)
    tasks, store = _read_tasks(path, config, problems)
    episodes = read_episodes(path, limits or EpisodeLimits())
    run_id = str(summary.get("run_id") or path.resolve().name)
    return RunData(path, run_id, summary, config, metrics, tasks, store, episodes,
                   tuple(problems) + episodes.problems)


def _read_json(path: Path, problems: list[str]) -> dict[str, Any]:
    if not path.exists():
        problems.append(f"{path.name} is missing")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name} is unreadable ({exc})")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path.name} is not a JSON object")
        return {}
    return data


def _read_config(path: Path, problems: list[str]) -> dict[str, Any]:
    if not path.exists():
        problems.append("config.yaml is missing")
        return {}
    import yaml

    try:
        data = read_yaml(path.read_text(encoding="utf-8"), str(path))
    except (OSError, yaml.YAMLError) as exc:
        problems.append(f"config.yaml is unreadable ({exc})")
        return {}
    return data if isinstance(data, dict) else {}


def _read_metrics(path: Path, problems: list[str]) -> tuple[dict[str, Any], ...]:
    if not path.exists():
        problems.append("metrics.jsonl is missing")
        return ()
    rows: list[dict[str, Any]] = []
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(row, dict):
                rows.append(row)
            else:
                bad += 1
    if bad:
        problems.append(f"metrics.jsonl: {bad} line(s) skipped, not JSON objects (a write cut by a crash?)")
    return tuple(rows)


def _read_tasks(path: Path, config: dict[str, Any], problems: list[str]) -> tuple[tuple[TaskStats, ...] | None, str]:
    url = config.get("store_url")
    db = path / "store.db"
    if not url and not db.exists():
        problems.append("no store: store.db is missing and config.yaml names no store_url")
        return None, "no store"

    try:
        # a report reads: it must neither make a store nor migrate a run's older one in place
        with open_store(str(url) if url else str(db), create=False, upgrade=False) as store:
            return tuple(store.task_stats()), store.url
    except Exception as exc:  # a report of the rest beats no report: name the store and go on
        where = "store_url" if url else str(db)
        problems.append(f"the store ({where}) could not be read: {exc.__class__.__name__}: {exc}")
        log.warning("store of %s unreadable: %s", path, exc)
        return None, f"unreadable ({where})"
