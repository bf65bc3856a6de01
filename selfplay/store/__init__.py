"""The curriculum store: every artifact, validation, task, attempt, run and checkpoint, in SQLite (default,
one file in the run directory) or PostgreSQL, with difficulty-targeted sampling.

    store = open_store()                      # ./selfplay.db
    stored = store.record_artifact(artifact, "toolz", report, origin="injector")  # artifact_id, task_id, duplicate
    store.record_attempt(stored.task_id, role="solver", policy_version=3, reward=1.0, turns=12, tokens=9000,
                         termination="submitted")
    batch = store.sample_tasks(64, origin=("injector", "higher_order"), repo="toolz")
    seen = store.used_failed_patches(parent_task_id)  # the higher-order `seen` set, persisted

`TaskStore` (`selfplay.store.protocol`) is the interface the loop, the demonstrations and RFT are typed
against; `SqlStore`, which `open_store` returns, implements it.
"""

from typing import TYPE_CHECKING, Any

from selfplay.store.errors import ImportFormatError, StoreError, TaskNotFound
from selfplay.store.protocol import TaskStore
from selfplay.store.records import (
    ArtifactRecord,
    AttemptRecord,
    CheckpointRecord,
    CheckRecord,
    RepoRecord,
    RunRecord,
    StoredArtifact,
    TaskStats,
)
from selfplay.store.sampling import SampleResult, SamplingConfig, sample

if TYPE_CHECKING:
    from selfplay.store.store import SqlStore, open_store

__all__ = [
    "ArtifactRecord",
    "AttemptRecord",
    "CheckRecord",
    "CheckpointRecord",
    "ImportFormatError",
    "RepoRecord",
    "RunRecord",
    "SampleResult",
    "SamplingConfig",
    "SqlStore",
    "StoreError",
    "StoredArtifact",
    "TaskNotFound",
    "TaskStats",
    "TaskStore",
    "open_store",
    "sample",
]


def __getattr__(name: str) -> Any:
    # SqlStore brings in SQLAlchemy (~0.5 s of import): loaded when first asked for, so that importing the
    # package for its records, errors or protocol (every `selfplay` command does) stays cheap.
    if name in ("SqlStore", "open_store"):
        from selfplay.store import store

        return getattr(store, name)
    raise AttributeError(f"module 'selfplay.store' has no attribute {name!r}")
