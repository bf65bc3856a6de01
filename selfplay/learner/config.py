"""Configuration of the loss and the DeepSpeed engine (pure dataclasses, no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from selfplay.config.bounds import check_bounds
from selfplay.learner.aggregations import AGG_MODES


@dataclass(frozen=True)
class LossConfig:
    clip_low: float = 0.2
    """epsilon_low of the clipped ratio (DAPO: 0.2)."""
    clip_high: float = 0.28
    """epsilon_high, decoupled (DAPO clip-higher: 0.28; Nebius 0.3 then 0.26 at 131k)."""
    agg: str = "token-mean"
    """token-mean (DAPO), seq-mean-token-mean (GRPO) or seq-mean-token-sum-norm (Dr. GRPO)."""
    norm_len: int | None = None
    """Constant length for seq-mean-token-sum-norm (e.g. the max response length); required for it."""
    clip_ratio_c: float | None = None
    """Dual-clip bound for negative advantages, above 1 (e.g. 3.0); None is off."""
    tis_cap: float | None = 2.0
    """Truncated importance sampling cap C on pi_learner_old / pi_rollout (FlashRL, verl: 2.0); None is
    off. On, the ratio is taken against the learner's own logprobs before the update (the first step's
    forward, a separate pass for later mini-batches): the rollout engine's numerics (batched and padded HF
    sampling, vLLM's kernels, bf16) never equal the learner's."""
    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the frozen initial policy; 0 is off (DAPO drops the KL)."""

    def __post_init__(self) -> None:
        if self.agg not in AGG_MODES:
            raise ValueError(f"agg {self.agg!r} is unknown; choose one of {AGG_MODES}")
        if self.agg == "seq-mean-token-sum-norm" and self.norm_len is None:
            raise ValueError("agg 'seq-mean-token-sum-norm' needs loss.norm_len (the max response length)")
        if not (0 <= self.clip_low < 1 and self.clip_high >= 0):
            raise ValueError(f"need 0 <= clip_low < 1 and clip_high >= 0, got {self.clip_low}, {self.clip_high}")
        # dual clip bounds a negative advantage's ratio from above at c > 1 (below 1 it would cut the clip)
        check_bounds(self, at_least={"norm_len": 1, "kl_coef": 0}, above={"clip_ratio_c": 1, "tis_cap": 0})


