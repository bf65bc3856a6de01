"""Overlong modes, staleness and dynamic-sampling rules, each variant on small hand-made trajectories."""

import pytest

from selfplay.learner.baseline import RunningMeanBaseline
from selfplay.learner.batch import BatchConfig, build_batch
from selfplay.learner.dynamic_sampling import (
    RULES,
    DynamicSampler,
    DynamicSamplingConfig,
    filter_groups,
    group_trajectories,
)
from selfplay.learner.errors import BatchError
from selfplay.learner.overlong import (
    MODES,
    OverlongConfig,
    shape_overlong,
    soft_overlong_penalty,
    turn_penalty,
)
from selfplay.learner.staleness import filter_stale

from .helpers import traj

# ---- overlong ---------------------------------------------------------------------------------------

BATCH = [traj(1.0, sampled=4, turns=2), traj(1.0, termination="context_exhausted", sampled=10, turns=12),
         traj(-1.0, termination="max_turns", sampled=7, turns=5)]
CFG = dict(l_max=8, l_cache=4, turn_threshold=3, max_turns=7)
EXPECTED = {
    # mode: (kept rewards, dropped)
    "none": ([1.0, 1.0, -1.0], 0),
    "mask": ([1.0], 2),
    "negative": ([1.0, -1.0, -1.0], 0),
    # soft: L=4 -> 0; L=10 > L_max -> -1; L=7 -> (4 - 7)/4 = -0.75
    "soft": ([1.0, 0.0, -1.75], 0),
    # turns: 2 < 3 -> 0; 12 -> (3 - 12)/4 = -2.25; 5 -> (3 - 5)/4 = -0.5
    "turns": ([1.0, 1.0 - 2.25, -1.5], 0),
}


@pytest.mark.parametrize("mode", MODES)
def test_overlong_modes(mode):
    kept, m = shape_overlong(BATCH, OverlongConfig(mode=mode, **CFG))
    rewards, dropped = EXPECTED[mode]
    assert [t.reward for t in kept] == pytest.approx(rewards)
    assert m["batch/dropped_overlong"] == dropped
    assert m["batch/truncated_frac"] == pytest.approx(2 / 3)


def test_soft_penalty_edges_and_turn_penalty_reaches_minus_one():
    assert soft_overlong_penalty(16384, 20480, 4096) == 0.0
    assert soft_overlong_penalty(20480, 20480, 4096) == -1.0
    assert soft_overlong_penalty(18432, 20480, 4096) == pytest.approx(-0.5)
    assert soft_overlong_penalty(20481, 20480, 4096) == -1.0
    assert turn_penalty(9, 10, 40) == 0.0 and turn_penalty(10, 10, 40) == 0.0
    assert turn_penalty(40, 10, 40) == -1.0


def test_overlong_rejects_bad_config_and_ungraded():
    with pytest.raises(ValueError, match="mode"):
        OverlongConfig(mode="drop")
    with pytest.raises(ValueError, match="l_cache"):
        OverlongConfig(l_max=4, l_cache=8)
    with pytest.raises(BatchError, match="no reward"):
        shape_overlong([traj(None)], OverlongConfig())


# ---- staleness --------------------------------------------------------------------------------------

@pytest.mark.parametrize("max_staleness,kept_versions", [(0, [10]), (2, [10, 8]), (8, [10, 8, 2]), (9, [10, 8, 2, 1])])
def test_staleness_filter(max_staleness, kept_versions):
    batch = [traj(1.0, version=v) for v in (10, 8, 2, 1)]
    kept, m = filter_stale(batch, 10, max_staleness)
    assert [t.policy_version for t in kept] == kept_versions
    assert m["batch/dropped_stale"] == 4 - len(kept_versions)
    assert m["batch/staleness_max"] == 9


def test_future_version_is_an_error():
    with pytest.raises(BatchError, match="newer"):
        filter_stale([traj(1.0, version=11)], 10)


# ---- dynamic sampling -------------------------------------------------------------------------------

GROUPS = group_trajectories([traj(1.0, group="mixed"), traj(-1.0, group="mixed"),
                             traj(1.0, group="solved"), traj(1.0, group="solved"),
                             traj(-1.0, group="alone"),
                             traj(0.3, role="injector", meta={"id": "i1"})])
BY_KEY = {g.key: g for g in GROUPS}
MIXED, SOLVED = BY_KEY["mixed"], BY_KEY["solved"]


