"""The learning experiment's pure parts: failure labels, paired test, intervals, split checks."""

from pathlib import Path

import pytest

from selfplay.experiment.arms import ExperimentConfig, stages
from selfplay.experiment.failures import EpisodeFacts, classify, empty_or_unchanged
from selfplay.experiment.stats import mcnemar_exact, wilson

LIB = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
OTHER = LIB.replace("pkg/core.py", "pkg/other.py")
TESTS = LIB.replace("pkg/core.py", "tests/test_core.py")
REFUSED = "str_replace: the SEARCH text was not found in pkg/core.py. View the file and copy ..."
MISSING = ("Error: src/marshmallow/parse.py does not exist (paths are relative to /testbed); copy the path from a "
           "grep hit or from the listing `view .` shows (`create` makes a new file).")
# the editor's words for a path of another repo, as the held-out episodes produced


def facts(termination="submitted", reward=-1.0, turns=3, format_errors=0, submission=LIB, observations=(),
          infra=False):
    return EpisodeFacts(termination, reward, turns, format_errors, submission, tuple(observations),
                        ("pkg/core.py",), ("tests/test_core.py",), infra)


@pytest.mark.parametrize("f,label", [
    (facts(infra=True), "infra"),
    (facts(reward=1.0), "solved"),
    (facts(turns=3, format_errors=3, termination="max_turns", submission=None), "no_action"),
    (facts(submission=""), "no_edit"),
    (facts(submission=TESTS), "no_edit"),               # only the oracle tests changed: not a repair
    (facts(submission="", observations=[REFUSED]), "search_mismatch"),
    (facts(submission=OTHER), "wrong_file"),
    (facts(submission=LIB), "wrong_fix"),
    (facts(termination="max_turns", submission=None, observations=["ok", REFUSED]), "search_mismatch"),
    (facts(termination="max_turns", submission=None), "out_of_turns"),
    (facts(termination="max_turns", submission=None, observations=[MISSING, MISSING]), "wrong_path"),
    (facts(submission="", observations=[MISSING]), "wrong_path"),
    (facts(submission="", observations=[MISSING, REFUSED]), "search_mismatch"),  # it found the file later
    (facts(submission=LIB, observations=[MISSING]), "wrong_fix"),  # an edit landed: the path is not the story
    (facts(termination="context_exhausted", submission=None), "out_of_turns"),
    (facts(termination="repeated", submission=None), "repeated"),  # ended by `EpisodeLimits.max_repeats`
    (facts(termination="repeated", submission=None, observations=[REFUSED, REFUSED]), "search_mismatch"),
])
def test_failure_labels(f, label):
    assert classify(f) == label


def test_empty_or_unchanged_is_what_a_trivial_policy_scores():
    assert empty_or_unchanged(facts(submission=""))
    assert empty_or_unchanged(facts(submission=TESTS))
    assert not empty_or_unchanged(facts(submission=LIB))
    assert not empty_or_unchanged(facts(termination="max_turns", submission=None))


def test_mcnemar_exact():
    # 6 tasks only a solves, 0 only b: p = 2 * 0.5^6
    r = mcnemar_exact([True] * 6 + [False] * 4, [False] * 10)
    assert r["only_a"] == 6 and r["only_b"] == 0 and r["p_value"] == pytest.approx(2 / 64)
    assert mcnemar_exact([True, False], [True, False])["p_value"] == 1.0  # no discordant pair
    assert mcnemar_exact([True, False], [False, True])["p_value"] == 1.0
    with pytest.raises(ValueError, match="same tasks"):
        mcnemar_exact([True], [True, False])


def test_wilson_bounds():
    lo, hi = wilson(0, 12)
    assert lo == 0.0 and 0.2 < hi < 0.3
    lo, hi = wilson(3, 12)
    assert 0.05 < lo < 0.25 < hi < 0.6


def test_held_out_repos_cannot_train(tmp_path):
    with pytest.raises(ValueError, match="share \\['parse'\\]"):
        ExperimentConfig(model_dir="m", work=Path(tmp_path), repos=("toolz", "parse"), heldout=("parse",))
    with pytest.raises(ValueError, match="unknown arm"):
        ExperimentConfig(model_dir="m", work=Path(tmp_path), repos=("toolz",), heldout=("parse",), arms=("sft",))


