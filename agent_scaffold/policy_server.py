"""`PolicyServer`: a small OpenAI-compatible HTTP server around a local policy (normally `HFPolicy`).

It implements the subset `OpenAIPolicy` uses, with vLLM's field names and defaults: POST /v1/completions
(token-id or text prompts, n, seed, max_tokens default 16, logprobs, return_token_ids,
return_tokens_as_token_ids, return_weight_versions), POST /v1/chat/completions, GET /v1/models,
GET /health, and weight sync for the learner: POST /reload_weights {"weights_path", "version"} and
GET /weight_info. Unlike `vllm serve` it never applies generation_config.json defaults: a field left out
means the neutral value. Requests are served by concurrent threads through a `BatchingPolicy`; around an
`HFPolicy` it batches continuously, so a client's request joins the running batch at the next decode step
and its rows return as soon as they finish (with `kv_cache_mb`, a client's next turn prefills only its new
tokens). A weight reload stops admission and waits for the running rows.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent_scaffold.policies.batching import BatchingPolicy
from agent_scaffold.policy import Completion, SamplingParams
from agent_scaffold.transcript import encode, render

log = logging.getLogger(__name__)


class BadRequest(ValueError):
    """The request is malformed; answered with HTTP 400 and this message."""


def sampling_from_request(body: dict[str, Any]) -> SamplingParams:
    def num(name: str, default: float) -> Any:
        value = body.get(name)
        return default if value is None else value

    stop = body.get("stop") or ()
    try:
        return SamplingParams(
            temperature=float(num("temperature", 1.0)), top_p=float(num("top_p", 1.0)),
            top_k=max(0, int(num("top_k", 0))), min_p=float(num("min_p", 0.0)),
            repetition_penalty=float(num("repetition_penalty", 1.0)),
            max_new_tokens=int(num("max_tokens", 16)), seed=body.get("seed"),
            stop=(stop,) if isinstance(stop, str) else tuple(stop),
            stop_token_ids=tuple(body.get("stop_token_ids") or ()))
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"bad sampling parameters: {exc}") from None


class PolicyServer:
    """Serves `policy` on host:port (port 0 picks a free one; see `.port`).

    `policy` is wrapped in a `BatchingPolicy(policy, max_batch, max_wait_s)` unless it already is one;
    `max_batch=1` samples one request at a time.
    """

    def __init__(self, policy: Any, host: str = "127.0.0.1", port: int = 8000, model_name: str | None = None,
                 max_batch: int = 8, max_wait_s: float = 0.02) -> None:
        self.model_name = model_name or str(getattr(policy, "model_dir", "policy"))
        self.policy = policy if isinstance(policy, BatchingPolicy) else BatchingPolicy(policy, max_batch, max_wait_s)
        self._owns_batching = self.policy is not policy
        server = self

        class Handler(_Handler):
            owner = server

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def serve_forever(self) -> None:
        log.info("serving %s at %s", self.model_name, self.url)
        self.httpd.serve_forever()

    def start(self) -> threading.Thread:
        """Serve in a daemon thread (tests, embedding); stop with `shutdown`."""
        t = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        t.start()
        return t

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._owns_batching:
            self.policy.close()

    # --- endpoint logic (plain dicts in, plain dicts out) -------------------------------------------

    def _generate(self, prompts: list[list[int]], n: int, params: SamplingParams) -> list[Completion]:
        flat = [p for p in prompts for _ in range(n)]  # prompt-major, as vLLM orders choices
        return self.policy.generate(flat, params)

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompts = self._prompts(body.get("prompt"))
        n = int(body.get("n") or 1)
        params = sampling_from_request(body)
        outs = self._generate(prompts, n, params)
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        choices = []
        for i, c in enumerate(outs):
            choice: dict[str, Any] = {"index": i, "text": c.text, "finish_reason": c.finish_reason, "stop_reason": None}
            if body.get("return_token_ids"):
                choice["token_ids"] = list(c.token_ids)
                choice["prompt_token_ids"] = prompts[i // n]
            if body.get("logprobs") is not None:
                tokens = [f"token_id:{t}" if as_ids else self._piece(t) for t in c.token_ids]
                choice["logprobs"] = {"tokens": tokens, "token_logprobs": list(c.logprobs),
                                      "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, c.logprobs)]}
            if body.get("return_weight_versions"):
                choice["weight_versions"] = [{"version": c.policy_version, "start": 0, "end": len(c.token_ids)}]
            choices.append(choice)
        return self._envelope("text_completion", choices, prompts, outs)

    def chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("'messages' must be a non-empty list of {role, content}")
        prompt = encode(self.policy.tokenizer, render(self.policy.tokenizer, messages, True))
        n = int(body.get("n") or 1)
        outs = self._generate([prompt], n, sampling_from_request(body))
        choices = []
        for i, c in enumerate(outs):
            choice: dict[str, Any] = {"index": i, "message": {"role": "assistant", "content": c.text},
                                      "finish_reason": c.finish_reason}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": self._piece(t), "logprob": lp}
                                                  for t, lp in zip(c.token_ids, c.logprobs)]}
            if body.get("return_token_ids"):
                choice["token_ids"] = list(c.token_ids)
            choices.append(choice)
        out = self._envelope("chat.completion", choices, [prompt], outs)
        if body.get("return_token_ids"):
            out["prompt_token_ids"] = prompt
        return out

    def reload_weights(self, body: dict[str, Any]) -> dict[str, Any]:
        path, version = body.get("weights_path"), body.get("version")
        if not path or version is None:
            raise BadRequest("reload_weights needs {\"weights_path\": DIR, \"version\": N}")
        self.policy.load_weights(path, int(version))  # waits for the running batch
        return {"version": self.policy.version}

    def _prompts(self, prompt: Any) -> list[list[int]]:
        tok = self.policy.tokenizer
        if isinstance(prompt, str):
            return [list(tok.encode(prompt, add_special_tokens=False))]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return [prompt]
        if isinstance(prompt, list) and prompt and all(isinstance(p, list) and p and all(isinstance(t, int) for t in p)
                                                       for p in prompt):
            return prompt
        if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
            return [list(tok.encode(p, add_special_tokens=False)) for p in prompt]
        raise BadRequest("'prompt' must be a string, a list of strings, a list of token ids or a list of lists "
                         "of token ids (non-empty)")

    def _piece(self, token_id: int) -> str:
        return self.policy.tokenizer.convert_ids_to_tokens(token_id)

    def _envelope(self, kind: str, choices: list, prompts: list, outs: list[Completion]) -> dict[str, Any]:
        completion_tokens = sum(len(c.token_ids) for c in outs)
        prompt_tokens = sum(len(p) for p in prompts)
        return {"id": f"cmpl-{uuid.uuid4().hex[:16]}", "object": kind, "created": int(time.time()),
                "model": self.model_name, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}


class _Handler(BaseHTTPRequestHandler):
    owner: PolicyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": "BadRequestError" if status == 400 else "Error",
                                      "code": status}})

    def do_GET(self) -> None:
        srv = self.owner
        if self.path.rstrip("/") == "/health":
            self._send(200, {"status": "ok"})
        elif self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": srv.model_name, "object": "model",
                                                         "owned_by": "selfplay"}]})
        elif self.path.rstrip("/") == "/weight_info":
            self._send(200, {"weight_version": srv.policy.version})
        else:
            self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:
        routes = {"/v1/completions": self.owner.completions, "/v1/chat/completions": self.owner.chat_completions,
                  "/reload_weights": self.owner.reload_weights}
        handler = routes.get(self.path.rstrip("/"))
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if handler is None:
                self._error(404, f"no route POST {self.path}; try {', '.join(routes)}")
            elif not isinstance(body, dict):
                self._error(400, "the request body must be a JSON object")
            else:
                self._send(200, handler(body))
        except (BadRequest, json.JSONDecodeError) as exc:
            self._error(400, str(exc))
        except Exception as exc:  # keep the server alive; the client sees the failure and may retry
            log.exception("request to %s failed", self.path)
            self._error(500, f"{exc.__class__.__name__}: {exc}")
