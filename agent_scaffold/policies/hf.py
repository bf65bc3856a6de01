"""`HFPolicy`: a transformers causal LM on CPU or GPU, token in / token out.

Sampling is our own loop (KV cache, one token per step, a `torch.Generator` per prompt) rather than
`model.generate`, because `generate` silently applies `generation_config` defaults (e.g. top_k=50) and its
scores are post-processed; here the returned logprob is exactly the log-softmax of the distribution each
token was drawn from, which under the default `SamplingParams` is the model's plain temperature-1 softmax.

Prompts of one call (and, through `BatchingPolicy`, of concurrent episodes) are sampled together: one
left-padded forward with an attention mask and per-row position ids, then one decode step per live row.
Each row has its own generator, stop ids, stop strings and max_new_tokens, so its sample is the one it
would get alone; padding and batch shape move logits by float rounding only (~1e-5 in logprobs in fp32).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_scaffold.policy import Completion, SamplingParams

log = logging.getLogger(__name__)

EXTRA_HINT = "the hf policy needs torch and transformers: pip install 'selfplay-swe[train]'"


def _import_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise ImportError(EXTRA_HINT) from exc
    return torch


def process_logits(logits: Any, params: SamplingParams, seen: Any) -> Any:
    """Log-probabilities of the distribution to sample from, shape (V,), from raw logits (V,).

    `seen` holds the ids already in the context (for the repetition penalty). Greedy (temperature 0)
    returns the temperature-1 log-softmax; the caller takes the argmax.
    """
    torch = _import_torch()
    logits = logits.float()
    if params.repetition_penalty != 1.0 and seen.numel():
        picked = logits[seen]
        logits[seen] = torch.where(picked > 0, picked / params.repetition_penalty,
                                   picked * params.repetition_penalty)
    if params.temperature > 0:
        logits = logits / params.temperature
    if params.top_k > 0 and params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    if params.min_p > 0:
        logp = logp.masked_fill(logp.exp() < params.min_p * logp.exp().max(), float("-inf"))
    if params.top_p < 1.0:
        sorted_logp, order = torch.sort(logp, descending=True)
        cum = sorted_logp.exp().cumsum(-1)
        drop = cum - sorted_logp.exp() >= params.top_p  # keep the smallest prefix reaching top_p
        logp = logp.scatter(0, order[drop], float("-inf"))
    if params.min_p > 0 or params.top_p < 1.0:
        logp = torch.log_softmax(logp, dim=-1)  # renormalise after truncation
    return logp


class HFPolicy:
    """A local HF checkpoint (default: the embedded SmolLM2-135M-Instruct)."""

    def __init__(self, model_dir: str | Path | None = None, device: str = "cpu", dtype: Any = None,
                 version: int = 0) -> None:
        """`version`: the weights version of `model_dir` (checkpoint N of a run is version N), which every
        completion reports; a resumed run that reported 0 would see all its rollouts as stale."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"HFPolicy version must be a non-negative int (the checkpoint's), got {version!r}")
        torch = _import_torch()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if model_dir is None:
            from agent_scaffold.embedded import default_model_dir

            model_dir = default_model_dir()
        self.model_dir = str(model_dir)
        self.device = device
        self.dtype = dtype if dtype is not None else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=self.dtype).to(device).eval()
        self.version = version
        self._lock = threading.Lock()  # weight swaps never interleave with a generation
        self.eos_ids = self._eos_ids()
        log.info("loaded %s on %s", self.model_dir, device)

    def _eos_ids(self) -> frozenset[int]:
        ids = {self.tokenizer.eos_token_id}
        gen = getattr(self.model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None)
        ids.update(eos if isinstance(eos, list) else [eos])
        return frozenset(i for i in ids if i is not None)

    def load_weights(self, checkpoint_dir: str | Path, version: int) -> None:
        """Swap in the weights saved (save_pretrained) in `checkpoint_dir`, in place; set `version`."""
        from transformers import AutoModelForCausalLM

        fresh = AutoModelForCausalLM.from_pretrained(str(checkpoint_dir), dtype=self.dtype)
        with self._lock:
            missing, unexpected = self.model.load_state_dict(fresh.state_dict(), strict=False)
            if unexpected or [k for k in missing if "lm_head" not in k]:  # tied heads may be absent
                raise ValueError(f"{checkpoint_dir} does not fit the loaded model: missing={missing[:5]} "
                                 f"unexpected={unexpected[:5]}; save it with save_pretrained from the same "
                                 "architecture")
            self.version = int(version)
        log.info("loaded weights version %d from %s", version, checkpoint_dir)

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        base = params.seed if params.seed is not None else random.randrange(2**62)
        return self.generate_rows(prompts, [params.with_(seed=base + i) for i in range(len(prompts))])

    def generate_rows(self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams]) -> list[Completion]:
        """One completion per prompt, all in one left-padded batch, row i sampled with `params[i]`.

        Each row's seed is used as given (a random one when None), through its own `torch.Generator`, so a
        row's sample does not depend on its batch mates (up to float rounding of the padded forward).
        `BatchingPolicy` calls this to merge the requests of concurrent episodes.
        """
        if len(prompts) != len(params):
            raise ValueError(f"{len(prompts)} prompts but {len(params)} sampling params: pass one per prompt")
        rows = [list(p) for p in prompts]
        vocab = self.model.get_input_embeddings().num_embeddings
        for i, p in enumerate(rows):
            if not p:
                raise ValueError(f"prompt {i} is empty: render at least the chat template's generation prompt")
            if min(p) < 0 or max(p) >= vocab:
                raise ValueError(f"prompt {i} holds token ids outside the model's vocabulary [0, {vocab}): "
                                 "encode it with this policy's tokenizer")
        if not rows:
            return []
        seeds = [p.seed if p.seed is not None else random.randrange(2**62) for p in params]
        with self._lock:  # weight swaps never interleave with a generation
            return _BatchSampler(self, rows, list(params), seeds).run()