def test_arm_config_refuses_a_held_out_repo_smuggled_in_by_an_override(tmp_path):
    from selfplay.experiment.arms import arm_config

    cfg = ExperimentConfig(model_dir="m", work=Path(tmp_path), repos=("toolz",), heldout=("parse",),
                           overrides=("repos=[toolz, parse]",))
    with pytest.raises(ValueError, match="parse is held out|held-out repos \\['parse'\\]"):
        arm_config(cfg, "rl", 1)
    ok = arm_config(ExperimentConfig(model_dir="m", work=Path(tmp_path), repos=("toolz",), heldout=("parse",)),
                    "control", 3)
    assert ok.learner.engine.lr == 0.0 and ok.iterations == 3 and ok.repos == ("toolz",)
    assert not ok.warm_start.enabled and ok.policy.model_dir == "m"


def test_stages():
    assert stages(4, 2) == [2, 4] and stages(5, 2) == [2, 4, 5] and stages(1, 3) == [1]


def test_turn_kinds_and_the_turn_table():
    from selfplay.experiment.failures import turn_kinds, turn_table

    def a(text):
        return {"role": "assistant", "content": text}

    def o(text):
        return {"role": "user", "content": text}

    fence = "```"
    messages = [{"role": "system", "content": "s"}, o("task"),
                a(f"{fence}bash\npython -m pytest tests/test_core.py -x\n{fence}"), o("1 failed"),
                a("I will look."), o("No action found"),
                a(f"{fence}edit\nview pkg/core.py 1 20\n{fence}"), o("1: def f"),
                a(f"{fence}edit\nstr_replace pkg/core.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n{fence}"),
                o(REFUSED),
                a(f"{fence}edit\nstr_replace pkg/core.py\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n{fence}"),
                o("edited"),
                a(f"{fence}bash\ngrep -n def pkg/core.py\n{fence}"), o("..."),
                a(f"{fence}edit\nview src/marshmallow/parse.py 1 5\n{fence}"), o(MISSING),
                a(f"{fence}submit\n{fence}")]
    kinds = turn_kinds(messages)
    assert kinds == ("run_tests", "format_error", "view", "str_replace_refused", "str_replace", "bash",
                     "missing_file", "submit")
    # an edit that changes nothing is refused by the editor, and labelled as such, not as applied
    noop = a(f"{fence}edit\nstr_replace pkg/core.py\n<<<<<<< SEARCH\na\n=======\na\n>>>>>>> REPLACE\n{fence}")
    from agent_scaffold.editor import EditError, replace_once

    with pytest.raises(EditError) as err:
        replace_once("a\nb\n", "a", "a", "pkg/core.py")
    assert turn_kinds(messages[:2] + [noop, o(f"Error: {err.value}")]) == ("str_replace_noop",)
    # a last edit whose output the context had no room for is labelled by that output, not as applied
    from selfplay.experiment.failures import with_unsent

    last = messages[:2] + [messages[8]]
    assert turn_kinds(last) == ("str_replace",)
    assert turn_kinds(with_unsent(last, {"unsent_observation": REFUSED})) == ("str_replace_refused",)
    assert with_unsent(last, {}) == last and with_unsent(last, None) == last
    table = turn_table([kinds, ("format_error", "submit")])
    assert table[1] == {"run_tests": 1, "format_error": 1} and table[2] == {"format_error": 1, "submit": 1}
    assert table[7] == {"missing_file": 1} and table[8] == {"submit": 1}


def test_the_turn_table_has_a_column_for_every_kind_taken():
    from selfplay.experiment.figures import KINDS, turns_table

    results = {"arms": {"rl": {"solver_turns": {"turns": {"1": {"localize": 3}, "2": {"str_replace": 2,
                                                                                      "missing_file": 1}}}}}}
    header, _, first, second = turns_table(results).splitlines()
    columns = [c.strip() for c in header.strip("|").split("|")][2:]
    assert columns == [*KINDS, "localize", "missing_file"]
    assert first.endswith("| 3 | 0 |") and second.endswith("| 0 | 1 |")
    assert second.split("|")[3 + KINDS.index("str_replace")].strip() == "2"