@pytest.mark.parametrize("rules,kept,dropped", [
    ((), {"mixed", "solved", "alone", "i1"}, {}),
    (("all_equal",), {"mixed", "i1"}, {"all_equal": 2}),  # a singleton's rewards are all equal too
    (("too_small",), {"mixed", "solved", "i1"}, {"too_small": 1}),
    (("all_equal", "too_small"), {"mixed", "i1"}, {"all_equal": 1, "too_small": 1}),
])
def test_drop_rules(rules, kept, dropped):
    out, m = filter_groups(GROUPS, DynamicSamplingConfig(drop_rules=rules))
    assert {g.key for g in out} == kept
    for r in RULES:
        assert m[f"batch/dropped_{r}"] == dropped.get(r, 0)
    assert m["batch/passed_groups"] == len(kept)


def test_sampler_draws_until_full_and_buffers_overflow():
    draws = iter([[SOLVED], [MIXED, MIXED], [MIXED]])
    s = DynamicSampler(DynamicSamplingConfig(batch_groups=1, max_draws=5))
    batch, m = s.fill(lambda: next(draws))
    assert [g.key for g in batch] == ["mixed"] and m["batch/draws"] == 2
    assert m["batch/dropped_all_equal"] == 1 and m["batch/buffered_groups"] == 1
    batch2, m2 = s.fill(lambda: next(draws))  # served from the buffer, no new draw
    assert len(batch2) == 1 and m2["batch/draws"] == 0


def test_sampler_cap_on_draws():
    s = DynamicSampler(DynamicSamplingConfig(batch_groups=3, max_draws=2))
    batch, m = s.fill(lambda: [MIXED, SOLVED])
    assert len(batch) == 2 and m["batch/draws"] == 2 and m["batch/draws_capped"] == 1.0


def test_grouping_needs_an_id():
    t = traj(1.0)
    bare = type(t)(**{**t.__dict__, "metadata": {}})
    with pytest.raises(ValueError, match="group_id"):
        group_trajectories([bare])


# ---- whole pipeline ---------------------------------------------------------------------------------

def test_build_batch_end_to_end():
    trajs = [traj(1.0, group="a", version=5), traj(-1.0, group="a", version=5),
             traj(-1.0, group="a", version=5, termination="max_turns"),
             traj(1.0, group="b", version=5), traj(1.0, group="b", version=5),
             traj(1.0, group="c", version=0), traj(-1.0, group="c", version=0),
             traj(0.5, role="injector", version=5, meta={"id": "i", "repo": "toolz", "strategy": "removal"})]
    cfg = BatchConfig(advantage="dr_grpo", max_staleness=4, overlong=OverlongConfig(mode="mask"))
    samples, m = build_batch(trajs, 8, cfg, RunningMeanBaseline())
    # c is 8 versions old -> dropped; a loses its truncated member -> [1, -1] -> +1, -1;
    # b is all-equal -> dropped; the injector's baseline starts at 0 -> 0.5
    assert sorted(s.advantage for s in samples) == [-1.0, 0.5, 1.0]
    assert m["batch/dropped_stale"] == 2 and m["batch/dropped_overlong"] == 1
    assert m["batch/dropped_all_equal"] == 1 and m["batch/kept_groups"] == 2
    assert m["batch/solver_reward_mean"] == 0.0 and m["batch/injector_reward_mean"] == 0.5


def test_counters_match_the_group_rewards():
    """Per-role counters follow from the rewards: only groups that put a sample in the batch are kept,
    and an injector singleton whose running-baseline advantage is 0 is not counted as kept."""
    trajs = [traj(1.0, group="a"), traj(-1.0, group="a"), traj(-1.0, group="a"),   # variance: trains 3
             traj(-1.0, group="b"), traj(-1.0, group="b"), traj(-1.0, group="b"),  # all -1: dropped
             traj(1.0, group="c"), traj(1.0, group="c"), traj(1.0, group="c"),     # all +1: dropped
             traj(-1.0, role="injector", meta={"id": "i1", "repo": "toolz", "strategy": "removal"}),
             traj(-1.0, role="injector", meta={"id": "i2", "repo": "toolz", "strategy": "removal"})]
    baseline = RunningMeanBaseline(initial=-1.0)  # both injectors score the baseline: advantage 0
    samples, m = build_batch(trajs, 0, BatchConfig(), baseline)
    assert m["batch/solver/groups"] == 3 and m["batch/solver/groups_with_variance"] == 1
    assert m["batch/solver/groups_dropped"] == 2 and m["batch/dropped_all_equal"] == 2
    assert m["batch/solver/samples_trained"] == 3 and m["batch/solver/groups_trained"] == 1
    assert m["batch/injector/groups"] == 2 and m["batch/injector/groups_dropped"] == 0
    assert m["batch/injector/samples_trained"] == 0 and m["batch/injector/groups_trained"] == 0
    assert m["batch/kept_groups"] == 1 and m["batch/samples"] == len(samples) == 3
    assert m["batch/dropped_zero_advantage"] == 2
    assert "batch/injector/groups_with_variance" not in m


