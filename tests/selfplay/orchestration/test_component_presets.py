"""Component presets (SFT presets, warm-start sizes): YAML files read through the run loader's checks."""

from __future__ import annotations

import pytest

from selfplay.config.component_presets import component_preset, preset_names, sft_preset, warm_start_size
from selfplay.config.loader import ConfigError
from selfplay.demos.warm_start_config import WarmStartConfig
from selfplay.learner.sft import SFTConfig


def test_the_shipped_presets_hold_the_documented_values():
    assert preset_names("sft") == ("cpu", "nebius")
    assert preset_names("warm_start") == ("default", "full", "medium", "visible")
    assert sft_preset("nebius") == SFTConfig()
    assert sft_preset("cpu") == SFTConfig(lr=1e-4, warmup_steps=1, batch_size=4, epochs=1, token_budget=2048,
                                          gradient_checkpointing=False)
    # the warm start's cache key hashes these values: a size read from YAML must equal the one it replaced
    assert warm_start_size("default") == WarmStartConfig()
    # medium and full train every demonstration every epoch in the SFT preset's steps, as before the
    # default's injector_epochs, batch_size and lr (so they keep their cache keys)
    # (all three keep the `direct` injector demonstrations they were measured with, and so their keys)
    assert warm_start_size("medium") == WarmStartConfig(n_per_repo=16, injector_per_repo=4, epochs=3,
                                                        injector_epochs=None, batch_size=None, lr=None,
                                                        injector_strategy="direct")
    # visible is the fifteenth attempt's `--locate visible -n 16 --epochs 2` (docs/benchmarks.md), by name
    assert warm_start_size("visible") == WarmStartConfig(n_per_repo=16, locate="visible", epochs=2, injector_epochs=1,
                                                         injector_strategy="direct")
    assert warm_start_size("full") == WarmStartConfig(n_per_repo=60, per_task=2, injector_per_repo=10, max_rounds=30,
                                                      epochs=1, injector_epochs=None, batch_size=None, lr=None,
                                                      injector_strategy="direct")


def test_overrides_apply_and_none_keeps_the_preset():
    cfg = sft_preset("cpu", lr=3e-5, epochs=None, seed=7)
    assert (cfg.lr, cfg.epochs, cfg.seed, cfg.batch_size) == (3e-5, 1, 7, 4)
    assert warm_start_size("medium", n_per_repo=4, epochs=None) == WarmStartConfig(
        n_per_repo=4, injector_per_repo=4, epochs=3, injector_epochs=None, batch_size=None, lr=None,
        injector_strategy="direct")


def test_unknown_names_and_bad_values_are_refused_with_what_is_allowed(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"unknown sft preset 'cpuu' \(did you mean 'cpu'\?\); choose one of cpu, "
                                          "nebius"):
        sft_preset("cpuu")
    with pytest.raises(ValueError, match="presets exist for sft, warm_start"):
        component_preset("learner", "cpu")
    with pytest.raises(ConfigError, match="unexpected keyword argument 'nope'"):
        sft_preset("cpu", nope=1)
    with pytest.raises(ConfigError, match=r"warm_start preset 'default': warm_start\.config\.repos: parse is held out"):
        warm_start_size("default", repos=("parse",))


def test_a_malformed_preset_file_names_the_key(tmp_path, monkeypatch):
    from importlib import resources

    import selfplay.config.component_presets as cp

    folder = tmp_path / "presets" / "sft"
    folder.mkdir(parents=True)
    (folder / "bad.yaml").write_text("lr: fast\n")
    monkeypatch.setattr(cp.resources, "files", lambda pkg: tmp_path if pkg == "selfplay.config" else resources.files(pkg))
    with pytest.raises(ConfigError, match=r"sft\.lr"):
        sft_preset("bad")
