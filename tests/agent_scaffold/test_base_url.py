"""A server base URL that can never answer is named where it enters, before any request or retry."""

from __future__ import annotations

import time

import pytest

from agent_scaffold.errors import PolicyError
from agent_scaffold.policies.base_url import base_url_problem


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "https://api.example.com/v1", "http://[::1]:8000/",
                                 "http://gpu-node-3"])
def test_http_urls_with_a_host_pass(url):
    assert base_url_problem(url) is None


@pytest.mark.parametrize(("url", "names"), [
    ("localhost:8000", "names no http:// or https:// scheme"),  # httpx reads scheme 'localhost'
    ("127.0.0.1:8000", "names no http:// or https:// scheme"),
    ("ftp://host", "names no http:// or https:// scheme"),
    ("http://", "names no host"),
    ("http://:8000", "names no host"),
    ("http://host:port", "is not a URL"),
    ("http://[::1", "is not a URL"),
])
def test_urls_that_cannot_answer_are_named_with_the_form_to_use(url, names):
    problem = base_url_problem(url)
    assert problem is not None and names in problem and repr(url) in problem and "http://" in problem


def test_the_client_refuses_it_before_any_request():
    from agent_scaffold.policies.openai import OpenAIPolicy

    start = time.monotonic()
    with pytest.raises(PolicyError, match="'localhost:8000' names no http"):
        OpenAIPolicy("localhost:8000", model="m", max_retries=4, backoff=1.0)
    assert time.monotonic() - start < 1  # no retries with backoff first
