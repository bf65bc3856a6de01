"""A `kill -9`ed run leaves no container behind once resumed: `reap_containers` removes its run-labelled
sandboxes and its parser boxes, which are process-wide and carry no run id (a full CI run left two of
them running after the killed `selfplay run` of test_loop_docker.py was resumed). A Ray actor, killed
without atexit, removes its own parser boxes when closed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[3]
OWNER = """
import sys, time
from sandboxes.docker import DockerSandbox
from selfplay.jobs.parser_box import default_boxes
image, run_id = sys.argv[1], sys.argv[2]
run_box = DockerSandbox.create(image, workdir="/work", run_id=run_id)
with default_boxes().checkout() as parser_box:
    print(run_box.id, parser_box.id, flush=True)
time.sleep(120)
"""


def _owned_by(pid: int) -> list[str]:
    from sandboxes.engine import docker_client

    return [c["Id"] for c in docker_client().api.containers(all=True, filters={"label": f"selfplay.owner.pid={pid}"})]


def test_reaping_a_killed_run_removes_its_parser_boxes_too():
    from sandboxes.base_image import ensure_base_image
    from selfplay.orchestration.components import reap_containers

    run_id = f"pytest-reap-{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", OWNER, ensure_base_image(), run_id], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        ids = proc.stdout.readline().split()
        assert len(ids) == 2, f"owner process failed (exit {proc.poll()})"
        assert sorted(_owned_by(proc.pid)) == sorted(ids)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert sorted(_owned_by(proc.pid)) == sorted(ids)  # SIGKILL: nothing of the owner's ran
    assert reap_containers(run_id) == 2
    assert _owned_by(proc.pid) == []


ACTOR = """
import os
from selfplay.jobs.parser_box import default_boxes
from selfplay.rollout.ray_executor import EpisodeActor
actor = EpisodeActor.__new__(EpisodeActor)
actor.runner = None
with default_boxes().checkout() as box:
    print(os.getpid(), box.id, flush=True)
actor.close()
os._exit(0)  # as ray.kill ends an actor: no atexit hook runs
"""


def test_a_closed_ray_actor_leaves_no_parser_box():
    proc = subprocess.run([sys.executable, "-c", ACTOR], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-2000:]
    pid, made = proc.stdout.split()
    assert made not in _owned_by(int(pid)) and _owned_by(int(pid)) == []
