"""The repository code under test sees in a suite job (validation, grading) is the one the solver's
sandbox shows: one fresh commit of the task's starting tree, not the repo image's release history
(docs/security.md, "Injector side: bugs whose failure is luck"). Real toolz sandboxes."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image
from selfplay.artifact import load_artifact
from selfplay.jobs import Collected, Job, exec_job, staged_files
from selfplay.judge.grader import build_buggy_state
from selfplay.judge.tamper import TamperConfig
from selfplay.validation import ValidationConfig, validate

VALID = Path(__file__).resolve().parent.parent / "fixtures" / "artifacts" / "valid"

# What code under test can read of the repository: its commits (hash and dates included) and refs, the tree of
# HEAD, the layout of .git with every object's name, and who owns it.
PROBE = r"""echo ==PROBE
git log --all --format='%s|%an|%ae|%D|%P|%H|%aI|%cI' 2>&1
git rev-list --all --count 2>&1
git rev-parse 'HEAD^{tree}' 2>&1
(cd .git && find . -print | LC_ALL=C sort)
stat -c '%U %G %a' .git .git/index .git/HEAD
echo ==END
"""

# A bug that is there wherever the last commit message is not the solver sandbox's "initial commit": in the
# image's history (where validation and grading ran) and in the verification run's copy (no .git), so it
# was valid, and the solver's sandbox never showed it.
HISTORY_BUG = '''diff --git a/toolz/itertoolz.py b/toolz/itertoolz.py
--- a/toolz/itertoolz.py
+++ b/toolz/itertoolz.py
@@ -1,6 +1,7 @@
 import itertools
 import heapq
 import collections
+import os
 import operator
 from functools import partial
 from itertools import filterfalse, zip_longest
@@ -545,7 +546,8 @@ def frequencies(seq):
     """
     d = collections.defaultdict(int)
     for item in seq:
-        d[item] += 1
+        msg = ".git/COMMIT_EDITMSG"  # 15 bytes in the solver sandbox: "initial commit", newline
+        d[item] += 1 if os.path.isfile(msg) and os.path.getsize(msg) == 15 else 2
     return dict(d)
''' + " \n \n"  # the hunk's last context lines: two blank ones


def _probe(text: str) -> str:
    return text.split("==PROBE", 1)[1].split("==END", 1)[0]


@pytest.mark.docker
def test_a_suite_job_shows_the_run_the_solver_sandbox_git(toolz_spec):
    artifact = replace(load_artifact(VALID), test_script="#!/bin/bash\n" + PROBE)
    sb = DockerSandbox.create(repo_image(toolz_spec), workdir=toolz_spec.workdir)
    try:
        job = exec_job(sb, artifact, Job(patches=("bug_inject.diff", "test_weaken.diff")), suite_timeout=60,
                       stage=staged_files(artifact))
        assert isinstance(job, Collected), job
        in_job = _probe(job.log.decode())
        sb.reset()
        build_buggy_state(sb, artifact)
        solver = sb.exec("bash -c " + shlex.quote(PROBE), timeout=60)
        assert solver.exit_code == 0, solver.output
        in_episode = _probe(solver.output)
    finally:
        sb.close()
    assert in_job == in_episode
    log = in_job.strip().splitlines()
    assert log[0].startswith("initial commit|selfplay|") and log[1] == "1"  # one commit, not the release history
    assert log[0].endswith("|2000-01-01T00:00:00+00:00|2000-01-01T00:00:00+00:00")  # the same commit hash, too
    assert "./refs/tags/selfplay-base" in log and not any(line.startswith("./refs/tags/v") for line in log)


@pytest.mark.docker
def test_a_bug_keyed_on_the_image_history_fails_validation_without_the_screen(toolz_spec, toolz_pool):
    artifact = replace(load_artifact(VALID), bug_inject=HISTORY_BUG)
    config = ValidationConfig(min_changed_files=1, bug_screen=TamperConfig(enabled=False))
    report = validate(artifact, toolz_spec, pool=toolz_pool, config=config)
    assert not report.valid
    failed = {c.name: c.detail for c in report.checks if not c.passed}
    assert list(failed) == ["bug_validity"], report.checks
    # the screen still refuses it before any suite runs
    screened = validate(artifact, toolz_spec, pool=toolz_pool, config=ValidationConfig(min_changed_files=1))
    assert [c.name for c in screened.checks if not c.passed] == ["patch_hygiene"]


def test_the_fresh_git_comes_after_the_layers_and_before_the_edits():
    from selfplay.jobs.canary import Canary
    from selfplay.jobs.job import FRESH_GIT_LINE, job_command

    def lines(job: Job) -> list[str]:
        return job_command(job, marker="M", canary=Canary.new(), suite_timeout=10).splitlines()

    graded = lines(Job(patches=("bug_inject.diff", "test_weaken.diff"), edits=("prediction.diff",)))
    at = {name: next(i for i, line in enumerate(graded) if f"/{name} >" in line)
          for name in ("bug_inject.diff", "test_weaken.diff", "prediction.diff")}
    fresh = graded.index(FRESH_GIT_LINE)
    assert at["bug_inject.diff"] < at["test_weaken.diff"] < fresh < at["prediction.diff"]
    assert FRESH_GIT_LINE not in lines(Job(clean=False))  # the tree and .git as they are (an episode's own run)
