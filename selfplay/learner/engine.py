"""`LearnerEngine`: DeepSpeed ZeRO drives an HF causal LM through the DAPO loss.

One `train_step(samples)` is one optimizer step over all samples:
  1. plan packed micro-batches by token budget (`microbatch.py`), no padding; a prompt that several
     samples open with runs once where `share_prefix` applies (`shared_prefix.py`);
  2. per micro-batch: decoder forward (gradient checkpointing), chunked lm_head logprobs and entropy
     (`logprobs.py`), `losses.policy_loss` with the *whole batch's* normaliser, so the sum of micro-batch
     losses is exactly the full-batch token-mean loss;
  3. backward per micro-batch (gradients accumulate; DeepSpeed reduces at the manual boundary), then one
     AdamW step with linear LR warmup and gradient clipping; the policy version goes up by one.

CPU: fp32, gloo (a one-process "world" is set up if none is), SDPA with a block-diagonal mask.
GPU: bf16, NCCL, flash-attention varlen when flash_attn is installed; Ulysses sequence parallelism
(DeepSpeed ALST) when `sequence_parallel_size > 1` — wired but only testable on a multi-GPU machine.

One `train_step` is one optimizer step; `PolicyLearner.update` splits an iteration's batch into
`learner.steps_per_update` mini-batches (Nebius: 2-8 optimizer steps per iteration) and passes the
pre-update learner logprobs to each step.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import os
import socket
import time
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

from agent_scaffold.embedded import default_model_dir
from selfplay.learner import TRAIN_EXTRA_HINT
from selfplay.learner.batch import Sample
from selfplay.learner.config import EngineConfig
from selfplay.learner.microbatch import plan_microbatches

try:
    import deepspeed
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(TRAIN_EXTRA_HINT) from exc

from selfplay.learner.checkpoint import load_checkpoint, save_checkpoint
from selfplay.learner.fused_loss import packed_policy_loss
from selfplay.learner.head_transform import logit_multiplier
from selfplay.learner.logprobs import (
    can_fuse,
    chunked_logprobs,
    decoder_hidden,
    fused_head_loss,
    packed_token_logprobs,
)
from selfplay.learner.lora import add_adapters, merged_state_dict
from selfplay.learner.losses import batch_denominator, policy_loss, token_weights
from selfplay.learner.model_options import apply_model_options
from selfplay.learner.packing import (
    Packed,
    pack,
    packs_by_positions,
    pad_rows,
    sliding_window,
    unpack,
)
from selfplay.learner.sequence_parallel import sp_token_logprobs
from selfplay.learner.shared_prefix import SharedPack, pack_shared, plan_shared_microbatches, shared_hidden

log = logging.getLogger(__name__)


_OWNER_ENV = "SELFPLAY_DIST_OWNER"
"""`<pid>:<port>` of the process that made a one-process world with `init_distributed`."""


def init_distributed() -> None:
    """Join the process group, creating a one-process world (gloo on CPU) when no launcher set one up."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return
    one_process_world_env(os.environ, os.getpid())
    if not torch.cuda.is_available():
        skip_shm_comm_build()
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")


def skip_shm_comm_build() -> None:
    """Keep DeepSpeed from JIT-compiling its CPU shared-memory all-reduce op when it sets up communication.

    The op serves only DeepSpeed's CPU inference all-reduce, which training never calls (gloo reduces the
    gradients). Its build costs a minute or more of C++ compilation per new set of flags on 2 cores, and a
    process killed while compiling leaves torch's build lock behind: every later learner then waits on that
    lock forever (a CI run hung there). DeepSpeed reads the op's compatibility from one cached dict, so
    marking it incompatible there makes `build_shm_op` return None and communication falls back to gloo.
    """
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def one_process_world_env(env: MutableMapping[str, str], pid: int) -> None:
    """Fill `env` with a one-process world (free port, rank 0) unless a launcher set one up.

    A one-process world this module made in a parent process (a `selfplay` CLI started by a run, a test)
    is inherited through the environment; its port is still the parent's, so it is made afresh here.
    A launcher's settings (no owner mark, or another port) are left alone.
    """
    owner = env.get(_OWNER_ENV, "")
    owner_pid, _, port = owner.partition(":")
    if owner and owner_pid != str(pid) and env.get("MASTER_PORT") == port:
        for key in ("MASTER_PORT", "MASTER_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK", _OWNER_ENV):
            env.pop(key, None)
    if "MASTER_PORT" not in env:  # a free port: several one-process learners may share a machine
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            env["MASTER_PORT"] = str(s.getsockname()[1])
        env[_OWNER_ENV] = f"{pid}:{env['MASTER_PORT']}"
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        env.setdefault(key, value)


