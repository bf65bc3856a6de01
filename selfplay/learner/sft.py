"""Supervised fine-tuning on successful trajectories (the RFT step of the Nebius recipe), on the learner's
engine: same DeepSpeed step, packing, fused head; the loss is the token-mean NLL of the valid assistant
turns (`LearnerEngine.sft_step`).

Defaults are Nebius's RFT settings: LR 5e-6, AdamW weight decay 0.1, 10 warm-up steps then cosine to 0,
batch 64 trajectories, one epoch (the `nebius` preset). The `cpu` preset (selfplay/config/presets/sft/)
scales them down for a 135M model on 2 cores: LR 1e-4, batch 4, 1 warm-up step.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from selfplay.learner.batch import Sample
from selfplay.learner.checkpoint import save_hf
from selfplay.learner.config import EngineConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SFTConfig:
    """Hyperparameters of one SFT run."""

    model_dir: str | None = None
    """Starting checkpoint; None is the embedded SmolLM2-135M-Instruct."""
    lr: float = 5e-6
    """Peak learning rate (Nebius RFT: 5e-6)."""
    weight_decay: float = 0.1
    """AdamW weight decay (Nebius: 0.1)."""
    warmup_steps: int = 10
    """Linear warm-up steps, then cosine decay to 0 at the end of training (Nebius: 10)."""
    batch_size: int = 64
    """Trajectories (segments) per optimizer step (Nebius: 64)."""
    epochs: int = 1
    """Passes over the data (Nebius: 1)."""
    injector_epochs: int | None = None
    """Passes over the injector samples when fewer than `epochs`: they join the first `injector_epochs`
    epochs only. An injector demonstration is about twice a solver one's length, so on a CPU they take
    most of the SFT time; None trains them every epoch."""
    token_budget: int = 8192
    """Tokens per packed micro-batch."""
    gradient_checkpointing: bool = True
    """Recompute decoder activations in backward (off in the CPU preset: short sequences, faster)."""
    share_prefix: bool = True
    """Run an opening that a micro-batch's demonstrations share before their first loss token once, where
    it pays (`EngineConfig.share_prefix`; off under gradient checkpointing). A role's system prompt ahead of
    demonstrations of different tasks does not pay on CPU (docs/benchmarks.md)."""
    seed: int = 0
    """Shuffling and torch seed."""
    dtype: str = "auto"
    """The engine's weights and compute (`EngineConfig.dtype`): auto is bf16 on a GPU and fp32 on a CPU.
    bf16 on a CPU is measured, not a default: docs/benchmarks.md, "bf16 SFT steps on a CPU"."""

    def __post_init__(self) -> None:
        if self.dtype not in ("auto", "bf16", "fp32"):
            raise ValueError(f"SFTConfig.dtype must be auto, bf16 or fp32, got {self.dtype!r}")
        if self.lr < 0 or self.batch_size < 1 or self.epochs < 1 or self.warmup_steps < 1:
            raise ValueError("SFTConfig needs lr >= 0, batch_size >= 1, epochs >= 1 and warmup_steps >= 1")
        if self.injector_epochs is not None and self.injector_epochs < 1:
            raise ValueError(f"SFTConfig.injector_epochs must be >= 1 or None (every epoch), got {self.injector_epochs}")


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Multiplier of the peak LR at optimizer step `step` (0-based) of `total`: (step+1)/warmup during
    warm-up, then cosine from 1 down to 0 at step `total` (the last step uses a small positive LR)."""
    if step < warmup:
        return (step + 1) / warmup
    span = max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup + 1) / (span + 1))))


def short_run_warning(warmup: int, total: int) -> str | None:
    """What a run of `total` optimizer steps that ends inside its warm-up should say, or None: its LR never
    reaches the peak (the Nebius preset's 10 warm-up steps outlast a small store's run at batch 64)."""
    if total >= warmup:
        return None
    return (f"the warm-up ({warmup} steps) is longer than this run ({total} optimizer steps): the LR peaks at "
            f"{total / warmup:.0%} of the preset's and never decays; give --batch-size or a warm-up that fits "
            "this much data")


def batches(samples: Sequence[Sample], config: SFTConfig) -> list[list[Sample]]:
    """The optimizer steps' batches: each epoch a fresh seeded shuffle cut into batch_size pieces. Injector
    samples join only the first `injector_epochs` epochs."""
    out: list[list[Sample]] = []
    rng = random.Random(config.seed)
    injector_epochs = config.epochs if config.injector_epochs is None else config.injector_epochs
    for epoch in range(config.epochs):
        order = [i for i, s in enumerate(samples) if epoch < injector_epochs or s.role != "injector"]
        rng.shuffle(order)
        out.extend([samples[i] for i in order[k:k + config.batch_size]]
                   for k in range(0, len(order), config.batch_size))
    return out


@dataclass(frozen=True)
class SFTResult:
    out_dir: Path
    """The Hugging Face checkpoint (loads with `--policy hf --model DIR`)."""
    history: tuple[dict[str, float], ...]
    """Metrics of each optimizer step."""
    wall_time: float


def sft_engine(config: SFTConfig, steps: int) -> Any:
    """A `LearnerEngine` set up for `steps` optimizer steps of `config`'s SFT."""
    from selfplay.learner.engine import LearnerEngine  # lazy: torch, transformers, deepspeed

    engine = LearnerEngine(EngineConfig(model_dir=config.model_dir, lr=config.lr, warmup_steps=config.warmup_steps,
                                        weight_decay=config.weight_decay, token_budget=config.token_budget,
                                        gradient_checkpointing=config.gradient_checkpointing,
                                        share_prefix=config.share_prefix, seed=config.seed, dtype=config.dtype))
    # The engine's scheduler is warm-up then constant; RFT decays to 0 (same warm-up, so step 0 agrees).
    engine.scheduler.lr_lambdas = [lambda k: lr_factor(k, config.warmup_steps, steps)]
    return engine


def train_sft(samples: Sequence[Sample], out_dir: str | Path, config: SFTConfig = SFTConfig(), *,
              on_step: Callable[[int, dict[str, float]], None] | None = None,
              metadata: dict | None = None) -> SFTResult:
    """Fine-tune on `samples` and save an HF checkpoint (weights, tokenizer, `sft.json`) to `out_dir`."""
    if not samples:
        raise ValueError("train_sft got no samples; collect successful trajectories first (`selfplay rft`)")
    start = time.monotonic()
    plan = batches(samples, config)
    if (short := short_run_warning(config.warmup_steps, len(plan))) is not None:
        log.warning("sft: %s", short)
    history = []
    out = Path(out_dir)
    with sft_engine(config, len(plan)) as engine:  # closed: a run trains its learner next in this process
        for i, batch in enumerate(plan):
            metrics = engine.sft_step(batch)
            history.append(metrics)
            log.info("sft step %d/%d loss %.4f lr %.2e (%.1f s)", i + 1, len(plan), metrics["sft/loss"],
                     metrics["sft/lr"], metrics["sft/step_s"])
            if on_step:
                on_step(i, metrics)
        out.mkdir(parents=True, exist_ok=True)
        save_hf(engine, out)
        model_dir = engine.model_dir
    wall = time.monotonic() - start
    (out / "sft.json").write_text(json.dumps({
        "config": {**asdict(config), "model_dir": model_dir}, "samples": len(samples), "steps": len(plan),
        "loss_first": history[0]["sft/loss"], "loss_last": history[-1]["sft/loss"], "wall_s": wall,
        **(metadata or {})}, indent=1, default=str) + "\n")
    return SFTResult(out, tuple(history), wall)
