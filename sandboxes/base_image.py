"""The base image every repo image starts from, built without a registry.

`selfplay-base:bookworm` is `debootstrap --variant=minbase` of Debian bookworm with python3, venv, pip, git,
ca-certificates and procps, turned into an image by `docker import` (no registry is reachable here, so
nothing is pulled). It is built once and reused by tag. A registry image (e.g. `python:3.11-slim`, which
must carry git) replaces it only when the caller or SELFPLAY_BASE_IMAGE names one.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from repos.cache import cache_root, file_lock
from sandboxes.engine import docker_client
from sandboxes.errors import ImageBuildError

log = logging.getLogger(__name__)

BASE_IMAGE = "selfplay-base:bookworm"
BASE_PACKAGES = "python3,python3-venv,python3-pip,git,ca-certificates,procps"


def default_log_dir() -> Path:
    """Where build logs go: <cache>/logs/builds."""
    return cache_root() / "logs" / "builds"


def image_id(name: str) -> str | None:
    """The local image id of `name`, None when the engine does not have it."""
    import docker

    try:
        return docker_client().images.get(name).id
    except docker.errors.ImageNotFound:
        return None


def ensure_base_image(image: str | None = None, *, log_dir: Path | None = None) -> str:
    """The base image's tag: `image` or SELFPLAY_BASE_IMAGE when set (pulled if missing), else
    `selfplay-base:bookworm`, built with debootstrap when absent and reused by tag otherwise."""
    configured = image or os.environ.get("SELFPLAY_BASE_IMAGE")
    if configured:
        if image_id(configured) is None:
            log.info("pulling configured base image %s", configured)
            try:
                docker_client().images.pull(configured)
            except Exception as exc:
                raise ImageBuildError(f"configured base image {configured!r} is not present and could "
                                      f"not be pulled ({exc}); unset SELFPLAY_BASE_IMAGE to build "
                                      f"{BASE_IMAGE} with debootstrap") from exc
        return configured
    if image_id(BASE_IMAGE) is not None:
        return BASE_IMAGE
    with file_lock(cache_root() / "locks" / "base-image.lock"):
        if image_id(BASE_IMAGE) is None:
            build_base_image(log_dir or default_log_dir())
    return BASE_IMAGE


def build_base_image(log_dir: Path, image: str = BASE_IMAGE) -> None:
    """Build `image` from debootstrap + docker import (root only; replaces an existing tag)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"base-{image.replace('/', '_').replace(':', '-')}.log"
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap"
                                                  if Path("/usr/sbin/debootstrap").exists() else None)
    if os.geteuid() != 0:
        raise ImageBuildError(f"building {image} needs root (debootstrap); run `selfplay setup` as "
                              "root, or set SELFPLAY_BASE_IMAGE to an image with python3, venv and git")
    with open(log_path, "w") as out:
        if debootstrap is None:
            log.info("installing debootstrap")
            _logged(["apt-get", "update"], out, log_path, "apt-get update")
            _logged(["apt-get", "install", "-y", "debootstrap"], out, log_path, "install debootstrap")
            debootstrap = "/usr/sbin/debootstrap"
        with tempfile.TemporaryDirectory(prefix="selfplay-rootfs-", dir="/var/tmp") as tmp:
            rootfs, tarball = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
            log.info("building %s with debootstrap (about a minute); log: %s", image, log_path)
            _logged([debootstrap, "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm", str(rootfs)],
                    out, log_path, "debootstrap bookworm")
            _logged(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], out, log_path, "tar the rootfs")
            repository, tag = image.rsplit(":", 1)
            try:
                docker_client().api.import_image(src=str(tarball), repository=repository, tag=tag)
            except Exception as exc:
                raise ImageBuildError(f"docker import of {image} failed: {exc}; "
                                      f"log: {log_path}") from exc
    log.info("built %s", image)


def _logged(cmd: list[str], out, log_path: Path, what: str) -> None:
    out.write(f"$ {shlex.join(cmd)}\n")
    out.flush()
    proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise ImageBuildError(f"could not {what} (exit {proc.returncode}); log: {log_path}")
