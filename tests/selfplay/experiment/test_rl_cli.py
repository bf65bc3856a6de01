"""`scripts/bench_learning.py --arm rl` refuses bad options before it builds a warm start or seeds a
held-out task (each of which takes minutes), naming the option or key to fix, and creates nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.parametrize("argv, expected", [
    (["--repos", "nosuch"], "repos: 'nosuch' not in the bundled repos/default.toml; valid names: toolz"),
    (["--heldout", "nosuch"], "held-out repos 'nosuch' are not in the bundled repos/default.toml"),
    (["--heldout", "toolz"], "--repos and --heldout share ['toolz']"),
    (["--model", "/nonexistent/ckpt"], "policy.model_dir: /nonexistent/ckpt does not exist"),
    (["--lr", "-1"], "lr must be a finite number >= 0, got -1.0"),
    (["--lr", "nan"], "lr must be a finite number >= 0, got nan"),
    (["--arms", "rl,sft"], "unknown arm(s) ['sft']"),
    (["--samples", "-1"], "samples must be >= 0, got -1"),
    (["--workers", "0"], "workers must be >= 1, got 0"),
    (["--max-turns", "0"], "max_turns must be >= 1, got 0"),
    (["--temperature", "0"], "temperature must be in (0, 2]"),
    (["-n", "0"], "-n must be 1 or more"),
    (["--set", "nosuch=1"], "nosuch: unknown key"),
    (["--set", "rollout.solver_tasks=-2"], "solver_tasks must be >= 0, got -2"),
    (["--preset", "nope"], "'nope' is neither a preset nor a YAML file"),
])
def test_rl_arm_refuses_bad_options_before_any_work(refused, tmp_path, argv, expected):
    work = tmp_path / "exp"
    msg = refused("--arm", "rl", "--work", str(work), *argv)
    assert expected in msg, msg
    assert not work.exists()


def test_demonstrated_needs_a_warm_start_store(refused, tmp_path):
    """A checkpoint folder with no store.db beside it is no warm start's: `--demonstrated` has no tasks."""
    from selfplay.learner.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "ckpt" / "model")
    msg = refused("--arm", "rl", "--work", str(tmp_path / "exp"), "--model", str(model), "--demonstrated")
    assert "--demonstrated: no warm-start store" in msg


def test_rft_arm_refuses_unknown_repos_and_empty_budgets(refused, tmp_path):
    work = tmp_path / "rft"
    assert "held-out repos 'nosuch' are not in the bundled repos/default.toml" in refused("--arm", "rft", "--repos", "nosuch", "--phase",
                                                               "before", "--work", str(work))
    assert "-n must be 1 or more" in refused("--arm", "rft", "-n", "0", "--work", str(work))
    assert "--max-turns and --max-new-tokens must be 1 or more, got 0" in refused(
        "--arm", "rft", "--max-turns", "0", "--phase", "before", "--work", str(work))
    assert not work.exists()


def test_saved_results_are_never_overwritten_nor_misread(refused, tmp_path):
    """An experiment's results.json is its only record of its evaluations: a start without --resume leaves
    it alone, and one that does not parse is named, before any task is seeded."""
    work = tmp_path / "exp"
    work.mkdir()
    (work / "results.json").write_text('{"config": ')  # cut short
    msg = refused("--arm", "rl", "--work", str(work), "--resume")
    assert "results.json cannot be read as an experiment's results" in msg and "new --work" in msg
    assert "no results.json there" in refused("--arm", "report", "--work", str(tmp_path))
    assert "cannot be read" in refused("--arm", "report", "--work", str(work))
    (work / "results.json").write_text('{"evals": {}, "arms": {}}')
    assert "already holds an experiment" in refused("--arm", "rl", "--work", str(work))
    assert (work / "results.json").read_text() == '{"evals": {}, "arms": {}}'
    assert not (work / "tasks.json").exists()


def test_a_held_out_list_that_cannot_be_read_back_is_named(refused, tmp_path):
    """tasks.json points at artifacts in the seed cache; a cleared cache leaves it naming folders that are
    gone, which is said (with what to do) instead of a traceback."""
    from selfplay.learner.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "tiny")
    work = tmp_path / "exp"
    work.mkdir()
    listed = [{"repo": "parse", "task_id": "parse-0", "dir": str(tmp_path / "gone"), "f2p": [], "p2p": []}]
    (work / "tasks.json").write_text(json.dumps(listed))
    msg = refused("--arm", "rl", "--work", str(work), "--model", str(model))
    assert f"{work / 'tasks.json'} lists the held-out tasks, but they cannot be read back" in msg
    assert "does not exist" in msg and "move it aside" in msg
    assert not (work / "results.json").exists()


