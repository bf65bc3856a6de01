"""Leaks: SIGTERM/SIGINT of the owner removes its containers; `gc` removes those of a SIGKILLed owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from sandboxes import reaper

pytestmark = pytest.mark.docker

OWNER = """
import sys, time
from sandboxes.docker import DockerSandbox
sb = DockerSandbox.create(sys.argv[1], run_id=sys.argv[2])
print(sb.id, flush=True)
time.sleep(120)
"""


def _owner(image: str, run_id: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", OWNER, image, run_id], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    cid = proc.stdout.readline().strip()
    assert cid, f"owner process failed (exit {proc.poll()})"
    return proc, cid


def _labelled(run_id: str) -> list[str]:
    from sandboxes.engine import docker_client

    return [c["Id"] for c in docker_client().api.containers(all=True, filters={"label": f"selfplay.run_id={run_id}"})]


def test_gc_removes_containers_of_a_killed_owner_only(repo_image, session_sandbox):
    from sandboxes.engine import docker_client

    run_id = f"pytest-leak-{os.getpid()}"
    proc, cid = _owner(repo_image, run_id)
    assert _labelled(run_id) == [cid]
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert _labelled(run_id) == [cid]  # SIGKILL cannot be caught: the container leaked
    dry = reaper.gc(docker_client(), dry_run=True)
    assert cid[:12] in {s.id for s in dry}
    removed = reaper.gc(docker_client())
    assert cid[:12] in {s.id for s in removed}
    assert _labelled(run_id) == []
    # Our own live sandbox is not an orphan.
    assert session_sandbox.id[:12] not in {s.id for s in removed}
    assert session_sandbox.exec("true").ok


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_the_owner_removes_its_containers(repo_image, sig):
    run_id = f"pytest-signal-{sig.name}-{os.getpid()}"
    proc, _ = _owner(repo_image, run_id)
    proc.send_signal(sig)
    proc.wait(30)
    assert proc.returncode != 0  # it still dies of the signal (or of KeyboardInterrupt)
    deadline = time.monotonic() + 10
    while _labelled(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _labelled(run_id) == []


def test_pid_reuse_does_not_pass_for_a_live_owner():
    labels = reaper.owner_labels("x")
    assert reaper.owner_alive(labels) is True
    assert reaper.owner_alive({**labels, reaper.LABEL_START: "1@" + labels[reaper.LABEL_START].split("@")[1]}) is False
    assert reaper.owner_alive({**labels, reaper.LABEL_HOST: "some-other-host"}) is None
