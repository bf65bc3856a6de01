"""`Toolbox`: executes a parsed action in the sandbox and turns the outcome into an observation.

A command's output is shown without test runners' durations (`durations.mask_durations`), so an episode's
tokens do not depend on how fast the machine ran its tests.

Agent mistakes (a failing command, an edit that does not match) become observations; `SandboxError`
propagates so the loop can end the episode as an infrastructure failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from agent_scaffold.actions import Action
from agent_scaffold.durations import mask_durations
from agent_scaffold.editor import EditError, Editor
from agent_scaffold.localize import LocalizeError, Localizer, localize
from sandboxes.sandbox import Sandbox


def truncate(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, keeping head and tail around a marker."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    dropped = len(text) - head - tail
    return f"{text[:head]}\n[... {dropped} characters truncated ...]\n{text[-tail:]}"


@dataclass(frozen=True)
class Outcome:
    """What one action produced."""

    observation: str
    """Text shown to the agent (already truncated)."""
    submitted: bool = False
    """True for the submit action."""
    error: bool = False
    """True when the action failed in a way the agent caused (non-zero exit, bad edit)."""
    duration: float = 0.0
    """Seconds spent in the sandbox."""


class Toolbox:
    """bash, edit, localize and submit against one sandbox; `localize` only with a `localizer`."""

    def __init__(self, sandbox: Sandbox, command_timeout: float = 60.0, max_observation_chars: int = 8000,
                 localizer: Localizer | None = None) -> None:
        self.sandbox = sandbox
        self.localizer = localizer
        self.editor = Editor(sandbox)
        self.command_timeout = command_timeout
        self.max_observation_chars = max_observation_chars

    def run(self, action: Action) -> Outcome:
        if action.tool == "submit":
            return Outcome("Submitted.", submitted=True)
        if action.tool == "bash":
            return self._bash(action.command)
        if action.tool == "localize":
            return self._localize()
        return self._edit(action)

    def _localize(self) -> Outcome:
        if self.localizer is None:
            return Outcome("Error: localize is not available in this episode (it needs a spec of failing tests); "
                           "use bash or edit.", error=True)
        t0 = time.monotonic()
        try:
            text = localize(self.sandbox, self.localizer, self.command_timeout)
        except LocalizeError as exc:
            return Outcome(f"Error: {exc}", error=True, duration=time.monotonic() - t0)
        return Outcome(truncate(text, self.max_observation_chars), duration=time.monotonic() - t0)

    def _bash(self, command: str) -> Outcome:
        res = self.sandbox.exec(command, timeout=self.command_timeout, user="agent")  # never as the grader
        output = truncate(mask_durations(res.output), self.max_observation_chars)
        if res.timed_out:
            note = f"[command timed out after {self.command_timeout:g} s and was killed]"
        else:
            note = f"[exit code {res.exit_code}]"
        text = f"{output.rstrip()}\n{note}" if output.strip() else note
        return Outcome(text, error=not res.ok, duration=res.duration)

    def _edit(self, a: Action) -> Outcome:
        ed = self.editor
        try:
            if a.command == "view":
                text = ed.view(a.path, *a.args, max_chars=self.max_observation_chars)
            elif a.command == "create":
                text = ed.create(a.path, a.body)
            elif a.command == "str_replace":
                text = ed.str_replace(a.path, a.old, a.body, *a.args)
            elif a.command == "insert":
                text = ed.insert(a.path, a.args[0], a.body)
            else:
                text = ed.undo(a.path)
        except EditError as exc:
            return Outcome(f"Error: {exc}", error=True)
        return Outcome(truncate(text, self.max_observation_chars))
