"""`load_config` / `dump_config`: presets, dotted overrides, type checks and the errors they give."""

from __future__ import annotations

import dataclasses

import pytest

from selfplay.config.loader import (
    PRESETS,
    ConfigError,
    dump_config,
    load_config,
    load_resume_config,
    parse_override,
    to_data,
    valid_keys,
)
from selfplay.config.run_config import RunConfig
from selfplay.config.yaml_io import write_yaml


def _load(*overrides: str, config: str = "default") -> RunConfig:
    return load_config(config, overrides)


def test_no_argument_is_the_default_preset():
    assert load_config() == load_config("default")


def test_overrides_are_yaml_typed():
    c = _load("learner.engine.lr=3e-6", "repos=[toolz, cachetools]", "policy.model_dir=null", "learner.enabled=false",
              "max_hours=2", "rollout.repo_weights={toolz: 2}", "curriculum.sampling.band=[0.1, 0.6]")
    assert c.learner.engine.lr == 3e-6
    assert c.repos == ("toolz", "cachetools")
    assert c.policy.model_dir is None and c.learner.enabled is False
    assert c.max_hours == 2.0 and isinstance(c.max_hours, float)  # int -> float is the one coercion
    assert c.rollout.repo_weights == {"toolz": 2.0}
    assert c.curriculum.sampling.band == (0.1, 0.6)


def test_later_overrides_win_and_unset_keys_keep_the_preset():
    c = _load("rollout.workers=3", "rollout.workers=5")
    assert c.rollout.workers == 5
    assert c.rollout.solver_limits.max_turns == load_config("default").rollout.solver_limits.max_turns


def test_the_default_run_ends_loops_and_an_override_turns_that_off():
    """Both roles of the default preset end an episode at its second repeat (docs/benchmarks.md, "Ending a
    loop"); `null` gives the role's default back, which never ends one."""
    c = load_config("default")
    assert (c.rollout.solver_limits.max_repeats, c.rollout.injector_limits.max_repeats) == (2, 2)
    assert _load("rollout.solver_limits.max_repeats=null").rollout.solver_limits.max_repeats is None
    assert _load("rollout.solver_limits.max_repeats=3").rollout.solver_limits.max_repeats == 3


@pytest.mark.parametrize("override, named", [("rollout.solver_limits.max_repeats=0", "max_repeats must be positive"),
                                             ("rollout.injector_limits.max_turns=0", "max_turns must be positive")])
def test_a_limit_out_of_range_is_refused_when_the_config_loads(override, named):
    with pytest.raises(ConfigError, match=named):
        _load(override)


def test_the_shared_suite_limits_load_into_each_section_on_their_own():
    c = _load("grader.suite_timeout=7", "validation.suite_timeout=9", "validation.tamper.enabled=false",
              "grader.max_test_output=1024")
    assert (c.grader.suite_timeout, c.validation.suite_timeout) == (7.0, 9.0)
    assert isinstance(c.grader.suite_timeout, float) and isinstance(c.validation.suite_timeout, float)
    assert c.grader.tamper.enabled and not c.validation.tamper.enabled
    assert (c.grader.max_test_output, c.validation.max_test_output) == (1024, RunConfig().validation.max_test_output)
    assert {"grader.suite_timeout", "validation.suite_timeout", "grader.tamper.enabled"} <= set(valid_keys())


def test_a_yaml_file_is_a_partial_tree_over_the_defaults(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("name: mine\nlearner:\n  engine:\n    lr: 2.0e-6\n")
    c = load_config(f)
    assert c.name == "mine" and c.learner.engine.lr == 2e-6
    assert c.rollout == RunConfig().rollout


@pytest.mark.parametrize("override, expected", [
    ("learner.lr=3e-6", ["learner.lr", "unknown key", "did you mean learner.engine.lr?"]),
    ("policy.backendd=hf", ["policy.backendd", "did you mean policy.backend?"]),
    ("polcy.backend=hf", ["polcy", "unknown key", "did you mean policy?"]),
    ("policy.backend=hff", ["policy.backend", "'hff'", "one of 'hf', 'openai', 'vllm', 'scripted'"]),
    ("rollout.workers=two", ["rollout.workers", "expected int", "'two'"]),
    ("rollout.workers=2.5", ["rollout.workers", "expected int", "2.5"]),
    ("learner.enabled=yes", ["learner.enabled", "expected bool", "'yes'"]),
    ("name=123", ["name", "expected str", "quote it"]),
    ("rollout.strategies=removal", ["rollout.strategies", "a list of str", "write a list"]),
    ("rollout.strategies=[kit, dirct]", ["rollout.strategies: dirct is not an injection strategy",
                                         "removal, history, direct, kit"]),
    ("rollout.strategies=[]", ["rollout.strategies: an empty list"]),
    ("curriculum.sampling.band=[0.1, 0.2, 0.3]", ["curriculum.sampling.band", "exactly 2"]),
    ("repos=[toolz, 3]", ["repos[1]", "expected str"]),
    ("learner.engine.dtype=fp16", ["learner.engine:", "dtype", "fp16", "override 'learner.engine.dtype=fp16'"]),
    ("learner.engine.loss.agg=mean", ["learner.engine.loss:", "token-mean"]),
    ("rollout.workers=0", ["rollout.workers", ">= 1"]),
    ("policy.backend=vllm", ["policy.endpoints", "base URL"]),
    ("policy.backend.x=1", ["policy.backend.x", "not a section"]),
    ("policy=3", ["policy:", "expected a mapping"]),
    ("validation.tamper.patterns=[{name: x}]", ["validation.tamper.patterns[0]", "missing required key(s) regex, why"]),
    ("validation.tamper.patterns=[{name: x, regex: '(', why: t}]", ["validation.tamper:", "invalid regex"]),
    ("learner.engine.lr", ["KEY=VALUE"]),
    ("learner.engine.lr=[1", ["learner.engine.lr", "not valid YAML"]),
])
def test_bad_keys_and_values_name_the_key_and_what_is_allowed(override, expected):
    with pytest.raises(ConfigError) as info:
        _load(override)
    for part in expected:
        assert part in str(info.value), str(info.value)


def test_errors_in_a_file_name_the_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("rollout:\n  wrokers: 3\n")
    with pytest.raises(ConfigError, match=r"rollout.wrokers: unknown key.*did you mean rollout.workers\?.*bad.yaml"):
        load_config(f)
    f.write_text("learner:\n  enabled: true\nlearner:\n  enabled: false\n")
    with pytest.raises(ConfigError, match="(?s)bad.yaml is not valid YAML.*duplicate key 'learner'.*bad.yaml\", line 3"):
        load_config(f)
    f.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(f)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigError, match="did you mean 'default'.*smoke, gpu-1node, multi-node"):
        load_config("defualt")


