"""`RayExecutor`: episodes on Ray actors, one rollout worker per actor process (the `dist` extra).

Each actor builds its own runner (`worker.build_runner`: its own sandbox pools on its node's Docker
engine, or `rollout.docker_host`) and plays one request at a time, so a lost actor loses one episode.
When the driver's policy is an in-process `hf` checkpoint, it is served over HTTP by a `PolicyServer`
started here, and the actors' `config.policy` is rewritten to the `openai` backend pointed at it
(weight updates of the driver's policy are then seen by every actor at once). HTTP backends (openai,
vllm) are passed through as configured; `scripted` actors each read the same action lists.

An actor that dies mid-episode (node lost, OOM, `ray.kill`) is replaced by a fresh one and its request
is played again, counted against `retries` like any infrastructure failure: every request yields exactly
one result.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policy_server import PolicyServer
from sandboxes.reaper import registry
from selfplay.config.run_config import RunConfig
from selfplay.rollout.executor import call_runner
from selfplay.rollout.policy_factory import hf_policy
from selfplay.rollout.requests import EpisodeRequest, EpisodeResult, RequestRunner, infra_failure_result
from selfplay.rollout.worker import build_runner

log = logging.getLogger(__name__)

RunnerFactory = Callable[[RunConfig, str], RequestRunner]
"""Builds an actor's runner from the (rewritten) config and the run id; `worker.build_runner` by default."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("rollout.executor=ray needs Ray: pip install 'selfplay-swe[dist]'") from exc
    return ray


def default_runner_factory(config: RunConfig, run_id: str) -> RequestRunner:
    return build_runner(config, run_id=run_id)


class EpisodeActor:
    """The body of one Ray actor: a runner built in the actor's own process."""

    def __init__(self, config: RunConfig, run_id: str, factory: RunnerFactory, docker_host: str | None) -> None:
        if docker_host:
            os.environ["DOCKER_HOST"] = docker_host  # before any Docker client of this process exists
        self.name = f"ray-actor:{os.getpid()}"
        self.runner = factory(config, run_id)

    def pid(self) -> int:
        return os.getpid()

    def run(self, request: EpisodeRequest) -> EpisodeResult:
        result = call_runner(self.runner, request, worker=self.name)
        return result if result.worker else dataclasses.replace(result, worker=self.name)

    def close(self) -> None:
        """Close the runner, then remove every container this process still owns (the process-wide
        parser boxes too): `ray.kill` follows, and a killed actor runs no atexit hook."""
        try:
            close = getattr(self.runner, "close", None)
            if callable(close):
                close()
        finally:
            registry.cleanup()


class RayExecutor:
    """Runs requests on `workers` Ray actors (a local Ray when `address` is None)."""

    def __init__(self, config: RunConfig, workers: int | None = None, retries: int | None = None,
                 address: str | None = None, run_id: str = "", *, policy: Any = None,
                 runner_factory: RunnerFactory | None = None) -> None:
        self.ray = ray = _import_ray()
        self.workers = workers or config.rollout.workers
        self.retries = config.rollout.episode_retries if retries is None else retries
        if self.workers < 1 or self.retries < 0:
            raise ValueError(f"workers must be >= 1 and retries >= 0 (got {self.workers}, {self.retries})")
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address or config.rollout.ray_address, log_to_driver=False)
        self._server = None
        self.actor_config = self._actor_config(config, policy, remote=bool(address or config.rollout.ray_address))
        self.run_id, self.factory = run_id, runner_factory or default_runner_factory
        self.docker_host = config.rollout.docker_host
        self._actor_cls = ray.remote(num_cpus=0, max_restarts=0)(EpisodeActor)
        self.actors = [self._new_actor() for _ in range(self.workers)]

    def _actor_config(self, config: RunConfig, policy: Any, remote: bool) -> RunConfig:
        """hf: serve the driver's policy over HTTP and point the actors at it."""
        if config.policy.backend != "hf":
            return config

        policy = policy if policy is not None else hf_policy(config.policy)
        # loopback unless actors run on other nodes; then the node's (private) address
        host = self.ray.util.get_node_ip_address() if remote else "127.0.0.1"
        self._server = PolicyServer(policy, host=host, port=0)
        self._server.start()
        # the actors render prompts with the served weights' tokenizer (a path every node can read)
        served = (getattr(policy, "model_dir", None) or getattr(getattr(policy, "policy", None), "model_dir", None)
                  or config.policy.model_dir)
        if served is None:
            served = str(default_model_dir())
        log.info("serving the driver's policy to Ray actors at %s", self._server.url)
        return dataclasses.replace(config, policy=dataclasses.replace(
            config.policy, backend="openai", endpoints=(self._server.url,),
            model_name=self._server.model_name, model_dir=str(served)))

    def _new_actor(self) -> Any:
        return self._actor_cls.options(scheduling_strategy="SPREAD").remote(
            self.actor_config, self.run_id, self.factory, self.docker_host)

    def _replace(self, index: int) -> None:
        try:
            self.ray.kill(self.actors[index], no_restart=True)
        except Exception as exc:  # already gone: nothing to kill
            log.debug("killing a lost actor: %s", exc)
        self.actors[index] = self._new_actor()

    def run(self, requests: Sequence[EpisodeRequest]) -> Iterator[EpisodeResult]:
        """Yield exactly one result per request, as they complete; infrastructure failures (a dead actor
        included) are retried up to `retries` times, then yielded with infra_failure=True."""
        ray = self.ray
        queue = collections.deque((r, 0) for r in requests)
        idle = collections.deque(range(len(self.actors)))
        pending: dict[Any, tuple[EpisodeRequest, int, int]] = {}
        while queue or pending:
            while queue and idle:
                (request, tries), index = queue.popleft(), idle.popleft()
                pending[self.actors[index].run.remote(request)] = (request, tries, index)
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                request, tries, index = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the actor died or could not run the method
                    log.warning("episode %s: Ray worker lost (%s); replacing the actor", request.episode_id,
                                exc.__class__.__name__)
                    self._replace(index)
                    result = infra_failure_result(request, f"Ray worker lost: {exc.__class__.__name__}: "
                                                           f"{str(exc)[:500]}")
                idle.append(index)
                if result.infra_failure and tries < self.retries:
                    log.info("episode %s: infrastructure failure (%s); retry %d of %d", request.episode_id,
                             result.error, tries + 1, self.retries)
                    queue.appendleft((request, tries + 1))
                    continue
                yield result

    def actor_pids(self) -> list[int]:
        """The actors' process ids (for operators and tests)."""
        return self.ray.get([a.pid.remote() for a in self.actors])

    def close(self) -> None:
        """Close every actor's sandboxes, stop the actors and the policy server (and Ray, if started here)."""
        ray = self.ray
        for actor in self.actors:
            try:
                ray.get(actor.close.remote(), timeout=120)
            except Exception as exc:  # a dead actor has nothing left to close
                log.debug("closing an actor: %s", exc)
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self._server is not None:
            self._server.shutdown()
            self._server = None
        if self._owns_ray:
            ray.shutdown()