def test_demonstrated_without_model_is_checked_with_the_stand_in(bench, monkeypatch, tmp_path):
    """Without --model the options are checked with the embedded model standing in for the warm start not
    built yet: `--demonstrated` then has no store to check, and is not refused for it."""
    import argparse

    args = argparse.Namespace(demonstrated=True, max_turns=4, max_new_tokens=32, max_context_tokens=2048,
                              samples=1, workers=1, temperature=0.5, eval_seed=0, localize=False,
                              submit_on_limit=False, max_repeats=None, eval_device="cpu", arm="rl",
                              work=tmp_path / "exp", repos=None, heldout="parse,inflection,humanize",
                              iterations=1, eval_every=1, lr=1e-5, seed=0, preset="default", policy=None,
                              overrides=[], arms="rl,control", train_eval=0, control_learner="on", repo_list=None)
    from agent_scaffold.embedded import default_model_dir

    cfg = bench.experiment_config(args, str(default_model_dir()), stand_in=True)
    assert not any("demonstrated" in o for o in cfg.overrides)
    with pytest.raises(SystemExit, match="--demonstrated: no warm-start store"):
        bench.experiment_config(args, str(default_model_dir()))


def test_a_work_dir_in_use_is_refused_naming_its_holder(refused, tmp_path):
    """Two processes in one --work (the other arm started there too, a --resume while the first still runs,
    a report) would seed the same tasks.json and overwrite each other's results.json: the second is told."""
    from selfplay.dir_lock import DirLock
    from selfplay.learner.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "tiny")
    work = tmp_path / "exp"
    work.mkdir()
    held = DirLock.acquire(work, "bench_learning.py --arm rl")  # this process stands in for the first
    try:
        msg = refused("--arm", "rl", "--work", str(work), "--model", str(model))
        assert f"{work} is in use by another `bench_learning.py --arm rl` (pid" in msg
        assert "then `the same command with --resume`" in msg
        (work / "results.json").write_text('{"evals": {}, "arms": {}}')
        assert "is in use" in refused("--arm", "report", "--work", str(work))
        assert "is in use" in refused("--arm", "compare", "--work", str(work), "--before", str(model),
                                      "--phase", "before", "--out", str(tmp_path / "c.json"))
        assert not (work / "tasks.json").exists()
    finally:
        held.release()


def _own_list(tmp_path):
    """A user's repo list: the bundled entries and a repo of their own (a local checkout) called `mine`."""
    from repos.listfile import DEFAULT_LIST

    (tmp_path / "mine").mkdir()
    listed = tmp_path / "my_repos.toml"
    listed.write_text(Path(DEFAULT_LIST).read_text() + '\n[[repo]]\nname = "mine"\nsource = "local"\n'
                      'path = "mine"\ntest_command = "python -m pytest -rA"\n')
    return listed


def test_held_out_repos_are_named_in_the_users_repo_list(refused, tmp_path):
    """`--repo-list` names the held-out repos (and, for `--arm rl`, the arms' `repo_list`): a user holds out
    a repo of their own list, which the bundled list does not know."""
    listed = _own_list(tmp_path)
    work = tmp_path / "exp"
    work.mkdir()
    (work / "results.json").write_text('{"evals": {}, "arms": {}}')  # the first check after the held-out one
    assert "held-out repos 'mine' are not in the bundled repos/default.toml" in refused(
        "--arm", "rl", "--work", str(work), "--heldout", "mine")
    assert "already holds an experiment" in refused("--arm", "rl", "--work", str(work), "--heldout", "mine",
                                                    "--repo-list", str(listed))
    assert "already holds an experiment" in refused("--arm", "rl", "--work", str(work), "--heldout", "mine",
                                                    "--set", f"repo_list={listed}")
    msg = refused("--arm", "rl", "--work", str(work), "--heldout", "nosuch", "--repo-list", str(listed))
    assert f"held-out repos 'nosuch' are not in {listed}; valid names:" in msg
    assert "repo_list: cannot read repo list" in refused("--arm", "rl", "--work", str(work), "--repo-list",
                                                         str(tmp_path / "none.toml"))
    rft = tmp_path / "rft"
    assert "--repo-list: cannot read repo list" in refused("--arm", "rft", "--repo-list", str(tmp_path / "none.toml"),
                                                           "--work", str(rft))
    assert f"held-out repos 'nosuch' are not in {listed}" in refused("--arm", "rft", "--repo-list", str(listed),
                                                                     "--repos", "nosuch", "--work", str(rft))
    # rft: --max-turns 0 is refused after the held-out repos are checked
    assert "--max-turns and --max-new-tokens must be 1 or more" in refused(
        "--arm", "rft", "--repo-list", str(listed), "--repos", "mine", "--max-turns", "0", "--work", str(rft))
    assert not rft.exists()
