"""Task images of higher-order tasks: the failed prediction is part of the buggy state, and the exported gold
patch (reverse of the prediction, then reverse of the bug) resolves the instance under swebench's grading."""

from __future__ import annotations

import dataclasses
import json

import pytest
from swebench_fixtures import FIXTURES

pytestmark = [pytest.mark.docker, pytest.mark.slow]
pytest.importorskip("swebench")

# A failed prediction next to the keyfilter bug (its context includes the buggy line).
PRED = """diff --git a/toolz/dicttoolz.py b/toolz/dicttoolz.py
--- a/toolz/dicttoolz.py
+++ b/toolz/dicttoolz.py
@@ -153,5 +153,5 @@ def keyfilter(predicate, d, factory=dict):
     \"\"\"
-    rv = factory()
+    rv = factory()  # the result
     for k, v in d.items():
         if not predicate(k):
             rv[k] = v
"""

GIT_PROBE = ("git log --all --format='%H|%s|%an|%aI|%cI|%D'; git branch --show-current; git status --porcelain; "
             "cat .git/info/exclude; stat -c '%U %a' .git")


def test_higher_order_task_image_and_gold_patch(tmp_path):
    from repos.listfile import get_repo
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from sandboxes.sandbox import WORKDIR
    from selfplay.eval.dataset import normalise
    from selfplay.eval.offline import task_from_folder
    from selfplay.eval.predictions import Prediction
    from selfplay.eval.swebench_grading import grade_local, sandbox_config
    from selfplay.eval.task_image import ensure_instance_image
    from selfplay.judge.grader import build_buggy_state
    from selfplay.store.export import to_instance

    first, _ = task_from_folder(FIXTURES / "toolz-keyfilter")
    task = dataclasses.replace(first, task_id="toolz__selfplay-keyfilter-ho", order=2, origin="higher_order",
                               parent_id=first.task_id, pred_patch=PRED)
    inst = normalise(json.loads(json.dumps(to_instance(task, image=None, base_commit=None, version=None,
                                                       created_at=""))))
    assert inst["image"] == task.image_name != first.image_name
    image = ensure_instance_image(inst)  # built from the toolz repo image and the selfplay_* fields
    with DockerSandbox.create(image, workdir=WORKDIR, config=sandbox_config(inst)) as sb:
        src = sb.exec("sed -n 150,158p toolz/dicttoolz.py; git log --all --oneline | wc -l", 30).output
        assert "rv = factory()  # the result" in src and "if not predicate(k):" in src
        assert src.split()[-1] == "1"  # one commit: no history to lift the fix from
        exported = sb.exec(GIT_PROBE, 30).output
    # the training solver's sandbox of the same task: the same repository, commit for commit
    with DockerSandbox.create(repo_image(get_repo("toolz")), workdir=WORKDIR) as sb:
        build_buggy_state(sb, task.artifact, base_patch=PRED)
        assert sb.exec(GIT_PROBE, 30).output == exported
    verdict = grade_local(inst, Prediction(inst["instance_id"], "gold", inst["patch"]), tmp_path / "gold")
    assert verdict["resolved"] is True
