"""Loop endings and submissions on the LocalSandbox test double, plus trajectory JSON round trip."""

import pytest

from agent_scaffold.agent import run_episode
from agent_scaffold.policies.scripted import ScriptedPolicy, ScriptExhausted
from agent_scaffold.policy import TRAINING
from agent_scaffold.roles import load_role, render_template, solver_variables
from agent_scaffold.trajectory import Trajectory, load_jsonl, save_jsonl
from sandboxes.errors import SandboxDead


def test_sandbox_failure_is_an_infra_failure(local_sandbox, tokenizer):
    def dead(*a, **k):
        raise SandboxDead("container abc is gone")

    local_sandbox.exec = dead
    ep = run_episode(ScriptedPolicy(["```bash\nls\n```"], tokenizer), local_sandbox, load_role("solver"),
                     solver_variables("spec"))
    assert ep.termination == "sandbox_error" and ep.infra_failure
    assert "container abc is gone" in ep.error and ep.trajectory.metadata["infra_failure"] is True


def test_injector_submission_is_the_artifact_files(local_sandbox, tokenizer):
    role = load_role("injector", "removal")
    art = "/tmp/ssr_test_artifact_" + local_sandbox.workdir.rsplit("/", 1)[-1]
    actions = [f"```bash\nmkdir -p {art} && echo 'pytest -rA' > {art}/test_script.sh && "
               f"git diff > {art}/bug_inject.diff\n```", "```submit\n```"]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), local_sandbox, role, {"artifact_dir": art})
    assert ep.termination == "submitted" and ep.trajectory.role == "injector"
    assert ep.submission == {"test_script.sh": "pytest -rA\n", "bug_inject.diff": ""}
    assert f"{art}/test_weaken.diff" in ep.trajectory.messages[1]["content"]  # the prompt names all five files
    assert ep.trajectory.metadata["strategy"] == "removal"


@pytest.mark.parametrize("allowed", [0, 1, 2])
def test_an_incomplete_artifact_submit_is_refused_with_what_is_missing(local_sandbox, tokenizer, allowed):
    """With `refused_submits`, a submit that lacks artifact files is answered with their names instead of
    ending the episode; once complete, or after that many refusals, submit ends it."""
    from dataclasses import replace

    role = load_role("injector", "direct")
    role = replace(role, limits=replace(role.limits, refused_submits=allowed))
    art = "/tmp/ssr_test_refused_" + local_sandbox.workdir.rsplit("/", 1)[-1]
    write_rest = (f"```bash\ncd {art} && echo 'pytest -rA' > test_script.sh && echo t.py > test_files.txt && "
                  "echo x > test_parser.py && echo d > bug_inject.diff && echo w > test_weaken.diff\n```")
    actions = [f"```bash\nrm -rf {art} && mkdir -p {art} && touch {art}/test_weaken.diff\n```", "```submit\n```",
               "```submit\n```", write_rest, "```submit\n```"]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), local_sandbox, role, {"artifact_dir": art})
    observations = [m["content"] for m in ep.trajectory.messages[2:] if m["role"] == "user"]
    assert ep.termination == "submitted" and ep.trajectory.metadata["refused_submits"] == min(allowed, 2)
    assert ep.turns == {0: 2, 1: 3, 2: 5}[allowed]
    if allowed == 0:
        assert set(ep.submission) == {"test_weaken.diff"}
        return
    assert observations[1].startswith(f"Submit refused (1 of {allowed}): the artifact in {art} is incomplete "
                                      "(missing: test_script.sh, test_files.txt, test_parser.py, bug_inject.diff; "
                                      "empty: test_weaken.diff)")
    if allowed == 1:  # the second submit ends the episode as it is
        assert set(ep.submission) == {"test_weaken.diff"}
    else:  # refused again, then the files are written and the third submit is accepted
        assert observations[2].startswith("Submit refused (2 of 2)")
        assert ep.submission["test_weaken.diff"] == "w\n" and len(ep.submission) == 5


def test_an_empty_diff_submit_is_refused_for_the_solver(local_sandbox, tokenizer):
    from dataclasses import replace

    role = load_role("solver")
    role = replace(role, limits=replace(role.limits, refused_submits=1))
    actions = ["```submit\n```", "```bash\necho changed >> README.md\n```", "```submit\n```"]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), local_sandbox, role, solver_variables("spec"))
    assert ep.termination == "submitted" and ep.turns == 3 and "README.md" in ep.submission
    assert ep.trajectory.messages[3]["content"].startswith("Submit refused (1 of 1): the diff is empty")


