"""Task images: a repo image plus one task's buggy state, so SWE-bench tooling sees a normal instance.

`/testbed` holds original -> bug -> weakening (-> the failed prediction of a higher-order task) as the one
and only commit, tagged `selfplay-base` (`Task.to_swebench`'s base_commit): the same starting point the
grader gives solvers in training (`selfplay.judge.grader.build_buggy_state`), with no history to leak the fix.
Built with one container and `docker commit` (`sandboxes.image_build.build_in_container`), named
`Task.image_name`, reused when present; the name hashes the task and `selfplay.task.TASK_IMAGE_RECIPE` (bump
it when this recipe changes). Not built through `DockerSandbox`: its PID 1 snapshots the workdir into the
container, and a committed snapshot of the wrong tree would make `reset()` restore it.
"""

from __future__ import annotations

import io
import json
import logging
import shlex
import tarfile
import time
from typing import Any

from repos.listfile import get_repo
from sandboxes.base_image import image_id
from sandboxes.engine import docker_client
from sandboxes.errors import ImageBuildError
from sandboxes.image_build import build_in_container
from sandboxes.images import repo_image
from sandboxes.sandbox import BASE_MESSAGE, WORKDIR
from sandboxes.shell import FRESH_GIT, IMAGE_SNAPSHOT, SNAPSHOT_LABEL
from selfplay.jobs.job import git_env_line
from selfplay.store.export import from_instance
from selfplay.task import Task

log = logging.getLogger(__name__)
LAYERS = "/var/lib/selfplay-task"
SCRIPT = f"""
set -euo pipefail
{FRESH_GIT}
cd "$1"
{git_env_line()}
for layer in bug_inject.diff test_weaken.diff pred.diff; do
  if [ -s {LAYERS}/$layer ]; then git apply --whitespace=nowarn {LAYERS}/$layer || {{ echo "$layer does not apply" >&2; exit 4; }}; fi
done
rm -rf {LAYERS}
cp .git/info/exclude /tmp/selfplay-exclude 2>/dev/null || : > /tmp/selfplay-exclude
fresh_git /tmp/selfplay-exclude {shlex.quote(BASE_MESSAGE)} || {{ echo "making the one commit failed" >&2; exit 5; }}
rm -f /tmp/selfplay-exclude
"""
# The layers go on with the grader's safe git environment and the one commit is `Sandbox.rebase`'s own
# (`FRESH_GIT`, the repo's exclude file kept), so the image's repository is the training solver's: the same
# commit, branch, tag and exclude file.
# Then the sandbox layer's own image step (`sandboxes.shell.IMAGE_SNAPSHOT`): the workdir goes to the agent uid
# and its snapshot and grader-owned git dir are refreshed. Without it a sandbox would fill its tmpfs workdir
# from the repo image's snapshot, i.e. the clean repo.


def _layers_tar(task: Task) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in (("bug_inject.diff", task.artifact.bug_inject),
                           ("test_weaken.diff", task.artifact.test_weaken), ("pred.diff", task.pred_patch or "")):
            data = text.encode() if text.endswith("\n") or not text else (text + "\n").encode()
            info = tarfile.TarInfo(f"{LAYERS.strip('/')}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_task_image(task: Task, repo_image: str, *, workdir: str = WORKDIR, rebuild: bool = False) -> str:
    """The tag of `task`'s image on top of `repo_image`, built when missing. Raises ImageBuildError with
    the build output's tail when a layer does not apply."""
    tag = task.image_name
    if not rebuild and image_id(tag):
        return tag
    start = time.monotonic()
    script = f"{SCRIPT}\nbash -c {shlex.quote(IMAGE_SNAPSHOT)} selfplay-snapshot {shlex.quote(workdir)}\n"

    def failed(code: int | None, output: str) -> ImageBuildError:
        return ImageBuildError(f"task {task.task_id}: building its image from {repo_image} failed "
                               f"(exit {code}): {output.strip()[-1500:]}")

    build_in_container(repo_image, ["bash", "-c", script, "build", workdir], tag=tag, archive=_layers_tar(task),
                       changes=['CMD ["sleep", "infinity"]', f"LABEL selfplay.task={task.task_id}",
                                f"LABEL {SNAPSHOT_LABEL}=1"],
                       message=f"selfplay task image for {task.task_id}", timeout=600, failure=failed,
                       network_disabled=True)
    log.info("built task image %s in %.1f s", tag, time.monotonic() - start)
    return tag


def ensure_instance_image(instance: dict[str, Any], *, pull: bool = True) -> str:
    """The instance's image, present in the engine: a `selfplay-task-*` image is built from the
    instance's `selfplay_*` fields and the repo's image; any other image is pulled when `pull`.
    Raises ImageBuildError saying what is missing."""
    image = str(instance["image"])
    if image_id(image):
        return image
    if image.startswith("selfplay-task-"):
        return build_task_image(task_from_instance(instance), _repo_image(instance))
    if not pull:
        raise ImageBuildError(f"instance {instance['instance_id']}: image {image} is not in the engine")
    log.info("pulling %s", image)
    try:
        docker_client().images.pull(image)
    except Exception as exc:
        raise ImageBuildError(
            f"instance {instance['instance_id']}: cannot pull {image} ({exc.__class__.__name__}: {exc}); "
            "this machine needs registry access, or load the images first (docs/eval.md), or pick another "
            "--namespace") from exc
    return image


def task_from_instance(instance: dict[str, Any]) -> Task:
    if "selfplay_artifact" not in instance:
        raise ImageBuildError(f"instance {instance['instance_id']}: image {instance['image']} is missing and "
                              "the instance carries no selfplay_artifact to build it from")
    rec = dict(instance)
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):  # normalised to lists; from_instance reads the JSON
        if not isinstance(rec[key], str):
            rec[key] = json.dumps(rec[key])
    task, _ = from_instance(rec, f"instance {instance['instance_id']}")
    return task


def _repo_image(instance: dict[str, Any]) -> str:
    stored = instance.get("selfplay_repo_image")
    if stored and image_id(stored):
        return stored
    return repo_image(get_repo(instance["repo"]))
