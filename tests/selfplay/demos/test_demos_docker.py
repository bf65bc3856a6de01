"""`selfplay demos` for real on toolz: seed, demonstrate, grade, store; then every stored demonstration is
replayed (its assistant turns through the scripted backend, in a fresh buggy sandbox) and graded +1 again."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory):
    return tmp_path_factory.mktemp("demos")


@pytest.fixture(scope="module")
def demos(demo_root):
    pytest.importorskip("transformers")
    from repos.listfile import get_repo
    from selfplay.demos.collect import make_demos
    from selfplay.store import open_store

    root = demo_root
    spec = get_repo("toolz")
    store = open_store(str(root / "s.db"))
    report = make_demos(spec, 2, store, root / "out", seed=3, seed_cache=root / "seeds", injector=1,
                         injector_strategy="kit")
    yield spec, store, report
    store.close()


def test_demonstrations_are_stored_short_and_graded_plus_one(demos):
    _, store, report = demos
    attempts = [a for a in store.attempts(source="demo") if a.role == "solver"]
    assert attempts and len(attempts) == len(report.kept) >= 1, report
    assert all(a.reward == 1.0 and a.role == "solver" and a.tokens <= 2048 for a in attempts)
    # demonstrations measure the expert, not the policy: the curriculum statistics stay untouched
    assert all(s.attempts == 0 for s in store.task_stats([a.task_id for a in attempts]))


def test_seeds_are_validated_once_and_then_read_from_the_seed_cache(demos, demo_root):
    """The first round seeded for real (a cold cache) with the demonstrations' length filter; the same
    inputs give the same tasks back from the cache, and another seed config is a different entry."""
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from sandboxes.images import repo_image
    from selfplay.demos.collect import SEED_VALIDATION_RUNS
    from selfplay.demos.seed_cache import cached_seed, seed_key
    from selfplay.demos.solver import DEMO_LIMITS, artifact_fits, fits_key
    from selfplay.procedural.seed import SeedConfig
    from selfplay.task import make_task_id
    from selfplay.validation import ValidationConfig

    spec, store, report = demos
    assert report.seed_rounds_cached == 0 and report.seed_time > 0
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    validation = ValidationConfig(original_runs=SEED_VALIDATION_RUNS)
    image = repo_image(spec)
    key = seed_key(spec, image, 2, SeedConfig(seed=3000), validation, fits_key(tok, DEMO_LIMITS))
    assert (demo_root / "seeds" / key / "index.json").is_file()
    seeded, hit = cached_seed(spec, 2, image=image, config=SeedConfig(seed=3000), validation=validation,
                              accept=lambda a: artifact_fits(a, tok), accept_key=fits_key(tok, DEMO_LIMITS),
                              cache=demo_root / "seeds")
    assert hit and seeded
    assert all(r.report.valid and r.report.fail_to_pass and artifact_fits(r.artifact, tok) for r in seeded)
    # make_demos stored every task of its first round; the cache gives back the same ones
    assert all(store.has_task(make_task_id(spec.name, r.artifact)) for r in seeded)
    assert seed_key(spec, image, 2, SeedConfig(seed=3001), validation) != seed_key(
        spec, image, 2, SeedConfig(seed=3000), validation)


def test_every_stored_demonstration_replays_to_plus_one(demos):
    from transformers import AutoTokenizer

    from agent_scaffold.agent import run_episode
    from agent_scaffold.embedded import default_model_dir
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.roles import load_role, solver_variables
    from agent_scaffold.trajectory import load_jsonl
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.demos.solver import DEMO_LIMITS
    from selfplay.judge.grader import build_buggy_state, grade

    spec, store, _ = demos
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    for attempt in [a for a in store.attempts(source="demo") if a.role == "solver"]:
        (stored,) = load_jsonl(attempt.trajectory_path)
        task = store.get_task(attempt.task_id)
        actions = [m["content"] for m in stored.messages if m["role"] == "assistant"]
        with DockerSandbox.create(repo_image(spec), workdir=spec.workdir) as sb:
            build_buggy_state(sb, task.artifact)
            ep = run_episode(ScriptedPolicy(actions, tokenizer=tok), sb, load_role("solver"),
                             solver_variables(task.spec, "tests"), limits=DEMO_LIMITS)
        assert ep.termination == "submitted"
        # the sampled (assistant) tokens are the stored ones exactly
        replayed = [ep.trajectory.input_ids[s:e] for s, e in ep.trajectory.turn_spans]
        assert replayed == [stored.input_ids[s:e] for s, e in stored.turn_spans]
        result = grade(task.artifact, ep.submission, task.fail_to_pass, task.pass_to_pass, spec=spec)
        assert result.reward == 1, result


def test_the_short_plan_solves_in_four_turns_of_at_most_96_tokens(demos):
    """The 4-turn plan (grep, view, str_replace, submit) fits the default run's solver budget and is
    graded +1 by the real grader."""
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from selfplay.demos.solver import run_solver_demo

    spec, store, _ = demos
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    for attempt in [a for a in store.attempts(source="demo") if a.role == "solver"]:
        demo = run_solver_demo(store.get_task(attempt.task_id), spec, tok, random.Random(0), short=True)
        spans = demo.trajectory.turn_spans
        assert demo.kept and demo.trajectory.metadata["plan"] == "short", demo.reason
        assert len(spans) == 4 and max(e - s for s, e in spans) <= 96, spans


def test_a_wrong_repair_is_graded_and_dropped(demos):
    """The grader, not the expert, decides: a demonstration whose fix is wrong is not kept."""
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from selfplay.demos import solver as solver_mod
    from selfplay.demos.solver import run_solver_demo

    spec, store, _ = demos
    task = store.get_task([a for a in store.attempts(source="demo") if a.role == "solver"][0].task_id)
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    real = solver_mod.expert_plan

    def sabotaged(plan, rng):  # submit right after reproducing: no fix in the diff
        script = real(plan, rng)
        return replace(script, actions=tuple(a for a in script.actions if "str_replace" not in a))

    solver_mod.expert_plan = sabotaged
    try:
        demo = run_solver_demo(task, spec, tok, random.Random(0))
    finally:
        solver_mod.expert_plan = real
    assert demo.termination == "submitted" and demo.reward == -1 and not demo.kept


@pytest.mark.parametrize("strategy", ["direct", "kit"])
def test_injector_expert_writes_an_artifact_that_validates(demos, strategy):
    """The expert's plan of either strategy submits an artifact that validates: `direct` in eight turns, `kit`
    (the artifact kit writes the test files, lists the changes, saves the bug diff and the weakening) in six
    with no typed script and no typed code."""
    from transformers import AutoTokenizer

    from agent_scaffold.actions import parse_action
    from agent_scaffold.embedded import default_model_dir
    from selfplay.demos.injector import NotDemonstrable, run_injector_demo
    from selfplay.demos.warm_start_config import WarmStartConfig

    spec, store, _ = demos
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    tasks = store.get_tasks([t.task_id for t in store.task_stats(repo=spec.name)])
    demo = task = None
    for task in tasks:  # the first stored bug whose function the expert's listing and view can show
        try:
            demo = run_injector_demo(task.artifact, spec, tok, random.Random(1), strategy=strategy)
            break
        except NotDemonstrable:
            continue
    assert demo is not None, f"none of {len(tasks)} stored toolz bugs is demonstrable"
    assert demo.trajectory.termination == "submitted" and demo.trajectory.metadata["format_errors"] == 0
    assert demo.kept, demo.report
    # it fits the default warm start's injector budget and the run's injector turns
    assert len(demo.trajectory.input_ids) <= WarmStartConfig().injector_max_context_tokens
    assert len(demo.trajectory.turn_spans) <= 8
    assert demo.report.valid and demo.trajectory.reward == 1.0
    assert demo.trajectory.metadata["strategy"] == strategy
    actions = [m["content"] for m in demo.trajectory.messages if m["role"] == "assistant"]
    assert any("cat > /tmp/ssr_artifact/test_parser.py" in a for a in actions) == (strategy == "direct")
    assert sum("python /tmp/kit.py " in a for a in actions) == (4 if strategy == "kit" else 0)
    # the episode wrote the same bug and the same oracle tests (headers and context may differ)
    assert demo.artifact.test_files == task.artifact.test_files
    assert set(demo.report.fail_to_pass) == set(task.fail_to_pass)
    msgs = demo.trajectory.messages
    # the oracle files it selects are among those its first observation listed
    assert all(f in msgs[3]["content"] for f in task.artifact.test_files)
    turns = [(parse_action(m["content"]), msgs[i + 1]["content"]) for i, m in enumerate(msgs[:-1])
             if m["role"] == "assistant"]
    if strategy == "kit":
        # the function it breaks is named in the listing `oracle` printed, and the number it applies is one
        # `mutate NAME` printed: nothing of the code is typed
        assert [a.tool for a, _ in turns] == ["bash"] * 5  # then submit
        name, k = turns[3][0].command.split()[-2:]
        assert turns[2][0].command.split()[-1] == name and f"def {name}(" in turns[1][1]
        assert f"\n{k}. line " in "\n" + turns[2][1]
        return
    # the function it views is named in the listing printed before, and the SEARCH text it types is in
    # the view (the sandbox's real grep and sed): nothing of the code is typed from memory
    (k,) = [i for i, (a, _) in enumerate(turns) if a.tool == "edit"]
    view = turns[k - 1][0].command
    name = view.split("/def ")[1].split("(")[0]
    assert f"def {name}(" in turns[k - 2][1] and turns[k][0].old in turns[k - 1][1]
    assert turns[k - 2][1].splitlines()[0] == turns[k][0].path  # the listing printed the path it edits


def test_injector_expert_skips_an_artifact_whose_tests_its_listing_does_not_show(demos):
    import dataclasses

    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from selfplay.demos.injector import NotDemonstrable, run_injector_demo

    spec, store, _ = demos
    task = store.get_task([a for a in store.attempts(source="demo") if a.role == "solver"][0].task_id)
    hidden = dataclasses.replace(task.artifact, test_files=("tests/zz/test_never_listed.py",))
    with pytest.raises(NotDemonstrable, match="tests/zz/test_never_listed.py are not among"):
        run_injector_demo(hidden, spec, AutoTokenizer.from_pretrained(default_model_dir()), random.Random(1))


def test_stored_injector_demonstrations_replay_to_valid_artifacts(demos):
    """make_demos(injector=1) stored an injector demonstration; its assistant turns, replayed through the
    scripted backend with the role of its strategy in a fresh sandbox, submit an artifact that validates again,
    with the same tokens, and with loss on every turn (each parses as a valid action)."""
    from transformers import AutoTokenizer

    from agent_scaffold.agent import run_episode
    from agent_scaffold.embedded import default_model_dir
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.roles import load_role
    from agent_scaffold.trajectory import load_jsonl
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.artifact import BugArtifact
    from selfplay.demos.injector import ARTIFACT_DIR, INJECTOR_LIMITS
    from selfplay.demos.warm_start_config import WarmStartConfig
    from selfplay.learner.rft import valid_turn_mask
    from selfplay.validation import validate

    spec, store, report = demos
    attempts = [a for a in store.attempts(source="demo") if a.role == "injector"]
    assert len(attempts) == len(report.injector_kept) == 1, report.dropped
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    (stored,) = load_jsonl(attempts[0].trajectory_path)
    assert stored.role == "injector" and stored.reward == 1.0 and stored.metadata["strategy"] == "kit"
    assert len(stored.input_ids) <= WarmStartConfig().injector_max_context_tokens
    assert sum(valid_turn_mask(stored)) == sum(stored.loss_mask) > 0
    actions = [m["content"] for m in stored.messages if m["role"] == "assistant"]
    with DockerSandbox.create(repo_image(spec), workdir=spec.workdir) as sb:
        ep = run_episode(ScriptedPolicy(actions, tokenizer=tok), sb, load_role("injector", stored.metadata["strategy"]),
                         {"artifact_dir": ARTIFACT_DIR}, limits=INJECTOR_LIMITS)
    assert ep.termination == "submitted"
    assert [ep.trajectory.input_ids[s:e] for s, e in ep.trajectory.turn_spans] == [
        stored.input_ids[s:e] for s, e in stored.turn_spans]
    result = validate(BugArtifact.from_files(ep.submission), spec)
    assert result.valid, result


def test_the_warm_start_builds_for_real_at_a_tiny_size(demos, demo_root, tmp_path, empty_cache):
    """`warm_start_checkpoint` end to end on toolz (the module's seeds, read back from its seed cache):
    solver and injector demonstrations, SFT of a tiny model on both roles, the manifest."""
    pytest.importorskip("deepspeed")
    from selfplay.demos.warm_start import warm_start_checkpoint, warm_start_info
    from selfplay.demos.warm_start_config import WarmStartConfig
    from selfplay.learner.tiny_model import save_tiny_model

    (empty_cache / "seeds").symlink_to(demo_root / "seeds")
    tiny = save_tiny_model(tmp_path / "tiny", max_position_embeddings=4096)
    config = WarmStartConfig(repos=("toolz",), n_per_repo=2, injector_per_repo=1, seed=3, model_dir=str(tiny),
                             epochs=1)
    path = warm_start_checkpoint(config)
    info = warm_start_info(config)
    assert path.name == f"model-{info.content_key}" and (path / "sft.json").is_file()
    assert info.demonstrations["solver"] >= 1 and info.demonstrations["injector"] == 1, info
    assert sum(info.operators.values()) == info.demonstrations["solver"]
    assert info.budgets["injector"]["tokens"] <= config.injector_max_context_tokens
    assert info.budgets["injector"]["turns"] == 6  # the kit plan (WarmStartConfig.injector_strategy)


def test_visible_only_demonstrates_exactly_the_tasks_whose_spec_names_the_function(demos, demo_root):
    """`visible_only` (`warm_start.config.locate: visible`): a stored task whose spec names the function its
    demonstration grepped is demonstrated again, graded +1, with the spec's call quoted and then viewed and
    edited by that name; one whose spec never names it, or whose call the editor resolves to another
    definition or to several, is NotDemonstrable. Then make_demos skips those and still stores +1
    demonstrations of the former."""
    import re

    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from agent_scaffold.trajectory import load_jsonl
    from selfplay.demos.collect import make_demos
    from selfplay.demos.solver import run_solver_demo
    from selfplay.demos.solver_plan import spec_call
    from selfplay.errors import NotDemonstrable
    from selfplay.store import open_store

    spec, store, _ = demos
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    kept, exhausted = [], []
    for attempt in [a for a in store.attempts(source="demo") if a.role == "solver"]:
        task = store.get_task(attempt.task_id)
        (traj,) = load_jsonl(attempt.trajectory_path)
        said = "\n".join(str(m["content"]) for m in traj.messages if m["role"] == "assistant")
        name = re.search(r'git grep -n "def (\w+)\(', said).group(1)
        call = spec_call(task.spec, name)
        if call is None:
            with pytest.raises(NotDemonstrable, match=f"never name `{name}`"):
                run_solver_demo(task, spec, tok, random.Random(0), visible_only=True)
            continue
        try:
            demo = run_solver_demo(task, spec, tok, random.Random(0), visible_only=True)
        except NotDemonstrable as exc:  # the call resolves elsewhere, or to several definitions (`merge`)
            assert f"`view {call}` " in str(exc), exc
            continue
        replies = [str(m["content"]) for m in demo.trajectory.messages if m["role"] == "assistant"]
        view = next(r for r in replies if f"view {call}\n" in r)  # the call copied whole
        assert f"`{call}`" in view.split("```")[0], view
        assert f"str_replace {call}\n" in "".join(replies), replies  # and the repair from its definition
        observations = [str(m["content"]) for m in demo.trajectory.messages if m["role"] == "user"]
        assert any(o.startswith(f"{call} is defined at ") for o in observations), observations
        if demo.termination == "context_exhausted":  # a long spec and a whole page can overflow 2,048 tokens
            assert sum(len(r) for r in replies) > 0 and not demo.kept
            exhausted.append(task.task_id)
            continue
        assert demo.kept, (demo.reason, replies)
        kept.append(task.task_id)

    visible = open_store(str(demo_root / "visible.db"))
    try:
        report = make_demos(spec, 1, visible, demo_root / "visible", seed=3, seed_cache=demo_root / "seeds",
                            visible_only=True)
    finally:
        visible.close()
    assert len(report.tasks) + report.skipped_hidden >= 1
    assert report.kept, (kept, exhausted, report)
    for path in report.kept:
        (traj,) = load_jsonl(path)
        said = "\n".join(str(m["content"]) for m in traj.messages if m["role"] == "assistant")
        targets = re.findall(r"(?:view|str_replace) (\S+)\n", said)
        assert targets and traj.reward > 0 and "git grep" not in said, said
        # every target is the call the spec makes, as it makes it
        assert all(spec_call(traj.messages[1]["content"], t.rsplit(".", 1)[-1]) == t for t in targets), said
