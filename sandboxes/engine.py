"""The Docker engine: a client that respects DOCKER_HOST, and `ensure_engine` that makes one answer.

`docker_client()` returns one cached client per DOCKER_HOST value (so several engines may be configured by
switching the variable) and raises `EngineUnavailable` naming the fix when nothing answers.
`ensure_engine()` installs Debian's `docker.io` and starts `dockerd` in the background when no engine
answers: directly when running as root (after asking unless `yes`), otherwise it only prints the commands.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from sandboxes.errors import EngineUnavailable

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

_clients: dict[str, docker.DockerClient] = {}
_lock = threading.Lock()

INSTALL_COMMANDS = (
    "apt-get update",
    "DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io",
)
START_COMMAND = "setsid nohup dockerd >/var/log/dockerd.log 2>&1 &"
FIX = ("start a Docker engine (`selfplay setup` installs docker.io and starts dockerd), "
       "or point DOCKER_HOST at one that runs")


def docker_client(*, timeout: int = 120, max_pool_size: int = 64) -> docker.DockerClient:
    """The client for the engine at DOCKER_HOST (default socket when unset), pinged once and cached.

    `max_pool_size` is large because pools and graders talk to the engine from many threads at once.
    """
    host = os.environ.get("DOCKER_HOST", "")
    with _lock:
        client = _clients.get(host)
        if client is not None:
            return client
        import docker

        where = host or "the default socket (unix:///var/run/docker.sock)"
        try:
            client = docker.from_env(timeout=timeout, max_pool_size=max_pool_size)
            client.ping()
        except Exception as exc:  # the SDK raises several unrelated types for "nothing listens"
            raise EngineUnavailable(f"no Docker engine answers at {where} "
                                    f"({exc.__class__.__name__}: {exc}); {FIX}") from exc
        _clients[host] = client
        return client


def engine_problem() -> str | None:
    """None when an engine answers at DOCKER_HOST, else the reason (for gating and `selfplay setup`)."""
    try:
        docker_client()
    except EngineUnavailable as exc:
        return str(exc)
    return None


def ensure_engine(yes: bool = False, *, ask: Callable[[str], bool] | None = None,
                  say: Callable[[str], None] = print, wait_s: float = 60.0) -> bool:
    """Make a Docker engine answer; returns True when one does at the end.

    As root: installs docker.io when `dockerd` is missing and starts it in the background, after `ask`
    agrees (skipped when `yes`). Not root, or refused: prints the commands and returns False.
    """
    if engine_problem() is None:
        say(f"Docker engine answers at {os.environ.get('DOCKER_HOST') or 'the default socket'}.")
        return True
    if os.environ.get("DOCKER_HOST"):
        # A remote or custom engine is the user's to start; installing a local one would not help.
        say(f"No engine answers at DOCKER_HOST={os.environ['DOCKER_HOST']}; start that engine "
            "or unset DOCKER_HOST to use a local one.")
        return False
    steps: list[str] = []
    if shutil.which("dockerd") is None:
        steps += INSTALL_COMMANDS
    steps.append(START_COMMAND)
    if os.geteuid() != 0:
        say("No Docker engine answers and this is not root. Run as root:\n  " + "\n  ".join(steps))
        return False
    if not yes:
        question = "No Docker engine answers. Run these commands now?\n  " + "\n  ".join(steps)
        if ask is None or not ask(question):
            say("Not started. To do it yourself, run:\n  " + "\n  ".join(steps))
            return False
    for step in steps:
        say(f"$ {step}")
        if step is START_COMMAND:
            _start_dockerd()
        else:
            subprocess.run(step, shell=True, check=True)
    return _wait_for_engine(wait_s, say)


def _start_dockerd() -> None:
    log_file = open("/var/log/dockerd.log", "ab")
    subprocess.Popen(["dockerd"], stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)


def _wait_for_engine(wait_s: float, say: Callable[[str], None]) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if engine_problem() is None:
            say("Docker engine is up.")
            return True
        time.sleep(1.0)
    say(f"dockerd did not answer within {wait_s:.0f} s; see /var/log/dockerd.log")
    return False
