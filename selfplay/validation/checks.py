"""The eight consistency checks as pure functions over what the sandbox runs observed.

Each returns a `CheckResult`; `selfplay.validation.runner` gathers the observations and stops at the
first failure. Departures from SSR (section 2.3), which leaves these unspecified:
- parser: must also be deterministic (same map on the same output, parsed twice) and stable across two
  runs of the original suite. Flaky tests (status differs between the runs, or missing from one) are
  dropped from FAIL_TO_PASS/PASS_TO_PASS under the default policy "drop"; the artifact is rejected only
  when no stable test is left (parser check) or every bug-failing test is flaky (bug_validity). Policy
  "reject" rejects any flakiness at the parser check.
- test_script: zero failing (stable) tests on the original, as SSR's injector prompt demands.
- patch_hygiene (ours, not in the paper): both diffs apply, no binary hunks, the bug touches no test
  file, the weakening touches only listed test files.
- weakening: a bug-failing test that *disappears* after weakening (deleted) counts, as SSR allows deletion.
"""

from __future__ import annotations

from collections.abc import Mapping

from selfplay.artifact import BugArtifact
from selfplay.diffs import (
    has_binary,
    infrastructure_reason,
    is_git_metadata,
    matches_any,
    split_diff,
    touched_files,
)
from selfplay.errors import DiffError
from selfplay.validation.report import CheckResult


def _few(items, n: int = 5) -> str:
    items = sorted(items)
    return ", ".join(items[:n]) + (f" (+{len(items) - n} more)" if len(items) > n else "")


def check_test_files(artifact: BugArtifact, missing: list[str]) -> CheckResult:
    try:
        weakened = set(touched_files(artifact.test_weaken))
    except DiffError as exc:
        return CheckResult("test_files", False, f"test_weaken.diff: {exc}")
    unlisted = weakened - set(artifact.test_files)
    if missing:
        return CheckResult("test_files", False, f"not in the original repo: {_few(missing)}")
    if unlisted:
        return CheckResult("test_files", False,
                           f"test_weaken.diff touches files not in test_files.txt: {_few(unlisted)}")
    return CheckResult("test_files", True, f"{len(artifact.test_files)} oracle test file(s) exist; they cover "
                                           f"the {len(weakened)} file(s) test_weaken.diff touches")


def flaky_tests(runs: list[Mapping[str, str]]) -> set[str]:
    """Tests whose status is not the same in every run (missing from a run counts as a difference)."""
    keys = set().union(*runs) if runs else set()
    return {t for t in keys if len({r.get(t) for r in runs}) > 1}


def check_parser(runs: list[Mapping[str, str] | None], errors: list[str | None], flaky: set[str],
                 policy: str) -> CheckResult:
    for statuses, error in zip(runs, errors):
        if statuses is None:
            return CheckResult("parser", False, error or "no output could be parsed")
    if not runs[0]:
        return CheckResult("parser", False, "test_parser.py printed an empty JSON object on the original "
                                            "repo's output (no test recognised)")
    stable = set(runs[0]) - flaky
    if flaky and (policy == "reject" or not stable):
        return CheckResult("parser", False, f"{len(flaky)} test(s) changed status between two runs of the "
                                            f"original: {_few(flaky)}")
    note = f"; {len(flaky)} flaky test(s) dropped: {_few(flaky)}" if flaky else ""
    return CheckResult("parser", True, f"{len(runs[0])} tests parsed, same map on {len(runs)} runs{note}")


def check_test_script(original: Mapping[str, str], min_passing: int) -> CheckResult:
    passing = [t for t, s in original.items() if s == "passed"]
    failing = [t for t, s in original.items() if s == "failed"]
    if failing:
        return CheckResult("test_script", False,
                           f"{len(failing)} test(s) fail on the original code: {_few(failing)}; "
                           "select only tests that pass before the bug")
    if len(passing) < min_passing:
        return CheckResult("test_script", False,
                           f"only {len(passing)} test(s) pass on the original code, need >= {min_passing}")
    return CheckResult("test_script", True, f"{len(passing)} tests pass on the original code, none fail")


def check_patch_hygiene(artifact: BugArtifact, test_patterns: tuple[str, ...],
                        apply_errors: Mapping[str, str | None], bug_offset: str | None = None) -> CheckResult:
    """Paths are the ones `git apply` itself reads (`selfplay.diffs.touched_files`), so a quoted,
    odd-prefix or mixed `---`/`+++` section cannot hide a code edit inside test_weaken.diff.

    `bug_offset`: git's `Hunk #N succeeded at L (offset K lines).` lines when bug_inject.diff applied only
    away from the lines its hunk headers name. Such a diff is refused: where a bug is (`bug_site`, from
    the headers) is what tells it apart from a stored bug with the same text elsewhere, and what the
    near-duplicate rule compares, so a policy must not be able to move a known bug to new lines by
    rewriting its headers. `git diff`, which every injector prompt asks for, never writes one."""
    try:
        return _patch_hygiene(artifact, test_patterns, apply_errors, bug_offset)
    except DiffError as exc:
        return CheckResult("patch_hygiene", False, str(exc))


