"""`base_url_problem`: what keeps a string from being an OpenAI-compatible server's base URL.

Checked where a URL enters (the run config's `policy.endpoints`, `OpenAIPolicy`), because httpx takes
`localhost:8000` for scheme `localhost` and the client's retries would spend their backoff on a URL that
can never answer."""

from __future__ import annotations

from urllib.parse import urlsplit


def base_url_problem(url: str) -> str | None:
    """None for an http(s) URL with a host; else what is wrong and the form to use."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check (a non-number raises)
    except ValueError as exc:
        return f"{url!r} is not a URL ({exc}); use http://HOST:PORT"
    if parts.scheme not in ("http", "https"):
        return f"{url!r} names no http:// or https:// scheme; use http://HOST:PORT, e.g. http://127.0.0.1:8000"
    if not parts.hostname:
        return f"{url!r} names no host; use http://HOST:PORT, e.g. http://127.0.0.1:8000"
    return None
