"""The step labels of an injector transcript: listing, view (and whether its name was listed), bug edit."""

from selfplay.experiment.injector_steps import (
    STEPS,
    injector_steps,
    kit_change,
    kit_choice,
    moved_on,
    step_counts,
    store_filtered,
)

FENCE = "```"


def a(text):
    return {"role": "assistant", "content": text}


def o(text):
    return {"role": "user", "content": text}


def bash(cmd):
    return a(f"{FENCE}bash\n{cmd}\n{FENCE}")


def edit(old, new):
    return a(f"{FENCE}edit\nstr_replace pkg/core.py\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n{FENCE}")


LISTING = """f=$(git ls-files '*core.py' | grep -v test | head -n 1); echo $f; grep -n "def " $f | head -n 20"""


def test_each_step_of_the_plan_gets_its_label():
    messages = [{"role": "system", "content": "s"}, o("task"),
                bash(LISTING), o("pkg/core.py\n8:def f(x):\n[exit code 0]"),
                bash("sed -n '/def g(/,+20p' pkg/core.py"), o("[exit code 0]"),
                bash("sed -n '/def f(/,+20p' pkg/core.py"), o("def f(x):\n    return x + 1\n[exit code 0]"),
                edit("    return x + 1", "    return x + 1"), o("Error: str_replace: the REPLACE text is the same as "
                                                               "the SEARCH text, so pkg/core.py would not change"),
                edit("    return x + 2", "    return x - 2"), o("Error: str_replace: the SEARCH text was not found"),
                a("no action"), o("Format error: No action found."),
                edit("    return x + 1", "    return x - 1"), o("Edited pkg/core.py. Lines around the change:"),
                bash('grep -n "def " nope.py | head -n 20'), o("grep: nope.py: No such file or directory\n[exit code 0]"),
                a(f"{FENCE}submit\n{FENCE}")]
    steps = injector_steps(messages)
    assert steps == ("list_ok", "view_empty_unlisted", "view_ok", "edit_noop", "edit_refused", "format_error",
                     "edit_applied", "list_missing")
    counts = step_counts([steps, ("list_ok",)])
    assert counts["list_ok"] == 2 and counts["edit_applied"] == 1 and counts["view_ok_unlisted"] == 0
    assert list(counts) == list(STEPS)


def test_the_kit_commands_get_their_labels():
    kit = "python /tmp/kit.py"
    messages = [{"role": "system", "content": "s"}, o("task"),
                bash("git ls-files '*test_*.py' | head -n 12"), o("t/test_core.py\n[exit code 0]"),
                bash(f"{kit} oracle t/test_x.py"), o("No such file: t/test_x.py. Copy test file paths from the listing.\n[exit code 1]"),
                bash(f"{kit} oracle t/test_core.py"), o("Wrote test_files.txt, test_script.sh, test_parser.py. On the original "
                                                        "code: 9 passed, 0 failed.\n[exit code 0]"),
                bash(f"{kit} bug"), o("No code file is changed: apply a change with `mutate NAME K`, or edit with str_replace, "
                                      "first.\n[exit code 1]"),
                bash(f"{kit} code"), o("pkg/core.py\n8:def f(x):\n[exit code 0]"),
                bash(f"{kit} show g"), o("No function g in pkg/core.py: copy a name from `python /tmp/kit.py code`.\n"
                                         "[exit code 1]"),
                bash(f"{kit} show f"), o("def f(x):\n    return x + 1\n[exit code 0]"),
                edit("    return x + 1", "    return x - 1"), o("Edited pkg/core.py. Lines around the change:"),
                bash(f"cd /testbed && {kit} bug"), o("Saved bug_inject.diff (pkg/core.py). With the bug: 9 passed, 0 failed.\n"
                                                     "No test fails: change the code so that some test fails.\n[exit code 0]"),
                bash(f"{kit} bug"), o("Saved bug_inject.diff (pkg/core.py). With the bug: 8 passed, 1 failed.\n"
                                      "FAILED t/test_core.py::test_f\n[exit code 0]"),
                bash(f"{kit} weaken"), o("Deleted the failed tests; saved test_weaken.diff. /tmp/ssr_artifact holds: ...\n"
                                         "[exit code 0]"),
                bash(f"cat {kit.split()[1]}"), o("..."),
                a(f"{FENCE}submit\n{FENCE}")]
    assert injector_steps(messages) == ("tests_listed", "oracle_error", "oracle_ok", "bug_error", "list_ok",
                                        "view_empty_unlisted", "view_ok", "edit_applied", "bug_passes", "bug_fails",
                                        "weaken_ok")