def test_multi_node_placeholder_must_be_overridden():
    with pytest.raises(ConfigError, match="store_url: still the CHANGE_ME placeholder.*postgresql"):
        load_config("multi-node")
    c = load_config("multi-node", ["store_url=postgresql://u:p@db:5432/selfplay"])
    assert c.rollout.executor == "ray" and c.store_url.startswith("postgresql://")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_round_trips_through_dump(preset, tmp_path):
    overrides = ["store_url=postgresql://u:p@db/selfplay"] if preset == "multi-node" else []
    c = load_config(preset, overrides)
    f = tmp_path / "config.yaml"
    f.write_text(dump_config(c))
    assert load_config(f) == c
    assert f.read_text() == dump_config(load_config(f))


def test_dump_quotes_strings_that_would_read_back_as_other_types(tmp_path):
    c = _load("name='3e-6'", "repos=['yes', 'null', '1.5']", "policy.model_name='true'")
    f = tmp_path / "c.yaml"
    f.write_text(dump_config(c))
    back = load_config(f)
    assert back == c and back.name == "3e-6" and back.policy.model_name == "true"
    assert back.repos == ("yes", "null", "1.5")


def test_every_leaf_of_the_tree_can_be_overridden_with_its_own_value():
    """Each key dumped from the defaults is accepted back as an override (no annotation the loader
    cannot check), and the tamper screen's init=False field is rebuilt, not dumped."""
    c = RunConfig()
    text = dump_config(c)
    assert "_compiled" not in text
    leaves = [k for k in valid_keys() if not any(other.startswith(k + ".") for other in valid_keys())]
    assert "learner.engine.loss.clip_high" in leaves and "validation.tamper.patterns" in leaves
    for key in leaves:
        value = c
        for part in key.split("."):
            value = getattr(value, part)
        if dataclasses.is_dataclass(value) or (isinstance(value, tuple) and value
                                                and dataclasses.is_dataclass(value[0])):
            continue
        literal = write_yaml(to_data(value), flow=True).strip()  # the writer's own scalar rules
        assert load_config("default", [f"{key}={literal}"]) is not None, key


def test_parse_override_splits_at_the_first_equals():
    assert parse_override("store_url=postgresql://u:p@h/db?x=1") == ("store_url", "postgresql://u:p@h/db?x=1")
    assert parse_override("policy.model_dir=") == ("policy.model_dir", None)


def test_resume_takes_the_saved_config_and_only_safe_overrides(tmp_path):
    saved = load_config("smoke", ["seed=7"])
    (tmp_path / "config.yaml").write_text(dump_config(saved))
    assert load_resume_config(tmp_path) == saved
    more = load_resume_config(tmp_path, ["iterations=5", "max_hours=1.5", "metrics.tensorboard=true"])
    assert (more.iterations, more.max_hours, more.seed) == (5, 1.5, 7)
    with pytest.raises(ConfigError, match="reward.group_size: cannot change when resuming.*iterations, max_hours"):
        load_resume_config(tmp_path, ["reward.group_size=4"])
    with pytest.raises(ConfigError, match="not a run directory"):
        load_resume_config(tmp_path / "nope")


def test_yaml_dialect_is_yaml_1_2_core():
    assert parse_override("a=3e-6")[1] == 3e-6
    assert parse_override("a=yes")[1] == "yes" and parse_override("a=on")[1] == "on"
    assert parse_override("a=True")[1] is True and parse_override("a=~")[1] is None
    assert parse_override("a=0x10")[1] == "0x10"
