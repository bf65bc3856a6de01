"""`search_sources`: where a transcript's SEARCH texts come from, on transcripts written here (the system
prompt is the solver role's real one)."""

from __future__ import annotations

from agent_scaffold.roles import load_role
from selfplay.experiment.search_sources import SEARCH_KINDS, bug_lines, example_lines, search_sources

BUG = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def count(seq, value):\n"
       "-    return len([x for x in seq if x == value])\n+    return len([x for x in seq if x != value])\n")
VIEW = "   1\tdef count(seq, value):\n   2\t    return len([x for x in seq if x != value])\n"


def edit(search: str, replace: str) -> dict:
    return {"role": "assistant", "content": f"Fix.\n```edit\nstr_replace m.py\n<<<<<<< SEARCH\n{search}\n=======\n"
                                            f"{replace}\n>>>>>>> REPLACE\n```"}


def transcript(*turns: dict) -> list[dict]:
    return [{"role": "system", "content": load_role("solver").system_template}, {"role": "user", "content": "the spec"},
            *turns]


def test_the_solver_prompts_example_is_what_example_means():
    assert example_lines(load_role("solver").system_template) == {"return result", "return sorted(result)"}
    assert bug_lines(BUG) == {"return len([x for x in seq if x != value])"}


def test_each_search_text_is_counted_once_by_source_and_flagged_for_the_bug_line_and_no_change():
    view = {"role": "assistant", "content": "Read.\n```edit\nview m.count\n```"}
    shown = {"role": "user", "content": VIEW}
    bug = "    return len([x for x in seq if x != value])"
    counts = search_sources(transcript(
        edit("    return result", "    return sorted(result)"),  # the prompt's example, before any view
        {"role": "user", "content": "str_replace: the SEARCH text was not found"},
        view, shown,
        edit(bug, bug.replace("!=", "==")),  # copied from the view, the bug's line: the repair
        {"role": "user", "content": "ok"},
        edit("def count(seq, value):", "def count(seq, value):"),  # from the view, unchanged
        {"role": "user", "content": "refused"},
        edit("    n = 0", "    n = 1"),  # never shown
        {"role": "assistant", "content": "no action here"},
    ), bug_lines(BUG))
    assert counts == {"str_replace": 4, "example": 1, "view": 2, "other": 1, "bug_line": 1, "unchanged": 1}
    assert tuple(counts) == SEARCH_KINDS


def test_a_line_the_policy_wrote_before_seeing_it_is_not_from_a_view():
    bug = "    return len([x for x in seq if x != value])"
    counts = search_sources(transcript(edit(bug, bug), {"role": "user", "content": VIEW}), bug_lines(BUG))
    assert (counts["view"], counts["other"], counts["bug_line"], counts["unchanged"]) == (0, 1, 1, 1)


def test_a_search_copied_from_a_localize_row_counts_as_read():
    messages = [{"role": "system", "content": ""}, {"role": "user", "content": "spec"},
                {"role": "assistant", "content": "```localize\n```"},
                {"role": "user", "content": "The spec's tests ran with line tracing: 1 failed, 2 passed. The lines "
                                            "...:\nm.py:9  1.00  if x != value:"},
                {"role": "assistant", "content": "```edit\nstr_replace m.py:9\n<<<<<<< SEARCH\nif x != value:\n"
                                                 "=======\nif x == value:\n>>>>>>> REPLACE\n```"}]
    counts = search_sources(messages, ["if x != value:"])
    assert (counts["view"], counts["other"], counts["bug_line"]) == (1, 0, 1)
