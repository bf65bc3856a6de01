"""`VLLMPolicy`: the in-process vLLM engine (GPU only), token in / token out.

Sampling parameters are always passed explicitly (an explicit `SamplingParams` ignores the model's
generation_config.json), with `logprobs=0` so each sampled token's logprob comes back, and the engine is
built with `logprobs_mode="processed_logprobs"` so those logprobs belong to the distribution actually
sampled from. `load_weights` reloads a saved HF checkpoint through `collective_rpc("reload_weights")`.
Not exercised in CPU CI (marker `gpu`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policy import Completion, SamplingParams

log = logging.getLogger(__name__)


class VLLMPolicy:
    def __init__(self, model_dir: str | Path | None = None, **engine_kwargs: Any) -> None:
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ImportError("the vllm policy needs vLLM and a CUDA GPU: pip install 'selfplay-swe[gpu]'") from exc
        if model_dir is None:
            model_dir = default_model_dir()
        self.model_dir = str(model_dir)
        engine_kwargs.setdefault("generation_config", "vllm")
        engine_kwargs.setdefault("logprobs_mode", "processed_logprobs")
        self.llm = LLM(model=self.model_dir, **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.version = 0

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        from vllm import SamplingParams as VSP
        from vllm.inputs import TokensPrompt

        sps = [VSP(temperature=params.temperature, top_p=params.top_p, top_k=params.top_k, min_p=params.min_p,
                   repetition_penalty=params.repetition_penalty, max_tokens=params.max_new_tokens,
                   seed=None if params.seed is None else params.seed + i, stop=list(params.stop) or None,
                   stop_token_ids=list(params.stop_token_ids) or None, logprobs=0)
               for i in range(len(prompts))]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], sps, use_tqdm=False)
        result = []
        for out in outs:
            o = out.outputs[0]
            ids = tuple(o.token_ids)
            lps = tuple(float(step[t].logprob) for step, t in zip(o.logprobs, ids))
            finish = "length" if o.finish_reason == "length" else "stop"
            result.append(Completion(ids, lps, o.text, finish, self.version))
        return result

    def load_weights(self, checkpoint_dir: str | Path, version: int) -> None:
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(checkpoint_dir)})
        self.llm.reset_prefix_cache()
        self.version = int(version)
        log.info("vLLM reloaded weights version %d from %s", version, checkpoint_dir)