class _BatchSampler:
    """One batched decode: a left-padded prefill of every prompt, then one token per live row per step.

    Row r keeps its own generator, stop ids, stop strings and max_new_tokens; a row that finishes leaves the
    batch (its KV-cache rows are dropped), so long rows do not make finished ones cost compute.
    Position ids count each row's own tokens, so padding shifts no row's RoPE positions.
    """

    def __init__(self, policy: HFPolicy, prompts: list[list[int]], params: list[SamplingParams],
                 seeds: list[int]) -> None:
        self.torch = torch = _import_torch()
        self.policy, self.prompts, self.params = policy, prompts, params
        dev = policy.device
        # Sampling stays on the model's device: moving each step's logits to the CPU cost more than the
        # forward itself on a GPU. A generator per row keeps results seeded per device.
        self.gens = [torch.Generator(device=dev).manual_seed(s) for s in seeds]
        self.stop_ids = [policy.eos_ids | set(p.stop_token_ids) for p in params]
        self.seen = [torch.tensor(p, dtype=torch.long, device=dev) for p in prompts]
        self.ids: list[list[int]] = [[] for _ in prompts]
        self.logps: list[list[float]] = [[] for _ in prompts]
        self.finish = ["length"] * len(prompts)

    def run(self) -> list[Completion]:
        torch, model, dev = self.torch, self.policy.model, self.policy.device
        width = max(len(p) for p in self.prompts)
        pad = self.policy.tokenizer.pad_token_id or 0  # any id: padded positions are masked out
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in self.prompts], device=dev)  # (B, T)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in self.prompts], device=dev)  # (B, T)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, T)
        batch = list(range(len(self.prompts)))  # the row of each batch slot
        live = set(batch)
        with torch.inference_mode():
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
            while True:
                logits = out.logits[:, -1]  # (B_slots, V)
                for slot, r in enumerate(batch):
                    if r in live and not self._step(r, logits[slot]):
                        live.discard(r)
                if not live:
                    break
                cache = out.past_key_values
                if len(live) < len(batch) and hasattr(cache, "batch_select_indices"):
                    keep = [slot for slot, r in enumerate(batch) if r in live]
                    cache.batch_select_indices(torch.tensor(keep, device=dev))
                    mask, batch = mask[keep], [batch[s] for s in keep]
                # A finished row still in the batch (old caches) repeats its last token; its output is ignored.
                step = torch.tensor([[self.ids[r][-1]] for r in batch], device=dev)  # (B_slots, 1)
                pos = torch.tensor([[len(self.prompts[r]) + len(self.ids[r]) - 1] for r in batch], device=dev)
                mask = torch.cat([mask, mask.new_ones(len(batch), 1)], dim=1)
                out = model(input_ids=step, attention_mask=mask, position_ids=pos, past_key_values=cache,
                            use_cache=True)
        return [self._completion(r) for r in range(len(self.prompts))]

    def _step(self, r: int, logits: Any) -> bool:
        """Sample row r's next token from its logits (V,); False once the row has finished."""
        torch, params = self.torch, self.params[r]
        logp = process_logits(logits, params, self.seen[r])
        if params.temperature == 0:
            tok = int(torch.argmax(logp))
        else:
            tok = int(torch.multinomial(logp.exp(), 1, generator=self.gens[r]))
        self.ids[r].append(tok)
        self.logps[r].append(float(logp[tok]))
        if params.repetition_penalty != 1.0:
            self.seen[r] = torch.cat([self.seen[r], torch.tensor([tok], device=self.seen[r].device)])
        if tok in self.stop_ids[r] or (params.stop and any(
                s in self.policy.tokenizer.decode(self.ids[r], skip_special_tokens=True) for s in params.stop)):
            self.finish[r] = "stop"
            return False
        return len(self.ids[r]) < params.max_new_tokens

    def _completion(self, r: int) -> Completion:
        text = self.policy.tokenizer.decode(self.ids[r], skip_special_tokens=True)
        for s in self.params[r].stop:
            if s in text:
                text = text[: text.index(s)]
        return Completion(tuple(self.ids[r]), tuple(self.logps[r]), text, self.finish[r], self.policy.version)
