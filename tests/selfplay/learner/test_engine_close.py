"""`LearnerEngine.close` frees what a dropped engine keeps: DeepSpeed's ZeRO optimizer hooks every parameter's
gradient accumulation with a closure over itself, which Python's collector cannot see through."""

from __future__ import annotations

import gc
import weakref

import pytest

from .conftest import make_samples


def _trained(model_dir):
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine

    engine = LearnerEngine(EngineConfig(model_dir=str(model_dir), lr=1e-3, warmup_steps=1))
    engine.train_step(make_samples(engine.tokenizer))
    return engine


def test_a_closed_engine_frees_its_model_and_optimizer_and_a_dropped_one_does_not(tmp_path):
    pytest.importorskip("deepspeed")
    from selfplay.learner.tiny_model import save_tiny_model

    model_dir = save_tiny_model(tmp_path / "tiny")
    dropped = _trained(model_dir)
    dropped_inner = weakref.ref(dropped.engine)
    del dropped
    gc.collect()
    # the control: without close, the engine outlives every reference this test held
    assert dropped_inner() is not None
    dropped_inner().destroy()  # the leaked one, freed so that it does not outlive this test

    closed = _trained(model_dir)
    inner, model, optimizer = weakref.ref(closed.engine), weakref.ref(closed.module), weakref.ref(closed.optimizer)
    closed.close()
    closed.close()  # idempotent
    assert closed.engine is None and closed.optimizer is None
    del closed
    gc.collect()
    assert inner() is None and model() is None and optimizer() is None
