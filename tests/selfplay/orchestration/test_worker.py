"""The rollout worker for real: toolz sandboxes from one pool, the scripted backend (a real policy, the
embedded tokenizer), real validation, grading and higher-order derivation.

The injector plays the expert's actions (`selfplay.demos.injector.injector_actions`) that write the handmade
valid toolz artifact cut to its one-file bug (keyfilter; the expert writes one-file mutants); the solver plays
the expert's fix (`selfplay.demos.solver_plan`) or a wrong edit.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from selfplay.config.run_config import LimitsOverride, PolicyConfig, RolloutConfig, RunConfig
from selfplay.rollout.requests import EpisodeRequest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
VALID = FIXTURES / "artifacts" / "valid"
LIMITS = LimitsOverride(max_turns=20, max_new_tokens=1536, max_context_tokens=8192, command_timeout=90.0,
                        wall_clock=900.0)


def _config(**rollout) -> RunConfig:
    return RunConfig(repos=("toolz",), policy=PolicyConfig(backend="scripted"),
                     rollout=RolloutConfig(sandboxes_per_repo=2, injector_limits=LIMITS, solver_limits=LIMITS,
                                           **rollout))


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers")
    from selfplay.rollout.policy_factory import embedded_tokenizer

    return embedded_tokenizer()


def _section(diff: str, path: str) -> str:
    parts = ["diff --git" + p for p in diff.split("diff --git")[1:]]
    (section,) = [p for p in parts if p.startswith(f"diff --git a/{path} ")]
    return section


@pytest.fixture(scope="module")
def artifact():
    """The valid fixture with only its keyfilter bug (dicttoolz) and that bug's weakening."""
    from selfplay.artifact import load_artifact

    a = load_artifact(VALID)
    return replace(a, bug_inject=_section(a.bug_inject, "toolz/dicttoolz.py"),
                   test_weaken=_section(a.test_weaken, "toolz/tests/test_dicttoolz.py"))


@pytest.fixture(scope="module")
def sources(toolz_spec, artifact):
    """The original text of the files the valid artifact's bug changes (the expert's knowledge)."""
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.demos.bug import parse_hunks

    with DockerSandbox.create(repo_image(toolz_spec), workdir=toolz_spec.workdir) as sb:
        return {h.path: sb.read_file(h.path).decode() for h in parse_hunks(artifact.bug_inject)}


@pytest.fixture(scope="module")
def injector_actions(artifact, sources):
    from selfplay.demos.injector import injector_actions

    return injector_actions(artifact, sources, random.Random(0), lines_fallback=True)


def _scripted_config(directory: Path, actions: dict) -> RunConfig:
    script = directory / "actions.json"
    script.write_text(json.dumps(actions))
    config = _config()
    return replace(config, policy=replace(config.policy, scripted_actions=str(script)))


@pytest.fixture(scope="module")
def worker(tmp_path_factory, tokenizer, injector_actions):
    """One worker built from the config (scripted_actions JSON: the valid injector); each test sets the
    scripts it plays (`_script`)."""
    from selfplay.rollout.worker import build_runner

    config = _scripted_config(tmp_path_factory.mktemp("script"), {"injector": [injector_actions]})
    runner = build_runner(config, run_id="test-worker")
    yield runner
    runner.close()


def _script(worker, tokenizer, role: str, *lists: list[str]) -> None:
    from selfplay.rollout.policy_factory import ScriptedQueues

    worker.source = ScriptedQueues({role: list(lists)}, tokenizer)


def _injector_request(i: int = 0) -> EpisodeRequest:
    return EpisodeRequest(f"test-it0-injector-{i}", "injector", "toolz", 0, 3, strategy="direct")


@pytest.fixture(scope="module")
def injected(worker, tokenizer, injector_actions):
    """The valid injector episode's result (played once; the solver tests use its task)."""
    _script(worker, tokenizer, "injector", injector_actions)  # whichever test ran before
    return worker(_injector_request())


