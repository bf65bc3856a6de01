"""Higher-order tasks: pure refusal/derivation rules, and one real second-order task on toolz."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from selfplay.artifact import load_artifact
from selfplay.diffs import normalised_hash, split_diff
from selfplay.higher_order import HigherOrderConfig, derive_task, make_higher_order_task, refuse_reason
from selfplay.task import Task, make_task_id

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VALID = FIXTURES / "artifacts" / "valid"
PRED = FIXTURES / "predictions"


def _parent(f2p=("a", "b"), p2p=("c",), order=1) -> Task:
    artifact = load_artifact(VALID)
    return Task(task_id=make_task_id("toolz", artifact), repo="toolz", artifact=artifact, fail_to_pass=f2p,
                pass_to_pass=p2p, order=order)


def test_refusals():
    partial = (PRED / "partial.diff").read_text()
    assert "order cap" in refuse_reason(_parent(order=2), partial, set(), HigherOrderConfig())
    assert refuse_reason(_parent(order=2), partial, set(), HigherOrderConfig(max_order=3)) is None
    assert "empty" in refuse_reason(_parent(), "  \n", set(), HigherOrderConfig())
    assert "duplicate" in refuse_reason(_parent(), partial, {normalised_hash(partial)}, HigherOrderConfig())


def test_derive_recomputes_fail_to_pass_over_the_parent_oracle():
    task = derive_task(_parent(), "LAYER", {"a": "passed", "b": "failed", "c": "failed", "x": "failed"})
    assert (task.fail_to_pass, task.pass_to_pass) == (("b", "c"), ("a",))  # a test vanishing counts as failing
    assert (task.order, task.origin, task.pred_patch, task.parent_id) == (2, "higher_order", "LAYER",
                                                                           _parent().task_id)
    assert task.task_id != _parent().task_id


def test_derive_keeps_nothing_when_every_oracle_test_passes():
    assert derive_task(_parent(), "LAYER", {"a": "passed", "b": "passed", "c": "passed"}) is None


def test_task_spec_is_the_reversed_weakening():
    spec = _parent().spec
    assert "+def test_frequencies():" in spec and "+    def test_keyfilter(self):" in spec


def test_swebench_shape():
    import json

    inst = _parent().to_swebench()
    assert json.loads(inst["FAIL_TO_PASS"]) == ["a", "b"] and json.loads(inst["PASS_TO_PASS"]) == ["c"]
    assert _parent().spec in inst["problem_statement"]  # the rendered test-spec section
    assert "+        d[item] += 1" in inst["patch"]  # the reference fix undoes the bug


@pytest.mark.docker
@pytest.mark.slow
def test_second_order_task_from_a_partial_fix(toolz_spec, toolz_pool, valid_report):
    from selfplay.judge.grader import grade

    parent = replace(_parent(valid_report.fail_to_pass, valid_report.pass_to_pass))
    partial = (PRED / "partial.diff").read_text()
    seen: set[str] = set()
    with toolz_pool.checkout() as sb:
        task = make_higher_order_task(parent, partial, spec=toolz_spec, sb=sb, seen=seen)
    assert task is not None and task.order == 2
    assert sorted(task.fail_to_pass) == sorted(t for t in valid_report.fail_to_pass if "keyfilter" in t)
    assert "toolz/tests/test_itertoolz.py::test_frequencies" in task.pass_to_pass
    assert seen == {normalised_hash(partial)} and task.metadata["failed_patch_hash"] == normalised_hash(partial)
    # the same failed patch again is a duplicate; a second-order task cannot spawn a third order
    with toolz_pool.checkout() as sb:
        assert make_higher_order_task(parent, partial, spec=toolz_spec, sb=sb, seen=seen) is None
        assert make_higher_order_task(task, partial, spec=toolz_spec, sb=sb, seen=set()) is None
    # the rest of the fix (dicttoolz only), graded on the second-order state, resolves it
    rest = "".join(s.text for s in split_diff((PRED / "correct.diff").read_text()) if s.path == "toolz/dicttoolz.py")
    result = grade(task.artifact, rest, task.fail_to_pass, task.pass_to_pass, spec=toolz_spec, pool=toolz_pool,
                   base_patch=task.pred_patch)
    assert result.reward == 1, result.to_json()
