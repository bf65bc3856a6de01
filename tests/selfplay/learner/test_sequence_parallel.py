"""Ulysses sequence parallelism, run for real on CPU: two gloo ranks split each sequence and must take
the same step as one rank that sees it whole (logprobs, loss, gradient norm, updated weights)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from selfplay.learner.sequence_parallel import shard_bounds  # noqa: E402

WORKER = Path(__file__).with_name("sp_worker.py")


def test_shard_bounds_cover_the_row():
    for n, sp in ((7, 2), (8, 2), (10, 4), (1, 2)):
        pad, _, _ = shard_bounds(n, sp, 0)
        spans = [shard_bounds(n, sp, r)[1:] for r in range(sp)]
        assert (n + pad) % sp == 0 and spans[0][0] == 0 and spans[-1][1] == n + pad
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A random 2-layer Llama (4 heads, 2 KV heads: divisible by sp=2), with the embedded tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    from agent_scaffold.embedded import default_model_dir

    path = tmp_path_factory.mktemp("tiny-llama")
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=512, max_position_embeddings=256, tie_word_embeddings=True)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(default_model_dir()).save_pretrained(path)
    return path


def _launch(model: Path, sp: int, world: int, out: Path) -> list[dict]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(world):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(model), str(sp), str(out / f"{sp}-{rank}.json")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        try:
            log, _ = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0, log[-4000:]
    return [json.loads((out / f"{sp}-{rank}.json").read_text()) for rank in range(world)]


@pytest.mark.slow
def test_two_rank_ulysses_equals_one_rank(tiny_model, tmp_path):
    (ref,) = _launch(tiny_model, 1, 1, tmp_path)
    ranks = _launch(tiny_model, 2, 2, tmp_path)
    assert not ref["sp_group"] and all(r["sp_group"] for r in ranks)
    for r in ranks:
        for a, b in zip(r["logprobs"], ref["logprobs"]):
            assert a == pytest.approx(b, abs=1e-5)
        for key in ("learner/loss", "learner/grad_norm", "learner/entropy", "learner/clipfrac"):
            assert r["metrics"][key] == pytest.approx(ref["metrics"][key], rel=1e-4, abs=1e-6), key
        for name, value in ref["digest"].items():
            assert r["digest"][name] == pytest.approx(value, rel=1e-4, abs=1e-4), name
    # Each sequence had its own micro-batch (SDPA under Ulysses cannot separate packed sequences).
    assert ranks[0]["metrics"]["learner/microbatches"] == 3 and ref["metrics"]["learner/microbatches"] == 1