@pytest.fixture(scope="module")
def task(injected):
    from selfplay.task import Task, make_task_id

    a = injected.artifact
    return Task(task_id=make_task_id("toolz", a), repo="toolz", artifact=a,
                fail_to_pass=injected.validation.fail_to_pass, pass_to_pass=injected.validation.pass_to_pass)


@pytest.mark.docker
@pytest.mark.slow
def test_injector_writes_a_valid_artifact(injected):
    assert not injected.infra_failure and injected.error is None, injected.error
    assert injected.termination == "submitted"
    assert injected.validation.valid, injected.validation
    assert set(injected.submission) == {"test_script.sh", "test_files.txt", "test_parser.py", "bug_inject.diff",
                                        "test_weaken.diff"}
    assert injected.trajectory.policy_version == 3  # the script plays as the requested version
    assert {"wall", "model", "sandbox", "validation"} <= set(injected.timings)
    assert injected.timings["validation"] > 0 and injected.worker


@pytest.mark.docker
@pytest.mark.slow
def test_injector_submitting_three_of_five_files_is_invalid_not_an_error(worker, tokenizer, injector_actions):
    # drop the last two saves (bug_inject.diff and test_weaken.diff are never written)
    actions = [a for a in injector_actions if "bug_inject.diff" not in a and "test_weaken.diff" not in a]
    _script(worker, tokenizer, "injector", actions)
    result = worker(_injector_request(1))
    assert not result.infra_failure and result.termination == "submitted"
    assert result.artifact is None and not result.validation.valid
    assert "missing bug_inject.diff, test_weaken.diff" in result.validation.error
    assert set(result.submission) == {"test_script.sh", "test_files.txt", "test_parser.py"}


@pytest.mark.docker
@pytest.mark.slow
def test_injector_that_never_submits_is_invalid(worker, tokenizer):
    _script(worker, tokenizer, "injector", ["I will not use a tool."] * 3)
    result = worker(replace(_injector_request(2), strategy="removal"))
    assert not result.infra_failure and result.termination == "format_errors"
    assert result.validation is not None and not result.validation.valid and "no artifact" in result.validation.error


@pytest.mark.docker
@pytest.mark.slow
def test_a_bug_whose_spec_leaves_the_solver_no_turn_is_refused_before_any_suite_runs(worker, tokenizer, toolz_spec,
                                                                                   injector_actions, injected):
    """The same valid artifact, with a solver context too small for its spec: invalid, with the reason, and
    no validation run (`rollout.refuse_unreadable_specs`); the injector's outcome label says why."""
    from agent_scaffold.agent import first_turn_room
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.roles import load_role, solver_variables
    from selfplay.diffs import reverse_diff
    from selfplay.experiment.failures import injector_outcome
    from selfplay.rollout.worker import episode_limits

    role, config = load_role("solver"), worker.config
    spec = reverse_diff(injected.artifact.test_weaken)
    room = first_turn_room(ScriptedPolicy([], tokenizer), role, solver_variables(spec), toolz_spec.workdir,
                           episode_limits(role, LIMITS))
    small = replace(LIMITS, max_context_tokens=LIMITS.max_context_tokens - room + role.limits.min_turn_tokens - 1)
    error = (f"spec too long for the solver: the solver's prompt with this spec (the reversed test_weaken.diff) "
             f"leaves {role.limits.min_turn_tokens - 1} tokens of the solver's context for a first turn, and a turn "
             f"needs {role.limits.min_turn_tokens}: weaken fewer or shorter tests, so that the spec fits")
    worker.config = replace(config, rollout=replace(config.rollout, solver_limits=small))
    try:
        _script(worker, tokenizer, "injector", injector_actions)
        result = worker(_injector_request(3))
        # with a refusal to spend, the injector is told at its submit, and its next submit ends the episode
        worker.config = replace(worker.config, rollout=replace(
            worker.config.rollout, injector_limits=replace(LIMITS, refused_submits=1)))
        _script(worker, tokenizer, "injector", [*injector_actions, "```submit\n```"])
        told = worker(_injector_request(4))
    finally:
        worker.config = config
    assert not result.infra_failure and result.termination == "submitted"
    assert not result.validation.valid and result.validation.suite_runs == 0 and "validation" not in result.timings
    assert result.validation.error == error
    assert result.trajectory.metadata["refused_submits"] == 0
    assert result.artifact == injected.artifact  # kept: the store records the refused artifact and why
    assert injector_outcome(result.termination, {"valid": False, "error": result.validation.error}) == "spec_too_long"

    assert told.termination == "submitted" and told.trajectory.metadata["refused_submits"] == 1
    refusals = [m["content"] for m in told.trajectory.messages if m["content"].startswith("Submit refused")]
    assert refusals == [f"Submit refused (1 of 1): {error}; then submit again. The next submit after the last "
                        "refusal ends the episode as it is."]
    assert told.validation.error == error and told.artifact == injected.artifact