@pytest.mark.parametrize("allowed", [0, 1])
def test_a_callers_check_refuses_a_complete_submit_only(local_sandbox, tokenizer, allowed):
    """`submit_check` is asked only of complete submissions and only while a refusal is left: its answer is
    the refusal's reason, and the next submit ends the episode as it is."""
    from dataclasses import replace

    role = load_role("solver")
    role = replace(role, limits=replace(role.limits, refused_submits=allowed))
    asked = []

    def check(submission):
        asked.append(submission)
        return "the fix touches README.md, not the code"

    actions = ["```submit\n```", "```bash\necho changed >> README.md\n```", "```submit\n```", "```submit\n```"]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), local_sandbox, role, solver_variables("spec"),
                     submit_check=check)
    observations = [m["content"] for m in ep.trajectory.messages[2:] if m["role"] == "user"]
    assert ep.termination == "submitted" and ep.trajectory.metadata["refused_submits"] == allowed
    if allowed == 0:  # nothing refused, nothing asked: the empty diff ends the episode
        assert ep.turns == 1 and ep.submission == "" and asked == []
        return
    assert observations[0].startswith("Submit refused (1 of 1): the diff is empty")  # incomplete: not asked
    assert ep.turns == 3 and "README.md" in ep.submission and asked == []  # no refusal left at the second submit


def test_a_callers_check_is_told_to_the_policy(local_sandbox, tokenizer):
    from dataclasses import replace

    role = load_role("solver")
    role = replace(role, limits=replace(role.limits, refused_submits=1))
    asked = []

    def check(submission):
        asked.append(submission)
        return "the fix touches README.md, not the code"

    actions = ["```bash\necho changed >> README.md\n```", "```submit\n```", "```submit\n```"]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), local_sandbox, role, solver_variables("spec"),
                     submit_check=check)
    assert ep.termination == "submitted" and ep.turns == 3 and ep.trajectory.metadata["refused_submits"] == 1
    assert len(asked) == 1 and "README.md" in asked[0] and ep.submission == asked[0]
    assert ep.trajectory.messages[5]["content"] == (
        "Submit refused (1 of 1): the fix touches README.md, not the code; then submit again. The next submit "
        "after the last refusal ends the episode as it is.")


def test_refused_submits_must_not_be_negative():
    from agent_scaffold.roles import EpisodeLimits

    with pytest.raises(ValueError, match="refused_submits must be 0 or more"):
        EpisodeLimits(refused_submits=-1)


def test_roles_and_templates():
    for strategy in ("removal", "history", "direct"):
        text = render_template(load_role("injector", strategy).task_template,
                               load_role("injector", strategy).defaults | {"workdir": "/testbed"})
        assert all(f in text for f in ("test_script.sh", "test_files.txt", "test_parser.py", "bug_inject.diff",
                                       "test_weaken.diff", "/tmp/ssr_artifact"))
    assert "git log" in load_role("injector", "history").task_template
    kit = render_template(load_role("injector", "kit").task_template,
                          load_role("injector", "kit").defaults | {"workdir": "/testbed"})
    assert "five files in /tmp/ssr_artifact" in kit and all(
        f"`python /tmp/kit.py {c}" in kit for c in ("oracle", "mutate", "show", "bug", "weaken"))
    with pytest.raises(ValueError, match="needs --strategy, one of removal, history, direct, kit"):
        load_role("injector")
    with pytest.raises(ValueError, match="unknown role 'judge'"):
        load_role("judge")
    with pytest.raises(ValueError, match="needs values for localize_hint, spec_section"):
        render_template(load_role("solver").task_template, {})
    assert "-    assert f(1) == 2" in solver_variables("-    assert f(1) == 2\n")["spec_section"]


def test_script_exhaustion_is_loud(local_sandbox):
    with pytest.raises(ScriptExhausted, match="only 0 actions"):
        ScriptedPolicy([]).generate([[1]], TRAINING)


def test_trajectory_round_trips_through_jsonl(local_sandbox, tokenizer, tmp_path):
    ep = run_episode(ScriptedPolicy(["```bash\necho héllo\n```", "```submit\n```"], tokenizer), local_sandbox,
                     load_role("solver"), solver_variables("spec"))
    traj = ep.trajectory
    path = tmp_path / "t.jsonl"
    save_jsonl([traj, traj], path)
    back = load_jsonl(path)
    assert back == [traj, traj]
    assert Trajectory.from_json(traj.to_json()) == traj
    assert "## [3] user" in traj.to_text() and "héllo" in traj.to_text()
    with pytest.raises(ValueError, match="unknown trajectory fields"):
        Trajectory.from_json('{"bogus": 1}')