@dataclass(frozen=True)
class EngineConfig:
    model_dir: str | None = None
    """HF checkpoint to train; None is the embedded SmolLM2-135M-Instruct."""
    lr: float = 1e-6
    """Peak learning rate after warmup (Nebius and DAPO: 1e-6; SSR: 3e-6)."""
    warmup_steps: int = 10
    """Linear warmup: step k (0-based) uses lr * min(1, (k + 1) / warmup_steps); constant afterwards."""
    weight_decay: float = 0.1
    """AdamW weight decay (Nebius: 0.1)."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    eps: float = 1e-8
    """AdamW epsilon, added to the root of the second moment. Adam's first steps move every weight by
    about `lr` whatever its gradient's size (m / sqrt(v) is the gradient's sign); a larger epsilon damps
    the weights whose gradients are smaller than it, where a small RL batch's gradient is mostly noise."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    zero_stage: int = 2
    """DeepSpeed ZeRO stage: 2 or 3."""
    offload_optimizer: bool = False
    """ZeRO CPU offload of optimizer states (GPU runs; needs DeepSpeed's cpu_adam op to build)."""
    dtype: str = "auto"
    """bf16, fp32, or auto (bf16 on CUDA, fp32 on CPU). On a CPU with AVX512-BF16, bf16 took 0.59x fp32's
    update time, its logprobs 0.007 nats per sampled token from the fp32 rollout policy's, where fp32 matches
    them exactly (docs/benchmarks.md, "The learner in bf16 on a CPU"); the CPU presets keep fp32."""
    gradient_checkpointing: bool = True
    """Recompute decoder-layer activations in backward."""
    token_budget: int = 8192
    """Max tokens per packed micro-batch (a longer single trajectory gets a micro-batch of its own); a prefix
    shared by several trajectories (`share_prefix`) counts once."""
    share_prefix: bool = True
    """Run a prompt that several trajectories of an update open with (a group's G attempts at one task)
    through the decoder once, each trajectory's remainder against its KV cache (`learner.shared_prefix`):
    the same logprobs and gradients for fewer tokens, where the opening saves more than its remainders'
    masked attention costs (`shared_prefix.sharing_gain`). Used by the policy update, its logprob passes
    and SFT where it applies: SDPA or eager attention, no gradient checkpointing, no sequence parallelism,
    no sliding-window layers."""
    logprob_chunk: int = 1024
    """Positions per lm_head chunk when computing logprobs and entropy."""
    fused_head: bool = True
    """Compute each lm_head chunk's gradients in forward from the separable loss (one head matmul fewer
    than checkpointed chunks). Used with ZeRO-2, no sequence parallelism and a plain Linear head;
    otherwise, or when False, chunks are checkpointed and recomputed in backward."""
    rope_scaling: dict[str, Any] | None = None
    """RoPE scaling applied to the model config in the learner and written into saved checkpoints,
    e.g. {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}."""
    max_position_embeddings: int | None = None
    """Context length to record in the config (e.g. 131072 with YaRN factor 4)."""
    attn_implementation: str = "auto"
    """sdpa (CPU: explicit block-diagonal mask; a sliding-window model's masks come from transformers via
    position_ids), flash_attention_2 (GPU: varlen via position_ids), or auto."""
    sequence_parallel_size: int = 1
    """Ulysses/ALST sequence parallelism degree (GPU only; 1 is off)."""
    seed: int = 0
    """Torch seed set before the engine is built."""
    lora_rank: int = 0
    """Rank of low-rank adapters on `lora_targets` (selfplay/learner/lora.py); 0 is off: every weight
    trains. On, the base weights are frozen and only the adapters train (use about ten times the full
    fine-tuning LR); checkpoints and weight sync carry the merged weights."""
    lora_alpha: float = 32.0
    """Adapter scale numerator: an adapter adds lora_alpha / lora_rank * B @ A to its layer's weight."""
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    """Attribute names of the nn.Linear layers that get adapters (Llama-family projections: attention and MLP)."""
    loss: LossConfig = field(default_factory=LossConfig)
    """The policy loss."""
    temperature: float = 1.0
    """Sampling temperature of the behaviour policy: logprobs, entropy and the policy loss are of
    softmax(logits / temperature), the distribution rollouts sample from, so the trained policy is the
    one that samples. A run sets it from `rollout.temperature`; SFT ignores it (plain likelihood)."""

    def __post_init__(self) -> None:
        if self.zero_stage not in (2, 3):
            raise ValueError(f"zero_stage must be 2 or 3, got {self.zero_stage}")
        if self.dtype not in ("auto", "bf16", "fp32"):
            raise ValueError(f"dtype must be auto, bf16 or fp32, got {self.dtype!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (the learner trains a sampling distribution; greedy "
                             f"has no logprobs), got {self.temperature}")
        if self.token_budget < 1 or self.logprob_chunk < 1 or self.warmup_steps < 1:
            raise ValueError("token_budget, logprob_chunk and warmup_steps must be >= 1")
        if self.lr < 0:
            raise ValueError(f"lr must be >= 0, got {self.lr}")
        check_bounds(self, at_least={"weight_decay": 0, "grad_clip": 0, "lora_alpha": 0, "max_position_embeddings": 1})
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0 (AdamW divides by sqrt(v) + eps), got {self.eps}")
        if self.sequence_parallel_size < 1:
            raise ValueError("sequence_parallel_size must be >= 1")
        if self.lora_rank < 0 or (self.lora_rank and not self.lora_targets):
            raise ValueError(f"lora_rank must be >= 0 (0 is off) with lora_targets non-empty, got "
                             f"{self.lora_rank} and {list(self.lora_targets)}")
