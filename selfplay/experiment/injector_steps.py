"""Where an injector episode of the scripted expert's plan went wrong, step by step (pure Python).

The `direct` plan (`selfplay.demos.injector`) finds the code file and prints a function before its bug
edit. Each turn of an episode gets one label, so a table of episodes shows where the plan broke:
- ``tests_listed``: the plan's first command, the repo's test files (`selfplay.demos.injector.LIST_TESTS`);
- ``list_ok`` / ``list_missing``: the function listing (`grep -n "def "`) printed lines, or named a file that
  does not exist;
- ``view_ok`` / ``view_empty``: the function view (`sed -n '/def NAME(/,+N'`) printed lines, or nothing;
  ``_unlisted`` is appended when NAME was in no earlier observation (typed from memory);
- ``edit_applied`` / ``edit_refused`` (SEARCH not in the file) / ``edit_noop`` (REPLACE equal to SEARCH) /
  ``edit_missing_file``;
- the artifact kit's commands (`kit` strategy, `agent_scaffold.artifact_kit`): its `code` and `show NAME` get
  the listing's and the view's labels; ``oracle_ok`` (the test files
  written and run) / ``oracle_error``; ``changes_listed`` / ``changes_error`` (`mutate NAME`: the
  operators' changes printed, or refused); ``bug_fails`` (bug_inject.diff saved and some test fails) /
  ``bug_passes`` (saved, no test fails) / ``bug_error`` (refused: nothing changed, no oracle yet), for `bug`
  and for `mutate NAME K`, which applies a change and then runs `bug`; ``weaken_ok`` / ``weaken_error``;
- ``format_error``; other turns are not labelled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agent_scaffold.actions import Action, FormatError, parse_action
from agent_scaffold.artifact_kit import ALL_STORED, HIDDEN_NOTE, KIT_PATH, MOVED_ON, SHARE_NOTE
from selfplay.demos.injector import LIST_TESTS
from selfplay.experiment.failures import NOOP_REFUSED, missing_file_refusals, search_refusals

STEPS = ("tests_listed", "oracle_ok", "oracle_error", "changes_listed", "changes_error", "list_ok", "list_missing",
         "view_ok", "view_ok_unlisted", "view_empty", "view_empty_unlisted", "edit_applied", "edit_refused", "edit_noop", "edit_missing_file", "bug_fails",
         "bug_passes", "bug_error", "weaken_ok", "weaken_error", "format_error")


def injector_steps(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The labels of an injector transcript's turns (system and task prompt first)."""
    steps: list[str] = []
    for action, after, seen in _turns(messages):
        if action is None:
            steps.append("format_error")
            continue
        kit, *kit_args = _kit_command(action.command) if action.tool == "bash" else (None,)
        if kit == "code":
            steps.append("list_ok" if "[exit code 0]" in after else "list_missing")
        elif kit == "show":
            listed = bool(kit_args) and any(f"def {kit_args[0]}(" in obs for obs in seen)
            steps.append(("view_ok" if "[exit code 0]" in after else "view_empty") + ("" if listed else "_unlisted"))
        elif kit == "mutate" and len(kit_args) == 1:
            steps.append("changes_listed" if "[exit code 0]" in after else "changes_error")
        elif kit == "bug" or kit == "mutate":
            steps.append("bug_error" if not after.startswith("Saved bug_inject.diff")
                         else "bug_passes" if "No test fails" in after else "bug_fails")
        elif kit in ("oracle", "weaken"):
            ok = after.startswith(("Wrote test_files.txt", "Deleted the failed tests"))
            steps.append(f"{kit}_{'ok' if ok else 'error'}")
        elif action.tool == "bash" and action.command.strip() == LIST_TESTS:
            steps.append("tests_listed")
        elif action.tool == "bash" and 'grep -n "def "' in action.command:
            steps.append("list_missing" if "No such file" in after else "list_ok")
        elif action.tool == "bash" and "sed -n '/def " in action.command:
            name = action.command.split("/def ", 1)[1].split("(", 1)[0]
            printed = after.replace("[exit code 0]", "").strip()
            listed = any(f"def {name}(" in obs for obs in seen)
            steps.append(("view_ok" if printed else "view_empty") + ("" if listed else "_unlisted"))
        elif action.tool == "edit" and action.command == "str_replace":
            steps.append("edit_noop" if NOOP_REFUSED in after or action.old == action.body
                         else "edit_refused" if search_refusals([after])
                         else "edit_missing_file" if missing_file_refusals([after]) else "edit_applied")
    return tuple(steps)