@pytest.mark.docker
@pytest.mark.slow
def test_a_spec_check_that_fails_at_a_submit_leaves_the_submit_standing(worker, tokenizer, injector_actions,
                                                                        injected, caplog):
    """An error of our own in the check asked at a submit does not end the episode or refuse the submit: the
    rule is asked again before validation, which judges the artifact as usual."""
    calls = []
    real = worker._unreadable_spec

    def flaky(*args):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("tokenizer gone")
        return real(*args)

    config = worker.config
    worker.config = replace(config, rollout=replace(config.rollout, injector_limits=replace(LIMITS, refused_submits=1)))
    worker._unreadable_spec = flaky
    try:
        _script(worker, tokenizer, "injector", injector_actions)
        result = worker(_injector_request(5))
    finally:
        worker.config = config
        del worker._unreadable_spec
    assert not result.infra_failure and result.termination == "submitted"
    assert result.trajectory.metadata["refused_submits"] == 0 and len(calls) == 2
    assert "the spec check at a submit failed" in caplog.text
    assert result.validation.valid and result.artifact == injected.artifact


def _solver_request(task, i: int) -> EpisodeRequest:
    return EpisodeRequest(f"test-it0-solver-{i}", "solver", "toolz", 0, 0, task=task, group_id="g0", seed=i)


@pytest.mark.docker
@pytest.mark.slow
def test_solver_with_the_right_fix_is_resolved(worker, tokenizer, task):
    from sandboxes.docker import DockerSandbox
    from selfplay.demos.bug import parse_hunks
    from selfplay.demos.solver_plan import SolverTask, solver_actions
    from selfplay.judge.grader import build_buggy_state

    pool = worker.pool("toolz")
    with DockerSandbox.create(pool.image, workdir=pool.workdir) as sb:  # the buggy sources the expert knows
        build_buggy_state(sb, task.artifact)
        buggy = {h.path: sb.read_file(h.path).decode() for h in parse_hunks(task.artifact.bug_inject)}
    plan = SolverTask(spec=task.spec, fail_to_pass=task.fail_to_pass, bug_inject=task.artifact.bug_inject,
                      buggy_sources=buggy, reproduce=False)
    _script(worker, tokenizer, "solver", solver_actions(plan, random.Random(0)))
    result = worker(_solver_request(task, 0))
    assert not result.infra_failure, result.error
    assert result.grade.resolved and result.grade.reward == 1, result.grade
    assert result.higher_order is None and "grading" in result.timings


@pytest.mark.docker
@pytest.mark.slow
def test_solver_episodes_have_the_localize_tool_only_with_rollout_solver_localize(worker, tokenizer, task):
    actions = ["```localize\n```",
               "```edit\nstr_replace toolz/dicttoolz.py:156\n<<<<<<< SEARCH\nif not predicate(k):\n=======\n"
               "if predicate(k):\n>>>>>>> REPLACE\n```", "```submit\n```"]
    config = worker.config
    try:
        worker.config = replace(config, rollout=replace(config.rollout, solver_localize=True))
        _script(worker, tokenizer, "solver", actions)
        result = worker(_solver_request(task, 5))
    finally:
        worker.config = config
    assert result.grade.resolved, result.grade
    listed = result.trajectory.messages[3]["content"]
    assert "toolz/dicttoolz.py:156" in listed and "if not predicate(k):" in listed
    _script(worker, tokenizer, "solver", actions[:1] + actions[2:])
    without = worker(_solver_request(task, 6))
    assert "localize is not available" in without.trajectory.messages[3]["content"]


