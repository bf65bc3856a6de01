"""`selfplay.eval.runner`'s solver limits: the evaluation's overrides, and one out of range refused before
any instance is played or any file written (pure: no sandbox starts)."""

from __future__ import annotations

import pytest

from agent_scaffold.roles import load_role
from selfplay.eval.runner import EvalConfig, evaluate, solver_limits


def test_the_evaluations_overrides_reach_the_solvers_limits(tmp_path):
    role = load_role("solver")
    assert solver_limits(role, EvalConfig(out_dir=tmp_path)) == role.limits
    limits = solver_limits(role, EvalConfig(out_dir=tmp_path, max_turns=7, max_new_tokens=64, max_context=1024,
                                            max_repeats=2))
    assert (limits.max_turns, limits.max_new_tokens, limits.max_context_tokens, limits.max_repeats) == (7, 64, 1024, 2)
    assert limits.command_timeout == role.limits.command_timeout  # what is not overridden stays the role's


def test_an_override_out_of_range_fails_before_any_instance(tmp_path):
    out = tmp_path / "eval"

    def never(instance_id: str):
        raise AssertionError("no policy is asked for")

    with pytest.raises(ValueError, match="max_repeats must be positive or None, got 0"):
        evaluate([{"instance_id": "a__b-1"}], never, EvalConfig(out_dir=out, max_repeats=0))
    assert not out.exists()
