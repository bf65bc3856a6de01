"""`selfplay serve-policy`: the model directory, device and address are checked before the model loads,
each named with exit 2 and what to do (the server itself: tests/agent_scaffold, test_policy_server)."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from selfplay.cli import app


def _serve(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["serve-policy", *args], env={"COLUMNS": "400"})
    return res.exit_code, " ".join(res.output.split())


def test_a_missing_model_directory_is_named(tmp_path):
    code, out = _serve("--model", str(tmp_path / "nomodel"))
    assert code == 2, out
    assert f"{tmp_path / 'nomodel'} does not exist" in out and "Repo id" not in out


@pytest.mark.parametrize(("config", "names"), [
    (None, "has no config.json"),
    ("{", "config.json is not valid JSON"),
    ("{}", "config.json names no model_type"),
])
def test_a_model_directory_without_a_usable_config_is_named(tmp_path, config, names):
    model = tmp_path / "model"
    model.mkdir()
    if config is not None:
        (model / "config.json").write_text(config)
    code, out = _serve("--model", str(model))
    assert code == 2, out
    assert names in out and str(model) in out


def test_a_port_out_of_range_is_named():
    code, out = _serve("--model", "/nonexistent", "--port", "99999")  # checked before the model, too
    assert code == 2, out
    assert "--port" in out and "65535" in out


def test_cuda_on_a_machine_without_it_is_named():
    import torch  # the train extra, which CI installs

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, out = _serve("--device", "cuda")
    assert code == 2, out
    assert "CUDA is not available" in out and "--device cpu" in out


def test_a_port_in_use_is_named_with_what_to_do():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out = _serve("--port", str(port))
    assert code == 2, out
    assert f"127.0.0.1:{port}" in out and "in use" in out and "--port" in out


@pytest.mark.parametrize("host", ["192.0.2.1", "nohost.invalid"])  # TEST-NET-1: never this machine's
def test_a_host_that_cannot_be_bound_is_named_with_what_to_do(host):
    code, out = _serve("--host", host, "--port", "0")
    assert code == 2, out
    assert f"cannot listen on {host}:0" in out and "--host must be" in out