@pytest.mark.docker
@pytest.mark.slow
def test_a_stored_task_whose_spec_leaves_the_solver_no_turn_comes_back_unplayed(worker, tokenizer, toolz_spec, task):
    """A store can hold a task whose spec no solver of this policy can read (a procedural seed, a task from
    before the rule, or from a run with a larger context): the attempt comes back unplayed, before any
    sandbox, with validation's reason; without the rule it is played and ends before a turn, as before."""
    from agent_scaffold.agent import first_turn_room
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.roles import load_role, solver_variables
    from selfplay.rollout.worker import episode_limits
    from selfplay.validation.report import unreadable_spec_error

    role, config = load_role("solver"), worker.config
    room = first_turn_room(ScriptedPolicy([], tokenizer), role, solver_variables(task.spec, "tests"),
                           toolz_spec.workdir, episode_limits(role, LIMITS))
    small = replace(LIMITS, max_context_tokens=LIMITS.max_context_tokens - room + role.limits.min_turn_tokens - 1)
    results = {}
    try:
        for rule in (True, False):
            worker.config = replace(config, rollout=replace(config.rollout, solver_limits=small,
                                                            refuse_unreadable_specs=rule))
            _script(worker, tokenizer, "solver", ["```submit\n```"])
            results[rule] = worker(_solver_request(task, 20 + rule))
    finally:
        worker.config = config
    unplayed, played = results[True], results[False]
    reason = unreadable_spec_error(role.limits.min_turn_tokens - 1, role.limits.min_turn_tokens)
    assert unplayed.unplayable == reason == unplayed.error and not unplayed.infra_failure
    assert unplayed.termination == "spec_too_long" and unplayed.trajectory is None and unplayed.grade is None
    assert "sandbox" not in unplayed.timings and unplayed.worker
    assert played.unplayable is None and played.termination == "context_exhausted"
    assert played.trajectory.turn_spans == () and played.grade.reward == -1 and "sandbox" in played.timings


@pytest.mark.docker
@pytest.mark.slow
def test_solver_with_a_wrong_fix_fails_and_makes_a_higher_order_task(worker, tokenizer, task):
    from selfplay.demos.bug import parse_hunks

    path = parse_hunks(task.artifact.bug_inject)[0].path
    wrong = ["Add a note.\n```bash\nprintf '\\nNOTE = 1\\n' >> " + path + "\n```", "Done.\n```submit\n```"]
    _script(worker, tokenizer, "solver", wrong)
    result = worker(_solver_request(task, 1))
    assert not result.infra_failure, result.error
    assert not result.grade.resolved and result.grade.reward == -1
    assert "NOTE = 1" in result.submission
    ho = result.higher_order
    assert ho is not None and ho.order == 2 and ho.parent_id == task.task_id and "NOTE = 1" in ho.pred_patch
    assert set(ho.fail_to_pass) == set(task.fail_to_pass)
    # the same failed patch, already used (the loop passes store.used_failed_patches): no second task
    from selfplay.diffs import normalised_hash

    _script(worker, tokenizer, "solver", wrong)
    again = worker(replace(_solver_request(task, 2), seen=frozenset({normalised_hash(result.submission)})))
    assert not again.grade.resolved and again.higher_order is None


