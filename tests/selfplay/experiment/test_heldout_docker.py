"""A held-out episode for real (a toolz Docker sandbox, the real grader), played by the scripted backend:
an episode that repairs the bug and runs out of turns is graded only with `EvalSettings.submit_on_limit`."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize("on_limit", [False, True])
def test_a_repair_left_unsubmitted_counts_only_with_submit_on_limit(toolz_spec, valid_report, on_limit):
    pytest.importorskip("transformers")
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from selfplay.artifact import load_artifact
    from selfplay.experiment.heldout import EvalSettings, play, summarize
    from selfplay.rollout.policy_factory import embedded_tokenizer
    from selfplay.task import Task, make_task_id
    from tests.selfplay.conftest import ARTIFACTS

    artifact = load_artifact(ARTIFACTS / "valid")
    task = Task(make_task_id("toolz", artifact), "toolz", artifact, tuple(valid_report.fail_to_pass),
                tuple(valid_report.pass_to_pass), origin="procedural")
    repair = f"```bash\ngit apply -R <<'PATCH'\n{artifact.bug_inject}PATCH\n```"
    settings = EvalSettings(max_turns=1, max_new_tokens=512, samples=0, workers=1, submit_on_limit=on_limit)
    row = play(ScriptedPolicy([repair], embedded_tokenizer()), toolz_spec, task, "greedy", 0, settings)
    assert row.termination == "max_turns" and row.on_limit is on_limit
    if on_limit:  # the diff it left is graded: the bug is reverted, the oracle tests pass
        assert row.reward == 1.0 and row.failure == "solved"
        assert summarize([row])["on_limit"] == {"graded": 1, "solved": 1}
    else:
        assert row.reward == -1.0 and row.failure == "out_of_turns" and "on_limit" not in summarize([row])


def test_a_path_not_in_the_repo_is_listed_where_the_editor_refused_it(toolz_spec, valid_report):
    """The row keeps the path the policy named, from the real editor's refusal, and the summary counts it."""
    pytest.importorskip("transformers")
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from selfplay.artifact import load_artifact
    from selfplay.experiment.heldout import EvalSettings, play, summarize
    from selfplay.rollout.policy_factory import embedded_tokenizer
    from selfplay.task import Task, make_task_id
    from tests.selfplay.conftest import ARTIFACTS

    artifact = load_artifact(ARTIFACTS / "valid")
    task = Task(make_task_id("toolz", artifact), "toolz", artifact, tuple(valid_report.fail_to_pass),
                tuple(valid_report.pass_to_pass), origin="procedural")
    actions = ["```edit\nview marshmallow/schema.py 1 5\n```", "```edit\nview toolz/itertoolz.py 1 3\n```",
               "```submit\n```"]
    settings = EvalSettings(max_turns=3, max_new_tokens=512, samples=0, workers=1)
    row = play(ScriptedPolicy(actions, embedded_tokenizer()), toolz_spec, task, "greedy", 0, settings)
    assert row.missing_paths == ("marshmallow/schema.py",)  # toolz/itertoolz.py is the repo's own
    assert row.failure == "wrong_path"
    assert summarize([row])["missing_paths"] == {"episodes": 1, "refusals": 1, "top": [("marshmallow/schema.py", 1)]}


@pytest.mark.parametrize("max_repeats, termination, turns", [(None, "max_turns", 6), (2, "repeated", 3)])
def test_a_loop_of_one_action_ends_only_with_max_repeats(toolz_spec, valid_report, max_repeats, termination, turns):
    """The same view, answered the same, six times: with `EvalSettings.max_repeats` 2 the third ends the
    episode and its failure label says why; without it the loop runs out the turns, as every earlier
    evaluation did."""
    pytest.importorskip("transformers")
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from selfplay.artifact import load_artifact
    from selfplay.experiment.heldout import EvalSettings, play
    from selfplay.rollout.policy_factory import embedded_tokenizer
    from selfplay.task import Task, make_task_id
    from tests.selfplay.conftest import ARTIFACTS

    artifact = load_artifact(ARTIFACTS / "valid")
    task = Task(make_task_id("toolz", artifact), "toolz", artifact, tuple(valid_report.fail_to_pass),
                tuple(valid_report.pass_to_pass), origin="procedural")
    settings = EvalSettings(max_turns=6, max_new_tokens=512, samples=0, workers=1, max_repeats=max_repeats)
    loop = ["```edit\nview toolz/itertoolz.py 1 3\n```"] * 6
    row = play(ScriptedPolicy(loop, embedded_tokenizer()), toolz_spec, task, "greedy", 0, settings)
    assert (row.termination, row.turns, row.reward) == (termination, turns, -1.0)
    assert row.failure == ("repeated" if max_repeats else "out_of_turns")
