"""`RayExecutor` on a local `ray.init(num_cpus=2)`: requests run through actors, an actor killed
mid-episode has its request retried on a fresh actor (every request yields exactly one result), and the
real worker runs in an actor against the driver's policy served over HTTP (the hf path).

Test double: `SleepyRunner` (built by `sleepy_factory` in each actor) stands in for the worker in the
kill test, so the test controls when an episode is in flight; the real worker runs through an actor in
`test_real_worker_in_an_actor_uses_the_drivers_policy_server`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from selfplay.config.run_config import LimitsOverride, PolicyConfig, RolloutConfig, RunConfig
from selfplay.rollout.requests import EpisodeRequest, EpisodeResult

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray():
    ray = pytest.importorskip("ray")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # actors need not import the tests
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 << 20)
    yield ray
    ray.shutdown()


class SleepyRunner:
    """Test double of the worker: marks `<dir>/<episode id>.<pid>` when it starts, then holds the episode
    for `hold` s on its first attempt (so the test can kill its actor mid-episode)."""

    def __init__(self, directory: str, hold: float) -> None:
        self.dir, self.hold = Path(directory), hold

    def __call__(self, request: EpisodeRequest) -> EpisodeResult:
        first = not list(self.dir.glob(f"{request.episode_id}.*"))
        (self.dir / f"{request.episode_id}.{os.getpid()}").touch()
        if first and request.episode_id.endswith("-held"):
            time.sleep(self.hold)
        return EpisodeResult(request, None, "submitted", False, None, str(os.getpid()))


def _config(tmp_path: Path, **policy) -> RunConfig:
    return RunConfig(repos=("toolz",), policy=PolicyConfig(**policy),
                     rollout=RolloutConfig(workers=2, episode_retries=1, sandboxes_per_repo=1,
                                           injector_limits=LimitsOverride(max_turns=12, max_context_tokens=8192)))


def _requests(n: int, held: bool = False) -> list[EpisodeRequest]:
    ids = [f"r-it0-solver-{i}" for i in range(n)]
    if held:
        ids[0] += "-held"
    return [EpisodeRequest(i, "solver", "toolz", 0, 0) for i in ids]


def test_requests_run_on_actors(ray, tmp_path):
    from selfplay.rollout.ray_executor import RayExecutor

    config = _config(tmp_path, backend="scripted")
    executor = RayExecutor(config, run_id="t", runner_factory=lambda c, r: SleepyRunner(str(tmp_path), 0))
    try:
        results = list(executor.run(_requests(6)))
        pids = set(executor.actor_pids())
    finally:
        executor.close()
    assert sorted(r.request.episode_id for r in results) == sorted(r.episode_id for r in _requests(6))
    assert {int(r.submission) for r in results} <= pids and len(pids) == 2 and os.getpid() not in pids
    assert all(r.worker.startswith("ray-actor:") for r in results)


def test_an_actor_killed_mid_episode_is_replaced_and_its_request_retried(ray, tmp_path):
    from selfplay.rollout.ray_executor import RayExecutor

    config = _config(tmp_path, backend="scripted")
    executor = RayExecutor(config, run_id="t", runner_factory=lambda c, r: SleepyRunner(str(tmp_path), 120))
    results: list[EpisodeResult] = []
    requests = _requests(5, held=True)
    thread = threading.Thread(target=lambda: results.extend(executor.run(requests)), daemon=True)
    try:
        thread.start()
        deadline = time.monotonic() + 120
        while not (started := list(tmp_path.glob("*-held.*"))) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started, "the held episode never started"
        victim = int(started[0].suffix[1:])
        os.kill(victim, signal.SIGKILL)  # the actor dies mid-episode
        thread.join(timeout=180)
        assert not thread.is_alive(), f"{len(results)} of {len(requests)} results after the kill"
        pids = set(executor.actor_pids())
    finally:
        executor.close()
    by_id = {r.request.episode_id: r for r in results}
    assert len(results) == len(requests) and set(by_id) == {r.episode_id for r in requests}  # one each
    held = by_id[requests[0].episode_id]
    assert not held.infra_failure and int(held.submission) != victim  # replayed on a fresh actor
    assert victim not in pids and len(pids) == 2


def test_ray_missing_names_the_extra(monkeypatch):
    import builtins

    from selfplay.rollout import ray_executor

    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ImportError, match=r"selfplay-swe\[dist\]"):
        ray_executor._import_ray()


@pytest.mark.docker
def test_real_worker_in_an_actor_uses_the_drivers_policy_server(ray, tmp_path):
    """backend hf: the driver serves its policy (here the scripted backend, standing in for the checkpoint
    so no model is loaded) and the actor's real worker plays an injector episode in a toolz sandbox over
    HTTP; the artifact misses two files, so the verdict is invalid with the reason."""
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from selfplay.rollout.policy_factory import embedded_tokenizer
    from selfplay.rollout.ray_executor import RayExecutor

    pytest.importorskip("transformers")
    actions = ["Write two files.\n```bash\nmkdir -p /tmp/ssr_artifact && cd /tmp/ssr_artifact && "
               "echo toolz/tests/test_dicttoolz.py > test_files.txt && echo 'pytest' > test_script.sh\n```",
               "```submit\n```"]
    served = ScriptedPolicy(actions, tokenizer=embedded_tokenizer())
    config = _config(tmp_path, backend="hf")
    executor = RayExecutor(config, workers=1, run_id="test-ray-worker", policy=served)
    try:
        assert executor.actor_config.policy.backend == "openai"
        assert executor.actor_config.policy.endpoints[0].startswith("http://127.0.0.1:")
        request = EpisodeRequest("test-ray-it0-injector-0", "injector", "toolz", 0, 0, strategy="removal")
        (result,) = list(executor.run([request]))
    finally:
        executor.close()
    assert not result.infra_failure, result.error
    assert result.termination == "submitted" and set(result.submission) == {"test_files.txt", "test_script.sh"}
    assert not result.validation.valid and "missing" in result.validation.error
    assert int(result.worker.rsplit(":", 1)[1]) != os.getpid() and served.remaining == 0  # host:pid of the actor
    assert len(result.trajectory.turn_spans) == 2  # the trajectory came back whole


def test_actor_config_keeps_http_and_scripted_backends(ray, tmp_path):
    from selfplay.rollout.ray_executor import RayExecutor

    config = _config(tmp_path, backend="scripted")
    executor = RayExecutor(config, workers=1, runner_factory=lambda c, r: SleepyRunner(str(tmp_path), 0))
    try:
        assert executor.actor_config == config and executor._server is None
    finally:
        executor.close()
