"""Where a held-out episode failed, from its outcome and its observations (pure Python).

One label per episode, the first that applies:
- ``infra``: the sandbox failed (not the model's doing; never counted as a model failure);
- ``solved``: graded +1;
- ``no_action``: no turn parsed as an action;
- submitted: ``no_edit`` (the diff changes no library file: empty, or tests only), ``search_mismatch``
  (no library edit, and a `str_replace` SEARCH text was refused), ``wrong_path`` (no library edit, and
  an edit named a file that does not exist: a path of another repo, or invented), ``wrong_file`` (library
  files changed, none of them the bug's), ``wrong_fix`` (the bug's file changed, the oracle tests still
  fail);
- not submitted: ``search_mismatch`` when a SEARCH text was refused, ``wrong_path`` when an edit named a
  missing file, ``repeated`` when the loop ended it for repeating one action (`EpisodeLimits.max_repeats`),
  else ``out_of_turns``.

An injector episode gets one label too (`injector_outcome`): ``valid``, ``infra``, ``not_submitted``
(out of turns or context, or format errors), ``incomplete`` (submitted without one of the artifact's five
files), ``failed_<check>`` (the first consistency check that failed, e.g. ``failed_bug_breaks_tests``),
``spec_too_long`` (refused before any check because the solver's prompt with its spec would leave no room
for a turn, `RolloutConfig.refuse_unreadable_specs`) or ``invalid`` (refused before any check otherwise,
e.g. a corrupt diff).

`empty_or_unchanged` is reported beside the format-valid rate: a policy that runs the tests and submits
an empty diff has every turn format-valid and repairs nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_scaffold.actions import Action, FormatError, parse_action
from selfplay.diffs import touched_files
from selfplay.errors import DiffError
from selfplay.validation.report import UNREADABLE_SPEC

FAILURES = ("solved", "infra", "no_action", "no_edit", "search_mismatch", "wrong_path", "wrong_file", "wrong_fix",
            "out_of_turns", "repeated")
SEARCH_REFUSED = ("str_replace: the SEARCH text",)
"""Prefixes of the editor's refusals of a SEARCH block (`agent_scaffold.editor`)."""
NOOP_REFUSED = "str_replace: the REPLACE text is the same as the SEARCH text"
"""The editor's refusal of an edit that changes nothing (`agent_scaffold.editor.replace_once`)."""
MISSING_FILE = "does not exist (paths are relative to"
"""The editor's refusal of a path that is not in the repo (`agent_scaffold.editor`)."""


@dataclass(frozen=True)
class EpisodeFacts:
    """What the classification needs of one episode."""

    termination: str
    reward: float
    turns: int
    format_errors: int
    submission: str | None
    """The submitted diff (None unless the episode ended with submit)."""
    observations: tuple[str, ...]
    """Tool outputs shown to the policy, in order."""
    bug_files: tuple[str, ...]
    """Files the bug patch changes."""
    test_files: tuple[str, ...]
    """Oracle test files (edits to them are not repairs)."""
    infra_failure: bool = False


def library_edits(submission: str | None, test_files: Sequence[str]) -> tuple[str, ...]:
    """Files of the diff that are not oracle test files."""
    if not submission or not submission.strip():
        return ()
    try:
        files = touched_files(submission)
    except DiffError:  # an unparsable diff changes nothing the grader can apply
        return ()
    return tuple(f for f in files if f not in set(test_files))


def search_refusals(observations: Sequence[str]) -> int:
    return sum(any(p in o for p in SEARCH_REFUSED) for o in observations)


def missing_file_refusals(observations: Sequence[str]) -> int:
    """Edits refused because their path is not in the repo."""
    return sum(MISSING_FILE in o for o in observations)


_MISSING_PATH = re.compile(r"(\S+) " + re.escape(MISSING_FILE))


def missing_paths(observations: Sequence[str]) -> tuple[str, ...]:
    """The paths of the edits refused because they are not in the repo, one per refusal, in order. Where
    they come from says what the policy falls back on: a training repo's file is memorised, a line number
    or a made-up name is not read from anything."""
    return tuple(m.group(1) for o in observations for m in _MISSING_PATH.finditer(o))


def classify(f: EpisodeFacts) -> str:
    if f.infra_failure:
        return "infra"
    if f.reward > 0:
        return "solved"
    if f.turns and f.format_errors >= f.turns:
        return "no_action"
    refused = search_refusals(f.observations) > 0
    missing = missing_file_refusals(f.observations) > 0
    if f.termination == "submitted":
        edits = library_edits(f.submission, f.test_files)
        if not edits:
            return "search_mismatch" if refused else "wrong_path" if missing else "no_edit"
        return "wrong_fix" if set(edits) & set(f.bug_files) else "wrong_file"
    if refused or missing:
        return "search_mismatch" if refused else "wrong_path"
    return "repeated" if f.termination == "repeated" else "out_of_turns"


