"""Repo images, built without a registry or BuildKit and reused by content hash.

The base image comes from `sandboxes.base_image` (re-exported here: `ensure_base_image`, `BASE_IMAGE`).
A repo image holds the repo at `spec.workdir` as a git repository whose base commit is tagged
`selfplay-base`, a virtualenv at /opt/venv first on PATH, and the repo installed editable (so patches to
the workdir take effect) with its test dependencies. One container runs one pip step and is then
committed (`sandboxes.image_build.build_venv_image`, which says why not a Dockerfile). The tag is `selfplay-repo-<name>:<hash12>`, the hash covering the image-relevant spec fields,
the source tree, the base image id and this build recipe, so an unchanged repo is never rebuilt.
The last build step hands the workdir to the agent uid and stores its snapshot and the grader-owned git
dir in the root-only state dir (`sandboxes.shell.IMAGE_SNAPSHOT`); the label `selfplay.snapshot` tells
`DockerSandbox` to put the workdir on a size-limited tmpfs filled from it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from repos.cache import cache_root, file_lock
from repos.errors import RepoError
from repos.sources import fetch_source, source_key, sources_dir, tree_digest
from repos.spec import RepoSpec
from sandboxes.base_image import BASE_IMAGE, default_log_dir, ensure_base_image, image_id
from sandboxes.engine import docker_client
from sandboxes.errors import ImageBuildError
from sandboxes.image_build import IMAGE_PATH, PIP_SETUP, TAG_BASELINE, build_venv_image
from sandboxes.shell import IMAGE_SNAPSHOT, SNAPSHOT_LABEL

log = logging.getLogger(__name__)

BUILD_NAME_PREFIX = "selfplay-build-"
__all__ = ["BASE_IMAGE", "BuildResult", "build_repo_image", "build_repo_images", "content_hash",
           "ensure_base_image", "image_status", "repo_image", "requirement_names"]

# One shell step: venv, one pip install, git bookkeeping. Part of the content hash, so editing it (or the
# steps it shares with solve images) rebuilds.
BUILD_SCRIPT = r"""
set -euo pipefail
trap 'rm -f {ca}' EXIT
command -v git >/dev/null || {{ echo "selfplay: the base image has no git; use one that does" >&2; exit 90; }}
git config --global user.name selfplay
git config --global user.email selfplay@localhost
git config --global init.defaultBranch main
git config --global --add safe.directory '*'
# For the model uids (their HOME is an empty /tmp): commits work, and a repo owned by the agent uid is
# usable by the runner uid. Our own git calls ignore system configuration (sandboxes.shell.GIT_SAFE).
git config --system user.name selfplay
git config --system user.email selfplay@localhost
git config --system init.defaultBranch main
git config --system --add safe.directory '*'
""" + PIP_SETUP + r"""{venv}/bin/pip install -e {workdir} {requirements}
cd {workdir}
if [ ! -d .git ]; then git init -q && git add -A -f && git commit -q -m "{name} (base)"; fi
""" + TAG_BASELINE + r"""test -z "$(git status --porcelain)" || {{ git status --porcelain; echo "selfplay: tree not clean" >&2; exit 91; }}
{venv}/bin/python -m pytest --version
# Last: the workdir goes to the agent uid, its snapshot and the grader-owned git dir to the state dir.
bash -c {snapshot} selfplay-snapshot {workdir}
"""


@dataclass(frozen=True)
class BuildResult:
    """Outcome of building (or reusing) one repo image."""

    name: str
    """The repo's name in its list."""
    image: str | None
    """The image tag, None when the build failed."""
    built: bool = False
    """True when this call built the image, False when an existing one was reused (or on failure)."""
    seconds: float = 0.0
    """Wall-clock seconds spent on this repo."""
    log_path: Path | None = None
    """The build log (None when nothing was built)."""
    error: str | None = None
    """Why the build failed, naming the log; None on success."""

    @property
    def ok(self) -> bool:
        return self.error is None


# -- repo images ------------------------------------------------------------------------------------

