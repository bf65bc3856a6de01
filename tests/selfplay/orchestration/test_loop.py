"""The loop's logic with the documented test double of the worker (loop_double.TableRunner): recording,
Eq. 1 injector rewards, higher-order tasks, trajectory files and metadata, metrics, summary, and the
exclusion of infrastructure failures. Real store (SQLite), real run directory; no Docker, no learner
(test_loop_learner.py and test_loop_docker.py run those)."""

from __future__ import annotations

import itertools
import json

import pytest

from selfplay.code_revision import code_revision
from selfplay.config.run_config import (
    CurriculumConfig,
    LearnerConfig,
    MetricsConfig,
    RolloutConfig,
    RunConfig,
)
from selfplay.judge.rewards import RewardConfig
from selfplay.orchestration.loop import run_selfplay
from selfplay.orchestration.rundir import RunDir, read_trajectories
from selfplay.store import open_store
from tests.selfplay.orchestration.loop_double import TableRunner, artifact
from tests.selfplay.store.store_data import make_report

G = 4


def config(tmp_path, **kw) -> RunConfig:
    base = dict(name="t", runs_dir=str(tmp_path / "runs"), repos=("toolz",), iterations=2,
                rollout=RolloutConfig(injector_episodes=2, solver_tasks=1, workers=2),
                reward=RewardConfig(group_size=G), learner=LearnerConfig(enabled=False),
                curriculum=CurriculumConfig(seed_per_repo=0), metrics=MetricsConfig(tensorboard=False))
    base.update(kw)
    return RunConfig(**base)


class Events:
    def __init__(self):
        self.kinds: list[str] = []

    def on_event(self, event):
        self.kinds.append(event.kind)


@pytest.fixture()
def finished(tmp_path):
    runner = TableRunner(group_size=G, solved_per_group=1, infra=frozenset({"__none__"}))
    events = Events()
    cfg = config(tmp_path)
    path = run_selfplay(cfg, runner=runner, observer=events)
    return path, runner, events


def test_counts_rewards_and_files(finished):
    path, runner, events = finished
    run = RunDir(path)
    summary = json.loads(run.summary.read_text())
    assert summary["status"] == "finished" and summary["error"] is None
    assert summary["iterations"] == 2
    assert summary["injector_episodes"] == 4 and summary["valid_artifacts"] == 2
    # the one fresh valid task of each iteration, G attempts each (fresh first, even past solver_tasks)
    assert summary["solver_attempts"] == 2 * G and summary["solved"] == 2
    assert summary["higher_order_tasks"] == 2 * (G - 1)
    assert summary["learner_updates"] == 0 and summary["infra_failures"] == 0
    with open_store(str(run.store_db)) as store:
        attempts = store.attempts(run_id=path.name)
        solver = [a for a in attempts if a.role == "solver"]
        injector = [a for a in attempts if a.role == "injector"]
        assert len(solver) == 2 * G and sum(a.solved for a in solver) == 2
        # Eq. 1 with s = 1/4: 1 - 1.8 * 0.25 = 0.55; the invalid one -1
        assert sorted(round(a.reward, 6) for a in injector) == [-1.0, -1.0, 0.55, 0.55]
        assert summary["tasks_in_store"] == len(store.task_stats())
        assert len(store.list_tasks()) == 2 + 2 * (G - 1)
    solver_trajs = list(read_trajectories(run.trajectory_file(0, "solver")))
    assert len(solver_trajs) == G
    meta = solver_trajs[0].metadata
    assert {"id", "repo", "iteration", "task_id", "group_id", "order", "submission", "grade", "infra_failure",
            "error"} <= set(meta)
    assert len({t.metadata["group_id"] for t in solver_trajs}) == 1
    inj = list(read_trajectories(run.trajectory_file(0, "injector")))
    assert len(inj) == 2 and {t.reward for t in inj} == {-1.0, 0.55}
    assert all({"strategy", "validation", "submission"} <= set(t.metadata) for t in inj)
    assert not list(run.trajectories.glob("*.pending.gz"))
    assert {"phase", "episode", "iteration", "done"} <= set(events.kinds)