def test_injector_groups_share_a_baseline_per_repo_and_iteration():
    """injector_baseline="group": an iteration's episodes on one (repo, strategy) are a group. The
    all-invalid group trains nothing (the running baseline would push all of it down), the mixed group
    trains with group-relative advantages, and another iteration on the same repo is another group."""
    def inj(reward, repo, iteration, n):
        return traj(reward, role="injector", meta={"id": f"{repo}-{iteration}-{n}", "repo": repo,
                                                   "strategy": "direct", "iteration": iteration})
    trajs = [inj(0.5, "toolz", 0, 0), inj(-1.0, "toolz", 0, 1), inj(-1.0, "toolz", 0, 2),  # variance
             inj(-1.0, "boltons", 0, 0), inj(-1.0, "boltons", 0, 1),                      # all invalid
             inj(0.5, "toolz", 1, 0), inj(0.5, "toolz", 1, 1), inj(-1.0, "toolz", 1, 2)]  # next iteration
    baseline = RunningMeanBaseline()
    samples, m = build_batch(trajs, 1, BatchConfig(injector_baseline="group", group_size=2), baseline)
    assert m["batch/injector/groups"] == 3 and m["batch/injector/groups_with_variance"] == 2
    assert m["batch/injector/groups_dropped"] == 1 and m["batch/dropped_all_equal"] == 1
    assert m["batch/injector/samples_trained"] == 6 and m["batch/kept_groups"] == 2
    advantages = sorted(round(s.advantage, 3) for s in samples)
    # grpo within each group: (r - mean) / std, so each group's advantages sum to 0
    assert sum(advantages) == pytest.approx(0.0, abs=1e-6)
    assert sum(a > 0 for a in advantages) == 3 and sum(a < 0 for a in advantages) == 3
    assert baseline.values == {}  # the running baseline is not used, so it does not move
    # the default stays the running baseline: every injector episode trains, none is dropped as a group
    samples, m = build_batch(trajs, 1, BatchConfig(), RunningMeanBaseline())
    assert m["batch/injector/groups"] == 8 and m["batch/injector/groups_dropped"] == 0
    with pytest.raises(ValueError, match="injector_baseline"):
        BatchConfig(injector_baseline="none")


def test_negative_scale_weighs_the_samples_below_their_baseline():
    """negative_scale multiplies the negative advantages after the estimator: 0.5 halves them, and 0
    leaves the positive samples only (the rest dropped as zero-advantage and counted as such)."""
    trajs = [traj(1.0, group="a"), traj(-1.0, group="a"), traj(-1.0, group="a"), traj(-1.0, group="a")]
    full, _ = build_batch(trajs, 0, BatchConfig(), RunningMeanBaseline())
    half, _ = build_batch(trajs, 0, BatchConfig(negative_scale=0.5), RunningMeanBaseline())
    assert [s.advantage for s in half] == [a if a > 0 else a / 2 for a in (s.advantage for s in full)]
    only, m = build_batch(trajs, 0, BatchConfig(negative_scale=0.0), RunningMeanBaseline())
    assert [s.advantage for s in only] == [full[0].advantage] and full[0].advantage > 0
    assert m["batch/solver/samples_trained"] == 1 and m["batch/dropped_zero_advantage"] == 3
    with pytest.raises(ValueError, match="negative_scale"):
        BatchConfig(negative_scale=-1.0)


def test_signal_groups_counts_solver_groups_with_variance():
    from selfplay.learner.dynamic_sampling import signal_groups

    trajs = [traj(1.0, group="a"), traj(-1.0, group="a"), traj(-1.0, group="b"), traj(-1.0, group="b"),
             traj(None, group="c"), traj(1.0, group="c"), traj(0.5, role="injector", meta={"id": "i"})]
    assert signal_groups(trajs) == 1  # c's unrewarded member is not a reward, so c is a singleton


