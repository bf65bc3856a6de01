"""`Transcript`: the token-exact record of one episode as it grows.

The prompt is rendered once with the tokenizer's own chat template. After that the sequence only grows:
sampled ids are appended verbatim (never re-tokenized, so the learner's recomputed logprobs line up with
the behaviour logprobs), and each observation is appended as the tokens of the chat-template *delta*
that follows an assistant message: the end-of-turn glue, the observation message, and the next
generation prompt. Only that delta is tokenized. When a turn ended without the end-of-turn token (it hit
the token limit) the closing token is appended as glue with loss mask 0, so the next turn still sees a
well-formed conversation.
"""

from __future__ import annotations

from typing import Any

from agent_scaffold.policy import Completion

_MARK = "\u2402TURN-MARK\u2402"  # a string no template transforms, to locate the assistant content
_DUMMY = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def render(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)


def encode(tokenizer: Any, text: str) -> list[int]:
    """Tokens of rendered template text (special tokens in it are parsed; no BOS is added)."""
    return list(tokenizer.encode(text, add_special_tokens=False))


class Transcript:
    """Token ids, loss mask, logprobs, turn spans and the readable message list of one episode."""

    def __init__(self, tokenizer: Any, messages: list[dict[str, str]], observation_role: str = "user") -> None:
        if tokenizer is None or getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("token-exact trajectories need a tokenizer with a chat template; pass the policy's "
                             "HF tokenizer (OpenAIPolicy(tokenizer=DIR) for a remote server)")
        self.tokenizer = tokenizer
        self.observation_role = observation_role
        self.messages: list[dict[str, str]] = [dict(m) for m in messages]
        self.input_ids: list[int] = encode(tokenizer, render(tokenizer, self.messages, True))
        self.loss_mask: list[int] = [0] * len(self.input_ids)
        self.logprobs: list[float] = [0.0] * len(self.input_ids)
        self.turn_spans: list[tuple[int, int]] = []
        self.versions: list[int] = []
        self._closed = True  # did the last assistant turn end with the end-of-turn token?

    def __len__(self) -> int:
        return len(self.input_ids)

    def add_completion(self, completion: Completion) -> str:
        """Append sampled ids (mask 1) and return the assistant message text they decode to."""
        ids = list(completion.token_ids)
        start = len(self.input_ids)
        self.input_ids += ids
        self.loss_mask += [1] * len(ids)
        self.logprobs += list(completion.logprobs)
        self.turn_spans.append((start, len(self.input_ids)))
        self.versions.append(completion.policy_version)
        eos = self.tokenizer.eos_token_id
        self._closed = completion.finish_reason == "stop" and bool(ids) and ids[-1] == eos
        content_ids = ids[:-1] if self._closed else ids
        content = self.tokenizer.decode(content_ids, skip_special_tokens=False)
        self.messages.append({"role": "assistant", "content": content})
        return content

    def observation_ids(self, text: str) -> list[int]:
        """Tokens that would follow the last assistant turn for an observation `text` (not appended)."""
        full = render(self.tokenizer, _DUMMY + [{"role": "assistant", "content": _MARK},
                                                {"role": self.observation_role, "content": text}], True)
        tail = full[full.index(_MARK) + len(_MARK):]
        end = self.tokenizer.eos_token
        if self._closed and end and tail.startswith(end):
            tail = tail[len(end):]  # the sampled turn already holds the end-of-turn token
        return encode(self.tokenizer, tail)

    def add_observation(self, text: str, ids: list[int] | None = None) -> None:
        """Append an observation (mask 0); `ids` from `observation_ids` avoids tokenizing twice."""
        ids = self.observation_ids(text) if ids is None else ids
        self.input_ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.messages.append({"role": self.observation_role, "content": text})
        self._closed = True
