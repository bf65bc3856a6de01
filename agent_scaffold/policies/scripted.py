"""`ScriptedPolicy`: replays a fixed list of actions, one per call. A real backend for tests and demos.

With a tokenizer, each action's text is tokenized (this is the one place text becomes "sampled" ids, since
the script *is* the sampler) and the chat template's end-of-turn id (`ChatFormat.turn_end_id`; EOS for a
tokenizer without a template) is appended, as a model ending its turn would;
every logprob is 0.0 (the script chose the action with probability 1). Under a template whose generation
prompt opens a reasoning section (`ChatFormat.reply_opening`), each reply first closes it, empty, as Qwen3's
non-thinking prompt does. Without a tokenizer the ids are the UTF-8 bytes, enough for loops that never
render a chat template.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from agent_scaffold.chat_format import chat_format, turn_end_id
from agent_scaffold.policy import Completion, SamplingParams


class ScriptExhausted(IndexError):
    """The policy was asked for more turns than it has actions."""


class ScriptedPolicy:
    """Returns actions[0], actions[1], ... on successive completions, whatever the prompt."""

    def __init__(self, actions: list[str], tokenizer: Any = None, version: int = 0) -> None:
        self.actions = list(actions)
        self.tokenizer = tokenizer
        self.version = version
        self._next = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return len(self.actions) - self._next

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        out = []
        for _ in prompts:
            with self._lock:
                if self._next >= len(self.actions):
                    raise ScriptExhausted(f"scripted policy has only {len(self.actions)} actions; "
                                          "add more, or lower the episode's max_turns")
                text = self.actions[self._next]
                self._next += 1
            out.append(self._complete(text, params))
        return out

    def _complete(self, text: str, params: SamplingParams) -> Completion:
        if self.tokenizer is None:
            ids = list(text.encode())
            eos: list[int] = []
        else:
            if getattr(self.tokenizer, "chat_template", None):
                text = chat_format(self.tokenizer).scripted_reply(text)
            ids = list(self.tokenizer.encode(text, add_special_tokens=False))
            end = turn_end_id(self.tokenizer)
            eos = [end] if end is not None else []
        finish = "stop"
        if len(ids) + len(eos) > params.max_new_tokens:  # a script obeys the token budget like a model
            ids, eos, finish = ids[: params.max_new_tokens], [], "length"
            text = self.tokenizer.decode(ids) if self.tokenizer is not None else bytes(ids).decode(errors="replace")
        all_ids = tuple(ids + eos)
        return Completion(all_ids, (0.0,) * len(all_ids), text, finish, self.version)
