"""`Transcript`: the token-exact record of one episode as it grows.

The prompt is rendered once with the tokenizer's own chat template. After that the sequence only grows:
sampled ids are appended verbatim (never re-tokenized, so the learner's recomputed logprobs line up with
the behaviour logprobs), and each observation is appended as the tokens of the chat-template *delta*
that follows an assistant message: the end-of-turn glue, the observation message, and the next
generation prompt. Only that delta is tokenized. When a turn ended without the end-of-turn token (it hit
the token limit) the closing token is appended as glue with loss mask 0, so the next turn still sees a
well-formed conversation.

Compaction (optional, `compact`) starts a new *segment*: a fresh context made of the same prompt ids,
every earlier turn's sampled ids verbatim (now loss mask 0: they were trained in the segment that
sampled them) and observation deltas, where all but the newest observations are replaced by a short
marker. The segment is appended after the previous one, so `input_ids` is the concatenation of segments
and every sampled token appears exactly once with mask 1, inside the segment that conditioned it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from agent_scaffold.chat_format import MARK, chat_format
from agent_scaffold.policy import Completion

_DUMMY = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
ELIDED = "[observation of turn {turn} elided to save context]"
"""The text that replaces an old observation in a compacted context (turn is 1-based)."""


def render(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
    """`messages` in the chat template's text (a system message folded into the first user message where
    the template has no system role)."""
    return tokenizer.apply_chat_template(chat_format(tokenizer).messages(messages),
                                         add_generation_prompt=add_generation_prompt, tokenize=False)


def encode(tokenizer: Any, text: str) -> list[int]:
    """Tokens of rendered template text (special tokens in it are parsed; no BOS is added)."""
    return list(tokenizer.encode(text, add_special_tokens=False))


@dataclass
class _Turn:
    """One assistant turn and the observation that answered it (the pieces a compacted context reuses)."""

    ids: list[int]
    closed: bool
    obs_ids: list[int] | None = None
    marker_ids: list[int] | None = None  # the elision marker's delta, tokenized on first need
    elided: bool = False  # once elided, an observation stays elided in every later segment


class Transcript:
    """Token ids, loss mask, logprobs, turn spans, segments and the readable message list of one episode.

    `input_ids` (and mask, logprobs, turn spans) cover the whole episode, all segments concatenated;
    `context_ids` and `len()` are the current segment, the context the policy continues.
    """

    def __init__(self, tokenizer: Any, messages: list[dict[str, str]], observation_role: str = "user") -> None:
        self.format = chat_format(tokenizer)
        self.tokenizer = tokenizer
        self.observation_role = observation_role
        self.messages: list[dict[str, str]] = [dict(m) for m in messages]
        self._prompt_ids = encode(tokenizer, render(tokenizer, self.messages, True))
        self.input_ids: list[int] = list(self._prompt_ids)
        self.loss_mask: list[int] = [0] * len(self.input_ids)
        self.logprobs: list[float] = [0.0] * len(self.input_ids)
        self.turn_spans: list[tuple[int, int]] = []
        self.versions: list[int] = []
        self.segment_starts: list[int] = [0]
        self._turns: list[_Turn] = []
        self._closed = True  # did the last assistant turn end with the end-of-turn token?

    def __len__(self) -> int:
        """Tokens of the current context (the last segment)."""
        return len(self.input_ids) - self.segment_starts[-1]

    @property
    def context_ids(self) -> list[int]:
        """The ids the policy continues next: the current segment."""
        start = self.segment_starts[-1]
        return self.input_ids if start == 0 else self.input_ids[start:]

    @property
    def segments(self) -> list[tuple[int, int]]:
        """[start, end) of each segment in `input_ids`."""
        bounds = self.segment_starts + [len(self.input_ids)]
        return list(pairwise(bounds))

    def add_completion(self, completion: Completion) -> str:
        """Append sampled ids (mask 1) and return the assistant message: the text they decode to, after the
        reasoning section the generation prompt opened (`ChatFormat.reply_opening`), if any."""
        ids = list(completion.token_ids)
        start = len(self.input_ids)
        self.input_ids += ids
        self.loss_mask += [1] * len(ids)
        self.logprobs += list(completion.logprobs)
        self.turn_spans.append((start, len(self.input_ids)))
        self.versions.append(completion.policy_version)
        stopped = completion.finish_reason == "stop" and bool(ids) and ids[-1] in self.format.stop_ids
        # Only the template's own end-of-turn token closes the turn; a turn that stopped on another (EOS
        # where the template ends turns with <|eot_id|>) gets the template's closing glued after it.
        self._closed = stopped and ids[-1] == self.format.turn_end_id
        self._turns.append(_Turn(ids, self._closed))
        content_ids = ids[:-1] if stopped else ids
        # A generation prompt that opens the reasoning section leaves its `<think>` out of the sampled ids;
        # the message is the whole turn, so it parses (and reads in reports) as the model's reply.
        content = self.format.reply_opening + self.tokenizer.decode(content_ids, skip_special_tokens=False)
        self.messages.append({"role": "assistant", "content": content})
        return content

    def observation_ids(self, text: str, closed: bool | None = None) -> list[int]:
        """Tokens that would follow the last assistant turn (or one that ended with/without the end-of-turn
        token, `closed`) for an observation `text` (not appended)."""
        full = render(self.tokenizer, _DUMMY + [{"role": "assistant", "content": MARK},
                                                {"role": self.observation_role, "content": text}], True)
        tail = full[full.index(MARK) + len(MARK):]
        end = self.format.turn_end
        if (self._closed if closed is None else closed) and end and tail.startswith(end):
            tail = tail[len(end):]  # the sampled turn already holds the end-of-turn token
        return encode(self.tokenizer, tail)

    def add_observation(self, text: str, ids: list[int] | None = None) -> None:
        """Append an observation (mask 0); `ids` from `observation_ids` avoids tokenizing twice."""
        ids = self.observation_ids(text) if ids is None else ids
        self._append_context(ids)
        self._turns[-1].obs_ids = ids
        self.messages.append({"role": self.observation_role, "content": text})
        self._closed = True

    def compact(self, text: str, ids: list[int], keep: int, limit: int) -> list[int] | None:
        """Start a new segment that answers the last turn with observation `text` (`ids` from
        `observation_ids`), eliding all but the `keep` newest observations (the new one counts; fewer are
        kept if needed, never fewer than the new one). Commits and returns the 1-based turns newly elided
        when the new context has at most `limit` tokens; otherwise changes nothing and returns None."""
        pending = len(self._turns) - 1  # the turn `text` answers; never elided
        for k in range(max(keep, 1), 0, -1):
            cut = pending - (k - 1)  # observations of turns [0, cut) are elided, unless shorter than the marker
            elide = {i for i, t in enumerate(self._turns[:max(cut, 0)])
                     if t.elided or len(self._marker_ids(i)) < len(t.obs_ids)}  # type: ignore[arg-type]
            context = list(self._prompt_ids)
            for i, turn in enumerate(self._turns):
                context += turn.ids
                if i == pending:
                    context += ids
                elif i in elide or turn.elided:
                    context += self._marker_ids(i)
                else:
                    context += turn.obs_ids  # type: ignore[operator]
            if len(context) > limit:
                continue
            newly = sorted(i + 1 for i in elide if not self._turns[i].elided)
            for i in elide:
                self._turns[i].elided = True
            self.segment_starts.append(len(self.input_ids))
            self._append_context(context)
            self._turns[pending].obs_ids = ids
            self.messages.append({"role": self.observation_role, "content": text})
            self._closed = True
            return newly
        return None

    def _marker_ids(self, i: int) -> list[int]:
        turn = self._turns[i]
        if turn.marker_ids is None:
            turn.marker_ids = self.observation_ids(ELIDED.format(turn=i + 1), turn.closed)
        return turn.marker_ids

    def _append_context(self, ids: list[int]) -> None:
        self.input_ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
