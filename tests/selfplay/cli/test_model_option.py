"""`--model` checkpoint folders: one check (`selfplay.config.refs.checkpoint_problem`) for every command that
loads one, run before a model loads or a sandbox starts. The commands' own rows are in test_bad_inputs
(solve, episode, rft, run), test_serve_cmd (serve-policy) and test_warm_start (warm-start)."""

from __future__ import annotations

import pytest
import typer

from selfplay.cli.eval_cmd import policy_factory
from selfplay.cli.model_option import check_model_option
from selfplay.config.refs import checkpoint_problem


def _folder(tmp_path, config: str | None):
    model = tmp_path / "model"
    model.mkdir()
    if config is not None:
        (model / "config.json").write_text(config)
    return model


@pytest.mark.parametrize(("config", "names"), [
    (None, "has no config.json"),
    ("{", "config.json is not valid JSON"),
    ("[1]", "config.json names no model_type"),
    ('{"architectures": ["LlamaForCausalLM"]}', "config.json names no model_type"),
])
def test_a_folder_transformers_cannot_build_from_is_named(tmp_path, config, names):
    problem = checkpoint_problem(str(_folder(tmp_path, config)))
    assert problem is not None and names in problem and str(tmp_path / "model") in problem


def test_a_checkpoint_folder_passes_and_a_missing_or_file_path_is_named(tmp_path):
    assert checkpoint_problem(str(_folder(tmp_path, '{"model_type": "llama"}'))) is None
    assert checkpoint_problem(str(tmp_path / "none")) == f"{tmp_path / 'none'} does not exist"
    (tmp_path / "file").write_text("x")
    assert checkpoint_problem(str(tmp_path / "file")) == f"{tmp_path / 'file'} is not a folder"


def test_only_backends_that_load_a_folder_check_it_and_hub_names_pass_where_a_command_takes_them():
    check_model_option("gpt-4o", "openai")  # a served name
    check_model_option("./nomodel", "scripted")  # scripted loads no model
    check_model_option("HuggingFaceTB/SmolLM2-135M-Instruct", "hf")  # a Hub id, left to transformers
    with pytest.raises(typer.BadParameter, match="HuggingFaceTB/SmolLM2-135M-Instruct does not exist"):
        check_model_option("HuggingFaceTB/SmolLM2-135M-Instruct", "hf", hub=False)
    with pytest.raises(typer.BadParameter, match=r"\./nomodel does not exist; name a checkpoint folder"):
        check_model_option("./nomodel", "vllm")


def test_evals_policy_factory_checks_the_folder_before_loading_anything(tmp_path):
    """`selfplay eval swebench --model DIR`: refused when the folder holds no checkpoint, before the policy
    (minutes of loading on a CPU) is built."""
    model = _folder(tmp_path, "{}")
    with pytest.raises(typer.BadParameter, match="names no model_type"):
        policy_factory("hf", model=str(model), base_url="http://127.0.0.1:9", script=None)


def test_a_run_directory_or_its_checkpoints_folder_names_the_newest_checkpoint(tmp_path):
    run = tmp_path / "run"
    for version in ("v000002", "v000010"):
        (run / "checkpoints" / version).mkdir(parents=True)
        (run / "checkpoints" / version / "config.json").write_text('{"model_type": "llama"}')
    newest = run / "checkpoints" / "v000010"
    for folder in (run, run / "checkpoints"):
        assert checkpoint_problem(str(folder)) == f"{folder} has no config.json; it holds checkpoints, the newest {newest}"
    assert checkpoint_problem(str(newest)) is None
