"""Shared, expensive fixtures: one HF model load and one trained checkpoint per test session."""

from __future__ import annotations

import pytest

from selfplay.learner.baseline import RunningMeanBaseline
from selfplay.learner.batch import Sample

YARN = {"rope_type": "yarn", "factor": 2.0}


def make_samples(tokenizer, n: int = 4) -> list[Sample]:
    prompt = tokenizer.encode("The capital of France is", add_special_tokens=False)
    outs = [" Paris.", " Lyon, maybe.", " a city", " Paris, of course."][:n]
    samples = []
    for i, text in enumerate(outs):
        comp = tokenizer.encode(text, add_special_tokens=False)
        samples.append(Sample(tuple(prompt + comp), (0,) * len(prompt) + (1,) * len(comp),
                              (0.0,) * len(prompt) + (-1.0,) * len(comp), 1.0 if i % 2 == 0 else -1.0))
    return samples


@pytest.fixture
def learner_engine():
    """`LearnerEngine(...)` for one test: each engine it made is closed when the test ends. A dropped engine
    keeps its model, gradients and optimizer state for the life of the process (`LearnerEngine.close`), and
    this part of the suite runs in one process on a 24 GiB machine."""
    pytest.importorskip("deepspeed")
    from selfplay.learner.engine import LearnerEngine

    made = []

    def make(*args, **kwargs):
        made.append(LearnerEngine(*args, **kwargs))
        return made[-1]

    yield make
    for engine in made:
        engine.close()


@pytest.fixture(scope="session")
def hf_model():
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    from agent_scaffold.embedded import default_model_dir

    return AutoModelForCausalLM.from_pretrained(default_model_dir(), dtype=torch.float32,
                                                attn_implementation="sdpa").eval()


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A YaRN-configured engine saved as v0 (weights only), then after one step as v1 (+ optimizer and an
    injector baseline as training state)."""
    pytest.importorskip("deepspeed")
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine

    engine = LearnerEngine(EngineConfig(lr=1e-4, warmup_steps=1, rope_scaling=YARN, max_position_embeddings=16384,
                                        token_budget=24))
    from selfplay.learner.checkpoint import save_checkpoint

    samples = make_samples(engine.tokenizer)
    root = tmp_path_factory.mktemp("ckpt")
    # v0: the initial weights with the learner's model options; rollout engines start from it.
    save_checkpoint(engine, root, optimizer=False)
    metrics = engine.train_step(samples)
    baseline = RunningMeanBaseline()
    baseline.advantages(["toolz|removal", "toolz|history", "toolz|removal"], [0.5, -1.0, 0.2])
    path = engine.save(root, state={"injector_baseline": baseline.state_dict()})
    return engine, samples, metrics, root, path
