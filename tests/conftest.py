"""Test markers: `docker` and `postgres` skip with a reason outside CI and fail under CI=true; `gpu` may
skip anywhere. `slow` is informational (CI runs it).

Under CI=true only `gpu` tests may skip, by construction: any other skip (an `importorskip` of a package
CI installs, a `pytest.skip` in a fixture, a module skipped at import) is turned into a failure naming
the reason, so a missing train/dev/eval package fails the run instead of hiding tests."""

from __future__ import annotations

import functools
import os
import resource
import signal

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_configure(config: pytest.Config) -> None:
    # A run started in the background by a non-interactive shell (`cmd &`) has SIGINT ignored (POSIX), and
    # every process a test starts would inherit that; the tests of Ctrl-C cleanup need its usual meaning.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@functools.cache
def docker_problem() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:  # any failure means "no engine" for gating purposes
        return f"no Docker engine answers ({exc.__class__.__name__}: {exc}); run `selfplay setup`"
    return None


@functools.cache
def postgres_problem() -> str | None:
    url = os.environ.get("SELFPLAY_TEST_POSTGRES_URL")
    if not url:
        return "SELFPLAY_TEST_POSTGRES_URL is not set (scripts/test.sh starts a server and sets it)"
    return None


@functools.cache
def gpu_problem() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "no CUDA GPU"


GATES = {"docker": docker_problem, "postgres": postgres_problem}


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, problem in GATES.items():
        if item.get_closest_marker(marker) is None:
            continue
        reason = problem()
        if reason is None:
            continue
        if IN_CI:
            pytest.fail(f"CI=true requires {marker}-backed tests to run, but {reason}", pytrace=False)
        pytest.skip(reason)
    if item.get_closest_marker("gpu") is not None and gpu_problem() is not None:
        pytest.skip(gpu_problem())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The learner tests hold DeepSpeed engines (several GiB on CPU) in session fixtures. Running them last
    # keeps that memory from squeezing the Docker-backed tests on a 24 GiB CI machine.
    items.sort(key=lambda item: "learner" in item.path.parts)


def _ci_failure(reason: object) -> str:
    return f"CI=true: only gpu tests may skip, but this one skipped ({reason}); install what it needs"


def pytest_terminal_summary(terminalreporter) -> None:
    # scripts/test.sh runs two pytest processes at once on a 24 GiB CI machine: each says how much it took
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    terminalreporter.write_line(f"peak resident memory of this pytest process: {peak:.2f} GiB")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if IN_CI and report.skipped and item.get_closest_marker("gpu") is None and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = _ci_failure(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    if IN_CI and report.skipped:  # a whole module skipped at import (module-level importorskip)
        report.outcome = "failed"
        report.longrepr = _ci_failure(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    return report


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """SELFPLAY_CACHE pointed at an empty directory, for tests of what a build writes into the cache.

    The embedded model's HF checkpoint is linked in from the usual cache (converted there once if missing):
    converting the GGUF again in every such test cost ~35 s each on a 2-core CI box. The first test that needs
    the model anywhere in the run still converts it for real."""
    pytest.importorskip("transformers")
    from agent_scaffold.embedded import EMBEDDED_NAME, default_model_dir

    converted = default_model_dir()
    root = tmp_path / "cache"
    (root / "models").mkdir(parents=True)
    (root / "models" / EMBEDDED_NAME).symlink_to(converted, target_is_directory=True)
    monkeypatch.setenv("SELFPLAY_CACHE", str(root))
    return root