@pytest.mark.docker
@pytest.mark.slow
def test_concurrent_validations_and_episodes_on_one_pool_of_two_finish(worker, tokenizer, injector_actions, task):
    """Two injector episodes (each validating with parallelism 2) and a solver episode share a pool of
    size 2 on three threads: they all finish (no deadlock), under a guard."""
    from selfplay.rollout.executor import LocalExecutor
    from selfplay.rollout.policy_factory import ScriptedQueues

    wrong = ["```bash\nls\n```", "```submit\n```"]
    worker.source = ScriptedQueues({"injector": [injector_actions], "solver": [wrong]}, tokenizer)
    requests = [_injector_request(10), _injector_request(11), _solver_request(task, 12)]
    executor = LocalExecutor(worker, workers=3, retries=0)
    results = []
    thread = threading.Thread(target=lambda: results.extend(executor.run(requests)), daemon=True)
    thread.start()
    thread.join(timeout=900)
    assert not thread.is_alive(), f"deadlock: {len(results)} of 3 results after 900 s"
    assert sorted(r.request.episode_id for r in results) == sorted(r.episode_id for r in requests)
    assert all(not r.infra_failure for r in results), [r.error for r in results]
    assert [r.validation.valid for r in results if r.request.role == "injector"] == [True, True]


# --- the pure parts: no Docker -------------------------------------------------------------------------


def test_scripted_actions_file_is_checked_with_a_clear_error(tmp_path):
    from selfplay.errors import SelfPlayError
    from selfplay.rollout.policy_factory import load_scripted_actions

    good = tmp_path / "ok.json"
    good.write_text(json.dumps({"solver": [["a", "b"]]}))
    assert load_scripted_actions(good) == {"solver": [["a", "b"]]}
    for text, words in (("[1]", "must be an object"), ('{"judge": []}', "must be an object"),
                        ('{"solver": ["a"]}', "list of lists"), ("{nope", "not JSON")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(SelfPlayError, match=words):
            load_scripted_actions(bad)
    with pytest.raises(SelfPlayError, match="does not exist"):
        load_scripted_actions(tmp_path / "missing.json")


def test_scripted_queues_take_lists_in_turn_per_role_and_play_as_the_requested_version():
    from agent_scaffold.policy import SamplingParams
    from selfplay.errors import SelfPlayError
    from selfplay.rollout.policy_factory import ScriptedQueues

    queues = ScriptedQueues({"solver": [["one"], ["two"]]}, tokenizer=None)
    texts = [queues.policy_for("solver", 5).generate([[1]], SamplingParams(max_new_tokens=8))[0] for _ in range(3)]
    assert [c.text for c in texts] == ["one", "two", "one"] and {c.policy_version for c in texts} == {5}
    with pytest.raises(SelfPlayError, match="no action lists for the injector role"):
        queues.policy_for("injector", 0)


def test_round_robin_spreads_generate_calls_over_endpoints():
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.policy import SamplingParams
    from selfplay.rollout.policy_factory import RoundRobinPolicy

    a, b = ScriptedPolicy(["a"] * 3, version=2), ScriptedPolicy(["b"] * 3, version=1)
    rr = RoundRobinPolicy([a, b])
    out = [rr.generate([[0]], SamplingParams(max_new_tokens=4))[0].text for _ in range(4)]
    assert out == ["a", "b", "a", "b"] and rr.version == 1


def test_limits_take_overrides_and_never_exceed_the_model_window():
    from types import SimpleNamespace

    from agent_scaffold.agent import context_window, fit_context_window
    from agent_scaffold.roles import load_role
    from selfplay.rollout.worker import episode_limits

    role = load_role("injector", "removal")  # 65,536 tokens by default
    hf_like = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=8192)))
    limits = fit_context_window(episode_limits(role, LimitsOverride(max_turns=7)), hf_like)
    assert (limits.max_turns, limits.max_context_tokens) == (7, 8192)
    small = episode_limits(role, LimitsOverride(max_context_tokens=4096))
    assert fit_context_window(small, hf_like).max_context_tokens == 4096
    assert episode_limits(role, LimitsOverride(max_observation_chars=1200)).max_observation_chars == 1200
    assert episode_limits(role, LimitsOverride()).max_repeats is None  # the role's default: never
    assert episode_limits(role, LimitsOverride(max_repeats=2)).max_repeats == 2
    assert context_window(hf_like) == 8192
    assert context_window(SimpleNamespace(policy=hf_like, tokenizer=None)) == 8192  # a wrapper (batching)
    assert context_window(SimpleNamespace(tokenizer=SimpleNamespace(model_max_length=int(1e30)))) is None


