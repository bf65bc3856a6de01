"""`repos.retry.retry`: tries again on transient failures only, sleeping the caller's backoff between."""

from __future__ import annotations

import pytest

from repos.retry import retry


class Flaky(Exception):
    pass


def _failing(n: int, exc: type[Exception] = Flaky):
    calls = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= n:
            raise exc(f"failure {len(calls)}")
        return "ok"

    return fn, calls


def test_transient_failures_are_retried_with_the_backoff_before_each_retry(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr("repos.retry.time.sleep", slept.append)  # recorded, not slept: the delays are the test
    fn, calls = _failing(2)
    assert retry(fn, attempts=3, transient=lambda e: isinstance(e, Flaky), backoff=lambda k: k / 10) == "ok"
    assert len(calls) == 3 and slept == [0.1, 0.2]


def test_the_last_failure_and_other_errors_propagate_at_once(monkeypatch):
    monkeypatch.setattr("repos.retry.time.sleep", lambda s: None)
    fn, calls = _failing(5)
    with pytest.raises(Flaky, match="failure 3"):
        retry(fn, attempts=3, transient=lambda e: isinstance(e, Flaky), backoff=lambda k: 0)
    fn, calls = _failing(5, ValueError)
    with pytest.raises(ValueError, match="failure 1"):
        retry(fn, attempts=3, transient=lambda e: isinstance(e, Flaky), backoff=lambda k: 0)
    assert len(calls) == 1
    with pytest.raises(ValueError, match="attempts >= 1"):
        retry(fn, attempts=0, transient=lambda e: True, backoff=lambda k: 0)
