"""`HFPolicy`: a transformers causal LM on CPU or GPU, token in / token out.

Sampling is our own loop (KV cache, one token per step, a `torch.Generator` per prompt) rather than
`model.generate`, because `generate` silently applies `generation_config` defaults (e.g. top_k=50) and its
scores are post-processed; here the returned logprob is exactly the log-softmax of the distribution each
token was drawn from, which under the default `SamplingParams` is the model's plain temperature-1 softmax.
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
        with self._lock:
            base = params.seed if params.seed is not None else random.randrange(2**62)
            return [self._one(list(p), params, base + i) for i, p in enumerate(prompts)]

    def _one(self, prompt: list[int], params: SamplingParams, seed: int) -> Completion:
        torch = _import_torch()
        if not prompt:
            raise ValueError("empty prompt: render at least the chat template's generation prompt")
        # Sampling stays on the model's device: moving each step's logits to the CPU cost more than the
        # forward itself on a GPU. A generator per prompt keeps results seeded per device.
        gen = torch.Generator(device=self.device).manual_seed(seed)
        stop_ids = self.eos_ids | set(params.stop_token_ids)
        ids: list[int] = []
        logps: list[float] = []
        finish = "length"
        text = ""
        seen = torch.tensor(prompt, dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([prompt], device=self.device), use_cache=True)
            for _ in range(params.max_new_tokens):
                logp = process_logits(out.logits[0, -1], params, seen)
                if params.temperature == 0:
                    tok = int(torch.argmax(logp))
                else:
                    tok = int(torch.multinomial(logp.exp(), 1, generator=gen))
                ids.append(tok)
                logps.append(float(logp[tok]))
                if params.repetition_penalty != 1.0:
                    seen = torch.cat([seen, torch.tensor([tok], device=self.device)])
                if tok in stop_ids:
                    finish = "stop"
                    break
                if params.stop:
                    text = self.tokenizer.decode(ids, skip_special_tokens=True)
                    if any(s in text for s in params.stop):
                        finish = "stop"
                        break
                out = self.model(input_ids=torch.tensor([[tok]], device=self.device),
                                 past_key_values=out.past_key_values, use_cache=True)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        for s in params.stop:
            if s in text:
                text = text[: text.index(s)]
        return Completion(tuple(ids), tuple(logps), text, finish, self.version)