def test_an_empty_chart_becomes_a_no_data_svg():
    from selfplay.experiment.figures import svg_of
    from selfplay.report import charts

    svg = svg_of(charts.line_chart("x", "Held-out pass@k", {}, y_label="rate"))
    assert svg.startswith("<svg") and "Held-out pass@k: no data" in svg


def _entry(rows):
    return {"rows": [{"task": t, "mode": m, "sample": k, "reward": r} for t, m, k, r in rows]}


def test_training_stratum_pairs_episodes_by_task_and_seed():
    from selfplay.experiment.arms import paired

    # rl solves sample 0 of a and both samples of b; control solves only sample 1 of b
    rl = _entry([("a", "greedy", 0, -1), ("a", "sample", 0, 1), ("a", "sample", 1, -1),
                 ("b", "greedy", 0, 1), ("b", "sample", 0, 1), ("b", "sample", 1, 1)])
    control = _entry([("a", "greedy", 0, -1), ("a", "sample", 0, -1), ("a", "sample", 1, -1),
                      ("b", "greedy", 0, -1), ("b", "sample", 0, -1), ("b", "sample", 1, 1)])
    results = {"evals": {}, "train_evals": {"rl@2": rl, "control@2": control}}
    out = paired(results, 2)
    assert out["train_episodes"] == {"only_a": 2.0, "only_b": 0.0, "p_value": 0.5}
    assert out["train_greedy"]["only_a"] == 1 and out["train_greedy"]["only_b"] == 0
    # pass@k per task: rl solves a and b, control b only
    assert out["train_pass_at_k"]["only_a"] == 1 and out["train_pass_at_k"]["only_b"] == 0
    assert "greedy" not in out  # no held-out evaluation at that stage: nothing to pair
    assert paired({"evals": {}, "train_evals": {"rl@2": rl}}, 2) == {}


def test_training_stratum_needs_the_loops_seeds():
    from selfplay.config.loader import load_config
    from selfplay.experiment.stratum import training_tasks

    with pytest.raises(ValueError, match="curriculum.seed_per_repo is 0"):
        training_tasks(load_config("default", ["curriculum.seed_per_repo=0"]))


def test_fisher_exact_against_hand_computed_tables():
    from selfplay.experiment.stats import fisher_exact

    # 3/10 vs 0/10: P(X >= 3) = C(10,3) C(10,0) / C(20,3) = 120 / 1140; the table 0/10 vs 3/10 is as likely
    p = fisher_exact(3, 10, 0, 10)
    assert p["p_greater"] == pytest.approx(120 / 1140) and p["p_value"] == pytest.approx(240 / 1140)
    assert fisher_exact(0, 10, 3, 10)["p_greater"] == pytest.approx(1.0)
    assert fisher_exact(2, 8, 2, 8)["p_value"] == pytest.approx(1.0)
    assert fisher_exact(0, 0, 1, 12) == {"p_greater": 1.0, "p_value": 1.0}
    with pytest.raises(ValueError, match="out of range"):
        fisher_exact(5, 4, 0, 1)


def test_injector_outcome_labels_from_real_verdicts():
    from selfplay.artifact import BugArtifact
    from selfplay.errors import ArtifactError
    from selfplay.experiment.failures import injector_outcome
    from selfplay.validation.report import unreadable_spec_error

    with pytest.raises(ArtifactError) as missing:  # the error a five-file-short submission gets
        BugArtifact.from_files({"test_script.sh": "x"})
    assert injector_outcome("submitted", {"valid": False, "failed_check": None, "error": str(missing.value)}) \
        == "incomplete"
    assert injector_outcome("submitted", {"valid": False, "failed_check": "bug_validity", "error": None}) \
        == "failed_bug_validity"
    assert injector_outcome("submitted", {"valid": True}) == "valid"
    assert injector_outcome("max_turns", {"valid": False, "error": "no artifact submitted"}) == "not_submitted"
    # an artifact taken at a limit (`submit_on_limit`) is labelled by the check it failed, not as unsubmitted
    assert injector_outcome("max_turns", {"valid": False, "failed_check": "bug_validity", "error": None}) \
        == "failed_bug_validity"
    assert injector_outcome("submitted", {"valid": False, "error": "bug_inject.diff: corrupt patch"}) == "invalid"
    assert injector_outcome("submitted", None, infra_failure=True) == "infra"
    too_long = unreadable_spec_error(-400, 96)  # the rollout's refusal of a bug no solver could read
    assert too_long.startswith("spec too long for the solver: the solver's prompt with this spec (the reversed "
                               "test_weaken.diff) is 400 tokens longer than the solver's context, and a turn needs 96")
    assert "leaves 30 tokens of the solver's context for a first turn" in unreadable_spec_error(30, 96)
    assert injector_outcome("submitted", {"valid": False, "error": too_long}) == "spec_too_long"
    assert injector_outcome("max_turns", {"valid": False, "error": too_long}) == "spec_too_long"


