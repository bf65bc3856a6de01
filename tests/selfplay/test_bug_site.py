"""`bug_site` and `same_bug`: one bug in other words is the same bug; another line or other failing tests
is another bug."""

from __future__ import annotations

import pytest

from selfplay.artifact import BugArtifact
from selfplay.diffs import bug_site
from selfplay.errors import DiffError
from selfplay.task import Task, same_bug, stored_lines


def one_line(new: str, line: int = 12, path: str = "boltons/jsonutils.py") -> str:
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -{line - 1},3 +{line - 1},3 @@\n"
            f"     try:\n-        pass\n+        {new}\n     except Exception:\n")


def task(bug: str, fail_to_pass: tuple[str, ...] = ("tests/test_a.py::test_x",), *, repo: str = "boltons",
         order: int = 1) -> Task:
    art = BugArtifact(test_script="pytest -rA tests/test_a.py\n", test_files=("tests/test_a.py",),
                      test_parser="print('{}')\n", bug_inject=bug, test_weaken="")
    return Task(f"t-{hash((bug, fail_to_pass, repo, order))}", repo, art, fail_to_pass, (), order=order)


def test_the_site_is_the_changed_old_lines_whatever_the_new_text():
    assert bug_site(one_line("fail")) == {("boltons/jsonutils.py", "-12"), ("boltons/jsonutils.py", "+13")}
    assert bug_site(one_line("fail")) == bug_site(one_line("failed"))
    assert bug_site(one_line("fail")) != bug_site(one_line("fail", line=40))
    assert bug_site(one_line("fail")) != bug_site(one_line("fail", path="boltons/other.py"))


def test_pure_insertions_and_deletions_have_their_own_positions():
    insert = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -5,0 +6,2 @@\n+x = 1\n+y = 2\n"
    assert bug_site(insert) == {("m.py", "+6")}  # before old line 6, whatever is inserted
    delete = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -6,2 +5,0 @@\n-x = 1\n-y = 2\n"
    assert bug_site(delete) == {("m.py", "-6"), ("m.py", "-7")}
    no_newline = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n a\n-b\n"
                  "\\ No newline at end of file\n+c\n\\ No newline at end of file\n")
    assert bug_site(no_newline) == {("m.py", "-2"), ("m.py", "+3")}


def test_a_malformed_diff_is_refused_by_bug_site_and_matches_nothing_in_same_bug():
    with pytest.raises(DiffError):
        bug_site("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a\n")
    assert not same_bug(task("not a diff\n"), task("not a diff\n"))


def with_extra_edit(bug: str, line: int = 80) -> str:
    """`bug` plus an unrelated one-line change in another file."""
    return bug + one_line("pass  # noqa", line=line, path="boltons/strutils.py")


def test_an_extra_edit_elsewhere_does_not_make_the_same_bug_another():
    a = task(one_line("fail"))
    assert same_bug(a, task(with_extra_edit(one_line("failed"))))
    assert same_bug(task(with_extra_edit(one_line("fail"))), a)
    # the extra edit alone shares no line with the bug
    assert not same_bug(a, task(one_line("pass  # noqa", line=80, path="boltons/strutils.py")))


def test_count_bugs_joins_chains_of_matches_and_keeps_unparsed_bugs_apart():
    from selfplay.task import bug_key, count_bugs

    a, b = task(one_line("fail")), task(with_extra_edit(one_line("failed")))
    c = task(one_line("x", line=80, path="boltons/strutils.py"))  # matches b through its extra edit, not a
    assert count_bugs([bug_key(a), bug_key(b), bug_key(c)]) == 1
    assert count_bugs([bug_key(a), bug_key(c)]) == 2
    assert count_bugs([None, None, bug_key(a)]) == 3


def test_same_bug_needs_the_same_lines_the_same_failing_tests_the_same_repo_and_first_order():
    a = task(one_line("fail"))
    assert same_bug(a, task(one_line("failed")))
    assert not same_bug(a, task(one_line("fail", line=40)))
    assert not same_bug(a, task(one_line("failed"), ("tests/test_a.py::test_y",)))
    assert not same_bug(a, task(one_line("failed"), repo="toolz"))
    assert not same_bug(a, task(one_line("failed"), order=2))


def test_stored_lines_are_the_old_lines_first_order_bugs_remove_or_rewrite():
    """What the kit's `mutate` leaves out (`rollout.kit_store_view`): each first-order bug's removed lines,
    not its insertion points; a higher-order task or a diff that does not parse adds nothing."""
    insertion = ("diff --git a/boltons/x.py b/boltons/x.py\n--- a/boltons/x.py\n+++ b/boltons/x.py\n"
                 "@@ -4,2 +4,3 @@\n a\n+b\n c\n")
    tasks = [task(one_line("fail")), task(one_line("fail", line=40)), task(one_line("fail", path="boltons/o.py")),
             task(insertion), task(one_line("fail", line=7), order=2), task("not a diff")]
    assert stored_lines(tasks) == (("boltons/jsonutils.py", 12), ("boltons/jsonutils.py", 40), ("boltons/o.py", 12))
    assert stored_lines([]) == ()


def test_the_site_hash_is_what_a_diff_writes_and_where():
    """`site_hash` (the store's task identity): another line or other text is another hash; the context lines
    around the change, a header's section text and the order of file sections are not."""
    from selfplay.diffs import site_hash

    bug = one_line("fail")
    narrow = ("diff --git a/boltons/jsonutils.py b/boltons/jsonutils.py\n--- a/boltons/jsonutils.py\n"
              "+++ b/boltons/jsonutils.py\n@@ -12,1 +12,1 @@ def load(x):\n-        pass\n+        fail\n")
    assert site_hash(narrow) == site_hash(bug)
    assert site_hash(one_line("fail", line=40)) != site_hash(bug)
    assert site_hash(one_line("failed")) != site_hash(bug)
    other = one_line("x = 1", line=5, path="boltons/other.py")
    assert site_hash(bug + other) == site_hash(other + bug) != site_hash(bug)
    with pytest.raises(DiffError):
        site_hash("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n")