def test_build_runner_reads_the_scripted_actions_of_the_config(tmp_path, tokenizer):
    from selfplay.rollout.policy_factory import ScriptedQueues
    from selfplay.rollout.worker import Worker, build_runner

    runner = build_runner(_scripted_config(tmp_path, {"injector": [["a"]], "solver": [["b"], ["c"]]}), run_id="x")
    assert isinstance(runner, Worker) and isinstance(runner.source, ScriptedQueues)
    assert runner.source.actions == {"injector": [["a"]], "solver": [["b"], ["c"]]}
    assert runner.source.policy_for("solver", 0).tokenizer is not None  # the embedded chat template
    runner.close()  # no pool was started: nothing to remove


def test_http_backend_balances_endpoints_round_robin(tokenizer):
    """Two real `PolicyServer`s (each serving a scripted policy) behind policy.endpoints."""
    from agent_scaffold.embedded import default_model_dir
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.policy import SamplingParams
    from agent_scaffold.policy_server import PolicyServer
    from selfplay.rollout.policy_factory import policy_source, served_name_source

    servers = [PolicyServer(ScriptedPolicy([name] * 4, tokenizer=tokenizer, version=4), port=0, model_name="m")
               for name in ("left", "right")]
    for server in servers:
        server.start()
    try:
        source = policy_source(PolicyConfig(backend="vllm", endpoints=tuple(s.url for s in servers), model_name="m",
                                            model_dir=str(default_model_dir())))
        policy = source.policy_for("solver", 0)
        prompt = tokenizer.encode("hi")
        texts = [policy.generate([prompt], SamplingParams(max_new_tokens=8))[0].text for _ in range(4)]
    finally:
        for server in servers:
            server.shutdown()
    assert texts == ["left", "right", "left", "right"] and policy.version == 4
    assert served_name_source("Qwen/Qwen3-8B", "policy.model_dir") == "Qwen/Qwen3-8B"
    assert served_name_source("served", "policy.model_dir") is None  # embedded, with a warning


def test_hf_backend_is_batched_and_reports_its_version():
    pytest.importorskip("torch")
    from agent_scaffold.agent import context_window
    from selfplay.rollout.policy_factory import hf_policy

    policy = hf_policy(PolicyConfig(backend="hf", device="auto", max_batch=4), version=3)
    try:
        assert type(policy).__name__ == "BatchingPolicy" and policy.max_batch == 4
        assert policy.version == 3 and context_window(policy) == 8192  # SmolLM2's window
    finally:
        policy.close()


@pytest.mark.docker
@pytest.mark.slow
def test_hostile_episodes_give_results(worker, tokenizer, task):
    """Five garbage artifact files, a hung command and a flood of output: verdicts, not exceptions."""
    garbage = ("```bash\nmkdir -p /tmp/ssr_artifact && cd /tmp/ssr_artifact && for f in test_script.sh "
               "test_files.txt test_parser.py bug_inject.diff test_weaken.diff; do head -c 3000 /dev/urandom "
               "> $f; done\n```")
    _script(worker, tokenizer, "injector", [garbage, "```submit\n```"])
    result = worker(_injector_request(20))
    assert not result.infra_failure and result.termination == "submitted"
    assert result.validation is not None and not result.validation.valid and result.validation.error

    hung = ["```bash\nsleep 600\n```", "```bash\nyes flood | head -c 50000000\n```",
            "```bash\nhead -c 2000000 /dev/zero | tr '\\\\0' x > big.txt\n```", "```submit\n```"]
    _script(worker, tokenizer, "solver", hung)
    fast = replace(worker.config.rollout.solver_limits, command_timeout=3.0)
    original = worker.config
    worker.config = replace(original, rollout=replace(original.rollout, solver_limits=fast))
    try:
        result = worker(_solver_request(task, 21))
    finally:
        worker.config = original
    assert not result.infra_failure, result.error
    assert result.termination == "submitted" and result.grade is not None and not result.grade.resolved


