"""The learning experiment end to end at a tiny size: both arms of the real loop (real DeepSpeed updates
of a tiny random Llama, and of a tiny Qwen 2; the rollouts come from the documented worker double `loop_double.TableRunner`, as
in test_loop_learner.py, so groups have reward variance without a trained model), held-out evaluations in
real Docker toolz sandboxes graded by the real grader, the table, the page and the SVG charts."""

from __future__ import annotations

import functools
import json

import pytest

pytest.importorskip("deepspeed")

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def tiny_model(request, tmp_path_factory):
    """SmolLM2's class, and the class of a larger model the experiment would run on a GPU machine (Qwen 2,
    untied, with a sliding window on one of its two layers: `tiny_model.ARCHITECTURES`)."""
    from selfplay.learner.tiny_model import ARCHITECTURES, save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp(f"tiny-{request.param}"), max_position_embeddings=4096,
                           arch=request.param, **ARCHITECTURES.get(request.param, {}))


def test_two_arms_tables_and_charts(tmp_path, tiny_model, toolz_spec, valid_report):
    from selfplay.artifact import load_artifact
    from selfplay.experiment.arms import Experiment, ExperimentConfig, weights_hash
    from selfplay.experiment.figures import write_outputs
    from selfplay.experiment.heldout import EvalSettings
    from selfplay.orchestration.loop import run_selfplay
    from selfplay.task import Task, make_task_id
    from tests.selfplay.conftest import ARTIFACTS
    from tests.selfplay.orchestration.loop_double import TableRunner

    artifact = load_artifact(ARTIFACTS / "valid")
    task = Task(make_task_id("toolz", artifact), "toolz", artifact, tuple(valid_report.fail_to_pass),
                tuple(valid_report.pass_to_pass), origin="procedural")
    cfg = ExperimentConfig(
        model_dir=str(tiny_model), work=tmp_path / "exp", repos=("boltons",), heldout=("toolz",), iterations=2,
        eval_every=1, lr=1e-3,
        overrides=("curriculum.seed_per_repo=0", "rollout.injector_episodes=1", "rollout.solver_tasks=1",
                   "rollout.redraw_rounds=0", "learner.engine.token_budget=256", "metrics.tensorboard=false"),
        eval=EvalSettings(max_turns=1, max_new_tokens=4, samples=1, workers=1))
    run = functools.partial(run_selfplay, runner=TableRunner(group_size=4))
    # the training stratum: the same toolz task stands in for the loop's own seeds (the double's training tasks
    # come from its table, so there are none to seed); what is checked is its evaluation and pairing
    results = Experiment(cfg, [(toolz_spec, task)], run=run, train_tasks=[(toolz_spec, task)]).execute()

    start = weights_hash(tiny_model)
    evals = results["evals"]
    assert list(evals) == ["start", "rl@1", "rl@2", "control@1", "control@2"]
    # the control's weights are bit-identical to the start, so its episodes are the start's (played once)
    assert evals["control@2"]["weights"] == start and evals["control@2"]["reused"]
    assert evals["rl@2"]["weights"] != start and not evals["rl@2"]["reused"]
    for e in evals.values():
        assert e["summary"]["episodes"] == 2  # one greedy, one at T=1
        assert {r["mode"] for r in e["rows"]} == {"greedy", "sample"}
        assert all(r["failure"] in ("no_action", "out_of_turns", "no_edit", "wrong_file", "wrong_fix",
                                    "search_mismatch", "solved") for r in e["rows"])
    for arm in ("rl", "control"):
        curve = results["arms"][arm]["curve"]
        assert [r["iteration"] for r in curve] == [0, 1]
        # TableRunner solves 1 of G attempts, so every group has variance and all its G samples train: the
        # iteration's own valid bug, beside (the default preset's overlap_injectors) the one task drawn from
        # the store, empty in iteration 0
        got = [(r["batch/solver/samples_trained"], r["rollout/signal_groups"]) for r in curve]
        assert got == [(4, 1), (8, 2)], got
    assert results["arms"]["rl"]["curve"][-1]["policy_version"] > 0
    # turn by turn: every held-out episode played one turn; the training episodes are the double's (no
    # transcript messages, so no turns) but are counted
    assert all(sum(e["summary"]["turns"][1].values()) == 2 for e in evals.values())
    assert results["arms"]["rl"]["solver_turns"]["episodes"] == 12  # the 3 groups above
    # the double's injector: one valid bug per iteration, read back from the arms' trajectory files
    for arm in ("rl", "control"):
        inj = results["arms"][arm]["injectors"]
        assert inj["by_iteration"] == {"0": [1, 1], "1": [1, 1]} and inj["outcomes"] == {"valid": 2}
        assert inj["distinct_valid"] == 2  # the double's bug is unique per (iteration, episode)
    c = results["injector_comparison"]
    assert (c["rl_valid"], c["rl_episodes"], c["control_valid"], c["control_episodes"]) == (1, 1, 2, 2)
    assert set(results["paired"]) == {"greedy", "pass_at_k", "train_greedy", "train_pass_at_k", "train_episodes"}
    stratum = results["train_evals"]
    assert list(stratum) == list(evals) and results["train_tasks"] == [task.task_id]
    assert stratum["control@2"]["reused"] and stratum["control@2"]["weights"] == start
    assert all(e["summary"]["episodes"] == 2 for e in stratum.values())

    files = write_outputs(results, tmp_path / "exp", tmp_path / "svg")
    table = (tmp_path / "exp" / "table.md").read_text()
    assert "| rl@2 |" in table and "| control | 1 |" in table and "McNemar" in table and "Fisher" in table
    assert "| held-out start | 1 |" in table and "Training stratum:" in table and "| stratum start | 1 |" in table
    page = (tmp_path / "exp" / "index.html").read_text()
    assert "heldout-greedy" in page and "Content-Security-Policy" in page
    svgs = [p for p in files if p.suffix == ".svg"]
    assert len(svgs) == 5  # the held-out pair, two training curves, the training stratum
    for p in svgs:
        text = p.read_text()
        assert text.startswith("<svg") and 'data-series="rl"' in text and 'data-series="control"' in text
    saved = json.loads((tmp_path / "exp" / "results.json").read_text())
    assert saved["evals"]["rl@2"]["weights"] == evals["rl@2"]["weights"]

    # the recheck: both final checkpoints played again (real evaluation, Docker, grader) with a fresh sample
    # seed, on what results.json saved (its config as strings, as read back from disk)
    from selfplay.experiment.recheck import recheck_experiment, recheck_settings

    settings = recheck_settings(saved, samples=2, sample_seed=7, workers=1)
    again = recheck_experiment(saved, [(toolz_spec, task)], settings)
    assert again["arms"]["rl"]["model"] == evals["rl@2"]["model"] and again["arms"]["control"]["model"] == evals["control@2"]["model"]
    for arm in ("rl", "control"):
        rows = again["arms"][arm]["rows"]
        assert [(r["mode"], r["sample"]) for r in rows] == [("sample", 0), ("sample", 1)]  # no greedy episode
        assert all(r["task"] == task.task_id and r["turns"] == 1 for r in rows)
    assert again["paired"]["pairs"] == 2 and again["sample_seed"] == 7