def test_context_budget_is_clamped_to_the_policys_window(local_sandbox, tokenizer, hf_policy, caplog):
    """Every caller gets the clamp: the injector's 65,536-token default would
    run past a small model's window."""
    from agent_scaffold.agent import context_window, fit_context_window
    from agent_scaffold.roles import EpisodeLimits

    role = load_role("injector", "removal")
    assert role.limits.max_context_tokens == 65536
    prompt = len(run_episode(ScriptedPolicy(["```submit\n```"], tokenizer), local_sandbox, role,
                             {"artifact_dir": "/tmp/x"}).trajectory.input_ids)
    policy = ScriptedPolicy(["```bash\nseq 1 300\n```"] * 20, tokenizer)
    assert context_window(policy) is None  # nothing to clamp to: the budget stays as configured
    policy.context_window = prompt + 400
    with caplog.at_level("INFO", logger="agent_scaffold.agent"):
        ep = run_episode(policy, local_sandbox, role, {"artifact_dir": "/tmp/x"})
    assert ep.termination == "context_exhausted" and policy.remaining > 0
    assert ep.trajectory.metadata["max_context_tokens"] == policy.context_window
    assert "clamped from 65536" in caplog.text
    assert len(ep.trajectory.input_ids) <= policy.context_window

    # The real embedded model (SmolLM2: 8,192 positions), bare and behind the cross-episode batcher.
    from agent_scaffold.policies.batching import BatchingPolicy

    assert context_window(hf_policy) == 8192
    batched = BatchingPolicy(hf_policy)
    try:
        assert context_window(batched) == 8192
    finally:
        batched.close()
    assert fit_context_window(role.limits, hf_policy).max_context_tokens == 8192
    assert fit_context_window(EpisodeLimits(max_context_tokens=4096), hf_policy).max_context_tokens == 4096
    with pytest.raises(ValueError, match="min_turn_tokens=9000 does not fit the policy's context window of 8192"):
        fit_context_window(EpisodeLimits(min_turn_tokens=9000, max_context_tokens=65536), hf_policy)


@pytest.mark.parametrize("localize", [False, True])
def test_first_turn_room_is_what_the_episode_leaves_for_its_first_turn(local_sandbox, tokenizer, localize):
    """`first_turn_room` renders and tokenizes the prompt as `run_episode` does: with exactly
    `min_turn_tokens` of room the episode takes a turn, with one token less it ends before sampling."""
    from dataclasses import replace

    from agent_scaffold.agent import first_turn_room
    from agent_scaffold.localize import Localizer

    role = load_role("solver")
    variables = solver_variables("diff --git a/t.py b/t.py\n" + "+    assert f(1) == 2\n" * 40)
    limits = replace(role.limits, max_context_tokens=4096, min_turn_tokens=64)
    room = first_turn_room(ScriptedPolicy([], tokenizer), role, variables, local_sandbox.workdir, limits, localize)
    localizer = Localizer("spec", "true") if localize else None
    opened = run_episode(ScriptedPolicy(["```submit\n```"], tokenizer), local_sandbox, role, variables,
                         limits=limits, localizer=localizer)
    assert room == 4096 - opened.trajectory.turn_spans[0][0]  # the prompt is everything before the first turn
    exact = replace(limits, max_context_tokens=4096 - room + 64)
    ep = run_episode(ScriptedPolicy(["```submit\n```"], tokenizer), local_sandbox, role, variables, limits=exact,
                     localizer=localizer)
    assert ep.turns == 1 and ep.termination == "submitted"
    short = replace(exact, max_context_tokens=exact.max_context_tokens - 1)
    assert first_turn_room(ScriptedPolicy([], tokenizer), role, variables, local_sandbox.workdir, short,
                           localize) == 63
    ep = run_episode(ScriptedPolicy(["```submit\n```"], tokenizer), local_sandbox, role, variables, limits=short,
                     localizer=localizer)
    assert ep.turns == 0 and ep.termination == "context_exhausted"
    policy = ScriptedPolicy([], tokenizer)  # the budget is clamped to the model's window, as the episode's is
    policy.context_window = 4096 - room + 10
    assert first_turn_room(policy, role, variables, local_sandbox.workdir, limits, localize) == 10