def test_metrics_records(finished):
    path, _, _ = finished
    lines = [json.loads(x) for x in RunDir(path).metrics.read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [0, 1]
    rec = lines[-1]
    assert rec["solve_rate/all"] == 0.25 and rec["solve_rate/order_1"] == 0.25
    assert rec["solve_rate/repo/toolz"] == 0.25
    assert rec["injector/validity"] == 0.5 and rec["injector/failed_check/bug_validity"] == 1
    assert rec["reward/solver_mean"] == pytest.approx(-0.5)
    shares = [v for k, v in rec.items() if k.startswith("time_share/")]
    assert len(shares) == 6 and sum(shares) == pytest.approx(1.0)
    for key in ("tasks/active", "episode/solver/turns_mean", "episode/termination/submitted", "sandbox/errors",
                "infra/failures", "staleness/dropped", "throughput/episodes_per_hour", "throughput/tasks_per_hour",
                "time", "policy_version"):
        assert key in rec, key


def test_infra_failures_are_counted_not_recorded(tmp_path):
    cfg = config(tmp_path, iterations=1)
    run_id_glob = "t-*"

    # the first solver attempt of iteration 0 dies twice (the executor retries once)
    class Infra(TableRunner):
        def __call__(self, request):
            if request.episode_id.endswith("-it0-solver-0"):
                from selfplay.rollout.requests import infra_failure_result

                return infra_failure_result(request, "SandboxError: gone")
            return super().__call__(request)

    path = run_selfplay(cfg, runner=Infra(group_size=G, solved_per_group=2))
    assert path.match(run_id_glob)
    summary = json.loads(RunDir(path).summary.read_text())
    assert summary["infra_failures"] == 1 and summary["solver_attempts"] == G - 1
    with open_store(str(RunDir(path).store_db)) as store:
        injector = [a for a in store.attempts(run_id=path.name) if a.role == "injector" and a.task_id]
        # attempts 0 and 1 would solve; 0 is lost, so s = 1/3 over the 3 gradable ones
        assert injector[0].reward == pytest.approx(1 - 1.8 / 3)
    solver = list(read_trajectories(RunDir(path).trajectory_file(0, "solver")))
    assert len(solver) == G - 1  # an infrastructure failure with no trajectory leaves no line


def test_a_drawn_task_no_solver_can_read_is_retired_unplayed_and_nothing_is_recorded(tmp_path):
    """The worker sends a stored task whose spec leaves the solver no turn back unplayed
    (`EpisodeResult.unplayable`; test_worker.py plays that for real): the loop retires it with the reason,
    once for its G results, and records, writes and trains none of them; the iteration goes on."""
    from selfplay.rollout.requests import EpisodeResult

    reason = "spec too long for the solver: a test's reason"

    class Unreadable(TableRunner):  # higher-order tasks (drawn from iteration 1 on) have unreadable specs
        def __call__(self, request):
            if request.role == "solver" and request.task.origin == "higher_order":
                return EpisodeResult(request, None, "spec_too_long", False, reason, None, unplayable=reason)
            return super().__call__(request)

    cfg = config(tmp_path, rollout=RolloutConfig(injector_episodes=2, solver_tasks=2, workers=2))
    path = run_selfplay(cfg, runner=Unreadable(group_size=G, solved_per_group=1))
    run = RunDir(path)
    summary = json.loads(run.summary.read_text())
    assert summary["unreadable_tasks"] == 1 and summary["solver_attempts"] == 2 * G
    assert summary["infra_failures"] == 0
    with open_store(str(run.store_db)) as store:
        (retired,) = store.task_stats(status="retired")
        task = store.get_task(retired.task_id)
        assert task.origin == "higher_order" and task.metadata["retired_reason"] == reason
        assert store.attempts(task_id=retired.task_id) == []
        assert "retired_reason" not in store.get_task(task.parent_id).metadata
    lines = list(read_trajectories(run.trajectory_file(1, "solver")))
    assert len(lines) == G and retired.task_id not in {t.metadata["task_id"] for t in lines}
    record = json.loads(run.metrics.read_text().splitlines()[1])
    assert record["episode/termination/spec_too_long"] == G and record["tasks/retired"] == 1


def test_failure_sets_status_failed(tmp_path):
    class Broken(TableRunner):
        def close(self):
            pass

    cfg = config(tmp_path, iterations=1, repos=("toolz",))
    store_boom = {"n": 0}

    class Exploding:
        def on_event(self, event):
            pass

    runner = Broken(group_size=G)
    from selfplay.errors import SelfPlayError
    from selfplay.orchestration import rollouts

    original = rollouts.draw_tasks

    def boom(*a, **k):
        store_boom["n"] += 1
        raise RuntimeError("the store went away")

    rollouts.draw_tasks = boom
    try:
        with pytest.raises(SelfPlayError, match="the store went away"):
            run_selfplay(cfg, runner=runner, observer=Exploding())
    finally:
        rollouts.draw_tasks = original
    (path,) = (tmp_path / "runs").iterdir()
    summary = json.loads((path / "summary.json").read_text())
    assert summary["status"] == "failed" and "the store went away" in summary["error"]


@pytest.mark.parametrize("solved_per_group,rounds", [(0, 3), (1, 1)])
def test_dynamic_sampling_redraws_until_a_group_has_variance(tmp_path, solved_per_group, rounds):
    """With no reward variance, the iteration draws new tasks (G attempts each) up to `redraw_rounds`
    times; a first round with variance stops there. Every round's tasks are noted for a resume."""
    runner = TableRunner(group_size=G, solved_per_group=solved_per_group)
    cfg = config(tmp_path, iterations=1, rollout=RolloutConfig(injector_episodes=1, solver_tasks=1, workers=2,
                                                               redraw_rounds=2, min_signal_groups=1))
    path = run_selfplay(cfg, runner=runner)
    run = RunDir(path)
    summary = json.loads(run.summary.read_text())
    assert summary["solver_attempts"] == rounds * G
    solver_trajs = list(read_trajectories(run.trajectory_file(0, "solver")))
    assert len({t.metadata["group_id"] for t in solver_trajs}) == rounds
    assert len({t.metadata["task_id"] for t in solver_trajs}) == rounds  # each round on a new task
    record = json.loads(run.metrics.read_text().splitlines()[0])
    assert record["rollout/solver_rounds"] == rounds
    assert record["rollout/signal_groups"] == (0 if solved_per_group == 0 else 1)


def test_summary_names_the_warm_start_it_started_from(tmp_path, monkeypatch):
    """A run from the default warm start records its config key, content key, demonstrations and steps;
    a run from an explicit model_dir records none (the rollouts here are the worker double's)."""
    from dataclasses import asdict, replace

    from selfplay.config.run_config import PolicyConfig
    from selfplay.demos.warm_start import WarmStartManifest, cache_dir
    from selfplay.orchestration.components import warm_start_record

    monkeypatch.setenv("SELFPLAY_CACHE", str(tmp_path / "cache"))
    cfg = config(tmp_path, policy=PolicyConfig(backend="hf"))
    assert warm_start_record(cfg) is None  # not built: nothing to record
    root = cache_dir(cfg.warm_start.config)
    root.mkdir(parents=True)
    manifest = WarmStartManifest("ck", "content", {"solver": 18, "injector": 6}, 24, 6, {"op": 1}, ("toolz",),
                                 {}, str(root / "model-content"))
    # a manifest written before the code was recorded (no "code" key) still reads, with code ""
    (root / "manifest.json").write_text(json.dumps({k: v for k, v in asdict(manifest).items() if k != "code"}))
    assert warm_start_record(cfg) == {"config_key": "ck", "content_key": "content",
                                      "demonstrations": {"solver": 18, "injector": 6}, "steps": 6,
                                      "model_dir": str(root / "model-content"), "code": ""}
    assert warm_start_record(replace(cfg, policy=PolicyConfig(backend="hf", model_dir="/m"))) is None
    path = run_selfplay(replace(cfg, iterations=1), runner=TableRunner(group_size=G))
    summary = json.loads(RunDir(path).summary.read_text())
    assert summary["warm_start"]["content_key"] == "content" and summary["code"] == code_revision() != ""


def test_a_run_that_draws_a_strategy_its_warm_start_never_showed_is_told_so():
    from dataclasses import replace

    from selfplay.config.loader import load_config
    from selfplay.orchestration.components import undemonstrated_strategies

    default = load_config("default")
    assert default.warm_start.config.injector_strategy == "kit" and undemonstrated_strategies(default) is None
    mixed = replace(default, rollout=replace(default.rollout, strategies=("kit", "removal")))
    assert undemonstrated_strategies(mixed) == (
        "the warm start demonstrates the kit injector strategy, but the run's injector episodes also draw removal, "
        "a prompt it never showed; set rollout.strategies=[kit] (or warm_start.config.injector_strategy)")
    # no warm start, no injector demonstration or no injector episode: nothing to warn about
    assert undemonstrated_strategies(replace(mixed, warm_start=replace(mixed.warm_start, enabled=False))) is None
    assert undemonstrated_strategies(replace(mixed, rollout=replace(mixed.rollout, injector_episodes=0))) is None
    no_demos = replace(mixed.warm_start.config, injector_per_repo=0)
    assert undemonstrated_strategies(replace(mixed, warm_start=replace(mixed.warm_start, config=no_demos))) is None


def test_redraw_ahead_plays_every_round_at_once(tmp_path, monkeypatch):
    """`rollout.redraw_ahead`: the redraw rounds' tasks are drawn with the first round's and their attempts
    go to the executor together, also when the first round alone had a group with variance."""
    from selfplay.rollout.executor import LocalExecutor

    batches: list[int] = []
    run = LocalExecutor.run

    def spy(self, requests):
        batches.append(sum(r.role == "solver" for r in requests))
        return run(self, requests)

    monkeypatch.setattr(LocalExecutor, "run", spy)
    store_url = str(tmp_path / "tasks.db")
    with open_store(store_url) as store:  # stored tasks for the rounds drawn ahead (besides the fresh one)
        for n in (101, 102):
            store.record_validation(artifact(n), "toolz", make_report(True, n), origin="injector")
    runner = TableRunner(group_size=G, solved_per_group=1)
    cfg = config(tmp_path, iterations=1, store_url=store_url, rollout=RolloutConfig(
        injector_episodes=1, solver_tasks=1, workers=2, redraw_rounds=2, min_signal_groups=1, redraw_ahead=True))
    rundir = RunDir(run_selfplay(cfg, runner=runner))
    assert [b for b in batches if b] == [3 * G]  # one executor call with every round's attempts
    solver_trajs = list(read_trajectories(rundir.trajectory_file(0, "solver")))
    assert len({t.metadata["task_id"] for t in solver_trajs}) == 3 and len(solver_trajs) == 3 * G
    record = json.loads(rundir.metrics.read_text().splitlines()[0])
    assert record["rollout/solver_rounds"] == 3 and record["rollout/signal_groups"] == 3


@pytest.mark.parametrize("variant", ["verbatim", "reworded", "extra_edit"])
@pytest.mark.parametrize("reward_duplicates", [False, True])
def test_a_bug_the_store_already_holds_is_rewarded_as_invalid_unless_asked(tmp_path, reward_duplicates, variant):
    """One bug written three times in each of two iterations (consistency reward: +1 valid, -1 invalid). The
    store held it before iteration 1, so iteration 1's three get the invalid reward, also when each writes
    other text into the same line or adds an unrelated edit elsewhere (then six tasks, one bug). Iteration
    0's three wrote it while it was new, and all three are new, whichever finished first."""
    reword = variant != "verbatim"
    runner = TableRunner(group_size=G, solved_per_group=G, invalid=frozenset(), repeat=True,  # no higher orders
                         reword=variant == "reworded", extra_edit=variant == "extra_edit")
    cfg = config(tmp_path, iterations=2, rollout=RolloutConfig(injector_episodes=3, solver_tasks=0, workers=1),
                 reward=RewardConfig(group_size=G, injector_mode="consistency", reward_duplicates=reward_duplicates))
    path = run_selfplay(cfg, runner=runner)
    run = RunDir(path)
    summary = json.loads(run.summary.read_text())
    assert summary["valid_artifacts"] == 6  # all six are valid artifacts
    with open_store(str(run.store_db)) as store:
        assert len(store.list_tasks()) == (6 if reword else 1)
    for it, held in ((0, False), (1, True)):
        trained = [t.reward for t in read_trajectories(run.trajectory_file(it, "injector"))]
        assert trained == [-1.0 if held and not reward_duplicates else 1.0] * 3, (it, trained)


@pytest.mark.parametrize("order", list(itertools.permutations("XRY")))
def test_a_copy_of_an_iteration_s_own_new_bug_is_new_and_one_of_an_older_bug_is_not(tmp_path, order):
    """Bug P (line 1) is stored before the run. Iteration 0 writes X (line 2), R (X reworded) and Y (lines 1
    and 2: the same bug as X, R and P by `keys_match`), in every order. X and R are new; Y copies P, which the
    store held before the iteration, so it is a duplicate. No bug is judged against a task that the
    iteration's own episodes made, Y's included, so the order changes nothing."""
    from dataclasses import replace as with_

    two_lines = ("diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,2 @@\n"
                 "-    return x + 1\n-    return x + 2\n+    return x - 1\n+    return x - 2\n")
    written = {"X": artifact(2), "R": artifact(2, "return x - 99"), "Y": with_(artifact(2), bug_inject=two_lines)}
    bugs = {i: written[name] for i, name in enumerate(order)}
    base = TableRunner(group_size=G, solved_per_group=G, invalid=frozenset())

    def runner(request):
        result = base(request)
        if request.role == "injector":
            art = bugs[int(request.episode_id.rsplit("-", 1)[1])]
            result = with_(result, artifact=art, submission=art.files())
        return result

    runner.close = base.close
    store_url = str(tmp_path / "tasks.db")
    with open_store(store_url) as store:
        report = with_(make_report(True, 1), fail_to_pass=("tests/test_core.py::test_a",))  # TableRunner's test
        store.record_validation(artifact(1), "toolz", report, origin="injector")
    cfg = config(tmp_path, iterations=1, store_url=store_url,
                 rollout=RolloutConfig(injector_episodes=3, solver_tasks=0, workers=1),
                 reward=RewardConfig(group_size=G, injector_mode="consistency"))
    run = RunDir(run_selfplay(cfg, runner=runner))
    rewards = {order[int(t.metadata["id"].rsplit("-", 1)[1])]: t.reward
               for t in read_trajectories(run.trajectory_file(0, "injector"))}
    assert rewards == {"X": 1.0, "R": 1.0, "Y": -1.0}


@pytest.mark.parametrize("same_episode", [True, False])
def test_an_episode_replayed_after_a_kill_with_other_text_is_not_a_copy_of_its_own_first_write(tmp_path, same_episode):
    """A run killed after `record_artifact` and before the verdict's save replays the episode, which may write
    the same bug in other words (R: X reworded). The first write's task came from the same episode, so R is not
    its near-duplicate: it is rewarded as new. The same first write from another episode makes R a duplicate."""
    from dataclasses import replace as with_

    base = TableRunner(group_size=G, solved_per_group=G, invalid=frozenset())
    store_url = str(tmp_path / "tasks.db")
    report = with_(make_report(True, 1), fail_to_pass=("tests/test_core.py::test_a",))  # TableRunner's test

    def runner(request):
        result = base(request)
        if request.role == "injector":
            with open_store(store_url) as store:  # the killed first play of this episode, recorded before the kill
                store.record_artifact(artifact(2), "toolz", report, origin="injector",
                                      episode_id=request.episode_id if same_episode else "another-run-it0-injector-0")
            art = artifact(2, "return x - 99")
            result = with_(result, artifact=art, submission=art.files())
        return result

    runner.close = base.close
    cfg = config(tmp_path, iterations=1, store_url=store_url,
                 rollout=RolloutConfig(injector_episodes=1, solver_tasks=0, workers=1),
                 reward=RewardConfig(group_size=G, injector_mode="consistency"))
    run = RunDir(run_selfplay(cfg, runner=runner))
    [trained] = read_trajectories(run.trajectory_file(0, "injector"))
    assert trained.reward == (1.0 if same_episode else -1.0)


def test_a_finished_run_closes_its_rollout_policy(tmp_path, monkeypatch):
    """The hf rollout policy's decode thread keeps its weights and KV cache alive until it is closed; a
    process running loops one after another (the learning experiment's arms) grew to 24 GB without this."""
    import selfplay.orchestration.loop as loop

    class ClosablePolicy:  # test double of the hf rollout policy: the loop only closes it (a runner plays)
        closed = 0

        def close(self):
            self.closed += 1

    policy = ClosablePolicy()
    monkeypatch.setattr(loop, "build_learner", lambda *a, **k: (policy, None))
    run_selfplay(config(tmp_path), runner=TableRunner(group_size=G, solved_per_group=1))
    assert policy.closed == 1


@pytest.mark.parametrize("view", [True, False])
def test_kit_injectors_are_told_the_lines_the_store_bugs_change_as_the_iteration_starts(tmp_path, view):
    """`rollout.kit_store_view`: a `kit` injector request carries the (path, line) that the store's bugs of
    its repo change when its iteration starts: none in iteration 0 (an empty store), iteration 0's two bugs
    (lines 1 and 2 of pkg/core.py) in iteration 1. Without the view no request carries any. `kit_spread`
    gives the iteration's two episodes of the one repo the shares (0, 2) and (1, 2), with the view only, and
    `kit_share_by` whether they rotate."""
    from dataclasses import replace as with_

    runner = TableRunner(group_size=G, solved_per_group=1, invalid=frozenset())
    seen: dict[str, object] = {}

    def spy(request):
        if request.role == "injector":
            seen[request.episode_id] = request.kit_view
        return runner(request)

    spy.close = runner.close
    cfg = config(tmp_path, iterations=2)
    cfg = with_(cfg, rollout=with_(cfg.rollout, strategies=("kit",), solver_tasks=0, kit_store_view=view,
                                   kit_next_function=True, kit_spread=True, kit_share_by="rotate"))
    run_selfplay(cfg, runner=spy)
    if not view:
        assert set(seen.values()) == {None}
        return
    by_iteration = {it: {v.stored_lines for k, v in seen.items() if f"-it{it}-" in k} for it in (0, 1)}
    assert by_iteration == {0: {()}, 1: {(("pkg/core.py", 1), ("pkg/core.py", 2))}}
    assert {(v.next_function, v.rotate) for v in seen.values()} == {(True, True)}
    for it in (0, 1):
        assert sorted(v.share for k, v in seen.items() if f"-it{it}-" in k) == [(0, 2), (1, 2)]


def test_kit_shares_split_each_repo_s_kit_episodes_in_request_order():
    """`kit_shares`: the n kit injector requests of a repo get (0, n) ... (n-1, n) in request order; a repo
    with one kit request, other strategies and solver requests get none."""
    from selfplay.orchestration.rollouts import kit_shares
    from selfplay.rollout.requests import EpisodeRequest

    def req(i, repo, strategy="kit", role="injector"):
        return EpisodeRequest(f"e{i}", role, repo, 0, 0, strategy=strategy)
    requests = [req(0, "a"), req(1, "b"), req(2, "a"), req(3, "a", "direct"), req(4, "c"), req(5, "a"),
                req(6, "b"), req(7, "a", None, "solver")]
    assert kit_shares(requests) == {"e0": (0, 3), "e2": (1, 3), "e5": (2, 3), "e1": (0, 2), "e6": (1, 2)}


def test_a_ray_address_of_a_local_executor_is_said_to_be_unused(caplog):
    """`rollout.ray_address` does nothing while `rollout.executor` is local (a user who overrides the
    multi-node preset's executor keeps its address); the run says so instead of running locally untold."""
    import logging
    from dataclasses import replace

    from selfplay.config.loader import load_config
    from selfplay.orchestration import components

    default = load_config("default")
    caplog.set_level(logging.WARNING, logger=components.__name__)
    components.build_executor(default, None, "r", runner=TableRunner(group_size=G))
    assert "ray_address" not in caplog.text
    aimed = replace(default, rollout=replace(default.rollout, ray_address="ray://head:10001"))
    executor = components.build_executor(aimed, None, "r", runner=TableRunner(group_size=G))
    assert "rollout.ray_address=ray://head:10001 is not used: rollout.executor is local" in caplog.text
    assert "set rollout.executor=ray" in caplog.text
    executor.close()
