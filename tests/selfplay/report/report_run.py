"""A test double of a finished self-play run directory, written file by file as the run loop's contract says
(runs/<run_id>/: config.yaml, store.db, trajectories/it<NNNNN>-<role>.jsonl.gz, metrics.jsonl,
summary.json).

The store is a real SQLite store opened with `open_store`, filled through the `TaskStore` API; trajectories
are real `Trajectory` objects written with gzip; only the numbers are made up, small enough to check by
hand. `test_report_page.py` holds the expected figures next to the tests that check them.

One solver episode carries hostile text (script tags, a closing </script>, an onerror handler, `<!--`, the
JavaScript line separator) in its turn, its observation and its diff.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import yaml

from agent_scaffold.trajectory import Trajectory
from selfplay.artifact import BugArtifact
from selfplay.store import open_store
from selfplay.validation.report import CheckResult, ValidationReport

RUN_ID = "fixture-20260101-000000"
HOSTILE_ID = f"{RUN_ID}-it2-solver-1"
HOSTILE = ("<script>document.body.dataset.pwned='script'</script></script>"
           "<img src=x onerror=\"document.body.dataset.pwned='img'\"><!-- \u2028 &amp; <b>bold</b>")
DIFF = "diff --git a/toolz/x.py b/toolz/x.py\n--- a/toolz/x.py\n+++ b/toolz/x.py\n@@ -1 +1 @@\n-a\n+b\n"

# Rates the metrics lines report (iteration -> value); the tests compare the page to these.
METRICS = [
    {"iteration": 1, "time": 1_700_000_000, "policy_version": 0, "solve_rate/all": 0.5,
     "solve_rate/order_1": 0.5, "solve_rate/repo/toolz": 0.5, "injector/validity": 0.5,
     "injector/failed_check/bug_validity": 1, "reward/injector_mean": 0.2, "reward/solver_mean": 0.0,
     "episode/injector/turns_mean": 3, "episode/solver/turns_mean": 2, "episode/injector/tokens_mean": 120,
     "episode/solver/tokens_mean": 80, "tasks/active": 2},
    {"iteration": 1, "time": 1_700_000_050, "policy_version": 1, "learner/loss": 0.75, "learner/clipfrac": 0.1,
     "time_share/model": 0.6, "time_share/sandbox": 0.3, "time_share/orchestration": 0.1},
    {"iteration": 2, "time": 1_700_000_100, "policy_version": 1, "solve_rate/all": 0.25,
     "solve_rate/order_1": 0.5, "solve_rate/order_2": 0.0, "solve_rate/repo/toolz": 0.25,
     "injector/validity": 0.0, "injector/failed_check/bug_validity": 2, "injector/failed_check/weakening": 1,
     "reward/injector_mean": -0.5, "reward/solver_mean": -0.5, "episode/injector/turns_mean": 4,
     "episode/solver/turns_mean": 3, "tasks/active": 3, "learner/loss": 0.5, "time_share/model": 0.4,
     "time_share/sandbox": 0.5, "time_share/orchestration": 0.1},
]


def artifact(n: int) -> BugArtifact:
    bug = f"diff --git a/toolz/x.py b/toolz/x.py\n--- a/toolz/x.py\n+++ b/toolz/x.py\n@@ -{n} +{n} @@\n-a{n}\n+b{n}\n"
    weaken = (f"diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -{n} +{n} @@\n"
              f"-assert {n}\n+pass\n")
    return BugArtifact(test_script="pytest -rA tests/t.py\n", test_files=("tests/t.py",),
                       test_parser="import json\nprint(json.dumps({}))\n", bug_inject=bug, test_weaken=weaken)


def report(valid: bool, failed: str = "bug_validity") -> ValidationReport:
    checks = (CheckResult("test_files", True, "1 file"), CheckResult(failed, valid, "2 tests fail with the bug"))
    if not valid:
        return ValidationReport(valid=False, checks=checks)
    return ValidationReport(valid=True, checks=checks, fail_to_pass=("tests/t.py::test_a",),
                            pass_to_pass=("tests/t.py::test_b",))


def trajectory(role: str, episode_id: str, iteration: int, turns: list[tuple[str, str]], *, reward: float | None,
               termination: str = "submitted", **metadata) -> Trajectory:
    """An episode whose messages are system, task prompt, then (assistant turn, observation) pairs; tokens
    are one id per 4 characters, so lengths are deterministic."""
    messages = [{"role": "system", "content": f"You are the {role}."},
                {"role": "user", "content": f"Task prompt of {episode_id}."}]
    for command, observation in turns:
        messages.append({"role": "assistant", "content": f"Running it.\n```bash\n{command}\n```"})
        messages.append({"role": "user", "content": observation})
    ids: list[int] = []
    mask: list[int] = []
    spans = []
    for m in messages:
        n = max(1, len(m["content"]) // 4)
        if m["role"] == "assistant":
            spans.append((len(ids), len(ids) + n))
        ids.extend(range(n))
        mask.extend([int(m["role"] == "assistant")] * n)
    md = {"id": episode_id, "repo": "toolz", "iteration": iteration, "turns": len(turns),
          "infra_failure": False, "error": None, **metadata}
    return Trajectory(input_ids=tuple(ids), loss_mask=tuple(mask), logprobs=tuple(-0.5 * k for k in mask),
                      turn_spans=tuple(spans), policy_version=iteration - 1, role=role, termination=termination,
                      reward=reward, messages=tuple(messages), metadata=md)


def write_run(root: Path) -> Path:
    """Write the run directory under `root`; returns it."""
    run = root / RUN_ID
    (run / "trajectories").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"name": "fixture", "repos": ["toolz"], "store_url": None}))
    with open_store(str(run / "store.db")) as store:
        task_a = store.record_validation(artifact(1), "toolz", report(True), origin="injector", strategy="removal",
                                         episode_id=f"{RUN_ID}-it1-injector-0")
        store.record_validation(artifact(2), "toolz", report(False), origin="injector", strategy="history",
                                episode_id=f"{RUN_ID}-it1-injector-1")
        task_b = store.record_validation(artifact(3), "toolz", report(True), origin="procedural")
        store.record_validation(artifact(1), "toolz", report(True), origin="higher_order", order=2,
                                parent_id=task_a, pred_patch=DIFF)
        for solved in (True, False, False, False):  # task A: 1 of 4 -> 0.25
            store.record_attempt(task_a, role="solver", policy_version=0, reward=1.0 if solved else -1.0,
                                 turns=2, tokens=80, termination="submitted", run_id=RUN_ID)
        for _ in range(2):  # task B: 2 of 2 -> 1.0; the higher-order task has no attempt
            store.record_attempt(task_b, role="solver", policy_version=1, reward=1.0, turns=3, tokens=90,
                                 termination="submitted", run_id=RUN_ID)
    valid = {"valid": True, "failed_check": None, "error": None,
             "checks": [{"name": "test_files", "passed": True, "detail": "1 file"},
                        {"name": "bug_validity", "passed": True, "detail": "2 tests fail with the bug"}]}
    invalid = {"valid": False, "failed_check": "bug_validity", "error": None,
               "checks": [{"name": "test_files", "passed": True, "detail": "1 file"},
                          {"name": "bug_validity", "passed": False, "detail": "no test fails with the bug"}]}
    files = artifact(1).files()
    injectors = [
        trajectory("injector", f"{RUN_ID}-it1-injector-0", 1, [("ls", "toolz tests"), ("cat x.py", "a1")] * 1
                   + [("git diff", DIFF)], reward=0.5, strategy="removal", task_id=task_a, submission=files,
                   validation=valid),
        trajectory("injector", f"{RUN_ID}-it1-injector-1", 1, [("ls", "toolz")], reward=-1.0, strategy="history",
                   submission=files, validation=invalid),
    ]
    grade_ok = {"reward": 1, "resolved": True, "tests": {"tests/t.py::test_a": "passed"}, "dropped_hunks": [],
                "error": None, "tamper": None, "integrity": "ok"}
    grade_bad = {**grade_ok, "reward": -1, "resolved": False, "tests": {"tests/t.py::test_a": "failed"}}
    solvers_1 = [trajectory("solver", f"{RUN_ID}-it1-solver-{k}", 1, [("pytest -x", "1 failed")] * 2,
                            reward=1.0 if k == 0 else -1.0, task_id=task_a, group_id=f"{task_a}-1", order=1,
                            submission=DIFF, grade=grade_ok if k == 0 else grade_bad) for k in range(2)]
    hostile = trajectory("solver", HOSTILE_ID, 2, [(f"echo \"{HOSTILE}\"", f"output {HOSTILE}"),
                                                   ("sed -i s/a/b/ toolz/x.py", "")],
                         reward=-1.0, task_id=task_b, group_id=f"{task_b}-2", order=1,
                         submission=DIFF + f"+{HOSTILE}\n", grade={**grade_bad, "error": HOSTILE})
    solvers_2 = [trajectory("solver", f"{RUN_ID}-it2-solver-0", 2, [("ls", "x" * 9000)] * 3, reward=1.0,
                            task_id=task_b, group_id=f"{task_b}-2", order=1, submission=DIFF, grade=grade_ok),
                 hostile,
                 trajectory("solver", f"{RUN_ID}-it2-solver-2", 2, [], reward=None, termination="sandbox_error",
                            infra_failure=True, error="SandboxError: container died")]
    _write_gz(run / "trajectories" / "it00001-injector.jsonl.gz", injectors)
    _write_gz(run / "trajectories" / "it00001-solver.jsonl.gz", solvers_1)
    # two gzip members, as an appending writer leaves them
    _write_gz(run / "trajectories" / "it00002-solver.jsonl.gz", solvers_2[:1])
    _write_gz(run / "trajectories" / "it00002-solver.jsonl.gz", solvers_2[1:], mode="ab")
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in METRICS))
    summary = {"run_id": RUN_ID, "iterations": 2, "injector_episodes": 2, "valid_artifacts": 1,
               "solver_attempts": 5, "solved": 2, "learner_updates": 1, "policy_version": 1, "tasks_in_store": 3,
               "infra_failures": 1, "status": "finished", "error": None, "started_at": 1_700_000_000,
               "updated_at": 1_700_000_100, "wall_s": 100.0}
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def _write_gz(path: Path, trajectories: list[Trajectory], mode: str = "wb") -> None:
    with gzip.open(path, mode) as fh:
        fh.write("".join(t.to_json() + "\n" for t in trajectories).encode("utf-8"))