def ds_config(cfg: EngineConfig, bf16: bool, cuda: bool = False) -> dict[str, Any]:
    """The DeepSpeed config dict for `cfg`."""
    # Buckets of 5e7 elements instead of DeepSpeed's 5e8: the reduce bucket is a second copy of the
    # gradients, and on one device a smaller one costs nothing in communication. Contiguous gradients
    # (copy each gradient into one buffer as it is made) avoid fragmentation on GPU; on CPU the copies
    # were 4% of a learner step (measured, docs/benchmarks.md) and there is no allocator to defragment.
    zero: dict[str, Any] = {"stage": cfg.zero_stage, "reduce_bucket_size": int(5e7), "contiguous_gradients": cuda,
                            "allgather_bucket_size": int(5e7)}
    if cfg.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    return {
        # Micro-batches vary in number per step; we mark the accumulation boundary ourselves, so the
        # nominal accumulation count only has to be large.
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1 << 20,
        "zero_optimization": zero,
        "optimizer": {"type": "AdamW", "params": {"lr": cfg.lr, "betas": list(cfg.betas), "eps": cfg.eps,
                                                  "weight_decay": cfg.weight_decay, "torch_adam": True}},
        "gradient_clipping": cfg.grad_clip,
        "bf16": {"enabled": bf16},
        "sequence_parallel_size": cfg.sequence_parallel_size,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


class LearnerEngine:
    """The trainable policy. `version` counts optimizer steps since `initial_version`."""

    def __init__(self, config: EngineConfig | None = None, initial_version: int = 0) -> None:
        self.config = cfg = config or EngineConfig()
        model_dir = cfg.model_dir
        if model_dir is None:
            model_dir = str(default_model_dir())
        self.model_dir = model_dir
        torch.manual_seed(cfg.seed)
        init_distributed()
        cuda = torch.cuda.is_available()
        self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
        bf16 = cfg.dtype == "bf16" or (cfg.dtype == "auto" and cuda)
        self.dtype = torch.bfloat16 if bf16 else torch.float32
        attn = cfg.attn_implementation
        if attn == "auto":
            attn = "flash_attention_2" if cuda and _has_flash_attn() else "sdpa"
        hf_config = apply_model_options(AutoConfig.from_pretrained(model_dir), cfg.rope_scaling,
                                        cfg.max_position_embeddings)
        logit_multiplier(hf_config)  # refuses a head the chunked logprobs cannot reproduce, before loading
        # SDPA needs the explicit block-diagonal mask; flash-attention uses position ids (varlen), and so
        # does a model with sliding-window layers (`packing.sliding_window`).
        window = sliding_window(hf_config)
        self.block_mask = attn != "flash_attention_2" and window is None
        if window is not None and cfg.sequence_parallel_size > 1:
            # Ulysses drops 4D masks and shards positions; no test here shows it keeps a layer's window
            raise ValueError(f"{model_dir} has sliding-window attention (window {window}), which sequence "
                             "parallelism is not verified to keep; set sequence_parallel_size to 1")
        if window is not None and not packs_by_positions():
            raise ImportError(
                f"{model_dir} has sliding-window attention (window {window}); packing it needs transformers that "
                "separates packed sequences by position ids (masking_utils.find_packed_sequence_indices). "
                "Upgrade transformers within the `train` extra's range.")
        model = AutoModelForCausalLM.from_pretrained(model_dir, config=hf_config, dtype=self.dtype,
                                                     attn_implementation=attn)
        model.config.use_cache = False
        if cfg.gradient_checkpointing:
            if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x name
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.lora_scale = None
        if cfg.lora_rank:
            trainable = add_adapters(model, cfg.lora_rank, cfg.lora_alpha, cfg.lora_targets)
            self.lora_scale = cfg.lora_alpha / cfg.lora_rank
            log.info("LoRA rank %d on %s: %d trainable parameters, base weights frozen", cfg.lora_rank,
                     ",".join(cfg.lora_targets), trainable)
        self.sp_group = None
        self.token_budget = cfg.token_budget
        mpu = None
        if cfg.sequence_parallel_size > 1:
            mpu = self._setup_sequence_parallel(model, attn)
        warmup = cfg.warmup_steps
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model, model_parameters=[p for p in model.parameters() if p.requires_grad],
            config=ds_config(cfg, bf16, cuda), mpu=mpu,
            lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(
                opt, lambda step: min(1.0, (step + 1) / warmup)))
        self.engine.train()
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.ref_model = None
        if cfg.loss.kl_coef:
            self.ref_model = AutoModelForCausalLM.from_pretrained(model_dir, config=hf_config, dtype=self.dtype,
                                                                  attn_implementation=attn).to(self.device).eval()
            self.ref_model.requires_grad_(False)
        self.version = initial_version
        # The fused head (logits and their gradients made chunk by chunk in forward) reads the head weight
        # directly: ZeRO-3 partitions it outside the module's own forward, and Ulysses shards positions.
        self.fused = (cfg.fused_head and cfg.zero_stage == 2 and self.sp_group is None
                      and can_fuse(self.module.get_output_embeddings()))
        # transformers drops the cache under gradient checkpointing in training; Ulysses shards positions;
        # a sliding window would need each layer type's mask over the prefix; flash-attention's varlen path
        # is untested with a cache in training (`shared_prefix`): the attention that packs with a block mask
        self.share_prefix = cfg.share_prefix and not cfg.gradient_checkpointing and self.block_mask
        log.info("learner engine: %s, %s, ZeRO-%d, attn=%s, version %d", model_dir, self.dtype,
                 cfg.zero_stage, attn, self.version)

    @property
    def module(self) -> Any:
        """The HF model being trained."""
        return self.engine.module

    def close(self) -> None:
        """Frees the model, its gradients and the optimizer state; the engine cannot train afterwards.

        DeepSpeed's ZeRO optimizer hooks each parameter's gradient accumulation with a closure over itself,
        a reference Python's collector cannot see, so an engine that is merely dropped keeps all of it for
        the life of the process (a 135M fp32 engine: over 2 GB). A process that trains one engine after
        another (the warm start's SFT, then the run's learner; the learning experiment's arms) would hold
        every one. Idempotent."""
        engine = getattr(self, "engine", None)
        if engine is None:
            return
        engine.destroy()  # removes the gradient hooks
        self.engine = self.optimizer = self.scheduler = self.ref_model = None
        gc.collect()  # the engine's remaining reference cycles hold the tensors
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def __enter__(self) -> LearnerEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _setup_sequence_parallel(self, model: Any, attn: str) -> Any:
        sp, world = self.config.sequence_parallel_size, torch.distributed.get_world_size()
        if world % sp:
            raise ValueError(f"sequence_parallel_size {sp} must divide the number of learner processes ({world}); "
                             "launch sp (or a multiple of sp) ranks, e.g. `deepspeed --num_gpus {sp}`, or set it to 1")
        from deepspeed.runtime.sequence_parallel.ulysses_sp import UlyssesSPAttentionHF

        mpu = UlyssesSPAttentionHF.register_with_transformers(
            model_name_or_path=model, core_attn_implementation=attn,
            sequence_parallel_size=self.config.sequence_parallel_size, micro_batch_size=1,
            seq_length_is_variable=True)
        self.sp_group = mpu.get_sequence_parallel_group()
        self.block_mask = False  # Ulysses drops 4D masks; flash-attention separates sequences by position ids
        if attn != "flash_attention_2":  # SDPA would attend across packed sequences: one per micro-batch
            self.token_budget = 1
        return mpu

    # ---- logprobs -------------------------------------------------------------------------------

    def _plan(self, sequences: Sequence[Sequence[int]],
              loss_masks: Sequence[Sequence[int]] | None = None) -> list[list[int]]:
        """Micro-batches of `sequences` within the token budget, counting a shared prefix once when shared."""
        if self.share_prefix:
            return plan_shared_microbatches(sequences, self.token_budget, loss_masks)
        return plan_microbatches([len(s) for s in sequences], self.token_budget)

    def _pack(self, sequences: Sequence[Sequence[int]],
              loss_masks: Sequence[Sequence[int]] | None = None) -> Packed | SharedPack:
        if self.share_prefix:
            return pack_shared(sequences, loss_masks, device=self.device)
        return pack(sequences, block_mask=self.block_mask, device=self.device)

    def _hidden(self, model: Any, packed: Packed | SharedPack, temperature: float) -> Any:
        if isinstance(packed, SharedPack):
            return shared_hidden(model, packed, temperature)
        return decoder_hidden(model, packed, temperature)

    def _forward(self, model: Any, sequences: Sequence[Sequence[int]], temperature: float | None = None,
                 loss_masks: Sequence[Sequence[int]] | None = None) -> tuple[Any, Any]:
        """Token logprobs and entropies at `temperature` (None: the sampling temperature of the config),
        with shared prefixes run once where the engine shares them."""
        temperature = self.config.temperature if temperature is None else temperature
        packed = self._pack(sequences, loss_masks)
        if isinstance(packed, SharedPack):
            hidden = self._hidden(model, packed, temperature)
            lp, ent = chunked_logprobs(model.get_output_embeddings(), hidden, packed.targets, self.config.logprob_chunk)
            return packed.rows(lp), packed.rows(ent)
        if self.sp_group is not None:
            lp, ent = sp_token_logprobs(model, packed, self.sp_group, self.config.logprob_chunk, temperature)
        else:
            lp, ent = packed_token_logprobs(model, packed, self.config.logprob_chunk, temperature)
        return unpack(lp, packed.seq_lens), unpack(ent, packed.seq_lens)

    @torch.no_grad()
    def logprobs(self, sequences: Sequence[Sequence[int]], model: Any = None) -> list[list[float]]:
        """Per-token logprobs (0.0 for the first token) under the current (or given) weights."""
        lens = [len(s) for s in sequences]
        out: dict[int, list[float]] = {}
        for idx in self._plan(sequences):
            lp, _ = self._forward(model or self.module, [sequences[i] for i in idx])
            for row, i in zip(lp, idx):
                out[i] = row[: lens[i]].tolist()
        return [out[i] for i in range(len(sequences))]

    # ---- training -------------------------------------------------------------------------------

    def train_step(self, samples: Sequence[Sample],
                   learner_old: Sequence[Sequence[float]] | None = None) -> dict[str, float]:
        """One optimizer step on `samples`; returns learner/* metrics and bumps `version`. With TIS on,
        `learner_old` are the behaviour logprobs of `samples` under the learner as it was before the
        update's first step: an update of several mini-batch steps passes them in for its later steps, so
        their ratio is against the policy that sampled, as PPO's is. None: this is the update's first step,
        so the learner's logprobs at these weights are this step's own forward, detached (no extra pass)."""
        if not samples:
            raise ValueError("train_step got no samples; dynamic sampling dropped everything, draw more")
        cfg, lcfg = self.config, self.config.loss
        start = time.perf_counter()
        lens = [len(s.input_ids) for s in samples]
        plan = self._plan([s.input_ids for s in samples], [s.loss_mask for s in samples])
        masks = [pad_rows([samples[i].loss_mask for i in idx]) for idx in plan]
        den = batch_denominator(masks, lcfg.agg, lcfg.norm_len)
        tis = lcfg.tis_cap is not None
        sums: dict[str, float] = {}
        total_loss = 0.0
        masked_tokens = 0.0
        for k, idx in enumerate(plan):
            mb = [samples[i] for i in idx]
            mask = masks[k].to(self.device)
            rollout = pad_rows([s.old_logprobs for s in mb], device=self.device)
            adv = torch.tensor([s.advantage for s in mb], device=self.device)[:, None] * mask
            terms: dict[str, Any] = {"clip_low": lcfg.clip_low, "clip_high": lcfg.clip_high,
                                     "clip_ratio_c": lcfg.clip_ratio_c}
            old = rollout
            if tis:
                # Ratio against the learner's own logprobs before the update (None: this forward's), TIS
                # weight against the engine's; the loss's metrics log their mismatch every update
                # (mismatch_abs, tis_clipfrac).
                old = None if learner_old is None else pad_rows([learner_old[i] for i in idx], device=self.device)
                terms.update(rollout_logprobs=rollout, tis_cap=lcfg.tis_cap)
            if self.ref_model is not None:
                terms.update(ref_logprobs=self._forward_ref(mb), kl_coef=lcfg.kl_coef)
            if self.fused:
                packed = self._pack([s.input_ids for s in mb], [s.loss_mask for s in mb])
                hidden = self._hidden(self.module, packed, cfg.temperature)
                loss, m = packed_policy_loss(
                    self.module.get_output_embeddings(), hidden, packed, old, adv,
                    mask, agg=lcfg.agg, norm_len=lcfg.norm_len, denominator=den, chunk=cfg.logprob_chunk, **terms)
            else:
                lp, ent = self._forward(self.module, [s.input_ids for s in mb],
                                        loss_masks=[s.loss_mask for s in mb])  # (b, T)
                loss, m = policy_loss(lp.float(), old, adv, mask, agg=lcfg.agg, norm_len=lcfg.norm_len,
                                      denominator=den, **terms)
                m["entropy"] = (ent * mask).sum() / mask.sum().clamp(min=1)
            self.engine.set_gradient_accumulation_boundary(k == len(plan) - 1)
            self.engine.backward(loss, scale_wrt_gas=False)
            n_tok = float(mask.sum())
            masked_tokens += n_tok
            total_loss += float(loss.detach())
            for key, v in m.items():
                sums[key] = sums.get(key, 0.0) + float(v) * n_tok
        lr = float(self.scheduler.get_last_lr()[0])  # this step's: `step()` moves the scheduler to the next one
        self.engine.step()
        self.version += 1
        elapsed = time.perf_counter() - start
        grad_norm = self.engine.get_global_grad_norm()
        metrics = {f"learner/{k}": v / max(masked_tokens, 1.0) for k, v in sums.items()}
        metrics.update({
            "learner/loss": total_loss,
            "learner/grad_norm": float(grad_norm) if grad_norm is not None else float("nan"),
            "learner/lr": lr,
            "learner/tokens": float(sum(lens)),
            "learner/tokens_per_s": sum(lens) / elapsed,
            "learner/microbatches": float(len(plan)),
            "learner/step_s": elapsed,
            "learner/policy_version": float(self.version),
        })
        return metrics

    def sft_step(self, samples: Sequence[Sample]) -> dict[str, float]:
        """One optimizer step of supervised fine-tuning (rejection fine-tuning): the token-mean negative
        log-likelihood of the `loss_mask` tokens over all `samples` (`advantage` and `old_logprobs` are
        ignored). Same micro-batches, packing, fused head and DeepSpeed step as `train_step`; bumps `version`.

        At ratio 1 with advantage 1 the DAPO gradient equals this one; the NLL needs no behaviour logprobs.
        The likelihood is the model's own (temperature 1), whatever `temperature` the config samples at.
        """
        if not samples:
            raise ValueError("sft_step got no samples; collect demonstrations first (`selfplay demos`)")
        start = time.perf_counter()
        lens = [len(s.input_ids) for s in samples]
        plan = self._plan([s.input_ids for s in samples], [s.loss_mask for s in samples])
        masks = [pad_rows([samples[i].loss_mask for i in idx]) for idx in plan]
        den = batch_denominator(masks, "token-mean")
        if den == 0:
            raise ValueError("sft_step: every loss_mask is 0; nothing to train on")
        total_loss = 0.0
        for k, idx in enumerate(plan):
            mb = [samples[i] for i in idx]
            w = token_weights(masks[k].to(self.device), "token-mean", denominator=den)  # (b, T)
            ids, loss_masks = [s.input_ids for s in mb], [s.loss_mask for s in mb]
            if self.fused:
                packed = self._pack(ids, loss_masks)
                hidden = self._hidden(self.module, packed, 1.0)
                row_w = packed.positions(w.to(torch.promote_types(hidden.dtype, torch.float32)))
                keep = row_w != 0
                kept_w = row_w[keep]

                def token_loss(lp: Any, s: int, e: int, kept_w: Any = kept_w) -> Any:
                    return -(lp * kept_w[s:e]).sum()

                loss, _, _ = fused_head_loss(self.module.get_output_embeddings(), hidden, packed.targets,
                                             token_loss, self.config.logprob_chunk, keep=keep)
            else:
                lp, _ = self._forward(self.module, ids, temperature=1.0, loss_masks=loss_masks)  # (b, T)
                loss = -(lp.float() * w).sum()
            self.engine.set_gradient_accumulation_boundary(k == len(plan) - 1)
            self.engine.backward(loss, scale_wrt_gas=False)
            total_loss += float(loss.detach())
        lr = float(self.scheduler.get_last_lr()[0])  # this step's, as in `train_step`
        self.engine.step()
        self.version += 1
        elapsed = time.perf_counter() - start
        grad_norm = self.engine.get_global_grad_norm()
        return {
            "sft/loss": total_loss,
            "sft/grad_norm": float(grad_norm) if grad_norm is not None else float("nan"),
            "sft/lr": lr,
            "sft/tokens": float(sum(lens)),
            "sft/loss_tokens": den,
            "sft/microbatches": float(len(plan)),
            "sft/tokens_per_s": sum(lens) / elapsed,
            "sft/step_s": elapsed,
        }

    @torch.no_grad()
    def _forward_ref(self, mb: Sequence[Sample]) -> Any:
        lp, _ = self._forward(self.ref_model, [s.input_ids for s in mb], loss_masks=[s.loss_mask for s in mb])
        return lp.float()

    # ---- weights --------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Full (gathered) weights by HF parameter name, for in-memory sync and checkpoints; LoRA adapters
        merged into their weights."""
        if self.config.zero_stage == 3:
            state = self.engine._zero3_consolidated_16bit_state_dict()
        else:
            state = self.module.state_dict()
        return state if self.lora_scale is None else merged_state_dict(state, self.lora_scale)

    def save(self, root: str | Path, state: dict[str, Any] | None = None) -> Path:
        """Checkpoint the current weights, tokenizer and optimizer under root/v<version>, with the caller's
        JSON-able training `state` (e.g. the injector baselines) alongside (see checkpoint.py)."""
        return save_checkpoint(self, Path(root), state=state)

    def resume(self, checkpoint_dir: str | Path) -> dict[str, Any]:
        """Restore weights, optimizer, scheduler and version from a directory written by `save`; returns
        the `state` saved with it."""
        return load_checkpoint(self, Path(checkpoint_dir))


def _has_flash_attn() -> bool:
    return importlib.util.find_spec("flash_attn") is not None
