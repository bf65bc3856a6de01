"""Fetch a repo's source tree into a local git repository, cached under `<cache>/sources`.

- `pypi`: the `name==version` sdist from `pip download --no-deps --no-binary :all:`, unpacked. With
  `history = N`, the last N final releases up to and including `version` each become one commit, oldest
  first, so HEAD is the pinned release and `git log -p` shows the real changes between releases. This
  stands in for the upstream GitHub history (the paper's history-aware injection reverts real commits),
  which these machines cannot reach: release-to-release diffs are coarser than upstream commits.
- `git`: clone the URL and check out `commit`, full history kept.
- `local`: a copy of the directory (working tree included); `git init` plus one commit if it is no repo.
- `image`: nothing to fetch, the repo already lives in the image.

Every commit we create uses a fixed identity and a date taken from the sdist (its newest file), so a
re-fetch gives the same commit ids and the image content hash stays stable.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from packaging.version import InvalidVersion, Version

from repos.cache import cache_root, file_lock
from repos.errors import RepoError
from repos.spec import RepoSpec

log = logging.getLogger(__name__)

GIT_NAME = "selfplay"
GIT_EMAIL = "selfplay@localhost"
FIXED_DATE = 946684800  # 2000-01-01, for commits whose source carries no date of its own


def sources_dir() -> Path:
    return cache_root() / "sources"


def source_key(spec: RepoSpec) -> str:
    """Hash of the fields that decide what `fetch_source` produces (12 hex digits)."""
    fields = {"source": spec.source, "dist": spec.distribution, "version": spec.version,
              "history": spec.history, "url": spec.url, "commit": spec.commit,
              "path": str(Path(spec.path).resolve()) if spec.path else None}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


def fetch_source(spec: RepoSpec, *, refresh: bool = False) -> Path | None:
    """A local git repository holding `spec`'s source (None for `image` sources).

    Cached by `source_key`; `local` sources are always copied afresh since the directory may change.
    Raises RepoError naming the repo and the failing step.
    """
    if spec.source == "image":
        return None
    target = sources_dir() / f"{spec.name}-{source_key(spec)}"
    with file_lock(sources_dir() / f".{target.name}.lock"):
        if target.exists() and not refresh and spec.source != "local":
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=sources_dir()))
        try:
            fetcher = {"pypi": _fetch_pypi, "git": _fetch_git, "local": _fetch_local}[spec.source]
            fetcher(spec, tmp / "repo")
            shutil.rmtree(target, ignore_errors=True)
            (tmp / "repo").chmod(0o755)  # mkdtemp made it 0700; images need it readable
            (tmp / "repo").rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("source of %s ready at %s", spec.name, target)
    return target


# -- pypi ---------------------------------------------------------------------------------------------

def _fetch_pypi(spec: RepoSpec, repo: Path) -> None:
    if not spec.version:
        raise RepoError(f"repo {spec.name!r}: source 'pypi' needs a pinned `version`")
    versions = [spec.version]
    if spec.history > 1:
        versions = release_history(spec.distribution, spec.version, spec.history)
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    previous_date = 0
    for version in versions:
        archive = download_sdist(spec.distribution, version)
        for child in repo.iterdir():  # the next release replaces the whole tree (deleted files included)
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        date = max(_unpack_sdist(archive, repo), previous_date + 1)
        previous_date = date
        _git(repo, "add", "-A", "-f")
        _git(repo, "commit", "-q", "--allow-empty", "-m", f"{spec.distribution} {version}", date=date)
        _git(repo, "tag", f"v{version}")


def release_history(dist: str, version: str, n: int) -> list[str]:
    """The last `n` final releases of `dist` up to and including `version`, oldest first."""
    out = _run([sys.executable, "-m", "pip", "index", "versions", dist, "--disable-pip-version-check"],
               what=f"list the releases of {dist}")
    match = re.search(r"Available versions:\s*(.+)", out)
    if not match:
        raise RepoError(f"could not list the releases of {dist!r} (pip index versions said: {out.strip()})")
    pinned = Version(version)
    releases = []
    for item in match.group(1).split(","):
        try:
            parsed = Version(item.strip())
        except InvalidVersion:
            continue
        if parsed <= pinned and (not parsed.is_prerelease or parsed == pinned):
            releases.append((parsed, item.strip()))
    releases.sort()
    if not releases or releases[-1][0] != pinned:
        raise RepoError(f"{dist}=={version} is not among its released versions on the index")
    return [text for _, text in releases[-n:]]


def download_sdist(dist: str, version: str) -> Path:
    """The sdist archive of `dist==version`, downloaded once into `<cache>/sdists`."""
    folder = cache_root() / "sdists" / f"{dist}-{version}"
    existing = [p for p in folder.glob("*") if p.suffix in (".gz", ".zip", ".bz2", ".tgz")]
    if existing:
        return existing[0]
    folder.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
          "--disable-pip-version-check", "-d", str(folder), f"{dist}=={version}"],
         what=f"download the sdist of {dist}=={version}")
    found = [p for p in folder.iterdir() if p.is_file()]
    if not found:
        raise RepoError(f"pip downloaded no sdist for {dist}=={version} into {folder}")
    return found[0]


def _unpack_sdist(archive: Path, repo: Path) -> int:
    """Extract the archive's single top-level folder into `repo`; returns the newest member's mtime."""
    with tempfile.TemporaryDirectory() as tmp:
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(tmp)
                newest = max(int(_zip_mtime(info)) for info in zf.infolist())
        else:
            with tarfile.open(archive) as tf:
                members = tf.getmembers()
                tf.extractall(tmp, filter="data")
                newest = max(int(m.mtime) for m in members)
        roots = list(Path(tmp).iterdir())
        top = roots[0] if len(roots) == 1 and roots[0].is_dir() else Path(tmp)
        for child in top.iterdir():
            shutil.move(str(child), repo / child.name)
    return newest if newest > 0 else FIXED_DATE


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    return datetime.datetime(*info.date_time, tzinfo=datetime.UTC).timestamp()


# -- git and local --------------------------------------------------------------------------------

def _fetch_git(spec: RepoSpec, repo: Path) -> None:
    if not spec.url or not spec.commit:
        raise RepoError(f"repo {spec.name!r}: source 'git' needs both `url` and `commit`")
    _run(["git", "clone", "-q", spec.url, str(repo)], what=f"clone {spec.url}")
    _git(repo, "checkout", "-q", spec.commit)


def _fetch_local(spec: RepoSpec, repo: Path) -> None:
    if not spec.path:
        raise RepoError(f"repo {spec.name!r}: source 'local' needs a `path`")
    src = Path(spec.path).expanduser()
    if not src.is_dir():
        raise RepoError(f"repo {spec.name!r}: local path {src} is not a directory")
    shutil.copytree(src, repo, symlinks=True)
    if not (repo / ".git").exists():
        _git(repo, "init", "-q")
        _git(repo, "add", "-A", "-f")
        _git(repo, "commit", "-q", "--allow-empty", "-m", f"{spec.name} (local copy)", date=FIXED_DATE)


# -- helpers ----------------------------------------------------------------------------------------

def _git(repo: Path, *args: str, date: int = FIXED_DATE) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": GIT_NAME, "GIT_AUTHOR_EMAIL": GIT_EMAIL,
           "GIT_COMMITTER_NAME": GIT_NAME, "GIT_COMMITTER_EMAIL": GIT_EMAIL,
           "GIT_AUTHOR_DATE": f"{date} +0000", "GIT_COMMITTER_DATE": f"{date} +0000",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return _run(["git", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", *args],
                what=f"git {args[0]} in {repo}", cwd=repo, env=env)


def _run(cmd: list[str], *, what: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RepoError(f"could not {what}: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-2000:]
        raise RepoError(f"could not {what} (exit {proc.returncode}): {tail}")
    return proc.stdout


def tree_digest(repo: Path) -> str:
    """sha256 over every file of the working tree (path, executable bit, bytes) plus the git HEAD, if any."""
    digest = hashlib.sha256()
    for path in sorted(p for p in repo.rglob("*") if ".git" not in p.relative_to(repo).parts[:1]):
        rel = path.relative_to(repo).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} {os.readlink(path)}\n".encode())
        elif path.is_file():
            digest.update(f"F {rel} {os.access(path, os.X_OK)}\n".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    if (repo / ".git").exists():
        digest.update(_git(repo, "rev-parse", "HEAD").strip().encode())
    return digest.hexdigest()