def test_compare_plays_two_checkpoints_on_the_same_draws(tmp_path, tiny_model, valid_report, bench, monkeypatch):
    """`scripts/bench_learning.py --arm compare` for real (Docker sandboxes, the real grader), one phase a
    call as a user would run it: the second call reads the first's rows back from --out and pairs them."""
    import sys

    from selfplay.artifact import load_artifact
    from selfplay.code_revision import code_revision
    from selfplay.task import make_task_id
    from tests.selfplay.conftest import ARTIFACTS

    artifact = load_artifact(ARTIFACTS / "valid")
    work, out = tmp_path / "work", tmp_path / "compare.json"
    work.mkdir()
    (work / "tasks.json").write_text(json.dumps([{  # the held-out split, as heldout_tasks lists it
        "repo": "toolz", "task_id": make_task_id("toolz", artifact), "dir": str(ARTIFACTS / "valid"),
        "f2p": list(valid_report.fail_to_pass), "p2p": list(valid_report.pass_to_pass)}]))
    common = ["--arm", "compare", "--samples", "1", "--max-turns", "1", "--max-new-tokens", "4", "--workers", "1",
              "--eval-seed", "3", "--work", str(work), "--out", str(out)]
    for phase in ("before", "after"):
        monkeypatch.setattr(sys, "argv", ["bench_learning.py", *common, "--phase", phase, f"--{phase}", str(tiny_model)])
        bench.main()
    saved = json.loads(out.read_text())
    assert [len(saved["rows"][p]) for p in ("before", "after")] == [2, 2]  # one greedy, one sampled each
    assert saved["models"]["after"] == str(tiny_model) and saved["settings"]["sample_seed"] == 3
    assert saved["code"] == code_revision() != ""  # the commit that played them
    # equal weights and equal draws: the two phases played the same episodes
    strip = [[{k: v for k, v in r.items() if k != "wall_s"} for r in saved["rows"][p]] for p in ("before", "after")]
    assert strip[0] == strip[1]
    assert saved["paired"]["sampled"]["pairs"] == 1 and saved["paired"]["sampled"]["only_after"] == 0
    assert saved["paired"]["greedy"]["pairs"] == 1
    # every episode's messages, to read where it failed
    for phase in ("before", "after"):
        written = sorted(p.name for p in (work / "transcripts" / phase).glob("*.txt"))
        assert written == sorted(f"{r['task']}-{r['mode']}{r['sample']}.txt" for r in saved["rows"][phase])
        text = (work / "transcripts" / phase / written[0]).read_text()
        assert text.startswith("# graded reward -1, failure ") and "## [0] system" in text