def test_injector_comparison_counts_rl_after_its_first_update():
    from selfplay.experiment.arms import injector_comparison
    from selfplay.experiment.figures import injector_table

    def arm(by_iteration):
        return {"injectors": {"episodes": sum(n for _, n in by_iteration.values()),
                              "valid": sum(v for v, _ in by_iteration.values()), "by_iteration": by_iteration,
                              "distinct_valid": 2, "outcomes": {"valid": 1}, "turns": {}}}

    results = {"arms": {"rl": arm({"0": [1, 8], "1": [2, 8], "2": [3, 8]}), "control": arm({"0": [1, 8], "1": [0, 8]})}}
    c = injector_comparison(results)
    # rl's iteration 0 was sampled before any update: it is left out
    assert (c["rl_valid"], c["rl_episodes"], c["control_valid"], c["control_episodes"]) == (5, 16, 1, 16)
    assert 0 < c["p_greater"] < 0.1
    # distinct bugs over whole arms: rl 2 of 24 episodes, control 2 of 16 (one repeated bug raises no count)
    assert (c["rl_distinct"], c["rl_all_episodes"], c["control_distinct"]) == (2, 24, 2)
    assert c["distinct_p_greater"] > 0.5
    results["injector_comparison"] = c
    table = injector_table(results)
    assert "| rl | 24 | 25% (6/24) [12%, 45%] | 2 | 1/8, 2/8, 3/8 |" in table and "5/16 vs 1/16" in table
    assert "Distinct valid bugs, whole arms: 2/24 vs 2/16" in table
    assert injector_comparison({"arms": {"rl": arm({"0": [0, 1]})}}) is None


def test_a_control_arm_without_its_learner_and_arms_merged_from_two_runs(tmp_path):
    from selfplay.experiment.arms import ExperimentConfig, arm_config, merge_results

    cfg = ExperimentConfig(model_dir="m", work=tmp_path, repos=("boltons",), heldout=("toolz",), control_learner=False)
    assert not arm_config(cfg, "control", 1).learner.enabled
    rl = arm_config(cfg, "rl", 1)
    assert rl.learner.enabled and rl.learner.engine.lr == cfg.lr
    assert arm_config(ExperimentConfig(model_dir="m", work=tmp_path, repos=("boltons",), heldout=("toolz",)),
                      "control", 1).learner.enabled

    def results(arm, weights="w0", tasks=("t1", "t2"), overrides=("rollout.temperature=0.5",), seed="0", run=None,
                control_learner="True"):
        return {"config": {"model_dir": "m", "seed": seed, "overrides": repr(tuple(overrides)),
                           "control_learner": control_learner},
                "evals": {"start": {"weights": weights, "rows": [{"task": t} for t in tasks]},
                          f"{arm}@1": {"weights": "w1", "rows": []}},
                "arms": {arm: {"run_dir": run or arm}}}

    merged = results("rl")
    merge_results(merged, results("control", overrides=("rollout.temperature=0.5", "learner.enabled=false")))
    assert set(merged["arms"]) == {"rl", "control"} and set(merged["evals"]) == {"start", "rl@1", "control@1"}
    merge_results(merged, results("control"))  # merged again (a second report): the same run, nothing changes
    assert merged["arms"]["control"] == {"run_dir": "control"}
    for other, match in ((results("control", weights="w9"), "start"), (results("control", tasks=("t1",)), "tasks"),
                         (results("control", seed="1"), "seed"), (results("rl", run="elsewhere"), "arm"),
                         (results("control", overrides=("rollout.temperature=1.0",)), "overrides")):
        with pytest.raises(ValueError, match=match):
            merge_results(results("rl"), other)

    # A control run without its learner may differ from the rl arm in learner.* settings only (it built no
    # learner), from either side of the merge; the merged experiment carries the rl arm's overrides.
    agg = ("rollout.temperature=0.5", "learner.engine.loss.agg=seq-mean-token-mean")
    for base, other in ((results("rl", overrides=agg), results("control", control_learner="False")),
                        (results("control", control_learner="False"), results("rl", overrides=agg))):
        merge_results(base, other)
        assert set(base["arms"]) == {"rl", "control"} and base["config"]["overrides"] == repr(agg)
        assert base["control_overrides_differ"] == ["learner.engine.loss.agg=seq-mean-token-mean"]
    # refused: a control that trained (at LR 0), and a learner-free one whose rollout setting differs too
    for other in (results("control"), results("control", control_learner="False", overrides=(
            "rollout.temperature=1.0", "learner.engine.loss.agg=seq-mean-token-mean"))):
        with pytest.raises(ValueError, match="overrides differ"):
            merge_results(results("rl", overrides=agg), other)


