"""The loop against a real Docker sandbox of toolz (from the default repo list)."""

import pytest

from agent_scaffold.agent import run_episode
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.policy import SamplingParams
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUG = "        d[item] += 1\n"
BUGGY = "        d[item] = 1\n"
FIX_DIFF_LINES = ["-        d[item] = 1", "+        d[item] += 1"]


def _inject_bug(box):
    """Make the buggy state the base, as the solver's repo is built (`rebase`: one fresh commit, no original)."""
    res = box.exec("sed -i 's/        d\\[item\\] += 1/        d[item] = 1/' toolz/itertoolz.py && "
                   "grep -c 'd\\[item\\] = 1' toolz/itertoolz.py")
    assert res.ok and res.output.strip() == "1", res.output
    box.rebase()


def test_scripted_policy_fixes_a_real_bug(toolz_sandbox, tokenizer):
    _inject_bug(toolz_sandbox)
    actions = [
        "Run the test of frequencies first.\n```bash\npython -m pytest -q -p no:cacheprovider "
        "toolz/tests/test_itertoolz.py -k frequencies 2>&1 | tail -3\n```",
        "```bash\ngrep -n 'def frequencies' toolz/itertoolz.py\n```",
        "```edit\nview toolz.frequencies\n```",  # a name as a test calls it: its definition's page
        f"```edit\nstr_replace toolz.frequencies\n<<<<<<< SEARCH\n{BUGGY}=======\n{BUG}>>>>>>> REPLACE\n```",
        "```bash\npython -m pytest -q -p no:cacheprovider toolz/tests/test_itertoolz.py 2>&1 | tail -1\n```",
        "Tests pass.\n```submit\n```",
    ]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), toolz_sandbox, load_role("solver"),
                     solver_variables("frequencies counts every item as 1", kind="issue"))
    assert ep.termination == "submitted" and not ep.infra_failure, ep.trajectory.to_text()
    obs = [m["content"] for m in ep.trajectory.messages[3::2]]
    assert "failed" in obs[0] and "[exit code 0]" in obs[1] and "d[item] = 1" in obs[2]
    assert obs[2].startswith("toolz.frequencies is defined at toolz/itertoolz.py:")
    assert "Edited toolz/itertoolz.py" in obs[3] and " passed" in obs[4] and "failed" not in obs[4]
    assert obs[4].splitlines()[0].endswith(" passed")  # pytest's duration is not shown (agent_scaffold.durations)
    changed = [ln for ln in ep.submission.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == FIX_DIFF_LINES and "a/toolz/itertoolz.py" in ep.submission


def test_hf_policy_runs_a_two_turn_episode(toolz_sandbox, hf_policy):
    ep = run_episode(hf_policy, toolz_sandbox, load_role("solver"), solver_variables("Fix frequencies.", "issue"),
                     limits=EpisodeLimits(max_turns=2, max_new_tokens=6, max_format_errors=5),
                     sampling=SamplingParams(seed=0))
    traj = ep.trajectory
    # 6 tokens cannot hold an action: two answered format errors, then the turn limit.
    assert (ep.termination, ep.turns, ep.format_errors, ep.infra_failure) == ("max_turns", 2, 2, False)
    assert len(traj.turn_spans) == 2 and sum(traj.loss_mask) == sum(e - s for s, e in traj.turn_spans) == 12
    sampled = [lp for lp, m in zip(traj.logprobs, traj.loss_mask) if m]
    assert all(lp <= 0 for lp in sampled) and sum(sampled) < 0
    assert traj.messages[3]["content"].startswith("Format error")
    assert traj.policy_version == hf_policy.version and len(traj.input_ids) == len(traj.logprobs)


def test_a_loop_of_one_refused_edit_ends_as_repeated(toolz_sandbox, tokenizer):
    """The loop the embedded policy falls into (docs/benchmarks.md): the same no-op `str_replace` after the
    same refusal. With `max_repeats` 2 the third such turn ends the episode, in a real sandbox whose tree it
    left as it was."""
    line = "def frequencies(seq):\n"  # in the file whether or not another test left the bug in
    noop = f"```edit\nstr_replace toolz/itertoolz.py\n<<<<<<< SEARCH\n{line}=======\n{line}>>>>>>> REPLACE\n```"
    limits = EpisodeLimits(max_turns=8, max_new_tokens=256, max_context_tokens=4096, max_repeats=2)
    before = toolz_sandbox.exec("git status --porcelain && git diff").output
    ep = run_episode(ScriptedPolicy(["```edit\nview toolz/itertoolz.py 1 3\n```", *[noop] * 7], tokenizer),
                     toolz_sandbox, load_role("solver"), solver_variables("frequencies is wrong", kind="issue"),
                     limits=limits)
    assert (ep.termination, ep.turns, ep.submission) == ("repeated", 4, None)
    assert "REPLACE text is the same as the SEARCH text" in ep.trajectory.metadata["unsent_observation"]
    assert toolz_sandbox.exec("git status --porcelain && git diff").output == before


def test_a_missing_path_is_refused_with_the_repos_source_files_in_docker(toolz_sandbox):
    """The refusal's file list is read as the agent user in the container (git's view of the tracked files),
    the asked file's name first; a test file is never listed."""
    from agent_scaffold.editor import EditError, Editor

    with pytest.raises(EditError) as refused:
        Editor(toolz_sandbox).view("itertoolz.py")
    listed = str(refused.value).split(" include ", 1)[1].split(": copy", 1)[0]
    assert listed.startswith("toolz/itertoolz.py, ") and "toolz/__init__.py" in listed
    assert "test_" not in listed and listed.endswith(" more)")
