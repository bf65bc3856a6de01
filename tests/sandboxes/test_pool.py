"""SandboxPool: concurrent users each get a clean sandbox, and dirt never leaks to the next user."""

from __future__ import annotations

import threading

import pytest

from sandboxes.docker import DockerSandboxConfig
from sandboxes.pool import SandboxPool

pytestmark = pytest.mark.docker


def test_pool_hands_clean_sandboxes_to_concurrent_threads(repo_image):
    cfg = DockerSandboxConfig(cpus=0.5, mem_limit="256m", pids_limit=64)
    seen: list[tuple[str, str, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    in_use: set[str] = set()

    def user(i: int) -> None:
        try:
            for _ in range(2):
                with pool.checkout(timeout=60) as sb:
                    with lock:
                        assert sb.id not in in_use, "one sandbox handed to two users at once"
                        in_use.add(sb.id)
                    before = sb.exec("git status --porcelain; ls /tmp").output
                    sb.exec(f"echo dirt-{i} >> pkg/calc.py; touch new-{i}.txt /tmp/t-{i}")
                    with lock:
                        seen.append((sb.id, before, sb.diff()))
                        in_use.discard(sb.id)
        except BaseException as exc:  # reported below, in the test thread
            errors.append(exc)

    with SandboxPool(repo_image, 2, config=cfg, run_id="pytest-pool") as pool:
        threads = [threading.Thread(target=user, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert len(seen) == 8
        assert len({cid for cid, _, _ in seen}) == 2  # reused, not recreated
        for _, before, diff in seen:
            assert before == ""  # clean: no dirt from the previous user, empty /tmp
            assert diff.count("dirt-") == 1 and diff.count("new file mode") == 1
    assert pool._all == set()
    with pytest.raises(Exception, match="closed"), pool.checkout():
        pass


def test_pool_replaces_a_sandbox_that_died_while_idle(repo_image):
    from sandboxes.engine import docker_client

    with SandboxPool(repo_image, 1, config=DockerSandboxConfig(cpus=0.5, mem_limit="256m")) as pool:
        with pool.checkout() as sb:
            first = sb.id
        pool._idle.put(pool._idle.get(timeout=30))  # wait for the background reset to finish
        docker_client().api.kill(first)
        with pool.checkout(timeout=30) as sb:
            assert sb.id != first
            assert sb.exec("true").ok