def test_separation_interval_brackets_the_point_and_tells_noise_from_a_shift():
    from selfplay.experiment.stats import separation_interval

    # Token-weighted: valid (1.0 over 2 tokens, 3.0 over 2) = 1.0 a token, invalid -0.5 over 1 = -0.5.
    exact = separation_interval([(1.0, 2), (3.0, 2)], [(-0.5, 1)])
    assert exact["separation"] == pytest.approx(1.5) and exact["lo"] <= 1.5 <= exact["hi"]
    # Every valid episode raised by 0.1 a token and every invalid one lowered: the interval excludes 0.
    shifted = separation_interval([(0.1 * n, n) for n in (50, 80, 120)] * 4, [(-0.1 * n, n) for n in (60, 90)] * 6)
    assert shifted["lo"] == pytest.approx(0.2) and shifted["hi"] == pytest.approx(0.2)
    # Both classes drawn from one spread: the interval holds 0.
    import random

    rng = random.Random(1)
    noise = [(rng.gauss(0, 1) * 100, 100) for _ in range(24)]
    same = separation_interval(noise[:10], noise[10:])
    assert same["lo"] < 0 < same["hi"] and same["lo"] <= same["separation"] <= same["hi"]
    assert separation_interval(noise[:10], noise[10:]) == same  # seeded
    with pytest.raises(ValueError, match="both classes"):
        separation_interval([], noise)


def test_episode_seeds_are_fixed_by_task_and_sample_and_moved_by_the_sample_seed():
    import zlib

    from selfplay.experiment.heldout import EvalSettings, episode_seed

    assert EvalSettings().sample_seed == 0
    # the default keeps the seeds of every earlier evaluation, so old results still pair with new ones
    assert episode_seed("toolz-f81cfb03b7f9bad0", 3) == zlib.crc32(b"toolz-f81cfb03b7f9bad0:3")
    assert episode_seed("toolz-f81cfb03b7f9bad0", 3, 0) == episode_seed("toolz-f81cfb03b7f9bad0", 3)
    seeds = {s: [episode_seed(t, k, s) for t in ("a-1", "b-2") for k in range(4)] for s in (0, 1, 2)}
    assert all(len(set(v)) == 8 for v in seeds.values())  # distinct per task and sample
    assert not set(seeds[0]) & set(seeds[1]) and not set(seeds[1]) & set(seeds[2])  # every draw moves
    assert seeds[1] == [episode_seed(t, k, 1) for t in ("a-1", "b-2") for k in range(4)]  # and replays


def test_sign_test_against_hand_computed_tails():
    from selfplay.experiment.stats import sign_test

    # 13 vs 4 discordant pairs: P(X >= 13 | n = 17) = (C(17,13) + ... + C(17,17)) / 2^17 = 3214 / 131072
    p = sign_test(13, 4)
    assert p["p_greater"] == pytest.approx(3214 / 2 ** 17)
    assert p["p_value"] == pytest.approx(2 * 3214 / 2 ** 17)  # the same tail on the other side
    assert sign_test(4, 13)["p_greater"] == pytest.approx(1 - (3214 - 2380) / 2 ** 17)  # P(X >= 4) = 1 - P(X <= 3)
    assert sign_test(0, 0) == {"p_greater": 1.0, "p_value": 1.0}
    assert sign_test(3, 0)["p_greater"] == pytest.approx(1 / 8)
    with pytest.raises(ValueError, match=">= 0"):
        sign_test(-1, 2)