@pytest.mark.parametrize("edit, on_limit, taken", [
    (True, True, True),     # out of turns with a change: the diff is the submission
    (True, False, False),   # the default: nothing is submitted
    (False, True, False),   # nothing changed: an empty diff is not taken (grading it can only fail)
])
def test_submit_on_limit_takes_the_diff_of_an_episode_out_of_turns(local_sandbox, tokenizer, edit, on_limit, taken):
    from dataclasses import replace

    role = load_role("solver")
    role = replace(role, limits=replace(role.limits, max_turns=2, submit_on_limit=on_limit))
    actions = ["```bash\nls\n```", "```bash\necho changed >> README\n```" if edit else "```bash\nls pkg\n```"]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), local_sandbox, role, solver_variables("spec"))
    assert ep.termination == "max_turns" and ep.turns == 2
    assert (ep.submission is not None) is taken
    if taken:
        assert "README" in ep.submission and "+changed" in ep.submission
    assert ep.trajectory.metadata.get("submitted_on_limit", False) is taken


NOOP = "```edit\nstr_replace {path}\n<<<<<<< SEARCH\nx = 1\n=======\nx = 1\n>>>>>>> REPLACE\n```"


@pytest.mark.parametrize("max_repeats, turns, ending", [(None, 6, "max_turns"), (1, 2, "repeated"), (2, 3, "repeated")])
def test_a_repeated_action_with_the_same_observation_ends_the_episode(local_sandbox, tokenizer, max_repeats, turns,
                                                                      ending):
    """The same refused edit again and again (the 135M policy's commonest loop) ends the episode after
    `max_repeats` repeats; the thought before the block may differ, the action and its answer may not."""
    from dataclasses import replace

    local_sandbox.exec("printf 'x = 1\\n' > m.py")
    role = load_role("solver")
    role = replace(role, limits=replace(role.limits, max_turns=6, max_repeats=max_repeats))
    thoughts = ["Fix it.", "Again.", "Once more.", "Still.", "Hm.", "Last."]
    ep = run_episode(ScriptedPolicy([f"{t}\n{NOOP.format(path='m.py')}" for t in thoughts], tokenizer),
                     local_sandbox, role, solver_variables("spec"))
    assert (ep.termination, ep.turns, ep.trajectory.termination) == (ending, turns, ending)
    observations = [m["content"] for m in ep.trajectory.messages[2:] if m["role"] == "user"]
    assert len(observations) == turns - (ending == "repeated")  # the repeat's answer is not sent
    assert all("REPLACE text is the same as the SEARCH text" in o for o in observations)
    if ending == "repeated":
        assert "REPLACE text is the same" in ep.trajectory.metadata["unsent_observation"]
    else:  # the replay of runs played without a limit (scripts/repeat_stops.py) cuts where the loop would
        from agent_scaffold.repeats import cut_turn

        assert (cut_turn(ep.trajectory.messages, 1), cut_turn(ep.trajectory.messages, 2)) == (1, 2)


def test_a_repeat_needs_the_same_action_and_the_same_observation(local_sandbox, tokenizer):
    """A command whose output changes, an action between two equal ones, or a format error between them
    is not a repeat; the episode runs to its turn limit."""
    from dataclasses import replace

    role = load_role("solver")
    role = replace(role, limits=replace(role.limits, max_turns=7, max_repeats=1, max_format_errors=5))
    counter = "```bash\necho x >> n.txt && wc -l < n.txt\n```"  # same command, a new line count each time
    ls = "```bash\nls m.py n.txt\n```"
    local_sandbox.exec("touch m.py")
    actions = [counter, counter, ls, "```bash\ntrue\n```", ls, "no block here", ls]
    ep = run_episode(ScriptedPolicy(actions, tokenizer), local_sandbox, role, solver_variables("spec"))
    assert (ep.termination, ep.turns, ep.format_errors) == ("max_turns", 7, 1)


def test_max_repeats_must_be_positive():
    from agent_scaffold.roles import EpisodeLimits

    with pytest.raises(ValueError, match="max_repeats must be positive or None"):
        EpisodeLimits(max_repeats=0)
    assert EpisodeLimits().max_repeats is None


def test_overridden_limits_take_what_is_given_and_check_it():
    from agent_scaffold.roles import EpisodeLimits

    base = EpisodeLimits(max_turns=10, max_repeats=3)
    assert base.overridden(max_turns=None, max_repeats=None) == base  # None: the limit stays
    assert base.overridden(max_turns=4, max_repeats=1) == EpisodeLimits(max_turns=4, max_repeats=1)
    with pytest.raises(ValueError, match="max_turns must be positive, got 0"):
        base.overridden(max_turns=0)
    with pytest.raises(TypeError):
        base.overridden(max_turn=4)  # a misspelt limit is not silently dropped
