"""The issue the agent is asked to resolve: a GitHub issue URL (title and body through the GitHub API), a
file, or the text itself."""

from __future__ import annotations

import re
from pathlib import Path

from selfplay.eval.errors import SolveError

GITHUB_ISSUE = re.compile(r"^https?://github\.com/([\w.-]+)/([\w.-]+)/issues/(\d+)/?$")
API = "https://api.github.com/repos/{owner}/{repo}/issues/{number}"


def read_issue(spec: str, *, timeout: float = 10.0) -> str:
    """The issue text named by `spec` (URL, existing file, or literal text). Raises SolveError when a URL
    cannot be fetched, suggesting --issue FILE."""
    match = GITHUB_ISSUE.match(spec.strip())
    if match:
        return fetch_github_issue(*match.groups(), timeout=timeout)
    if spec.startswith(("http://", "https://")):
        raise SolveError(f"--issue {spec}: only GitHub issue URLs (https://github.com/OWNER/REPO/issues/N) are "
                         "fetched; save the issue text to a file and pass --issue FILE")
    path = Path(spec)
    if len(spec) < 4096 and "\n" not in spec and path.is_file():
        return path.read_text()
    if not spec.strip():
        raise SolveError("--issue is empty; pass a GitHub issue URL, a file or the issue text")
    return spec


def fetch_github_issue(owner: str, repo: str, number: str, *, timeout: float = 10.0) -> str:
    import os

    import httpx

    url = API.format(owner=owner, repo=repo, number=number)
    headers = {"Accept": "application/vnd.github+json"}
    if os.environ.get("GITHUB_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['GITHUB_TOKEN']}"
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise SolveError(f"could not fetch {url} ({exc.__class__.__name__}: {exc}); without network access, "
                         "save the issue's title and body to a file and pass --issue FILE") from exc
    if resp.status_code != 200:
        raise SolveError(f"GitHub answered {resp.status_code} for {url} ({resp.text[:200]}); check the URL, "
                         "set GITHUB_TOKEN for private repos or rate limits, or pass --issue FILE")
    data = resp.json()
    return f"{data.get('title', '').strip()}\n\n{(data.get('body') or '').strip()}\n"