def _rows(items):
    return [{"task": t, "mode": m, "sample": k, "reward": r, "failure": f} for t, m, k, r, f in items]


def test_recheck_pairs_by_task_and_sample_and_pools_experiments():
    from selfplay.experiment.recheck import pair_episodes, pooled, recheck_table

    rl = _rows([("a", "sample", 0, 1, "solved"), ("a", "sample", 1, 1, "solved"), ("b", "sample", 0, -1, "no_edit"),
                ("b", "sample", 1, 1, "solved"), ("b", "greedy", 0, 1, "solved")])
    control = _rows([("a", "sample", 0, -1, "no_edit"), ("a", "sample", 1, 1, "solved"),
                     ("b", "sample", 0, 1, "solved"), ("b", "sample", 1, -1, "infra"),
                     ("b", "greedy", 0, -1, "no_edit")])
    p = pair_episodes(rl, control)
    # greedy rows never pair (their seed is not the recheck's) and an infra row drops its pair
    assert (p["pairs"], p["only_rl"], p["only_control"], p["rl_solved"], p["control_solved"]) == (3, 1, 1, 2, 2)
    total = pooled([{"paired": p, "sample_seed": 1}, {"paired": {**p, "only_rl": 5, "only_control": 0}, "sample_seed": 2}])
    assert (total["pairs"], total["only_rl"], total["only_control"]) == (6, 6, 1)
    assert total["p_greater"] == pytest.approx(8 / 128)  # P(X >= 6 | n = 7) = (7 + 1) / 2^7
    table = recheck_table([{"work": "runs/a", "sample_seed": 1, "paired": p}], total)
    assert "| runs/a | 1 | 3 |" in table and "**pooled**" in table
    assert table.splitlines()[2].endswith("| - | - |")  # an entry written before the per-task reading
    ahead = {"ahead": 2, "behind": 0, "tied": 1, "p_greater": 0.25}
    table = recheck_table([{"work": "runs/a", "sample_seed": 1, "paired": p, "paired_by_task": ahead}], total)
    assert table.splitlines()[2].endswith("| 2 / 0 / 1 | 0.25 |")


def test_the_per_task_reading_counts_each_task_once():
    """Tasks where rl solved more of their paired draws are ahead, fewer behind; a task's margin is summed
    over its pairs, so 2 wins and 1 loss is ahead once, and an infra row drops only its pair."""
    from selfplay.experiment.recheck import pair_tasks

    rl = _rows([("a", "sample", 0, 1, "solved"), ("a", "sample", 1, 1, "solved"), ("a", "sample", 2, -1, "no_edit"),
                ("b", "sample", 0, -1, "no_edit"), ("b", "sample", 1, 1, "solved"),
                ("c", "sample", 0, -1, "wrong_fix"), ("d", "sample", 0, -1, "infra"), ("d", "sample", 1, 1, "solved")])
    control = _rows([("a", "sample", 0, -1, "no_edit"), ("a", "sample", 1, -1, "no_edit"),
                     ("a", "sample", 2, 1, "solved"), ("b", "sample", 0, 1, "solved"), ("b", "sample", 1, -1, "no_edit"),
                     ("c", "sample", 0, 1, "solved"), ("d", "sample", 0, 1, "solved"), ("d", "sample", 1, -1, "no_edit")])
    t = pair_tasks(rl, control)
    # a: +2 -1 ahead; b: +1 -1 tied; c: behind; d: its infra pair dropped, +1 ahead
    assert (t["tasks"], t["ahead"], t["behind"], t["tied"]) == (4, 2, 1, 1)
    assert t["p_greater"] == pytest.approx(4 / 8)  # P(X >= 2 | n = 3)


