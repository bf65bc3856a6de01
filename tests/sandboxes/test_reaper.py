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

# The sandbox is created by a worker thread, which cannot install a signal handler: a pool built on the
# main thread ("pool"), or the program's own call on it ("install"), does.
THREADED_OWNER = """
import sys, threading, time
from sandboxes.docker import DockerSandbox
from sandboxes.pool import SandboxPool
from sandboxes.reaper import registry
image, run_id, how = sys.argv[1:4]
if how == "pool":
    pool = SandboxPool(image, 1, run_id=run_id)
    with pool.checkout() as sb:
        print(sb.id, flush=True)
        time.sleep(120)
registry.install_signal_cleanup()
made = []
t = threading.Thread(target=lambda: made.append(DockerSandbox.create(image, run_id=run_id)))
t.start(); t.join()
print(made[0].id, flush=True)
time.sleep(120)
"""


def _owner(image: str, run_id: str, script: str = OWNER, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", script, image, run_id, *args], stdout=subprocess.PIPE, text=True,
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


@pytest.mark.parametrize("how", ["pool", "install"])
def test_sigterm_removes_containers_that_worker_threads_created(repo_image, how):
    run_id = f"pytest-thread-{how}-{os.getpid()}"
    proc, cid = _owner(repo_image, run_id, THREADED_OWNER, how)
    assert _labelled(run_id) == [cid]
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    assert proc.returncode == -signal.SIGTERM  # it still dies of the signal
    deadline = time.monotonic() + 10
    while _labelled(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _labelled(run_id) == []


# A worker thread's creation reaches the engine, and its answer comes back slowly: SIGTERM arrives in between.
SLOW_ANSWER_OWNER = """
import os, signal, sys, threading, time
import docker.api.client
from sandboxes.docker import DockerSandbox
from sandboxes.reaper import registry
image, run_id = sys.argv[1:3]
sent = threading.Event()
real = docker.api.client.APIClient.create_container
def slow(self, *a, **k):
    answer = real(self, *a, **k)  # the container exists in the engine from here on
    sent.set()
    time.sleep(3)
    return answer
docker.api.client.APIClient.create_container = slow
registry.install_signal_cleanup()
threading.Thread(target=lambda: DockerSandbox.create(image, run_id=run_id), daemon=True).start()
sent.wait(60)
print("sent", flush=True)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)
"""


def test_sigterm_waits_for_a_creation_in_flight_and_removes_what_it_made(repo_image):
    """A SIGTERM that lands while a worker's creation is unanswered used to leave that container behind
    ("Created", its owner dead): the handler removed what was registered and the process died before the
    creation's answer registered it."""
    run_id = f"pytest-inflight-{os.getpid()}"
    proc, said = _owner(repo_image, run_id, SLOW_ANSWER_OWNER)
    assert said == "sent"
    proc.wait(30)
    assert proc.returncode == -signal.SIGTERM
    time.sleep(1)
    left = _labelled(run_id)
    if left:  # do not leak from the test itself
        from sandboxes.engine import docker_client
        reaper._remove(docker_client(), left)
    assert left == []


def test_the_handler_is_installed_from_the_main_thread_only():
    # In a process of its own: the handler is process state.
    script = """
import signal, threading
from sandboxes.reaper import registry
got = []
t = threading.Thread(target=lambda: got.append(registry.install_signal_cleanup())); t.start(); t.join()
print(got[0], signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
print(registry.install_signal_cleanup(), signal.getsignal(signal.SIGTERM) == registry._on_signal)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.stdout.split() == ["False", "True", "True", "True"], out.stderr[-2000:]


def test_pid_reuse_does_not_pass_for_a_live_owner():
    labels = reaper.owner_labels("x")
    assert reaper.owner_alive(labels) is True
    assert reaper.owner_alive({**labels, reaper.LABEL_START: "1@" + labels[reaper.LABEL_START].split("@")[1]}) is False
    assert reaper.owner_alive({**labels, reaper.LABEL_HOST: "some-other-host"}) is None


def test_signalled_since_names_work_begun_before_the_signal_only(monkeypatch):
    fresh = reaper._Registry()
    monkeypatch.setattr(reaper.signal, "signal", lambda *a: None)  # no handler change in the test process
    before = time.monotonic()
    assert not fresh.signalled_since(before)
    fresh._previous[signal.SIGINT] = lambda signum, frame: None  # a program that catches it and goes on
    fresh._on_signal(signal.SIGINT, None)
    assert fresh.signalled_since(before)  # work begun before it stops
    assert not fresh.signalled_since(time.monotonic())  # work begun after it is not affected