def _turns(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[Action | None, str, list[str]]]:
    """Each assistant turn after the system and task prompts: its action (None for a format error), the
    observation that answered it, and the observations before it."""
    seen: list[str] = []
    body = list(messages[2:])
    for i, m in enumerate(body):
        if m.get("role") != "assistant":
            seen.append(str(m.get("content", "")))
            continue
        after = str(body[i + 1].get("content", "")) if i + 1 < len(body) else ""
        try:
            action: Action | None = parse_action(str(m.get("content", "")))
        except FormatError:
            action = None
        yield action, after, seen


def _kit_command(command: str) -> tuple[str | None, ...]:
    """The kit subcommand a bash command runs and its arguments (the words after `KIT_PATH`); (None,) when
    it runs no kit."""
    words = command.split()
    at = next((i for i, w in enumerate(words) if w == KIT_PATH), None)
    return tuple(words[at + 1:]) if at is not None and at + 1 < len(words) else (None,)


def kit_choice(messages: Sequence[Mapping[str, Any]]) -> tuple[str, int] | None:
    """The function and change number of a transcript's last `mutate NAME K` that saved a bug diff (the
    kit's operator bug the episode submitted, unless a later edit changed it), or None when there is none.
    Two episodes with the same choice on one repo wrote the same bug, unless the store's view renumbered
    the listing (`kit_change` tells those apart)."""
    saved = list(_saving_mutates(messages))
    return saved[-1][:2] if saved else None


def _saving_mutates(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, int, str]]:
    """(NAME, K, the latest `mutate NAME` listing before it, or "") of each `mutate NAME K` that saved a bug diff."""
    listings: dict[str, str] = {}
    for action, after, _ in _turns(messages):
        if action is None or action.tool != "bash":
            continue
        kit, *args = _kit_command(action.command)
        if kit == "mutate" and len(args) == 1 and "[exit code 0]" in after:
            listings[args[0]] = after
        elif kit == "mutate" and len(args) == 2 and args[1].isdigit() and after.startswith("Saved bug_inject.diff"):
            yield args[0], int(args[1]), listings.get(args[0], "")


def kit_change(messages: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The function and the listed text (`line L: old  ->  new`) of the change the transcript's last saving
    `mutate NAME K` applied, read from the latest `mutate NAME` listing before it; None without such a
    mutate or listing. Unlike `kit_choice` it names the same change also when the store's view renumbered
    the listing, so it tells a replay of a demonstrated bug from another change of the same number. When the
    listing moved on to another function (`rollout.kit_next_function`), that function is the one named."""
    saved = list(_saving_mutates(messages))
    if not saved:
        return None
    name, k, listing = saved[-1]
    line = next((li for li in listing.splitlines() if li.startswith(f"{k}. ")), None)
    if MOVED_ON in listing:
        name = listing.split(MOVED_ON, 1)[1].split(",", 1)[0]
    return (name, line.split(". ", 1)[1]) if line else None


def store_filtered(messages: Sequence[Mapping[str, Any]]) -> bool:
    """True when a `mutate NAME` of the transcript left changes out for the store's view (or, with a share
    of `rollout.kit_spread`, for the other episodes of its round)."""
    return any(action is not None and action.tool == "bash" and _kit_command(action.command)[0] == "mutate"
               and any(note in after for note in (HIDDEN_NOTE, ALL_STORED, SHARE_NOTE))
               for action, after, _ in _turns(messages))


def moved_on(messages: Sequence[Mapping[str, Any]]) -> bool:
    """True when a `mutate NAME` of the transcript listed another function's changes instead of refusing a
    used-up NAME (`rollout.kit_next_function`)."""
    return any(action is not None and action.tool == "bash" and _kit_command(action.command)[0] == "mutate"
               and MOVED_ON in after for action, after, _ in _turns(messages))


def step_counts(episodes: Sequence[Sequence[str]]) -> dict[str, int]:
    """Episodes with each label at least once (a label per column of the docs' funnel table)."""
    counts: Counter[str] = Counter()
    for steps in episodes:
        counts.update(set(steps))
    return {s: counts[s] for s in STEPS}
