"""The sandbox image of a checkout: the base image, the checkout at /testbed, a virtualenv at /opt/venv
with the repo's install, git's baseline tagged `selfplay-base`.

The install is `--setup CMD` when given (run in /testbed with the venv on PATH), else detected:
pyproject.toml / setup.py / setup.cfg -> `pip install -e .`; requirements*.txt (requirements.txt, then
requirements-dev.txt / requirements-test.txt / requirements_dev.txt / test-requirements.txt when present) ->
`pip install -r` each; pytest is always added. The build runs with network (pip), the agent's sandbox
without. It is `sandboxes.image_build.build_venv_image`, as for repo images, with another script: the repo
image recipe always installs the repo editable, so it cannot serve requirements-only repos or a custom
setup. The tag hashes the commit, the install and the base image, so an unchanged repo is not rebuilt. A
failed install raises SolveError with the build log's tail and path.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
from pathlib import Path

from sandboxes.base_image import default_log_dir, ensure_base_image, image_id
from sandboxes.image_build import PIP_SETUP, TAG_BASELINE, build_venv_image
from sandboxes.sandbox import WORKDIR
from selfplay.solve.checkout import Checkout
from selfplay.solve.errors import SolveError

log = logging.getLogger(__name__)
EXTRA_REQUIREMENTS = ("requirements-dev.txt", "requirements-test.txt", "requirements_dev.txt",
                      "test-requirements.txt")

SCRIPT = r"""
set -euo pipefail
trap 'rm -f {ca}' EXIT
git config --global --add safe.directory '*'
""" + PIP_SETUP + r"""export PATH={venv}/bin:$PATH VIRTUAL_ENV={venv}
cd {workdir}
echo "selfplay: install: $SELFPLAY_INSTALL"
bash -c "$SELFPLAY_INSTALL"
pip install pytest
""" + TAG_BASELINE


def detect_install(tree: Path) -> str:
    """The install command for the repo in `tree` (see the module docstring)."""
    if any((tree / f).is_file() for f in ("pyproject.toml", "setup.py", "setup.cfg")):
        return "pip install -e ."
    reqs = [f for f in ("requirements.txt", *EXTRA_REQUIREMENTS) if (tree / f).is_file()]
    if reqs:
        return " && ".join(f"pip install -r {shlex.quote(f)}" for f in reqs)
    return "true  # no pyproject.toml, setup.py or requirements file: nothing to install"


def build_solve_image(co: Checkout, *, setup: str | None = None, log_dir: Path | None = None) -> str:
    """The image tag for `co`, built when missing. Raises SolveError naming the log on install failure."""
    install = setup or detect_install(co.path)
    base = ensure_base_image()
    key = hashlib.sha256(f"{co.commit}\0{install}\0{image_id(base)}\0{SCRIPT}".encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in co.name.lower()) or "repo"
    tag = f"selfplay-solve-{safe}:{key}"
    if image_id(tag):
        return tag
    log_path = (log_dir or default_log_dir()) / f"solve-{safe}-{key}.log"

    def failed(code: int | None, output: str) -> SolveError:
        tail = "\n".join(output.strip().splitlines()[-15:])
        return SolveError(f"the repo does not install (`{install}` exited {code}); fix it or pass --setup CMD. "
                          f"Build log: {log_path}\n{tail}")

    log.info("building %s (install: %s; log: %s)", tag, install, log_path)
    build_venv_image(base, SCRIPT, tag=tag, source=co.path, workdir=WORKDIR, timeout=3600, failure=failed,
                     message=f"selfplay solve image for {co.name}", log_path=log_path,
                     log_header=f"build of {tag} from {base}, install: {install}",
                     environment={"SELFPLAY_INSTALL": install})
    return tag
