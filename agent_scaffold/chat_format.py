"""`ChatFormat`: what a tokenizer's chat template does at the end of an assistant turn, read from the
template itself.

A model ends its turn with the token its template closes assistant messages with. That is the
tokenizer's EOS for ChatML models (SmolLM2, Qwen), but not for every family: Gemma closes a turn with
`<end_of_turn>` (EOS is `<eos>`), Phi-3 with `<|end|>` (EOS is `<|endoftext|>`), and Llama-3 with
`<|eot_id|>`, whose EOS is `<|end_of_text|>` in the configs first published. Taking EOS for the end of
a turn there makes scripted demonstrations end their turns with a token the template never puts there,
and makes the transcript glue a second end-of-turn token after every sampled one: sequences that differ
from the template's render, so the policy trains on text it never sees at inference.

Some templates (Gemma 2, Mistral's first) refuse a system message; for them the system prompt is folded
into the first user message, as Gemma 3's template does on its own.

Some reasoning templates (DeepSeek-R1's distills, Qwen3's Thinking-2507 models) end the generation prompt
inside an opened `<think>` section: the model's reply holds the reasoning, then `</think>`, then the answer,
and never the opening tag. `ChatFormat.reply_opening` is that opened text; the transcript puts it before
each reply it decodes, so a reply reads as the model's whole turn (and parses as one whose reasoning comes
first), and the scripted policy closes it before its action, as a model that reasons no further would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_scaffold.actions import THINK, THINK_END

MARK = "\u2402TURN-MARK\u2402"
"""A string no template transforms, to locate an assistant message's content in a render."""
_NEXT = "\u2402NEXT-MARK\u2402"


@dataclass(frozen=True)
class ChatFormat:
    """The end-of-turn facts of one tokenizer's chat template."""

    turn_end_id: int
    """The token the template closes an assistant message with (EOS when that is not a special token)."""
    turn_end: str
    """That token's text, as the template writes it."""
    stop_ids: frozenset[int]
    """Tokens that end a sampled turn: the turn end and EOS (a model may emit either)."""
    system_role: bool
    """Whether the template renders a system message; when not, `messages` folds it into the first user's."""
    reply_opening: str = ""
    """The reasoning section the generation prompt opens and leaves open (`<think>` and what follows it, as
    "<think>\n"), which every reply continues; empty for a template that opens none or closes it."""

    def scripted_reply(self, text: str) -> str:
        """The reply a script sends for the action `text`: after closing, empty, the reasoning section the
        generation prompt opened (as Qwen3's non-thinking prompt closes it), if any."""
        return f"\n{THINK_END}\n\n{text}" if self.reply_opening else text

    def messages(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """`messages` as this template accepts them: a leading system message folded into the first user
        message when the template has no system role."""
        if self.system_role or not messages or messages[0]["role"] != "system":
            return messages
        system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
        if rest and rest[0]["role"] == "user":
            rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
            return rest
        return [{"role": "user", "content": system}, *rest]


_ATTR = "_selfplay_chat_format"


def chat_format(tokenizer: Any) -> ChatFormat:
    """The `ChatFormat` of `tokenizer`'s chat template, kept on the tokenizer until its template changes."""
    template = getattr(tokenizer, "chat_template", None)
    if template is None:
        raise ValueError("token-exact trajectories need a tokenizer with a chat template; pass the policy's "
                         "HF tokenizer (OpenAIPolicy(tokenizer=DIR) for a remote server)")
    key = (str(template), tokenizer.eos_token_id)
    cached = getattr(tokenizer, _ATTR, None)
    if cached is None or cached[0] != key:
        cached = (key, _read(tokenizer))
        setattr(tokenizer, _ATTR, cached)
    return cached[1]


def turn_end_id(tokenizer: Any) -> int | None:
    """The token that ends a turn under `tokenizer`: its template's (`ChatFormat.turn_end_id`), or EOS for a
    tokenizer without a template."""
    if getattr(tokenizer, "chat_template", None):
        return chat_format(tokenizer).turn_end_id
    return tokenizer.eos_token_id


def _read(tokenizer: Any) -> ChatFormat:
    system_role = _renders_system(tokenizer)
    probe = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
             {"role": "assistant", "content": MARK}, {"role": "user", "content": _NEXT}]
    if not system_role:
        probe = probe[1:]
    text = tokenizer.apply_chat_template(probe, tokenize=False)
    tail = text[text.index(MARK) + len(MARK):text.index(_NEXT)]
    eos = tokenizer.eos_token_id
    ids = list(tokenizer.encode(tail, add_special_tokens=False))
    special = set(getattr(tokenizer, "all_special_ids", ())) | {
        i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if getattr(t, "special", False)}
    if ids and ids[0] in special:
        end = ids[0]
    elif eos is not None:
        end = eos  # a template that closes turns with plain text: EOS is the one stop a model learns
    else:
        raise ValueError("the chat template closes an assistant message with no special token and the "
                         "tokenizer has no EOS: set tokenizer.eos_token to the model's end-of-turn token")
    return ChatFormat(turn_end_id=end, turn_end=tokenizer.decode([end], skip_special_tokens=False),
                      stop_ids=frozenset(i for i in (end, eos) if i is not None), system_role=system_role,
                      reply_opening=_reply_opening(tokenizer, probe[:-3]))


def _reply_opening(tokenizer: Any, head: list[dict[str, str]]) -> str:
    """The reasoning section that the generation prompt leaves open ("" when it opens none, or closes it),
    after `head` (the probe's system message, where the template has a system role) and a user message."""
    prompt = tokenizer.apply_chat_template([*head, {"role": "user", "content": MARK}], add_generation_prompt=True,
                                           tokenize=False)
    tail = prompt[prompt.rindex(MARK) + len(MARK):]
    start = tail.rfind(THINK)
    if start < 0 or THINK_END in tail[start:]:
        return ""
    return tail[start:]


def _renders_system(tokenizer: Any) -> bool:
    from jinja2.exceptions import TemplateError  # transformers renders templates with jinja2

    try:
        text = tokenizer.apply_chat_template([{"role": "system", "content": MARK}, {"role": "user", "content": "u"}],
                                             tokenize=False)
    except TemplateError:  # raise_exception('System role not supported')
        return False
    return MARK in text
