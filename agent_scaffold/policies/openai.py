"""`OpenAIPolicy`: a policy served over HTTP by `vllm serve`, SGLang or `selfplay serve-policy`.

Token mode (training): POST /v1/completions with the prompt as token ids, `return_token_ids`,
`return_tokens_as_token_ids`, `logprobs=0`, an explicit `max_tokens` (vLLM defaults to 16) and every
sampling field sent explicitly, because vLLM fills omitted ones from the model's generation_config.json
(e.g. top_k=20) and that silently truncates the sampling distribution. Start vLLM with
`--generation-config vllm` as well. Chat mode (`chat()`): /v1/chat/completions for API models in evaluation.

Prompts of one `generate` call go out as concurrent requests (one per prompt, prompt i with seed + i, so
results match `HFPolicy` with the same seed); each request is retried with exponential backoff on
connection errors, timeouts, 429 and 5xx.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from agent_scaffold.errors import PolicyError
from agent_scaffold.policies.base_url import base_url_problem
from agent_scaffold.policy import Completion, SamplingParams
from repos.retry import retry

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class _Transient(Exception):
    """A failure worth another try: the connection, a timeout, or a RETRY_STATUS answer."""


def parse_token_ids(choice: dict[str, Any]) -> list[int]:
    """Sampled ids of a completion choice: `token_ids`, else the "token_id:N" strings of logprobs.tokens."""
    if choice.get("token_ids") is not None:
        return [int(t) for t in choice["token_ids"]]
    tokens = (choice.get("logprobs") or {}).get("tokens")
    if not tokens or not all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        raise PolicyError("the server returned neither token_ids nor 'token_id:N' tokens; use vLLM >= 0.10.2 "
                          "(return_token_ids) or start it with --return-tokens-as-token-ids")
    return [int(t.split(":", 1)[1]) for t in tokens]


class OpenAIPolicy:
    """HTTP client policy. `tokenizer`: an HF tokenizer, or a path/hub id to load one (token mode)."""

    def __init__(self, base_url: str, model: str | None = None, *, tokenizer: Any = None,
                 api_key: str | None = None, timeout: float = 600.0, max_retries: int = 4,
                 backoff: float = 1.0, concurrency: int = 8) -> None:
        if problem := base_url_problem(base_url):
            raise PolicyError(f"server base URL {problem}")
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self.max_retries, self.backoff, self.concurrency = max_retries, backoff, concurrency
        self.model = model or self._first_model()
        self.tokenizer = self._load_tokenizer(tokenizer)
        self.version = self._weight_version()

    # --- plumbing ------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        def once() -> dict[str, Any]:
            try:
                r = self.client.request(method, path, json=body)
            except httpx.TransportError as exc:
                raise _Transient(f"{exc.__class__.__name__}: {exc}") from exc
            if r.status_code in RETRY_STATUS:
                raise _Transient(f"HTTP {r.status_code}: {r.text[:500]}")
            if r.status_code >= 400:
                raise PolicyError(f"{method} {self.base_url}{path} failed with HTTP {r.status_code}: {r.text[:1000]}")
            return r.json()

        try:
            return retry(once, attempts=self.max_retries + 1, transient=lambda exc: isinstance(exc, _Transient),
                         backoff=lambda k: self.backoff * 2 ** (k - 1) * (0.5 + random.random()),
                         what=f"{method} {path}")
        except _Transient as exc:
            raise PolicyError(f"{method} {self.base_url}{path} failed after {self.max_retries + 1} attempts: "
                              f"{exc}; is the server up?") from None

    def _first_model(self) -> str:
        data = self._request("GET", "/v1/models").get("data") or []
        if not data:
            raise PolicyError(f"{self.base_url}/v1/models lists no model; pass model=NAME")
        return data[0]["id"]

    def _load_tokenizer(self, tokenizer: Any) -> Any:
        if tokenizer is not None and not isinstance(tokenizer, (str, Path)):
            return tokenizer
        source = tokenizer or (self.model if Path(self.model).is_dir() else None)
        if source is None:
            return None  # chat mode only: a hosted API model has no local tokenizer
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:
            raise ImportError("token mode needs an HF tokenizer: pip install 'selfplay-swe[train]'") from exc
        try:
            return AutoTokenizer.from_pretrained(str(source))
        except (OSError, ValueError) as exc:  # a hub id without the hub, a folder without tokenizer files
            why = " ".join(str(exc).split())[:300]
            raise PolicyError(f"cannot load a tokenizer from {str(source)!r} ({why}); name a local folder that "
                              "holds the served checkpoint's tokenizer files") from None

    def _weight_version(self) -> int:
        try:
            r = self.client.get("/weight_info")
            return int(r.json().get("weight_version", 0)) if r.status_code == 200 else 0
        except (httpx.HTTPError, ValueError, TypeError):
            return 0  # servers without weight sync (API models, vLLM without dev mode)

    @staticmethod
    def _sampling_fields(params: SamplingParams, seed: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k,
                                "min_p": params.min_p, "repetition_penalty": params.repetition_penalty,
                                "presence_penalty": 0.0, "frequency_penalty": 0.0,
                                "max_tokens": params.max_new_tokens}
        if seed is not None:
            body["seed"] = seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.stop_token_ids:
            body["stop_token_ids"] = list(params.stop_token_ids)
        return body

    def _map(self, fn: Any, items: list[Any]) -> list[Any]:
        if len(items) <= 1:
            return [fn(*item) for item in items]
        with ThreadPoolExecutor(min(self.concurrency, len(items))) as pool:
            return list(pool.map(lambda item: fn(*item), items))

    # --- the Policy protocol --------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        seeds = [None if params.seed is None else params.seed + i for i in range(len(prompts))]
        return self._map(self._complete, [(list(p), params, s) for p, s in zip(prompts, seeds)])

    def _complete(self, prompt: list[int], params: SamplingParams, seed: int | None) -> Completion:
        body = {"model": self.model, "prompt": prompt, "logprobs": 0, "return_token_ids": True,
                "return_tokens_as_token_ids": True, "return_weight_versions": True, "n": 1,
                **self._sampling_fields(params, seed)}
        choice = self._request("POST", "/v1/completions", body)["choices"][0]
        ids = parse_token_ids(choice)
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        if logprobs is None or len(logprobs) != len(ids):
            raise PolicyError(f"{self.base_url} returned {len(ids)} tokens but logprobs {logprobs!r:.200}")
        try:  # the oldest weights that sampled any of these tokens
            versions = [int(wv["version"]) for wv in choice.get("weight_versions") or []]
        except (KeyError, TypeError, ValueError):
            versions = []  # vLLM versions may be arbitrary strings; keep the client's
        version = min(versions) if versions else self.version
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Completion(tuple(ids), tuple(float(x) for x in logprobs), choice.get("text") or "", finish, version)

    def chat(self, conversations: Sequence[list[dict[str, str]]], params: SamplingParams) -> list[Completion]:
        """Chat-mode completions (API models): one per conversation; token_ids are empty unless the server
        returns them."""
        seeds = [None if params.seed is None else params.seed + i for i in range(len(conversations))]
        return self._map(self._chat_one, [(list(c), params, s) for c, s in zip(conversations, seeds)])

    def _chat_one(self, messages: list[dict[str, str]], params: SamplingParams, seed: int | None) -> Completion:
        body = {"model": self.model, "messages": messages, "logprobs": True, "return_token_ids": True,
                **self._sampling_fields(params, seed)}
        choice = self._request("POST", "/v1/chat/completions", body)["choices"][0]
        content = ((choice.get("logprobs") or {}).get("content")) or []
        ids = tuple(int(t) for t in choice.get("token_ids") or ())
        logprobs = tuple(float(c["logprob"]) for c in content) if len(content) == len(ids) else (0.0,) * len(ids)
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Completion(ids, logprobs, choice["message"].get("content") or "", finish, self.version)

    def close(self) -> None:
        self.client.close()
