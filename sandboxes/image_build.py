"""The one way images are built here: a container runs a script, then `docker commit`.

There is no BuildKit on these machines, and a container lets a build bind-mount the host's pip cache and
copy in the host's CA bundle for that step only (the script deletes it before the commit, so it is in no
layer). `build_in_container` is that step; repo images (`sandboxes.images`), solve images
(`selfplay.solve.image`) and task images (`selfplay.eval.task_image`) all go through it.
`build_venv_image` adds what a pip-installing build needs (the pip cache mount, the CA bundle, the
virtualenv first on the image's PATH), and `PIP_SETUP` / `TAG_BASELINE` are the script steps that such
builds share.
"""

from __future__ import annotations

import io
import shlex
import tarfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from repos.cache import cache_root
from sandboxes.engine import docker_client
from sandboxes.reaper import registry
from sandboxes.sandbox import BASE_TAG

HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
VENV = "/opt/venv"
IMAGE_PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CA_IN_CONTAINER = "/tmp/selfplay-host-ca.crt"
"""Where a build finds the host's CA bundle (`source_tar` puts it there; `PIP_SETUP` exports PIP_CERT)."""
PIP_CACHE_IN_CONTAINER = "/tmp/selfplay-pip-cache"
"""Where the host's pip cache (cache_root()/pip) is mounted during a build."""

# The venv and pip's settings. The script's own `trap 'rm -f {ca}' EXIT` removes the CA bundle.
PIP_SETUP = """{python} -m venv {venv}
export PIP_CACHE_DIR={pip_cache} PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off
if [ -s {ca} ]; then export PIP_CERT={ca}; fi
"""
# After the install, in the workdir's git repository: the base commit, tagged, with a clean tree.
TAG_BASELINE = r"""printf '__pycache__/\n*.py[cod]\n.pytest_cache/\n' >> .git/info/exclude
# Installing may rewrite tracked build metadata (e.g. an sdist's *.egg-info): restore it; new build
# outputs are excluded, so the tree is clean at the base commit and diffs show only real edits.
git diff --name-only -z | xargs -0r git checkout --
git ls-files --others --exclude-standard --directory | sed 's|^|/|' >> .git/info/exclude
git tag -f {base_tag} >/dev/null
"""


def source_tar(source: Path, workdir: str) -> bytes:
    """A tar of the tree `source` at `workdir`, plus the host's CA bundle at CA_IN_CONTAINER (for pip behind a
    TLS-inspecting proxy) when the host has one."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(str(source), arcname=workdir.strip("/"))
        if HOST_CA_BUNDLE.exists():
            tar.add(str(HOST_CA_BUNDLE), arcname=CA_IN_CONTAINER.strip("/"))
    return buffer.getvalue()


def build_in_container(base: str, command: list[str], *, tag: str, archive: bytes, changes: Sequence[str],
                       message: str, timeout: float, failure: Callable[[int | None, str], Exception],
                       log_path: Path | None = None, log_header: str = "", **create: Any) -> str:
    """Build image `tag` the way every image here is built: a container of `base` runs `command`
    (`create`: more `containers.create` arguments, e.g. name, mounts, environment, network_disabled) on
    `archive` unpacked at /, then `docker commit` with `changes`. Its output goes to `log_path` (after
    `# log_header`, with the exit status and seconds). A non-zero exit raises `failure(exit code, output)`;
    Docker API errors propagate. The container is removed whatever happens, and the reaper knows it
    meanwhile. Returns the new image's id."""
    client = docker_client()
    start = time.monotonic()
    with registry.creating():
        container = client.containers.create(base, command=command, **create)
        registry.register(client, container.id)
    try:
        container.put_archive("/", archive)
        container.start()
        status = container.wait(timeout=timeout)
        output = container.logs().decode("utf-8", "replace")
        if log_path is not None:
            log_path.write_text(f"# {log_header}\n{output}\n"
                                f"# exit {status.get('StatusCode')} after {time.monotonic() - start:.1f} s\n")
        if status.get("StatusCode") != 0:
            raise failure(status.get("StatusCode"), output)
        repository, version = tag.rsplit(":", 1)
        return container.commit(repository=repository, tag=version, changes=list(changes), message=message).id
    finally:
        try:
            container.remove(force=True)
        except Exception:  # already gone; nothing to clean
            pass
        registry.forget(container.id)


def build_venv_image(base: str, script: str, *, tag: str, source: Path, workdir: str, message: str,
                     timeout: float, failure: Callable[[int | None, str], Exception], log_path: Path,
                     log_header: str, python: str = "python3", fields: Mapping[str, str] | None = None,
                     changes: Sequence[str] = (), **create: Any) -> str:
    """`build_in_container` for a tree that `script` pip-installs into the virtualenv at VENV: the tree
    `source` lands at `workdir` (with the host's CA bundle, `source_tar`), the host's pip cache is
    bind-mounted at PIP_CACHE_IN_CONTAINER, and the image runs in `workdir` with the venv first on PATH
    (`changes` add to that). `script` is a template: {ca}, {venv}, {pip_cache}, {base_tag}, {workdir}
    and {python} (both shell-quoted) are filled in, and so are `fields`. Returns the new image's id."""
    from docker.types import Mount

    log_path.parent.mkdir(parents=True, exist_ok=True)
    pip_cache = cache_root() / "pip"
    pip_cache.mkdir(parents=True, exist_ok=True)
    text = script.format(ca=CA_IN_CONTAINER, venv=VENV, pip_cache=PIP_CACHE_IN_CONTAINER, base_tag=BASE_TAG,
                         workdir=shlex.quote(workdir), python=shlex.quote(python), **(fields or {}))
    image_config = [f"ENV PATH={IMAGE_PATH}", f"ENV VIRTUAL_ENV={VENV}", "ENV LANG=C.UTF-8", f"WORKDIR {workdir}",
                    *changes, 'CMD ["sleep", "infinity"]']
    # `mounts`, not `volumes`: the latter also records a VOLUME in the config, which the commit would keep.
    return build_in_container(base, ["bash", "-c", text], tag=tag, archive=source_tar(source, workdir),
                              changes=image_config, message=message, timeout=timeout, failure=failure,
                              log_path=log_path, log_header=log_header,
                              mounts=[Mount(PIP_CACHE_IN_CONTAINER, str(pip_cache), type="bind")], **create)
