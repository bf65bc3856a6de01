"""`collect` and `selfplay rft` on a store laid out as `selfplay run` leaves it: attempts whose
`trajectory_path` is `<iteration file>#<episode id>`, many episodes to one gzip file."""

from __future__ import annotations

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from agent_scaffold.agent import run_episode
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
from selfplay.cli import app
from selfplay.learner.rft import collect
from selfplay.orchestration.rollouts import episode_id
from selfplay.orchestration.rundir import RunDir, append_trajectories
from selfplay.store import open_store
from tests.agent_scaffold.local_sandbox import LocalSandbox

RUN = "rft-20260101-000000"


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    """Three scripted solver episodes that differ in their first command (so none is a duplicate)."""
    from transformers import AutoTokenizer  # the train extra, which CI installs

    from agent_scaffold.embedded import default_model_dir

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    out = []
    for cmd in ("ls", "cat a.py", "wc -l a.py"):
        sb = LocalSandbox(tmp_path_factory.mktemp("repo"), {"a.py": "x = 1\n"})
        ep = run_episode(ScriptedPolicy([f"Look.\n```bash\n{cmd}\n```", "```submit\n```"], tokenizer=tokenizer),
                         sb, load_role("solver"), solver_variables("fix it", "issue"),
                         limits=EpisodeLimits(max_turns=4))
        out.append(ep.trajectory)
    return out


@pytest.fixture()
def run_store(tmp_path, episodes, monkeypatch):
    """A run directory under `tmp_path` (the working folder, as for `selfplay run`): one iteration's solver
    file holding three episodes, the first failed, and the store's attempts pointing into it."""
    monkeypatch.chdir(tmp_path)
    run = RunDir.create("runs", RUN)
    path = run.trajectory_file(0, "solver")
    rewards = (-1.0, 1.0, 1.0)
    ids = [episode_id(RUN, 0, "solver", k) for k in range(3)]
    append_trajectories(path, [replace(t, reward=r, metadata={**t.metadata, "id": e})
                               for t, r, e in zip(episodes, rewards, ids)])
    with open_store(str(run.store_db)) as st:
        for t, r, e in zip(episodes, rewards, ids):
            st.record_attempt(None, role="solver", policy_version=0, reward=r, turns=2, tokens=len(t.input_ids),
                              termination="submitted", trajectory_path=f"{path}#{e}", run_id=RUN, source="policy")
    return run


def test_a_run_store_gives_its_successful_episodes(run_store, episodes):
    with open_store(str(run_store.store_db), create=False) as st:
        data = collect(st)
    assert data.stats["rft/missing_files"] == 0 and data.stats["rft/kept"] == 2
    assert [t.input_ids for t in data.trajectories] == [episodes[1].input_ids, episodes[2].input_ids]
    assert [t.metadata["id"] for t in data.trajectories] == [episode_id(RUN, 0, "solver", k) for k in (1, 2)]


def test_a_run_store_read_from_elsewhere_names_the_path_and_where_to_run(run_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path / "runs")  # the stored paths are relative to the run's working folder
    res = CliRunner().invoke(app, ["rft", "--store", str(tmp_path / run_store.store_db), "--out",
                                   str(tmp_path / "o")], env={"COLUMNS": "400"})
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert f"runs/{RUN}/trajectories/it00000-solver.jsonl.gz#{RUN}-it0-solver-1" in out
    assert "relative to the folder it ran in" in out
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("out", ["afile", "afile/ckpt"])
def test_an_out_that_cannot_be_a_directory_fails_before_training(run_store, tmp_path, out):
    (tmp_path / "afile").write_text("keep me\n")
    res = CliRunner().invoke(app, ["rft", "--store", str(run_store.store_db), "--out", out])
    assert res.exit_code == 2, res.output
    assert "--out" in res.output and "afile is a file" in " ".join(res.output.split())
    assert "step 1" not in res.output  # no training ran
    assert (tmp_path / "afile").read_text() == "keep me\n"


@pytest.mark.parametrize(("flag", "value"), [("--lr", "-1"), ("--epochs", "0"), ("--batch-size", "0")])
def test_a_bad_override_is_named(tmp_path, flag, value):
    res = CliRunner().invoke(app, ["rft", "--store", str(tmp_path / "none.db"), "--out", str(tmp_path / "o"),
                                   flag, value])
    assert res.exit_code == 2, res.output
    assert flag in res.output and "--preset" not in res.output
    assert not (tmp_path / "o").exists() and not (tmp_path / "none.db").exists()