def _with_limits(worker, role: str, **limits):
    """The worker's config with `role`'s budget overrides changed (restore `worker.config` after)."""
    key = f"{role}_limits"
    rollout = worker.config.rollout
    return replace(worker.config, rollout=replace(rollout, **{key: replace(getattr(rollout, key), **limits)}))


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("on_limit", [False, True])
def test_a_solver_out_of_turns_is_graded_on_its_diff_only_with_submit_on_limit(worker, tokenizer, task, on_limit):
    """The right edit made in the last turn, never submitted: without `submit_on_limit` the attempt fails
    ungraded; with it, the sandbox's diff is graded and resolves the task, and the ending stays max_turns."""
    edit = ("```edit\nstr_replace toolz/dicttoolz.py:156\n<<<<<<< SEARCH\nif not predicate(k):\n=======\n"
            "if predicate(k):\n>>>>>>> REPLACE\n```")
    config = worker.config
    try:
        worker.config = _with_limits(worker, "solver", max_turns=1, submit_on_limit=on_limit)
        _script(worker, tokenizer, "solver", [edit])
        result = worker(_solver_request(task, 10 + on_limit))
    finally:
        worker.config = config
    assert not result.infra_failure and result.termination == "max_turns", result.error
    assert result.trajectory.metadata.get("submitted_on_limit", False) is on_limit
    if on_limit:
        assert "if predicate(k):" in result.submission
        assert result.grade.resolved and result.grade.reward == 1, result.grade
    else:
        assert result.submission is None and result.grade.reward == -1
        assert "without a submission" in result.grade.error


@pytest.mark.docker
@pytest.mark.slow
def test_an_injector_out_of_turns_is_validated_with_submit_on_limit(worker, tokenizer, injector_actions):
    """The valid artifact written but never submitted: with `submit_on_limit` the files in the artifact
    directory are taken and validated as a submission would be."""
    assert "```submit" in injector_actions[-1]
    written = injector_actions[:-1]
    config = worker.config
    try:
        worker.config = _with_limits(worker, "injector", max_turns=len(written), submit_on_limit=True)
        _script(worker, tokenizer, "injector", written)
        result = worker(_injector_request(3))
    finally:
        worker.config = config
    assert not result.infra_failure and result.termination == "max_turns", result.error
    assert result.trajectory.metadata["submitted_on_limit"] is True
    assert result.validation.valid, result.validation


@pytest.mark.docker
@pytest.mark.slow
def test_a_kit_request_s_stored_lines_reach_the_kit_in_its_sandbox(worker, tokenizer):
    """`rollout.kit_store_view` end to end below the loop: the request's (path, line) go to the kit the
    worker installs, whose `mutate NAME` then leaves out the change on that line (toolz's frequencies:
    line 546 holds one of its three listed changes)."""
    from agent_scaffold.artifact_kit import KIT_COMMAND, KitView

    _script(worker, tokenizer, "injector", [f"```bash\n{KIT_COMMAND} oracle toolz/tests/test_itertoolz.py\n```",
                                            f"```bash\n{KIT_COMMAND} mutate frequencies\n```", "```submit\n```"])
    result = worker(replace(_injector_request(3), strategy="kit", kit_view=KitView((("toolz/itertoolz.py", 546),))))
    listing = result.trajectory.messages[5]["content"]
    assert listing.startswith("1. line 548: d[item] += 1  ->  pass\n2. line 548: d[item] += 1  ->  d[item] += 2\n"
                              "(1 more on lines that bugs in the store already change: not listed.)\n"), listing
    # `rollout.kit_next_function`: with all of frequencies' lines stored, the request's flag makes the kit
    # list the next function's changes instead of refusing
    result = worker(replace(_injector_request(3), strategy="kit", kit_view=KitView(
        (("toolz/itertoolz.py", 546), ("toolz/itertoolz.py", 548)), next_function=True)))
    listing = result.trajectory.messages[5]["content"]
    assert listing.startswith("1. line "), listing
    assert ("\n(Every change of frequencies is on a line that a bug in the store already changes: these are the "
            "changes of ") in listing and "[exit code 0]" in listing, listing