def test_the_kit_mutate_commands_get_their_labels():
    """`mutate NAME` lists changes or is refused; `mutate NAME K` applies one and runs `bug`, so it gets `bug`'s
    labels."""
    kit = "python /tmp/kit.py"
    messages = [{"role": "system", "content": "s"}, o("task"),
                bash(f"{kit} mutate g"), o("No function g in pkg/core.py: copy a name from `python /tmp/kit.py code`.\n"
                                           "[exit code 1]"),
                bash(f"{kit} mutate f"), o("1. line 9: return x + 1  ->  return x + 2\nApply one: python /tmp/kit.py "
                                           "mutate f K\n[exit code 0]"),
                bash(f"{kit} mutate f 4"), o("No change 4: K is one of the numbers `python /tmp/kit.py mutate f` lists.\n"
                                             "[exit code 1]"),
                bash(f"{kit} mutate f 1"), o("Saved bug_inject.diff (pkg/core.py). With the bug: 8 passed, 1 failed.\n"
                                             "FAILED t/test_core.py::test_f\n[exit code 0]")]
    assert injector_steps(messages) == ("changes_error", "changes_listed", "bug_error", "bug_fails")


def test_the_kit_choice_is_the_last_mutate_that_saved_a_bug():
    """A refused `mutate NAME K` is no choice; of two that saved a diff, the later one is what was submitted."""
    kit = "python /tmp/kit.py"
    head = [{"role": "system", "content": "s"}, o("task")]
    refused = [bash(f"{kit} mutate f 4"), o("No change 4: K is one of the numbers `python /tmp/kit.py mutate f` "
                                            "lists.\n[exit code 1]")]
    saved = [bash(f"{kit} mutate f 1"), o("Saved bug_inject.diff (pkg/core.py). With the bug: 8 passed, 1 failed.")]
    again = [bash(f"{kit} mutate g 2"), o("Saved bug_inject.diff (pkg/core.py). With the bug: 7 passed, 2 failed.")]
    assert kit_choice(head + refused) is None
    assert kit_choice(head + refused + saved) == ("f", 1)
    assert kit_choice(head + saved + again + [a(f"{FENCE}submit\n{FENCE}")]) == ("g", 2)
    assert kit_choice(head + [bash(f"{kit} mutate f")]) is None  # the listing, not a change


def test_the_kit_change_is_read_from_the_listing_so_a_renumbered_listing_names_another_change():
    """`kit_change`: the listed text of the applied change, from the latest listing of that function; the
    same number after the store's view renumbered the listing is another change. `store_filtered` sees the
    view's note and its refusal; no listing before the mutate gives None."""
    kit = "python /tmp/kit.py"
    head = [{"role": "system", "content": "s"}, o("task")]
    full = [bash(f"{kit} mutate f"), o("1. line 4: a = 1  ->  pass\n2. line 5: b = 2  ->  pass\n"
                                       "Apply one: python /tmp/kit.py mutate f K\n[exit code 0]")]
    viewed = [bash(f"{kit} mutate f"), o("1. line 5: b = 2  ->  pass\n(1 more on lines that bugs in the store already "
                                         "change: not listed.)\nApply one: python /tmp/kit.py mutate f K\n[exit code 0]")]
    saved = [bash(f"{kit} mutate f 1"), o("Saved bug_inject.diff (pkg/core.py). With the bug: 8 passed, 1 failed.")]
    assert kit_change(head + full + saved) == ("f", "line 4: a = 1  ->  pass")
    assert kit_change(head + full + viewed + saved) == ("f", "line 5: b = 2  ->  pass")
    assert kit_choice(head + full + saved) == kit_choice(head + viewed + saved) == ("f", 1)
    assert kit_change(head + saved) is None and kit_change(head + full) is None
    assert not store_filtered(head + full + saved) and store_filtered(head + viewed + saved)
    refused = [bash(f"{kit} mutate g"), o("Every change of g is on a line that a bug in the store already changes: "
                                          "choose another function, or change it with str_replace.\n[exit code 1]")]
    assert store_filtered(head + refused)
    moved = [bash(f"{kit} mutate g"), o("1. line 9: c = 3  ->  pass\n(Every change of g is on a line that a bug in "
                                        "the store already changes: these are the changes of h, the next function "
                                        "of pkg/core.py with one elsewhere.)\n"
                                        "Apply one: python /tmp/kit.py mutate g K\n[exit code 0]")]
    saved_g = [bash(f"{kit} mutate g 1"), saved[1]]
    assert kit_change(head + moved + saved_g) == ("h", "line 9: c = 3  ->  pass")  # the function it moved to
    assert store_filtered(head + moved) and moved_on(head + moved + saved_g)
    assert not moved_on(head + viewed + saved) and not moved_on(head + refused)
    # a share (`rollout.kit_spread`): its count, and a move-on from a function whose fresh changes are others'
    shared = [bash(f"{kit} mutate f"), o("1. line 5: b = 2  ->  pass\n(1 more on lines that bugs in the store already "
                                         "change, or left to the other episodes of this round: not listed.)\n"
                                         "Apply one: python /tmp/kit.py mutate f K\n[exit code 0]")]
    assert store_filtered(head + shared) and not moved_on(head + shared)
    away = [bash(f"{kit} mutate g"), o("1. line 9: c = 3  ->  pass\n(The changes of g are left to the other episodes "
                                       "of this round: these are the changes of h, the next function of pkg/core.py "
                                       "with one elsewhere.)\nApply one: python /tmp/kit.py mutate g K\n[exit code 0]")]
    assert moved_on(head + away + saved_g) and kit_change(head + away + saved_g) == ("h", "line 9: c = 3  ->  pass")
