"""Where a held-out episode failed, from its outcome and its observations (pure Python).

One label per episode, the first that applies:
- ``infra``: the sandbox failed (not the model's doing; never counted as a model failure);
- ``solved``: graded +1;
- ``no_action``: no turn parsed as an action;
- submitted: ``no_edit`` (the diff changes no library file: empty, or tests only), ``search_mismatch``
  (no library edit, and a `str_replace` SEARCH text was refused), ``wrong_file`` (library files changed,
  none of them the bug's), ``wrong_fix`` (the bug's file changed, the oracle tests still fail);
- not submitted: ``search_mismatch`` when a SEARCH text was refused, else ``out_of_turns``.

`empty_or_unchanged` is reported beside the format-valid rate: a policy that runs the tests and submits
an empty diff has every turn format-valid and repairs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FAILURES = ("solved", "infra", "no_action", "no_edit", "search_mismatch", "wrong_file", "wrong_fix",
            "out_of_turns")
SEARCH_REFUSED = ("str_replace: the SEARCH text",)
"""Prefixes of the editor's refusals of a SEARCH block (`agent_scaffold.editor`)."""


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
    from selfplay.diffs import touched_files

    try:
        files = touched_files(submission)
    except Exception:  # an unparsable diff changes nothing the grader can apply
        return ()
    return tuple(f for f in files if f not in set(test_files))


def search_refusals(observations: Sequence[str]) -> int:
    return sum(any(p in o for p in SEARCH_REFUSED) for o in observations)


def classify(f: EpisodeFacts) -> str:
    if f.infra_failure:
        return "infra"
    if f.reward > 0:
        return "solved"
    if f.turns and f.format_errors >= f.turns:
        return "no_action"
    refused = search_refusals(f.observations) > 0
    if f.termination == "submitted":
        edits = library_edits(f.submission, f.test_files)
        if not edits:
            return "search_mismatch" if refused else "no_edit"
        return "wrong_fix" if set(edits) & set(f.bug_files) else "wrong_file"
    return "search_mismatch" if refused else "out_of_turns"


def empty_or_unchanged(f: EpisodeFacts) -> bool:
    """Submitted a diff that changes no library file."""
    return f.termination == "submitted" and not library_edits(f.submission, f.test_files)