def test_recheck_needs_a_finished_experiment_and_fresh_seeds():
    from selfplay.experiment.recheck import final_checkpoints, recheck_settings

    results = {"config": {"iterations": "3", "eval": str({"max_turns": 12, "max_new_tokens": 256,
                                                          "max_context_tokens": 2048, "samples": 4,
                                                          "temperature": 0.5, "greedy": True, "workers": 8})},
               "train_evals": {"start": {"model": "W"}, "rl@3": {"model": "R"}}}
    with pytest.raises(ValueError, match="control@3"):
        final_checkpoints(results)
    results["train_evals"]["control@3"] = {"model": "W"}
    assert final_checkpoints(results) == {"rl": "R", "control": "W"}
    s = recheck_settings(results, samples=8, sample_seed=5, workers=2)
    assert (s.max_turns, s.max_new_tokens, s.temperature, s.samples, s.greedy, s.sample_seed) == (12, 256, 0.5, 8,
                                                                                                   False, 5)
    assert not s.localize
    # an experiment evaluated with the localize tool is rechecked with it (its policy was trained to call it)
    results["config"]["eval"] = results["config"]["eval"].replace("'workers': 8", "'workers': 8, 'localize': True")
    assert recheck_settings(results, samples=8, sample_seed=5, workers=2).localize
    with pytest.raises(ValueError, match="replay"):
        recheck_settings(results, samples=8, sample_seed=0, workers=2)


def test_missing_paths_lists_each_refused_path_in_order():
    from selfplay.experiment.failures import missing_paths

    toolz = MISSING.replace("src/marshmallow/parse.py", "toolz/dicttoolz.py")
    assert missing_paths(["ok", MISSING, REFUSED, toolz, MISSING]) == (
        "src/marshmallow/parse.py", "toolz/dicttoolz.py", "src/marshmallow/parse.py")
    assert missing_paths([REFUSED, "1 failed"]) == ()


def test_the_device_is_this_machines_and_leaves_the_draws_alone():
    """An experiment evaluated on a GPU is rechecked on whatever this machine has, and its episodes are
    still the same draws as a CPU recheck's (`reusable_arm` matches them), as with `workers`."""
    from dataclasses import replace

    from selfplay.experiment.heldout import EvalSettings
    from selfplay.experiment.recheck import draw_settings, recheck_settings

    results = {"config": {"eval": str({"max_turns": 12, "temperature": 0.5, "device": "cuda:1", "workers": 8})}}
    s = recheck_settings(results, samples=4, sample_seed=5, workers=2)
    assert s.device == "auto" and s.max_turns == 12
    assert draw_settings(replace(s, device="cpu")) == draw_settings(replace(s, device="cuda")) == draw_settings(s)
    assert draw_settings(replace(s, temperature=1.0)) != draw_settings(s)
    assert "device" not in draw_settings(EvalSettings())


def test_a_repeat_limit_is_part_of_the_draws_only_when_set():
    """Evaluations made before `EvalSettings.max_repeats` existed (no key) are the same draws as one without
    a limit, so their rechecks are still reused; one with a limit is not (its episodes can end earlier)."""
    from dataclasses import replace

    from selfplay.experiment.heldout import EvalSettings, eval_limits
    from selfplay.experiment.recheck import draw_settings, recheck_settings, reusable_arm

    old = {"config": {"eval": str({"max_turns": 12, "temperature": 0.5})}}  # saved before the field
    s = recheck_settings(old, samples=4, sample_seed=5, workers=2)
    assert s.max_repeats is None and "max_repeats" not in draw_settings(s)
    earlier = [{"kind": "evals", "tasks": ["t"], "settings": draw_settings(s), "arms": {"rl": {"model": "/m"}}}]
    assert reusable_arm(earlier, "/m", ["t"], s, "evals") == {"model": "/m"}
    limited = replace(s, max_repeats=2)
    assert draw_settings(limited)["max_repeats"] == 2 and reusable_arm(earlier, "/m", ["t"], limited, "evals") is None
    assert eval_limits(limited).max_repeats == 2 and eval_limits(s).max_repeats is None
    new = {"config": {"eval": str({"max_turns": 12, "temperature": 0.5, "max_repeats": 2})}}
    assert recheck_settings(new, samples=4, sample_seed=5, workers=2).max_repeats == 2  # the experiment's own
    with pytest.raises(ValueError, match="max_repeats must be 1 or more, or None"):
        EvalSettings(max_repeats=0)


