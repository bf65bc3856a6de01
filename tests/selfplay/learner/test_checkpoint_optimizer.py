"""Only the newest checkpoint keeps its optimizer/ state: saving a newer one drops the older ones' (their
weights stay), a kill mid-drop leaves no partial state, and a checkpoint without optimizer/ refuses to
resume with the reason. `FakeEngine` stands in for LearnerEngine's file-writing surface (it writes the
files `save_checkpoint` asks for), so this runs without torch; the real DeepSpeed round trip of a
weights-only checkpoint is in test_checkpoint.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfplay.learner.checkpoint import (
    DROPPED,
    OPTIMIZER,
    has_optimizer_state,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from selfplay.learner.errors import LearnerError
from selfplay.orchestration.rundir import prune_checkpoints


class _Module:
    def save_pretrained(self, target: Path, **_: object) -> None:
        (Path(target) / "config.json").write_text(json.dumps({"model_type": "llama"}))
        (Path(target) / "model.safetensors").write_bytes(b"w" * 16)


class _Tokenizer:
    def save_pretrained(self, target: Path) -> None:
        (Path(target) / "tokenizer.json").write_text("{}")


class _DeepSpeed:
    def __init__(self) -> None:
        self.loaded: list[str] = []

    def save_checkpoint(self, save_dir: str, tag: str, client_state: dict) -> None:
        (Path(save_dir) / tag).mkdir(parents=True)
        (Path(save_dir) / tag / "optim_states.pt").write_bytes(b"o" * 64)

    def load_checkpoint(self, load_dir: str, **_: object) -> tuple[str, dict]:
        self.loaded.append(load_dir)
        return load_dir, {}


class FakeEngine:
    def __init__(self) -> None:
        self.version, self.model_dir = 0, "base"
        self.module, self.tokenizer, self.engine = _Module(), _Tokenizer(), _DeepSpeed()

    def state_dict(self) -> dict:
        return {}


def _save(engine: FakeEngine, root: Path, **kw: object) -> Path:
    engine.version += 1
    return save_checkpoint(engine, root, **kw)


def test_a_newer_checkpoint_drops_the_older_optimizer_states_and_keeps_their_weights(tmp_path):
    engine = FakeEngine()
    v1 = _save(engine, tmp_path)
    assert has_optimizer_state(v1)
    v2 = _save(engine, tmp_path)
    assert has_optimizer_state(v2) and not has_optimizer_state(v1)
    assert (v1 / "model.safetensors").exists() and (v1 / "selfplay_learner.json").exists()
    v3 = _save(engine, tmp_path)
    assert [has_optimizer_state(p) for p in (v1, v2, v3)] == [False, False, True]
    assert latest_checkpoint(tmp_path) == v3
    assert not list(tmp_path.glob(f"*/{DROPPED}"))
    # retention still keeps the newest (the one with the state) and deletes whole old directories
    prune_checkpoints(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.glob("v*")) == [v2.name, v3.name]
    assert has_optimizer_state(v3)


def test_a_weights_only_save_keeps_the_older_state_a_resume_needs(tmp_path):
    engine = FakeEngine()
    v1 = _save(engine, tmp_path)
    v2 = _save(engine, tmp_path, optimizer=False)  # e.g. learn-demo's sync checkpoints
    assert has_optimizer_state(v1) and not has_optimizer_state(v2)


def test_a_kill_mid_drop_leaves_no_partial_state_and_is_finished_later(tmp_path):
    engine = FakeEngine()
    v1 = _save(engine, tmp_path)
    (v1 / OPTIMIZER).rename(v1 / DROPPED)  # what a kill between the rename and the delete leaves
    _save(engine, tmp_path)
    assert not (v1 / DROPPED).exists() and not has_optimizer_state(v1)


def test_resuming_from_a_checkpoint_without_optimizer_state_is_refused_with_the_reason(tmp_path):
    engine = FakeEngine()
    v1 = _save(engine, tmp_path)
    v2 = _save(engine, tmp_path)
    resumed = FakeEngine()
    with pytest.raises(LearnerError, match=r"no optimizer/ state .* only the newest keeps it.*resume from the "
                                           r"newest checkpoint"):
        load_checkpoint(resumed, v1)
    assert resumed.engine.loaded == [] and resumed.version == 0
    load_checkpoint(resumed, v2)
    assert resumed.engine.loaded == [str(v2 / OPTIMIZER)] and resumed.version == 2
