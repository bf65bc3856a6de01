"""`TableRunner`: a documented test double of the rollout worker (`worker.build_runner`) for the loop's own
logic (recording, rewards, resume bookkeeping, metrics) without Docker. Every result is built from real
types (Trajectory, BugArtifact, ValidationReport, GradeResult, Task); the same paths run for real, Docker
and all, in test_loop_docker.py.

Outcomes are a pure function of the episode id, so a replayed episode gives the same result:
- injector k of an iteration: valid unless k is in `invalid`; its bug is unique per (iteration, k), or the
  same bug every time with `repeat` (a policy that writes one known-valid bug again), reworded per
  (iteration, k) with `reword` as well (the same line changed to other text, the same tests failing), or
  with `extra_edit` plus an unrelated one-line change elsewhere, at a line of its own per (iteration, k);
- solver attempt j of a task (j = index mod G): resolved when j < `solved_per_group`; a failed one
  carries a higher-order task;
- episode ids in `infra` come back as infrastructure failures (no trajectory).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from agent_scaffold.trajectory import Trajectory
from selfplay.artifact import BugArtifact
from selfplay.judge.verdict import GradeResult
from selfplay.rollout.requests import EpisodeRequest, EpisodeResult, infra_failure_result
from selfplay.task import Task, make_task_id
from selfplay.validation.report import CheckResult, ValidationReport


def artifact(n: int, text: str | None = None) -> BugArtifact:
    """The bug at line n of pkg/core.py; `text` replaces what it writes there (the same bug reworded)."""
    bug = (f"diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -{n},1 +{n},1 @@\n"
           f"-    return x + {n}\n+    {text or f'return x - {n}'}\n")
    weaken = ("diff --git a/tests/test_core.py b/tests/test_core.py\n--- a/tests/test_core.py\n"
              f"+++ b/tests/test_core.py\n@@ -{n},1 +{n},1 @@\n-    assert f({n}) == {2 * n}\n+    pass\n")
    return BugArtifact(test_script="python -m pytest -rA tests/test_core.py\n", test_files=("tests/test_core.py",),
                       test_parser="import sys, json\nprint(json.dumps({}))\n", bug_inject=bug, test_weaken=weaken)


def trajectory(role: str, version: int, n_tokens: int = 6) -> Trajectory:
    ids = tuple(range(10, 10 + n_tokens))
    mask = (0, 0) + (1,) * (n_tokens - 2)
    return Trajectory(input_ids=ids, loss_mask=mask, logprobs=tuple(-0.5 * m for m in mask),
                      turn_spans=((2, n_tokens),), policy_version=version, role=role, termination="submitted")


@dataclass
class TableRunner:
    group_size: int
    solved_per_group: int = 1
    invalid: frozenset[int] = frozenset({1})
    infra: frozenset[str] = frozenset()
    repeat: bool = False
    reword: bool = False
    extra_edit: bool = False
    calls: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: EpisodeRequest) -> EpisodeResult:
        with self._lock:
            self.calls.append(request.episode_id)
        if request.episode_id in self.infra:
            return infra_failure_result(request, "SandboxError: the container died", timings={"wall": 0.01})
        index = int(request.episode_id.rsplit("-", 1)[1])
        timings = {"wall": 0.02, "model": 0.01, "sandbox": 0.005}
        if request.role == "injector":
            valid = index not in self.invalid
            checks = (CheckResult("test_files", True, "1 file"), CheckResult("bug_validity", valid, "x"))
            report = ValidationReport(valid=valid, checks=checks,
                                      fail_to_pass=("tests/test_core.py::test_a",) if valid else (),
                                      pass_to_pass=("tests/test_core.py::test_b",) if valid else ())
            n = 1000 * request.iteration + index + 1
            art = artifact(1, f"return x - {n}" if self.reword else None) if self.repeat else artifact(n)
            if self.extra_edit:  # the same bug plus an unrelated change elsewhere, other per episode
                art = replace(art, bug_inject=art.bug_inject + (
                    f"diff --git a/pkg/other.py b/pkg/other.py\n--- a/pkg/other.py\n+++ b/pkg/other.py\n"
                    f"@@ -{n},1 +{n},1 @@\n-x = 1\n+x = 1  # {n}\n"))
            return EpisodeResult(request, trajectory("injector", request.policy_version), "submitted", False, None,
                                 art.files(), validation=report, artifact=art,
                                 timings={**timings, "validation": 0.01})
        task = request.task
        resolved = index % self.group_size < self.solved_per_group
        grade = GradeResult(reward=1 if resolved else -1, resolved=resolved, tests={})
        higher = None
        if not resolved:
            layer = f"diff --git a/pkg/x.py b/pkg/x.py\n--- a/pkg/x.py\n+++ b/pkg/x.py\n@@ -1 +1 @@\n-a\n+b{index}\n"
            higher = Task(make_task_id(task.repo, task.artifact, layer), task.repo, task.artifact, task.fail_to_pass,
                          task.pass_to_pass, origin="higher_order", order=task.order + 1, parent_id=task.task_id,
                          pred_patch=layer)
        return EpisodeResult(request, trajectory("solver", request.policy_version), "submitted", False, None,
                             "diff --git a/x b/x\n", grade=grade, higher_order=higher,
                             timings={**timings, "grading": 0.01})

    def close(self) -> None:
        pass
