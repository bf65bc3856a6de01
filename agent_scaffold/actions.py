"""The text action format and its parser (pure).

A turn is free text (reasoning) plus exactly one fenced block whose info string names the tool:

    ```bash            any shell command(s), run in the repo workdir
    ```edit            first line: `view PATH [START [END]]` | `create PATH` | `str_replace PATH` |
                       `insert PATH LINE` | `undo PATH`; the rest of the block is the body (`view PATH:START`,
                       a `grep -n` hit's prefix, is `view PATH START`; `str_replace PATH:START` edits the
                       first match on or after START)
    ```localize        empty block: rank the lines the spec's failing tests run (solver episodes given a
                       `Localizer`; `agent_scaffold.localize`)
    ```submit          empty block: end the episode

A `str_replace` body is `<<<<<<< SEARCH`, the exact old text, `=======`, the new text, `>>>>>>> REPLACE`.
A block opens at a line starting with three backticks and a tool name and closes at the next line that is
exactly three backticks, so a file whose content has such a line must be written through bash instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TOOLS = ("bash", "edit", "localize", "submit")
EDIT_COMMANDS = ("view", "create", "str_replace", "insert", "undo")

_BLOCK = re.compile(r"^```[ \t]*([A-Za-z_]*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_REPLACE = re.compile(r"\A<<<<<<< SEARCH\n(.*?)^=======\n(.*?)^>>>>>>> REPLACE[ \t]*\n?\Z",
                      re.MULTILINE | re.DOTALL)

_GREP_HIT = re.compile(r"(.+?):(\d+):?")
THINK, THINK_END = "<think>", "</think>"
"""The tags of a reasoning model's reasoning section (Qwen3, DeepSeek-R1)."""

FORMAT_HELP = """Each reply must contain exactly one action: one fenced block, for example

```bash
grep -rn "def merge" toolz/
```

or an edit (view PATH [START [END]] | create PATH | str_replace PATH | insert PATH LINE | undo PATH):

```edit
str_replace toolz/dicttoolz.py
<<<<<<< SEARCH
exact old text
=======
new text
>>>>>>> REPLACE
```

or, when you are done:

```submit
```"""


class FormatError(ValueError):
    """The reply holds no valid action; the message tells the agent what to fix."""


@dataclass(frozen=True)
class Action:
    """One parsed action."""

    tool: str
    """"bash", "edit", "localize" or "submit"."""
    command: str = ""
    """bash: the command; edit: the sub-command (view, create, ...)."""
    path: str = ""
    """edit: the target path."""
    args: tuple[int, ...] = ()
    """edit view: (start[, end]); edit insert: (line,); edit str_replace: (start,) from `PATH:START`."""
    body: str = ""
    """edit create/insert: the text; str_replace: the new text."""
    old: str = ""
    """edit str_replace: the exact text to replace."""


def parse_action(text: str) -> Action:
    """The one action in `text`; raises FormatError naming what is wrong. A reply that opens with a reasoning
    model's `<think>` section (Qwen3) is parsed after the section's `</think>`, so that a block the model
    only thought about is not taken for its action. (A template that opens the section in its generation
    prompt: the transcript puts the opening before the reply, `ChatFormat.reply_opening`.)"""
    if text.lstrip().startswith(THINK):
        _, closed, text = text.partition(THINK_END)
        if not closed:
            raise FormatError(f"The reply's {THINK} section is not closed; end the reasoning with {THINK_END}, "
                              f"then send one action.\n\n{FORMAT_HELP}")
    blocks = [(m.group(1).lower(), m.group(2)) for m in _BLOCK.finditer(text)]
    tools = [b for b in blocks if b[0] in TOOLS]
    if not tools:
        named = f" (found a ```{blocks[0][0]} block; use bash, edit or submit)" if blocks else ""
        raise FormatError(f"No action found{named}.\n\n{FORMAT_HELP}")
    if len(tools) > 1:
        raise FormatError(f"Found {len(tools)} action blocks; send exactly one per reply and wait for its "
                          f"output.\n\n{FORMAT_HELP}")
    tool, body = tools[0]
    if tool in ("submit", "localize"):
        return Action(tool)
    if tool == "bash":
        if not body.strip():
            raise FormatError("The ```bash block is empty; put a command in it.")
        return Action("bash", command=body.rstrip("\n"))
    return _parse_edit(body)


def _parse_edit(block: str) -> Action:
    header, _, body = block.partition("\n")
    words = header.split()
    if not words or words[0] not in EDIT_COMMANDS:
        raise FormatError(f"The ```edit block must start with one of {', '.join(EDIT_COMMANDS)} and a path, "
                          f"got {header.strip()!r}.\n\n{FORMAT_HELP}")
    cmd, rest = words[0], words[1:]
    if not rest:
        raise FormatError(f"edit {cmd} needs a path: `{cmd} PATH`.")
    path, extra = rest[0], rest[1:]
    grep_hit = _GREP_HIT.fullmatch(path) if cmd in ("view", "str_replace") and not extra else None
    if grep_hit:  # `view PATH:LINE`, the prefix of a `grep -n` hit copied as is
        path, extra = grep_hit.group(1), [grep_hit.group(2)]
    try:
        nums = tuple(int(x) for x in extra)
    except ValueError:
        raise FormatError(f"edit {cmd}: expected line numbers after the path, got {' '.join(extra)!r}.") from None
    if cmd == "view":
        if len(nums) > 2:
            raise FormatError("edit view takes at most START and END: `view PATH [START [END]]`.")
        return Action("edit", cmd, path, nums)
    if cmd == "insert":
        if len(nums) != 1:
            raise FormatError("edit insert needs one line number: `insert PATH LINE` (0 inserts at the top; "
                              "the text goes after that line).")
        return Action("edit", cmd, path, nums, body=body)
    if cmd == "str_replace":
        if extra and grep_hit is None:
            raise FormatError("edit str_replace takes a path, or a path and the line to search from: "
                              "`str_replace PATH` or `str_replace PATH:LINE`.")
        m = _REPLACE.match(body)
        if m is None:
            raise FormatError("edit str_replace needs the body\n<<<<<<< SEARCH\nold text\n=======\nnew text\n"
                              ">>>>>>> REPLACE\n(each marker on its own line).")
        return Action("edit", cmd, path, nums, old=m.group(1), body=m.group(2))
    if nums:
        raise FormatError(f"edit {cmd} takes only a path: `{cmd} PATH`.")
    return Action("edit", cmd, path, body=body)
