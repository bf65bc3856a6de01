"""`--policy openai` against a server whose model name is no folder (`vllm serve DIR --served-model-name
step-1000`, the way docs/eval.md serves a checkpoint): the agent loop is token-exact, so the commands that play
episodes outside a run render prompts with `--tokenizer`, else the embedded model's tokenizer, with a warning.
Before, the client came up without a tokenizer and the first episode died on it ("an unexpected failure")."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfplay.cli import app

pytestmark = pytest.mark.slow
VALID = Path(__file__).resolve().parents[2] / "fixtures" / "artifacts" / "valid"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A real `serve-policy` server (a tiny random model with the embedded tokenizer) named step-1000."""
    pytest.importorskip("transformers")
    from agent_scaffold.policies.hf import HFPolicy
    from agent_scaffold.policy_server import PolicyServer
    from selfplay.learner.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path_factory.mktemp("served") / "tiny")
    policy = HFPolicy(model)
    srv = PolicyServer(policy, port=0, model_name="step-1000")
    srv.start()
    yield srv, model, policy
    srv.shutdown()


def test_the_served_client_has_a_tokenizer_when_the_served_name_is_no_folder(served, caplog):
    from selfplay.cli.eval_cmd import policy_factory

    srv, model, _ = served
    with caplog.at_level(logging.WARNING):
        client = policy_factory("openai", model="step-1000", base_url=srv.url, script=None)("any")
    assert client.model == "step-1000" and client.tokenizer is not None
    assert "'step-1000' is neither a directory nor a hub id" in caplog.text and "--tokenizer" in caplog.text
    caplog.clear()
    named = policy_factory("openai", model=None, base_url=srv.url, script=None, tokenizer=str(model))("any")
    assert named.model == "step-1000" and Path(named.tokenizer.name_or_path) == model
    assert "neither a directory" not in caplog.text


def test_a_tokenizer_folder_without_tokenizer_files_is_named(served, tmp_path):
    from agent_scaffold.errors import PolicyError
    from selfplay.cli.eval_cmd import policy_factory

    srv, _, _ = served
    (tmp_path / "notok").mkdir()
    with pytest.raises(PolicyError, match="cannot load a tokenizer from '.*notok'"):
        policy_factory("openai", model="step-1000", base_url=srv.url, script=None, tokenizer=str(tmp_path / "notok"))


def test_a_runs_endpoints_take_the_tokenizer_of_a_served_folder(served, caplog):
    """`vllm serve DIR` names its model DIR: a run with policy.endpoints and neither policy.model_dir nor
    policy.model_name renders prompts with DIR's tokenizer (before: the embedded one, with a warning)."""
    from agent_scaffold.policy_server import PolicyServer
    from selfplay.config.run_config import PolicyConfig
    from selfplay.rollout.policy_factory import http_policy

    _, model, policy = served
    srv = PolicyServer(policy, port=0)  # named after its model folder, as vLLM names it
    srv.start()
    try:
        with caplog.at_level(logging.WARNING):
            client = http_policy(PolicyConfig(backend="openai", endpoints=(srv.url, srv.url)))
    finally:
        srv.shutdown()
    assert [c.model for c in client.policies] == [str(model)] * 2
    assert all(Path(c.tokenizer.name_or_path) == model for c in client.policies)
    assert "neither a directory" not in caplog.text


@pytest.mark.docker
def test_an_episode_against_a_served_name_plays_its_turns(served, tmp_path):
    srv, model, _ = served
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["episode", "--role", "solver", "--artifact", str(VALID), "--policy", "openai",
                                   "--base-url", srv.url, "--model", "step-1000",
                                   "--max-turns", "2", "--max-new-tokens", "8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    [traj] = out.glob("solver-*.jsonl")
    record = json.loads(traj.read_text().splitlines()[0])
    assert len(record["turn_spans"]) >= 1 and sum(record["loss_mask"]) > 0  # turns sampled by the server
    assert "ended:" in res.output


@pytest.mark.parametrize(("args", "names"), [
    (["--policy", "hf", "--tokenizer", "x"], "for --policy openai; this command's policy is 'hf'"),
    (["--policy", "openai", "--tokenizer", "./notok"], "./notok does not exist"),
])
def test_a_tokenizer_option_that_cannot_apply_is_named(args, names, tmp_path):
    res = CliRunner().invoke(app, ["episode", "--role", "solver", *args, "--out", str(tmp_path / "out")],
                             env={"COLUMNS": "400"})
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "--tokenizer" in out and names in out, out
    assert not (tmp_path / "out").exists()