def _patch_hygiene(artifact: BugArtifact, test_patterns: tuple[str, ...],
                   apply_errors: Mapping[str, str | None], bug_offset: str | None) -> CheckResult:
    for name, text in (("bug_inject.diff", artifact.bug_inject), ("test_weaken.diff", artifact.test_weaken)):
        if has_binary(text):
            return CheckResult("patch_hygiene", False, f"{name} has binary hunks")
    for name, error in apply_errors.items():
        if error:
            return CheckResult("patch_hygiene", False, f"{name} does not apply cleanly: {error.strip()[:400]}")
    if bug_offset:
        return CheckResult("patch_hygiene", False,
                           f"bug_inject.diff's hunk headers do not name the lines it changes (git: "
                           f"{' '.join(bug_offset.split())[:300]}); save it with `git diff -- CODE_FILES > "
                           f"bug_inject.diff` from the original commit instead of writing the headers by hand")
    bug_files = touched_files(artifact.bug_inject)
    tests_hit = [p for p in bug_files if p in artifact.test_files or matches_any(p, test_patterns)]
    if tests_hit:
        return CheckResult("patch_hygiene", False, f"bug_inject.diff touches test files: {_few(tests_hit)}")
    git_meta = [p for p in bug_files if is_git_metadata(p)]
    if git_meta:
        return CheckResult("patch_hygiene", False, f"bug_inject.diff touches git metadata (it changes how the "
                                                   f"grader's git sees the tree): {_few(git_meta)}")
    # Grading drops a prediction's sections on test infrastructure, which includes any file test_script.sh
    # names: a bug there could never be fixed, and a solve rate on it is luck.
    pinned = [f"{fd.path} ({reason})" for fd in split_diff(artifact.bug_inject, name="bug_inject.diff")
              if (reason := infrastructure_reason(fd.path, new=fd.source_path is None, test_files=artifact.test_files,
                                                  test_patterns=test_patterns, script=artifact.test_script))]
    if pinned:
        return CheckResult("patch_hygiene", False,
                           f"bug_inject.diff changes files grading drops from every prediction, so no fix of them "
                           f"could count: {_few(pinned)}; put the bug in code the tests import, and name no code "
                           "file in test_script.sh")
    outside = [p for p in touched_files(artifact.test_weaken) if p not in artifact.test_files]
    if outside:
        return CheckResult("patch_hygiene", False,
                           f"test_weaken.diff touches files not listed in test_files.txt: {_few(outside)}")
    return CheckResult("patch_hygiene", True, "both diffs apply cleanly, text only; the bug touches code "
                                              "files only, the weakening listed test files only")


def check_bug_scope(artifact: BugArtifact, min_changed: int) -> CheckResult:
    files = touched_files(artifact.bug_inject)
    if len(files) < min_changed:
        return CheckResult("bug_scope", False,
                           f"bug_inject.diff changes {len(files)} file(s), need >= {min_changed}")
    return CheckResult("bug_scope", True, f"bug_inject.diff changes {len(files)} file(s): {_few(files)}")


def check_bug_validity(fail_to_pass: tuple[str, ...], flaky_failing: set[str], min_failing: int) -> CheckResult:
    if len(fail_to_pass) < min_failing:
        extra = (f"; {len(flaky_failing)} flaky test(s) also fail but do not count: {_few(flaky_failing)}"
                 if flaky_failing else "")
        return CheckResult("bug_validity", False, f"{len(fail_to_pass)} test(s) that pass on the original fail "
                                                  f"with the bug, need >= {min_failing}{extra}")
    return CheckResult("bug_validity", True,
                       f"{len(fail_to_pass)} test(s) fail with the bug: {_few(fail_to_pass)}")


def check_weakening(fail_to_pass: tuple[str, ...], weakened: Mapping[str, str]) -> CheckResult:
    hidden = [t for t in fail_to_pass if weakened.get(t) != "failed"]
    if not hidden:
        return CheckResult("weakening", False, f"all {len(fail_to_pass)} bug-failing test(s) still fail once "
                                               "test_weaken.diff is applied; it must delete or weaken some")
    removed = [t for t in hidden if t not in weakened]
    return CheckResult("weakening", True, f"{len(hidden)} bug-failing test(s) hidden by the weakening "
                                          f"({len(hidden) - len(removed)} pass, {len(removed)} removed)")


def check_inverse_mutation(fail_to_pass: tuple[str, ...],
                           reverted: Mapping[str, Mapping[str, str] | None]) -> CheckResult:
    """`reverted` maps each bug file to the run with only that file reverted (None: the run failed)."""
    idle = []
    for path, statuses in reverted.items():
        if statuses is None or not any(statuses.get(t) == "passed" for t in fail_to_pass):
            idle.append(path)
    if idle:
        return CheckResult("inverse_mutation", False,
                           f"reverting {_few(idle)} alone fixes none of the failing tests; every file the bug "
                           "changes must contribute to it")
    return CheckResult("inverse_mutation", True, f"each of the {len(reverted)} bug file(s) contributes: "
                                                 "reverting it alone makes a failing test pass")