def empty_or_unchanged(f: EpisodeFacts) -> bool:
    """Submitted a diff that changes no library file."""
    return f.termination == "submitted" and not library_edits(f.submission, f.test_files)


INJECTOR_OUTCOMES = ("valid", "infra", "not_submitted", "incomplete", "spec_too_long", "invalid")
"""Injector labels other than ``failed_<check>``."""


def injector_outcome(termination: str, validation: Mapping[str, Any] | None, infra_failure: bool = False) -> str:
    """One label for an injector episode from its termination and its validation verdict (the
    trajectory's metadata["validation"]: valid, failed_check, error)."""
    v = validation or {}
    if infra_failure:
        return "infra"
    if v.get("valid"):
        return "valid"
    if v.get("failed_check"):  # an artifact taken at a limit (`submit_on_limit`) is labelled by its check too
        return f"failed_{v['failed_check']}"
    if str(v.get("error") or "").startswith(UNREADABLE_SPEC):  # taken at a limit or submitted alike
        return "spec_too_long"
    if termination != "submitted":
        return "not_submitted"
    if "is missing" in str(v.get("error") or ""):
        return "incomplete"
    return "invalid"


def with_unsent(messages: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """`messages` and, when the episode ended with no room for it, the last action's observation
    (`unsent_observation` in the trajectory's metadata: the action ran, its output was not shown), so
    `turn_kinds` labels that last turn by what it did, not as an edit that applied."""
    unsent = (metadata or {}).get("unsent_observation")
    return [*messages, {"role": "user", "content": str(unsent)}] if unsent else list(messages)


def _turns(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[Action | None, str]]:
    """Each assistant turn of a transcript (system and task prompt first) as its parsed action (None for a
    format error) and the observation that answered it ("" when none did)."""
    body = list(messages[2:])
    for i, m in enumerate(body):
        if m.get("role") != "assistant":
            continue
        after = body[i + 1] if i + 1 < len(body) and body[i + 1].get("role") != "assistant" else {}
        try:
            action: Action | None = parse_action(str(m.get("content", "")))
        except FormatError:
            action = None
        yield action, str(after.get("content", ""))


def turn_kinds(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """One label per assistant turn of a transcript (system and task prompt first): ``format_error``,
    ``run_tests`` (a bash command that runs pytest), ``bash``, ``view``, ``str_replace``,
    ``str_replace_refused`` (its SEARCH text was refused), ``str_replace_noop`` (refused: its REPLACE text
    equals its SEARCH text), ``missing_file`` (an edit command whose path is not in the repo), another edit
    command's name, ``localize`` or ``submit``."""
    kinds: list[str] = []
    for action, after in _turns(messages):
        if action is None:
            kinds.append("format_error")
            continue
        if action.tool == "bash":
            kinds.append("run_tests" if "pytest" in action.command else "bash")
        elif action.tool in ("submit", "localize"):
            kinds.append(action.tool)
        elif missing_file_refusals([after]):
            kinds.append("missing_file")
        elif action.command == "str_replace" and search_refusals([after]):
            kinds.append("str_replace_refused")
        elif action.command == "str_replace" and NOOP_REFUSED in after:
            kinds.append("str_replace_noop")
        else:
            kinds.append(action.command)
    return tuple(kinds)


EDITED = ("Edited ", "Restored ", "Undid ")
"""How the editor's answers to a `str_replace` and an `undo` that applied begin (`agent_scaffold.editor`)."""


def recovery_moves(messages: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(undos, edited lines) of a transcript: undos are `undo` commands and applied `str_replace`s that put back
    what an earlier applied one replaced (its SEARCH the earlier REPLACE, its REPLACE the earlier SEARCH);
    edited lines are the distinct targets (path and line, or path alone) of the other applied `str_replace`s.
    A recovery demonstration's episode has one undo and two edited lines."""
    done: list[tuple[str, str, str]] = []
    undos, targets = 0, set()
    for action, after in _turns(messages):
        if action is None or action.tool != "edit" or not after.startswith(EDITED):
            continue
        if action.command == "undo":
            undos += 1
        elif action.command == "str_replace":
            old, new = action.old.strip(), action.body.strip()
            if any(p == action.path and (old, new) == (n, o) for p, o, n in done):
                undos += 1
            else:
                targets.add((action.path, action.args))
            done.append((action.path, old, new))
    return undos, len(targets)


def turn_table(episodes: Sequence[Sequence[str]]) -> dict[int, dict[str, int]]:
    """Turn number (1-based) -> how many episodes took each kind of action at that turn."""
    table: dict[int, Counter[str]] = {}
    for kinds in episodes:
        for turn, kind in enumerate(kinds, 1):
            table.setdefault(turn, Counter())[kind] += 1
    return {t: dict(c) for t, c in sorted(table.items())}
