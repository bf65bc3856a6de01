"""SandboxPool: concurrent users each get a clean sandbox, and dirt never leaks to the next user."""

from __future__ import annotations

import threading
import time

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
        _wait_idle(pool, 1)  # the background reset has finished
        docker_client().api.kill(first)
        with pool.checkout(timeout=30) as sb:
            assert sb.id != first
            assert sb.exec("true").ok


def test_a_rebased_sandbox_comes_back_as_the_image_not_as_its_rebased_tree(repo_image):
    """A solver's sandbox is rebased onto a buggy tree, which `reset` would return to; a pool that handed
    it to validation or grading next would test against the bug. Giving it back makes a new container."""
    with SandboxPool(repo_image, 1, config=DockerSandboxConfig(cpus=0.5, mem_limit="256m")) as pool:
        with pool.checkout() as sb:
            first = sb.id
            original = sb.read_file("pkg/calc.py")
            assert sb.exec("echo '# injected bug' >> pkg/calc.py").ok
            sb.rebase("buggy state")
            sb.reset()
            assert b"# injected bug" in sb.read_file("pkg/calc.py")  # reset returns to the rebased tree
        with pool.checkout(timeout=60) as sb:
            assert sb.id != first and not sb.rebased
            assert sb.read_file("pkg/calc.py") == original


def _wait_idle(pool: SandboxPool, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(pool._idle) < n:
        assert time.monotonic() < deadline, f"the pool never had {n} idle sandboxes"
        time.sleep(0.05)


def test_checkout_many_is_all_or_nothing_and_first_come_first_served(repo_image):
    cfg = DockerSandboxConfig(cpus=0.5, mem_limit="256m", pids_limit=64, checkout_timeout=2)
    with SandboxPool(repo_image, 2, config=cfg, run_id="pytest-pool") as pool:
        with pytest.raises(ValueError, match="cannot take 3 sandboxes at once .* size 2"):
            pool.checkout_many(3).__enter__()
        order: list[str] = []
        with pool.checkout() as held:
            # One is held, so a taker of two waits holding none; the default timeout names the pool.
            with pytest.raises(Exception, match=r"no 2 sandbox\(es\) .* within 2 s .*pool size 2.*"
                                                r"sandboxes_per_repo.*checkout_timeout"):
                with pool.checkout_many(2):
                    pass
            assert len(pool._idle) == 1  # it took nothing while it waited

            def many() -> None:
                with pool.checkout_many(2, timeout=60) as sbs:
                    order.append("many")
                    assert len({sb.id for sb in sbs}) == 2

            def single() -> None:
                with pool.checkout(timeout=60):
                    order.append("single")

            t_many = threading.Thread(target=many)
            t_many.start()
            time.sleep(0.5)
            t_single = threading.Thread(target=single)  # came later: served after the two-taker
            t_single.start()
            time.sleep(0.5)
            assert order == [] and held.exec("true").ok
        t_many.join(60)
        t_single.join(60)
        assert order == ["many", "single"]


def test_closing_the_pool_wakes_waiting_takers(repo_image):
    cfg = DockerSandboxConfig(cpus=0.5, mem_limit="256m", pids_limit=64)
    errors: list[BaseException] = []
    pool = SandboxPool(repo_image, 1, config=cfg, run_id="pytest-pool")
    with pool.checkout():
        def waiter() -> None:
            try:
                with pool.checkout(timeout=120):
                    pass
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)
        pool.close()
        t.join(30)
    assert not t.is_alive() and "closed" in str(errors[0])


def test_a_failed_replacement_gives_the_healthy_sandboxes_back(repo_image):
    from sandboxes.engine import docker_client

    cfg = DockerSandboxConfig(cpus=0.5, mem_limit="256m", pids_limit=64)
    with SandboxPool(repo_image, 2, config=cfg, run_id="pytest-pool") as pool:
        victim, healthy = pool._idle[0], pool._idle[1]
        docker_client().api.kill(victim.id)
        pool.image = "selfplay-test-no-such-image:0"  # the dead one's replacement cannot start
        with pytest.raises(Exception, match="no-such-image"), pool.checkout_many(2, timeout=30):
            pass
        assert healthy in pool._idle  # not lost with the failed take
        pool.image = repo_image
        _wait_idle(pool, 2)  # the refill (a sandbox, or its error for the next taker) keeps the size at 2
        for _ in range(3):  # a refill that still saw the bad image hands its error to one taker, then retries
            try:
                with pool.checkout_many(2, timeout=60) as sbs:
                    assert all(sb.exec("true").ok for sb in sbs)
                break
            except Exception as exc:
                assert "no-such-image" in str(exc)
        else:
            pytest.fail("the pool never recovered its two sandboxes")
