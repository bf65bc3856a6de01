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

_OUTCOME = r"(?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun|no tests ran)"
_PYTEST = re.compile(rf"^(?P<rule>=+ )?(?P<title>[^\n]*?\b{_OUTCOME}\b[^\n]*?) in \d+(?:\.\d+)?s"
                     rf"(?: \(\d+:\d\d:\d\d\))?(?(rule) =+)[ \t]*$", re.M)
_UNITTEST = re.compile(r"^(?P<title>Ran \d+ tests?) in \d+(?:\.\d+)?s[ \t]*$", re.M)


def pytest_rule(title: str, width: int = PYTEST_WIDTH) -> str:
    """`title` between `=` rules, as pytest's terminal writer draws a separator line `width` wide."""
    fill = "=" * max((width - len(title) - 2) // 2, 1)
    line = f"{fill} {title} {fill}"
    return line + "=" if len(line) + 1 <= width else line


def mask_durations(text: str) -> str:
    """`text` with the durations of pytest's and unittest's summary lines removed."""
    text = _PYTEST.sub(lambda m: pytest_rule(m["title"]) if m["rule"] else m["title"], text)
    return _UNITTEST.sub(lambda m: m["title"], text)
