"""`mask_durations`: test runners' wall-clock durations taken out of a command's output (pure).

A test run prints how long it took (pytest's `==== 3 passed in 0.37s ====`, unittest's `Ran 3 tests in
0.004s`). The figure tells the agent nothing about the code, and it differs from run to run. Left in, the same
episode yields other tokens on every run: a warm start's demonstrations differ by a digit between two builds
of one config (so its content key does too), and two arms of an experiment that share seeds stop sharing
their samples at the first test run. So the toolbox shows every summary without its duration; the rest of
the line is kept, and pytest's `=` rule is drawn again around the shorter text, as pytest draws it.
"""

from __future__ import annotations

import re

PYTEST_WIDTH = 80
"""The width pytest draws its rules to when its output is not a terminal (the toolbox's case)."""

_OUTCOME = re.compile(r"\b(?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun|no tests ran)\b")
# A summary's end, searched for in one line at a time. Output is the model's to shape (up to the sandbox's
# 1 MiB), so no pattern here may backtrack over a line: the duration is found from the end first, and the
# title before it is checked after.
_PYTEST_END = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?(?P<rule> =+)?[ \t]*$")
_PYTEST_RULE = re.compile(r"=+ ")
_UNITTEST = re.compile(r"Ran \d+ tests?(?= in \d+(?:\.\d+)?s[ \t]*$)")


def pytest_rule(title: str, width: int = PYTEST_WIDTH) -> str:
    """`title` between `=` rules, as pytest's terminal writer draws a separator line `width` wide."""
    fill = "=" * max((width - len(title) - 2) // 2, 1)
    line = f"{fill} {title} {fill}"
    return line + "=" if len(line) + 1 <= width else line


def _masked_line(line: str) -> str:
    if (ran := _UNITTEST.match(line)) is not None:
        return ran[0]
    end = _PYTEST_END.search(line)
    if end is None:
        return line
    head = line[:end.start()]
    rule = _PYTEST_RULE.match(head) if end["rule"] else None
    if end["rule"] and rule is None:
        return line  # a closing rule with no opening one: not pytest's
    title = head[rule.end():] if rule else head
    if _OUTCOME.search(title) is None:
        return line
    return pytest_rule(title) if rule else title


def mask_durations(text: str) -> str:
    """`text` with the durations of pytest's and unittest's summary lines removed (in time linear in `text`)."""
    if " in " not in text:
        return text
    return "\n".join(_masked_line(line) for line in text.split("\n"))