def image_repository(spec: RepoSpec) -> str:
    return f"selfplay-repo-{spec.name.lower()}"


def content_hash(spec: RepoSpec, source: Path, base_id: str) -> str:
    """12 hex digits over what the image depends on (test_command/test_patterns are not among it)."""
    fields = {"name": spec.name, "source": spec.source, "dist": spec.distribution, "version": spec.version,
              "history": spec.history, "url": spec.url, "commit": spec.commit, "workdir": spec.workdir,
              "install": list(spec.install), "python": spec.python, "env": [list(e) for e in spec.env]}
    payload = json.dumps({"spec": fields, "tree": tree_digest(source), "base": base_id,
                          "recipe": BUILD_SCRIPT, "path": IMAGE_PATH,
                          "snapshot": IMAGE_SNAPSHOT}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def repo_image(spec: RepoSpec, *, rebuild: bool = False, log_dir: Path | None = None,
               base_image: str | None = None) -> str:
    """The tag of `spec`'s image, built when missing (or when `rebuild`). Raises ImageBuildError or
    RepoError naming the repo, the failing step and the build log."""
    return build_repo_image(spec, rebuild=rebuild, log_dir=log_dir, base_image=base_image).image or ""


def build_repo_image(spec: RepoSpec, *, rebuild: bool = False, log_dir: Path | None = None,
                     base_image: str | None = None) -> BuildResult:
    """Like `repo_image`, but says whether it built and how long it took. Raises on failure."""
    start = time.monotonic()
    if spec.source == "image":
        if not spec.image:
            raise RepoError(f"repo {spec.name!r}: source 'image' needs an `image`")
        return BuildResult(spec.name, ensure_base_image(spec.image), seconds=time.monotonic() - start)
    base = ensure_base_image(base_image, log_dir=log_dir)
    base_id = image_id(base) or base
    source = fetch_source(spec)
    assert source is not None
    tag = f"{image_repository(spec)}:{content_hash(spec, source, base_id)}"
    if not rebuild and image_id(tag) is not None:
        return BuildResult(spec.name, tag, seconds=time.monotonic() - start)
    log_dir = log_dir or default_log_dir()
    log_path = log_dir / f"{spec.name}-{tag.rsplit(':', 1)[1]}.log"
    with file_lock(cache_root() / "locks" / f"image-{spec.name}.lock"):
        if rebuild or image_id(tag) is None:  # another process may have built it while we waited
            _build(spec, source, base, tag, log_path)
            return BuildResult(spec.name, tag, built=True, seconds=time.monotonic() - start,
                               log_path=log_path)
    return BuildResult(spec.name, tag, seconds=time.monotonic() - start)


def build_repo_images(specs: list[RepoSpec], *, rebuild: bool = False, log_dir: Path | None = None,
                      on_done=None) -> list[BuildResult]:
    """Build every spec's image; a broken entry fails alone (its result carries the error), the rest build.
    `on_done(result)` is called after each repo (for progress displays)."""
    results = []
    for spec in specs:
        start = time.monotonic()
        try:
            result = build_repo_image(spec, rebuild=rebuild, log_dir=log_dir)
        except (RepoError, ImageBuildError) as exc:  # keep the batch alive; the message names the log
            log.error("repo %s failed: %s", spec.name, exc)
            result = BuildResult(spec.name, None, seconds=time.monotonic() - start, error=str(exc))
        results.append(result)
        if on_done is not None:
            on_done(result)
    return results


def remove_stale_builds() -> list[str]:
    """Remove build containers left by processes that died (e.g. SIGKILL mid-build); returns their names."""
    client = docker_client()
    removed = []
    for info in client.api.containers(all=True, filters={"name": BUILD_NAME_PREFIX}):
        name = (info.get("Names") or ["/"])[0].lstrip("/")
        try:
            pid = int(name.rsplit("-", 2)[1])
            os.kill(pid, 0)
            continue  # its builder is alive
        except (ValueError, IndexError):
            continue  # not one of ours
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # alive, owned by another user
        try:
            client.api.remove_container(info["Id"], force=True, v=True)
            removed.append(name)
        except Exception as exc:  # keep building; a leftover container is not fatal
            log.warning("could not remove stale build container %s: %s", name, exc)
    return removed


def requirement_names(entries: Sequence[str]) -> set[str]:
    """Canonical project names of the pip requirement specifiers among `entries` (`pytest[testing]~=8.0;
    python_version>'3'` names pytest); an entry that is no specifier (a pip option, a path) names nothing."""
    names = set()
    for entry in entries:
        try:
            names.add(canonicalize_name(Requirement(entry).name))
        except InvalidRequirement:
            continue
    return names


def _build(spec: RepoSpec, source: Path, base: str, tag: str, log_path: Path) -> None:
    requirements = list(spec.install)
    if "pytest" not in requirement_names(requirements):
        requirements.append("pytest")
    # No labels on the build container: `docker commit` would copy them into the image and onto every
    # container made from it. Its name carries our pid instead (see remove_stale_builds), and the
    # sandbox registry removes it if we are interrupted.
    remove_stale_builds()
    name = f"{BUILD_NAME_PREFIX}{spec.name.lower()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    log.info("building %s (log: %s)", tag, log_path)
    start = time.monotonic()
    changes = [f"LABEL selfplay.repo={spec.name}", f"LABEL selfplay.content-hash={tag.rsplit(':', 1)[1]}",
               f"LABEL {SNAPSHOT_LABEL}=1"]
    changes += [f"ENV {key}={json.dumps(value)}" for key, value in spec.env]

    def failed(code: int | None, output: str) -> ImageBuildError:
        tail = "\n".join(output.strip().splitlines()[-5:])
        return ImageBuildError(f"repo {spec.name!r}: image build failed (exit {code}); log: {log_path}\n{tail}")

    replaced = image_id(tag)
    try:
        new = build_venv_image(
            base, BUILD_SCRIPT, tag=tag, source=source, workdir=spec.workdir, python=spec.python,
            fields={"requirements": shlex.join(requirements), "name": spec.name,
                    "snapshot": shlex.quote(IMAGE_SNAPSHOT)},
            changes=changes, message=f"selfplay repo image for {spec.name}", timeout=1800, failure=failed,
            log_path=log_path, log_header=f"build of {tag} for repo {spec.name} from {base}", name=name)
    except ImageBuildError:
        raise
    except Exception as exc:  # docker API errors: infrastructure, reported with the log
        raise ImageBuildError(f"repo {spec.name!r}: image build failed ({exc.__class__.__name__}: {exc}); "
                              f"log: {log_path}") from exc
    if replaced and replaced != new:  # a --rebuild: drop the untagged old image unless in use
        try:
            docker_client().images.remove(replaced)
        except Exception as exc:  # in use by a container; the engine keeps it, which is fine
            log.debug("kept replaced image %s: %s", replaced, exc)
    log.info("built %s in %.1f s", tag, time.monotonic() - start)


def image_status(spec: RepoSpec, base_image: str | None = None) -> tuple[str | None, str]:
    """(tag, status) without building or downloading: status is 'built', 'missing' (known tag, no image),
    'not fetched' (the source is not in the cache yet, so the tag is unknown) or 'no base image'."""
    if spec.source == "image":
        return spec.image, "built" if image_id(spec.image or "") else "missing"
    base = base_image or os.environ.get("SELFPLAY_BASE_IMAGE") or BASE_IMAGE
    base_id = image_id(base)
    if base_id is None:
        return None, "no base image"
    if spec.source == "local":
        source = fetch_source(spec)  # a local copy is cheap and the only way to see edits
    else:
        source = sources_dir() / f"{spec.name}-{source_key(spec)}"
        if not source.is_dir():
            return None, "not fetched"
    assert source is not None
    tag = f"{image_repository(spec)}:{content_hash(spec, source, base_id)}"
    return tag, "built" if image_id(tag) else "missing"
