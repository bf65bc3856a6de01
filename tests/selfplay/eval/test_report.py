"""Report arithmetic (pure): resolved % per run, mean ± standard error, pass@K, per-instance table."""

from __future__ import annotations

import math

from selfplay.eval.report import EvalReport, InstanceResult


def test_three_runs_over_four_instances():
    resolved = {0: {"a", "b"}, 1: {"a"}, 2: {"a", "c"}}
    results = tuple(InstanceResult(i, k, resolved=i in resolved[k]) for k in range(3) for i in "abcd")
    rep = EvalReport(tuple("abcd"), results, runs=3)
    assert rep.resolved_pct() == [50.0, 25.0, 50.0]
    mean, stderr = rep.mean_and_stderr()
    assert math.isclose(mean, 125 / 3)
    sd = math.sqrt(((50 - mean) ** 2 * 2 + (25 - mean) ** 2) / 2)
    assert math.isclose(stderr, sd / math.sqrt(3))
    assert rep.pass_at_k() == 75.0  # a, b, c each resolved at least once; d never
    row = {r["instance_id"]: r for r in rep.table()}
    assert row["a"]["resolved"] == [True, True, True] and row["d"]["resolved_runs"] == 0
    doc = rep.to_json()
    assert doc["resolved_pct_per_run"] == [50.0, 25.0, 50.0] and doc["pass_at_k"] == 75.0


def test_one_run_has_zero_stderr_and_infra_failures_are_listed():
    results = (InstanceResult("a", 0, resolved=True), InstanceResult("b", 0, resolved=False, infra_failure=True))
    rep = EvalReport(("a", "b"), results, runs=1)
    assert rep.mean_and_stderr() == (50.0, 0.0)
    assert rep.to_json()["infra_failures"] == ["b@run0"]


def test_metrics_are_flat_and_namespaced():
    results = (InstanceResult("a", 0, resolved=True), InstanceResult("b", 0, resolved=False),
               InstanceResult("a", 1, resolved=False), InstanceResult("b", 1, resolved=False, infra_failure=True))
    m = EvalReport(("a", "b"), results, runs=2).metrics()
    assert m == {"eval/swebench/resolved_pct": 25.0, "eval/swebench/resolved_pct_stderr": 25.0,
                 "eval/swebench/pass_at_2": 50.0, "eval/swebench/infra_failures": 1.0,
                 "eval/swebench/instances": 2.0}
