"""Where an episode's `str_replace` SEARCH texts come from (pure Python).

A held-out policy that edits the wrong text fails the same way whether it copied the system prompt's
example, copied a line it viewed that is not the bug, or wrote one from memory; these counts tell them
apart, per episode, so an evaluation's JSON says which one a warm start changed:

- ``example``: every line of SEARCH, stripped, is a line of the system prompt's own `str_replace` example;
- ``view``: else, every line, stripped, was shown by an earlier observation (a view's line numbers aside,
  or the code of a `localize` row, `PATH:LINE  SCORE  code`);
- ``other``: neither (written from memory, or mixed);
- ``bug_line``: one of its lines, stripped, is a line the bug patch added (the line to repair);
- ``unchanged``: REPLACE equals SEARCH (the editor refuses it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent_scaffold.actions import FormatError, parse_action

SEARCH_KINDS = ("str_replace", "example", "view", "other", "bug_line", "unchanged")
"""The counts `search_sources` returns, in report order."""

_EXAMPLE = re.compile(r"^<<<<<<< SEARCH\n(.*?)^=======\n(.*?)^>>>>>>> REPLACE", re.MULTILINE | re.DOTALL)
_VIEW_NUMBER = re.compile(r"^ *\d+\t")
_LOCALIZE_ROW = re.compile(r"^\S+:\d+  \d+\.\d\d  (.*)$")


def _stripped(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def example_lines(system_prompt: str) -> frozenset[str]:
    """The stripped lines of the SEARCH and REPLACE texts the system prompt shows as its example."""
    return frozenset(line for m in _EXAMPLE.finditer(system_prompt) for line in _stripped(m.group(1) + m.group(2)))


def bug_lines(bug_inject: str) -> frozenset[str]:
    """The stripped, non-empty lines the bug patch adds: the buggy lines a repair must change."""
    return frozenset(line[1:].strip() for line in bug_inject.splitlines()
                     if line.startswith("+") and not line.startswith("+++") and line[1:].strip())


def search_sources(messages: Sequence[Mapping[str, Any]], bug: Iterable[str]) -> dict[str, int]:
    """`SEARCH_KINDS` counts over the `str_replace` actions of a transcript (system prompt first, then the
    task), given the bug patch's added lines (`bug_lines`)."""
    example = example_lines(str(messages[0].get("content", ""))) if messages else frozenset()
    bug = frozenset(bug)
    seen: set[str] = set()
    counts: Counter[str] = Counter({k: 0 for k in SEARCH_KINDS})
    for m in messages[2:]:
        text = str(m.get("content", ""))
        if m.get("role") != "assistant":
            for line in text.splitlines():
                row = _LOCALIZE_ROW.match(line)
                seen.add((row.group(1) if row else _VIEW_NUMBER.sub("", line)).strip())
            continue
        try:
            action = parse_action(text)
        except FormatError:
            continue
        if action.command != "str_replace":
            continue
        lines = _stripped(action.old)
        counts["str_replace"] += 1
        if lines and all(line in example for line in lines):
            counts["example"] += 1
        elif lines and all(line in seen for line in lines):
            counts["view"] += 1
        else:
            counts["other"] += 1
        counts["bug_line"] += any(line in bug for line in lines)
        counts["unchanged"] += action.old == action.body
    return dict(counts)
