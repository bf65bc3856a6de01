"""`HFPolicy`: a transformers causal LM on CPU or GPU, token in / token out.

Sampling is our own loop (KV cache, one token per step, a `torch.Generator` per prompt) rather than
`model.generate`, because `generate` silently applies `generation_config` defaults (e.g. top_k=50) and its
scores are post-processed; here the returned logprob is exactly the log-softmax of the distribution each
token was drawn from, which under the default `SamplingParams` is the model's plain temperature-1 softmax.

Prompts of one call (and, through `BatchingPolicy`, of concurrent episodes) are sampled together in a
`DecodeBatch`: each prompt is prefilled alone, then one batched decode step per token for the live rows,
which rows join (continuous batching) and leave between steps. Each row has its own generator, stop ids,
stop strings and max_new_tokens, so its sample is the one it would get alone; padding and batch shape move
logits by float rounding only (~1e-5 in logprobs in fp32). With `kv_cache_mb` > 0 a `PrefixKVStore` keeps
finished rows' KV so an episode's next turn prefills only its new tokens.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_scaffold.chat_format import turn_end_id
from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policies.cpu_threads import ThreadGovernor
from agent_scaffold.policies.decode_batch import DecodeBatch
from agent_scaffold.policies.drain_lock import DrainLock
from agent_scaffold.policies.kv_store import PrefixKVStore
from agent_scaffold.policies.sampling import import_torch
from agent_scaffold.policy import Completion, SamplingParams

log = logging.getLogger(__name__)


class HFPolicy:
    """A local HF checkpoint (default: the embedded SmolLM2-135M-Instruct)."""

    def __init__(self, model_dir: str | Path | None = None, device: str = "cpu", dtype: Any = None,
                 version: int = 0, kv_cache_mb: int = 0, cpu_threads: int = 0, adapt_threads: bool = False,
                 fast_decode: bool = True, lookup_tokens: int = 0, lookup_rows: int = 24,
                 decode_engine: str = "torch") -> None:
        """`version`: the weights version of `model_dir` (checkpoint N of a run is version N), which every
        completion reports; a resumed run that reported 0 would see all its rollouts as stale.
        `kv_cache_mb`: memory cap of the prefix KV store reused across an episode's turns (0: off).
        `cpu_threads`: on CPU, torch threads per forward (0: torch's count). `adapt_threads`: lower them before
        each forward to the cores other processes leave free (`ThreadGovernor`). `fast_decode`: decode a Llama
        model through `LlamaStep` (others, or False, through the HF forward). `lookup_tokens`: speculative
        decoding with prompt-lookup drafts, up to this many tokens a row a step (`lookup.py`; 0: off; Llama
        models through `LlamaStep` only); `lookup_rows`: the most positions such a step feeds, all rows
        together. `decode_engine`: what runs a decode step of a model `fast_decode` writes out: "torch"
        (`LlamaStep`) or "onnxruntime" (`OrtStep`, CPU float32 only, rebuilt after every weight change)."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"HFPolicy version must be a non-negative int (the checkpoint's), got {version!r}")
        torch = import_torch()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if model_dir is None:
            model_dir = default_model_dir()
        self.model_dir = str(model_dir)
        self.device = device
        self.dtype = dtype if dtype is not None else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=self.dtype).to(device).eval()
        self.weights_epoch = 0
        """Moved by every weight load and version change: a decode engine holding its own copy of the
        weights (`OrtStep`) rebuilds when it differs from the epoch it was built from."""
        self.version = version
        self._lock = DrainLock()  # weight swaps never interleave with a generation
        self.eos_ids = self._eos_ids()
        if isinstance(kv_cache_mb, bool) or not isinstance(kv_cache_mb, int) or kv_cache_mb < 0:
            raise ValueError(f"kv_cache_mb must be a non-negative int (MiB; 0 turns KV reuse off), got {kv_cache_mb!r}")
        self.kv_store = PrefixKVStore(kv_cache_mb * 2**20) if kv_cache_mb else None
        if isinstance(cpu_threads, bool) or not isinstance(cpu_threads, int) or cpu_threads < 0:
            raise ValueError(f"cpu_threads must be a non-negative int (0 keeps torch's count), got {cpu_threads!r}")
        self.threads = (ThreadGovernor(cpu_threads or None, adapt=bool(adapt_threads))
                        if str(device).startswith("cpu") else None)
        """Sets the sampling thread's torch thread count before each forward (CPU only)."""
        for name, value, top in (("lookup_tokens", lookup_tokens, 32), ("lookup_rows", lookup_rows, 4096)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
                raise ValueError(f"{name} must be an int in [0, {top}], got {value!r}")
        self.lookup_tokens, self.lookup_rows = lookup_tokens, lookup_rows
        self._fast_decode = bool(fast_decode) and self._writes_out()
        if lookup_tokens and not self._fast_decode:
            log.warning("lookup_tokens=%d has no effect: %s decodes through the HF forward, and lookup drafts "
                        "are verified by LlamaStep only", lookup_tokens, self.model_dir)
        self._llama_step: Any = None
        self.decode_engine = decode_engine
        self.engine_sync_s: list[float] = []
        """Seconds each rebuild of the `OrtStep` took (its weight sync), in order."""
        self._check_engine()
        self.sync_engine()  # an ONNX Runtime step is built now, not in the first batch's first step
        log.info("loaded %s on %s", self.model_dir, device)

    @property
    def version(self) -> int:
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        # Every writer of the version (a load, an in-memory weight sync) has just changed the weights.
        self._version = value
        self.weights_epoch += 1

    def _check_engine(self) -> None:
        """Raise a ValueError naming `decode_engine` when it is unknown, not installed, or cannot decode
        this model as asked."""
        if self.decode_engine not in ("torch", "onnxruntime"):
            raise ValueError(f"decode_engine must be 'torch' or 'onnxruntime', got {self.decode_engine!r}")
        if self.decode_engine == "torch":
            return
        from agent_scaffold.policies.ort_step import import_ort, ort_unsupported

        import_ort()
        reason = ort_unsupported(self.model) if self._fast_decode else "fast_decode is off"
        if reason is not None:
            raise ValueError(f"decode_engine 'onnxruntime' cannot decode {self.model_dir}: {reason}; use "
                             "decode_engine 'torch'")
        if self.lookup_tokens:
            raise ValueError("decode_engine 'onnxruntime' feeds one position a row a step, so lookup_tokens must "
                             f"be 0 (got {self.lookup_tokens}); use decode_engine 'torch' for lookup drafts")

    def _writes_out(self) -> bool:
        from agent_scaffold.policies.llama_step import unsupported

        reason = unsupported(self.model)
        if reason is not None:
            log.info("decoding %s through the HF forward: %s", self.model_dir, reason)
        return reason is None

    def llama_step(self) -> Any:
        """The hand-written decode step `DecodeBatch` uses (`LlamaStep`, or `OrtStep` when `decode_engine` is
        "onnxruntime", rebuilt from the current weights whenever `weights_epoch` moved), or None (the HF
        forward). Built on
        first use, in the thread that decodes: fused weights allocated by another thread made every forward
        in the decoding thread 1.2-1.8x slower on the 2-core box (HF's own prefill too, through the weights
        that became views), built there they are faster. Call it under the policy's lock, as `DecodeBatch`
        runs."""
        if self.decode_engine == "onnxruntime":
            return self._ort_step()
        if self._fast_decode and self._llama_step is None:
            from agent_scaffold.policies.llama_step import LlamaStep

            self._llama_step = LlamaStep(self.model, import_torch())
        return self._llama_step

    def sync_engine(self) -> float:
        """Bring a decode engine that holds its own copy of the weights (`OrtStep`) up to the current ones
        now, rather than at the next generation; the seconds it took (0.0 when nothing was rebuilt). A
        weight sync calls it, so the rebuild is counted as the sync's time."""
        if self.decode_engine != "onnxruntime":
            return 0.0
        with self._lock:
            before = self._llama_step
            return self.engine_sync_s[-1] if self._ort_step() is not before else 0.0

    def _ort_step(self) -> Any:
        step = self._llama_step
        if step is None or step.epoch != self.weights_epoch:
            from agent_scaffold.policies.ort_step import OrtStep

            self._llama_step = None  # the old session's packed weights go before the new ones are made
            torch = import_torch()
            step = OrtStep(self.model, torch, threads=self.threads.ceiling if self.threads else 0,
                           epoch=self.weights_epoch)
            self._llama_step = step
            self.engine_sync_s.append(step.build_s)
        return step

    def _eos_ids(self) -> frozenset[int]:
        ids = {self.tokenizer.eos_token_id, turn_end_id(self.tokenizer)}  # e.g. Gemma's <end_of_turn>, not EOS
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
            if self.kv_store is not None:
                self.kv_store.clear()  # KV of the old weights would never be reused; free it now
        log.info("loaded weights version %d from %s", version, checkpoint_dir)

    def save_pretrained(self, target: str | Path) -> None:
        """Write the policy's weights, config and tokenizer as a HF checkpoint (what `load_weights` reads).
        Once `LlamaStep` is built the model's projection weights are views into its fused buffers; each
        is passed as a contiguous tensor of its own (no copy when it already is one), whatever layout the
        step's buffers take."""
        with self._lock:
            state = {k: v.contiguous() for k, v in self.model.state_dict().items()}  # no copy when already so
            self.model.save_pretrained(str(target), state_dict=state, safe_serialization=True)
        self.tokenizer.save_pretrained(str(target))

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        base = params.seed if params.seed is not None else random.randrange(2**62)
        return self.generate_rows(prompts, [params.with_(seed=base + i) for i in range(len(prompts))])

    def generate_rows(self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams]) -> list[Completion]:
        """One completion per prompt, all in one `DecodeBatch`, row i sampled with `params[i]`.

        Each row's seed is used as given (a random one when None), through its own `torch.Generator`, so a
        row's sample does not depend on its batch mates (up to float rounding of the padded forward).
        `BatchingPolicy` merges the requests of concurrent episodes through `decode_batch` instead.
        """
        if len(prompts) != len(params):
            raise ValueError(f"{len(prompts)} prompts but {len(params)} sampling params: pass one per prompt")
        rows = [list(p) for p in prompts]
        self.check_prompts(rows)
        if not rows:
            return []
        seeds = [p.seed if p.seed is not None else random.randrange(2**62) for p in params]
        out: list[Completion | None] = [None] * len(rows)
        with self._lock:  # weight swaps never interleave with a generation
            batch = self.decode_batch()
            batch.admit_many([(prompt, p, seed, i) for i, (prompt, p, seed) in enumerate(zip(rows, params, seeds))])
            while len(batch):
                for i, completion in batch.step():
                    out[i] = completion
        return out  # type: ignore[return-value]

    def decode_batch(self) -> Any:
        """A fresh `DecodeBatch` on this model and its KV store; drive it only while holding `_lock`."""
        return DecodeBatch(self, self.kv_store, self.lookup_tokens, self.lookup_rows)

    def check_prompts(self, prompts: Sequence[Sequence[int]]) -> None:
        """Raise a ValueError naming the first prompt that is empty or holds ids outside the vocabulary."""
        vocab = self.model.get_input_embeddings().num_embeddings
        for i, p in enumerate(prompts):
            if not p:
                raise ValueError(f"prompt {i} is empty: render at least the chat template's generation prompt")
            if min(p) < 0 or max(p) >= vocab:
                raise ValueError(f"prompt {i} holds token ids outside the model's vocabulary [0, {vocab}): "
                                 "encode it with this policy's tokenizer")
