"""The issue the agent is asked to resolve: a GitHub issue URL (title and body through the GitHub API), a
file (--issue-file PATH, or --issue @PATH), or the text itself."""

from __future__ import annotations

import os
import re
from pathlib import Path

from selfplay.solve.errors import SolveError

GITHUB_ISSUE = re.compile(r"^https?://github\.com/([\w.-]+)/([\w.-]+)/issues/(\d+)/?$")
API = "https://api.github.com/repos/{owner}/{repo}/issues/{number}"
TEXT_SUFFIXES = (".md", ".txt", ".rst", ".markdown")


def read_issue(spec: str | None = None, *, file: str | Path | None = None, timeout: float = 10.0) -> str:
    """The issue text: from `file` (--issue-file, or --issue @PATH), a GitHub issue URL, an existing file
    (kept for older command lines), or `spec` as the text itself. Raises SolveError, before any work, when
    a file is missing, unreadable or empty, when `spec` looks like a path to a file that does not exist
    (it would otherwise be sent to the model as the issue), or when a URL cannot be fetched."""
    if spec is not None and file is not None:
        raise SolveError("pass either --issue TEXT or --issue-file PATH, not both")
    if spec is not None and spec.startswith("@"):
        file = spec[1:]
    if file is not None:
        return _read_file(Path(file))
    if spec is None or not spec.strip():
        raise SolveError("the issue is empty; pass --issue TEXT, --issue URL or --issue-file PATH")
    match = GITHUB_ISSUE.match(spec.strip())
    if match:
        return fetch_github_issue(*match.groups(), timeout=timeout)
    if spec.startswith(("http://", "https://")):
        raise SolveError(f"--issue {spec}: only GitHub issue URLs (https://github.com/OWNER/REPO/issues/N) are "
                         "fetched; save the issue text to a file and pass --issue-file FILE")
    if looks_like_path(spec):
        path = Path(spec).expanduser()
        if path.is_file():
            return _read_file(path)
        raise SolveError(f"--issue {spec} looks like a file path, but there is no such file; pass the file with "
                         "--issue-file PATH, or the issue's text itself")
    return spec


def looks_like_path(spec: str) -> bool:
    """One token with a folder separator or a text-file suffix, such as ./issue.md or notes/bug.txt."""
    text = spec.strip()
    if not text or any(c.isspace() for c in text) or len(text) > 4096:
        return False
    return "/" in text or text.startswith("~") or text.lower().endswith(TEXT_SUFFIXES)


def _read_file(path: Path) -> str:
    try:
        text = path.expanduser().read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SolveError(f"issue file {path} does not exist; pass an existing file to --issue-file") from None
    except UnicodeDecodeError as exc:
        raise SolveError(f"issue file {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise SolveError(f"issue file {path} cannot be read ({exc.strerror or exc})") from None
    if not text.strip():
        raise SolveError(f"issue file {path} is empty; write the issue's title and description into it")
    return text


def fetch_github_issue(owner: str, repo: str, number: str, *, timeout: float = 10.0) -> str:
    import httpx

    url = API.format(owner=owner, repo=repo, number=number)
    headers = {"Accept": "application/vnd.github+json"}
    if os.environ.get("GITHUB_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['GITHUB_TOKEN']}"
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise SolveError(f"could not fetch {url} ({exc.__class__.__name__}: {exc}); without network access, "
                         "save the issue's title and body to a file and pass --issue-file FILE") from exc
    if resp.status_code != 200:
        raise SolveError(f"GitHub answered {resp.status_code} for {url} ({resp.text[:200]}); check the URL, "
                         "set GITHUB_TOKEN for private repos or rate limits, or pass --issue-file FILE")
    data = resp.json()
    return f"{data.get('title', '').strip()}\n\n{(data.get('body') or '').strip()}\n"