def test_build_batch_rejects_ragged_trajectory():
    t = traj(1.0)
    bad = type(t)(**{**t.__dict__, "logprobs": t.logprobs[:-1]})
    with pytest.raises(BatchError, match="same length"):
        build_batch([bad], 0, BatchConfig(), RunningMeanBaseline())


def test_compacted_trajectory_trains_each_segment_with_the_episode_advantage():
    import dataclasses

    whole = traj(1.0, group="s", prompt=2, sampled=3)
    # Two segments as agent_scaffold writes them after a compaction: each sampled token is trained once.
    ids = whole.input_ids + whole.input_ids
    mask = (0, 0, 1, 1, 0) + (0, 0, 0, 0, 1)
    compacted = dataclasses.replace(whole, input_ids=ids, loss_mask=mask, logprobs=(-0.5,) * 10,
                                    segments=((0, 5), (5, 10)))
    samples, m = build_batch([compacted, traj(-1.0, group="s")], 0, BatchConfig(), RunningMeanBaseline())
    mine = [s for s in samples if s.advantage > 0]
    assert [s.loss_mask for s in mine] == [mask[:5], mask[5:]]
    assert len({s.advantage for s in mine}) == 1
    assert m["batch/samples"] == 3.0


def test_infrastructure_failures_are_dropped_and_counted_never_trained_on():
    # A sandbox that died mid-episode: no reward, maybe a torn trajectory; either flag marks it.
    torn = traj(None, group="a", meta={"infra_failure": True})
    torn = type(torn)(**{**torn.__dict__, "logprobs": torn.logprobs[:-1]})
    died = traj(None, group="a", termination="sandbox_error")
    lost_injector = traj(None, role="injector", meta={"id": "i", "infra_failure": True})
    trajs = [traj(1.0, group="a"), traj(-1.0, group="a"), torn, died, lost_injector]
    samples, m = build_batch(trajs, 0, BatchConfig(), RunningMeanBaseline())
    assert m["batch/infra_failures"] == 3.0
    low, high = sorted(s.advantage for s in samples)  # group a keeps its two graded members only
    assert low < 0 < high and low == pytest.approx(-high)
    assert {s.role for s in samples} == {"solver"}


def test_group_size_check_catches_two_groups_sharing_an_id():
    cfg = BatchConfig(group_size=2)
    ok = [traj(1.0, group="a"), traj(-1.0, group="a"), traj(1.0, group="b")]  # fewer than G is fine
    build_batch(ok, 0, cfg, RunningMeanBaseline())
    mixed = ok + [traj(-1.0, group="a")]
    with pytest.raises(BatchError, match="group 'a' has 3 trajectories, more than group_size=2"):
        build_batch(mixed, 0, cfg, RunningMeanBaseline())
    with pytest.raises(ValueError, match="group_size"):
        BatchConfig(group_size=0)


def test_truncated_terminations_are_episode_endings_run_episode_produces():
    from agent_scaffold.trajectory import TERMINATIONS, TRUNCATED

    assert set(OverlongConfig().truncated_terminations) == set(TRUNCATED) <= set(TERMINATIONS)
    # "length" is a completion's finish reason (one turn cut at max_new_tokens), not an episode ending.
    with pytest.raises(ValueError, match=r"\['length'\], which no episode ends with"):
        OverlongConfig(truncated_terminations=("max_turns", "length"))


def test_samples_carry_their_group_for_the_minibatch_split():
    """Solver attempts of one task share a group key (a compacted episode's segments too); injector
    singletons each have their own; grouped injector episodes share one per (repo, strategy, iteration)."""
    trajs = [traj(1.0, group="a"), traj(-1.0, group="a"), traj(1.0, group="b"), traj(-1.0, group="b"),
             traj(0.5, role="injector", meta={"id": "i1", "repo": "toolz", "strategy": "kit"}),
             traj(-1.0, role="injector", meta={"id": "i2", "repo": "toolz", "strategy": "kit"})]
    samples, _ = build_batch(trajs, 0, BatchConfig(), RunningMeanBaseline())
    solver = [s.group for s in samples if s.role == "solver"]
    assert solver[0] == solver[1] != solver[2] == solver[3]
    injector = {s.group for s in samples if s.role == "injector"}
    assert len(injector) == 2 and not injector & set(solver)
    samples, _ = build_batch(trajs, 0, BatchConfig(injector_baseline="group"), RunningMeanBaseline())
    assert len({s.group for s in samples if s.role == "injector"}) == 1
