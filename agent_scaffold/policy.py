"""The `Policy` protocol (token in, token out) and the sampling settings every backend honours.

Training rollouts sample from the untruncated distribution (`TRAINING`): top-p, top-k, min-p and
repetition penalty all off, because any truncation makes the behaviour logprobs disagree with the learner's
recomputed logprobs and corrupts the importance ratio. A temperature is allowed (`rollout.temperature`):
the learner divides its logits by the same one. Evaluation decodes with SSR's setting (`SSR_SAMPLING`);
the held-out benchmark also decodes greedily (`GREEDY`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion. Defaults are plain ancestral sampling at temperature 1."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy."""
    top_p: float = 1.0
    """Nucleus mass; 1.0 is off."""
    top_k: int = 0
    """Keep the k most likely tokens; 0 is off."""
    min_p: float = 0.0
    """Drop tokens below min_p times the top probability; 0.0 is off."""
    repetition_penalty: float = 1.0
    """CTRL-style penalty on already-seen tokens; 1.0 is off."""
    max_new_tokens: int = 512
    """Hard cap on sampled tokens (finish_reason "length" when hit)."""
    seed: int | None = None
    """Per-request seed; prompt i of a batch uses seed + i, so results do not depend on batching."""
    stop: tuple[str, ...] = ()
    """Stop strings: generation ends once the text contains one (the string is cut from `text`, its
    tokens stay in `token_ids`, as in vLLM)."""
    stop_token_ids: tuple[int, ...] = ()
    """Token ids that end generation in addition to the model's EOS; they are kept in `token_ids`."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.min_p < 0 or self.repetition_penalty <= 0:
            raise ValueError("top_k and min_p must be >= 0 and repetition_penalty > 0")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    def with_(self, **changes: Any) -> SamplingParams:
        return replace(self, **changes)


TRAINING = SamplingParams()
"""Rollouts for RL: untruncated sampling (a run sets its temperature from `rollout.temperature`; with no cut
of the distribution the learner recomputes the same logprobs)."""
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=1024)
"""Greedy decoding (the held-out learning benchmark's deterministic arm)."""
SSR_SAMPLING = SamplingParams(temperature=1.0, top_p=0.95)
"""SSR's evaluation decoding, the one evaluation setting (SWE-bench runs and `selfplay solve`): temperature
1.0, top-p 0.95."""


@dataclass(frozen=True)
class Completion:
    """One sampled continuation."""

    token_ids: tuple[int, ...]
    """Sampled ids, verbatim, including a final EOS/stop token when generation stopped on one."""
    logprobs: tuple[float, ...]
    """Logprob of each sampled id under the distribution it was sampled from."""
    text: str
    """Decoded text (a matched stop string is cut off)."""
    finish_reason: FinishReason
    """"stop" (EOS, stop id or stop string) or "length" (max_new_tokens or context end)."""
    policy_version: int
    """Weights version that sampled it."""
    batch_sizes: tuple[int, ...] = field(default=(), compare=False)
    """How many rows were decoding together when each token was sampled (empty when the backend does not
    say); the run's batch-size metrics come from these."""
    batch_fill: float = field(default=0.0, compare=False)
    """Sum over the sampled tokens of the decode batch's KV fill when each was sampled (the share of the
    attended columns that were the rows' own, not another row's padding; 0 when the backend does not say)."""
    prefill_tokens: int = field(default=0, compare=False)
    """Prompt positions the engine computed for this call (the rest came from its KV store); 0 when the
    backend does not say."""
    prefill_s: float = field(default=0.0, compare=False)
    """Engine seconds spent prefilling this call's prompt (its share of a prefill forward shared by rows)."""
    decode_s: float = field(default=0.0, compare=False)
    """This call's share of the engine's decode steps: each step's seconds divided by the rows in it, so
    the shares of all calls add up to the engine's decoding time."""
    drafted: int = field(default=0, compare=False)
    """Tokens the engine drafted for this call by prompt lookup (speculative decoding; 0 when off)."""
    drafts_kept: int = field(default=0, compare=False)
    """Of those, the tokens its verification kept (each kept token saved the call a decode step)."""

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.logprobs)} logprobs")


@runtime_checkable
class Policy(Protocol):
    """A language model that continues token prompts."""

    tokenizer: Any
    """The HF tokenizer whose chat template renders prompts (None for chat-only API models)."""
    version: int
    """Current weights version."""

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One completion per prompt, in order."""
        ...