def test_recovery_moves_count_undos_and_the_lines_edited_besides(tmp_path):
    """A wrong edit put back by a reversed `str_replace`, another line repaired, a refused edit, then an `undo`:
    the observations are the real editor's."""
    from agent_scaffold.editor import EditError, Editor
    from selfplay.experiment.failures import recovery_moves
    from tests.agent_scaffold.local_sandbox import LocalSandbox

    editor = Editor(LocalSandbox(tmp_path, {"m.py": "a = 1\nb = 2\nc = 3\n"}))
    fence = "```"

    def edit(line, old, new):
        text = f"{fence}edit\nstr_replace m.py:{line}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n{fence}"
        try:
            seen = editor.str_replace("m.py", old, new, line)
        except EditError as exc:
            seen = f"Error: {exc}"
        return [{"role": "assistant", "content": text}, {"role": "user", "content": seen}]

    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    wrong, back, fix = edit(1, "a = 1", "a = 0"), edit(1, "a = 0", "a = 1"), edit(2, "b = 2", "b = 5")
    refused = edit(3, "c = 9", "c = 3")
    assert recovery_moves(head + wrong + back + fix + refused) == (1, 2)
    assert recovery_moves(head + wrong + fix) == (0, 2) and recovery_moves(head) == (0, 0)
    undo = [{"role": "assistant", "content": f"{fence}edit\nundo m.py\n{fence}"},
            {"role": "user", "content": editor.undo("m.py")}]
    assert recovery_moves(head + fix + undo) == (1, 1)


def test_a_recheck_reads_back_a_checkpoint_an_earlier_one_played_on_the_same_draws():
    """Two experiments from one start share their LR-0 control: the second recheck reads the control's
    episodes back from the first (same checkpoint, tasks, sample seed and settings) and plays only its own rl
    checkpoint; any other seed, task list or checkpoint is played. `play` is a test double of
    `heldout.evaluate` that records what it was asked to play; the real path is the Docker test's."""
    from dataclasses import replace
    from types import SimpleNamespace

    from selfplay.experiment.heldout import EpisodeRow, EvalSettings
    from selfplay.experiment.recheck import recheck_experiment, reusable_arm

    played = []

    def play(model, tasks, settings):
        played.append(model)
        return [EpisodeRow(task=t.task_id, repo="toolz", mode="sample", sample=k, termination="submitted",
                           reward=1.0 if model == "R1" else -1.0, turns=3, format_errors=0,
                           failure="solved" if model == "R1" else "no_edit", empty_diff=False, search_refusals=0,
                           wall_s=1.0) for _, t in tasks for k in range(settings.samples)]

    tasks = [(None, SimpleNamespace(task_id=i)) for i in ("a", "b")]
    settings = EvalSettings(samples=2, greedy=False, sample_seed=7, workers=4)
    first = recheck_experiment({"config": {"iterations": 1}, "evals": {"rl@1": {"model": "R1"},
                                                                       "control@1": {"model": "W"}}},
                               tasks, settings, kind="evals", play=play)
    assert played == ["R1", "W"] and first["settings"]["sample_seed"] == 7 and "workers" not in first["settings"]
    first["arms"]["control"]["source"] = "old.json"
    second = {"config": {"iterations": 1}, "evals": {"rl@1": {"model": "R2"}, "control@1": {"model": "W"}}}
    out = recheck_experiment(second, tasks[::-1], replace(settings, workers=1), kind="evals", play=play, reuse=[first])
    assert played == ["R1", "W", "R2"]  # the task order and the workers do not change a draw
    assert out["arms"]["control"]["rows"] == first["arms"]["control"]["rows"]
    assert out["arms"]["control"]["reused_from"] == "old.json" and "source" not in out["arms"]["control"]
    assert out["paired"]["pairs"] == 4 and out["paired"]["only_rl"] == 0
    # another seed, another task list, another kind of evaluation: nothing matches, so it is played
    assert reusable_arm([first], "W", ["a", "b"], replace(settings, sample_seed=8), "evals") is None
    assert reusable_arm([first], "W", ["a"], settings, "evals") is None
    assert reusable_arm([first], "W", ["a", "b"], settings, "train_evals") is None
    assert reusable_arm([first], "R2", ["a", "b"], settings, "evals") is None
    assert reusable_arm([first], "W", ["b", "a"], settings, "evals")["model"] == "W"
