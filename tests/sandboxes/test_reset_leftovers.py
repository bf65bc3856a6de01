"""A pooled sandbox's reset leaves nothing of the previous episode outside the repo either: not the
injector's artifact dir, not `pip install --user` output in the agent's home, not the interpreter's
site-packages (which the model uids cannot write at all).

Runs on a real repo image (toolz: a real /opt/venv with pip), as the episodes do."""

from __future__ import annotations

import pytest

from agent_scaffold.roles import ARTIFACT_FILES, load_role
from sandboxes.shell import SCRATCH_DIRS
from sandboxes.users import AGENT_UID, PARSER_UID, RUNNER_UID, drop_privileges

pytestmark = pytest.mark.docker

SITE = "/opt/venv/lib/python3.11/site-packages"
ARTIFACT_DIR = load_role("injector", "removal").defaults["artifact_dir"]


def test_the_injectors_artifact_dir_lies_in_a_dir_that_reset_empties():
    assert any(ARTIFACT_DIR.startswith(d + "/") for d in SCRATCH_DIRS), ARTIFACT_DIR


@pytest.fixture(scope="module")
def toolz_sandbox():
    from repos.listfile import get_repo
    from sandboxes.docker import DockerSandbox, DockerSandboxConfig
    from sandboxes.images import repo_image

    spec = get_repo("toolz")
    sb = DockerSandbox.create(repo_image(spec), workdir=spec.workdir, run_id="pytest-reset-leftovers",
                              config=DockerSandboxConfig(cpus=1.0, mem_limit="1g", pids_limit=256))
    yield sb
    sb.close()


def _fingerprint(sb) -> str:
    """Every entry of the interpreter's prefix and the agent's home, with size, mode, owner and mtime."""
    res = sb.exec("find /opt/venv -printf '%p %s %m %u %T@\\n' | sort | sha256sum; "
                  "pip list --format=freeze 2>/dev/null | sha256sum; ls -A /tmp /var/tmp /dev/shm",
                  user="root", workdir="/")
    assert res.ok, res.output
    return res.output


def test_reset_removes_artifact_dir_user_site_and_keeps_site_packages(toolz_sandbox):
    sb = toolz_sandbox
    sb.reset()
    before = _fingerprint(sb)
    # The injector's submission, as its role prompt tells it to write it.
    writes = [f"mkdir -p {ARTIFACT_DIR}"] + [f"echo leftover > {ARTIFACT_DIR}/{f}" for f in ARTIFACT_FILES]
    assert sb.exec("; ".join(writes) + f"; ls {ARTIFACT_DIR} | wc -l").output.strip() == "5"
    # pip install --user: in the repo's venv pip refuses user installs, so also write what it would have
    # written (a module, a .pth that runs code at startup, a console script) and the config files a
    # model could leave for the next episode's tools.
    pip_user = sb.exec("pip install --user --no-index leftover-pkg 2>&1; echo pip-exit=$?")
    assert "pip-exit=0" not in pip_user.output, pip_user.output
    user_site = sb.exec("python -c 'import site; print(site.getusersitepackages())'").output.strip()
    assert user_site.startswith("/tmp/.local/"), user_site  # HOME is /tmp
    home = sb.exec(
        f"mkdir -p {user_site} ~/.local/bin ~/.config/pip && echo 'LEFT = 1' > {user_site}/leftover_mod.py"
        f" && echo 'import leftover_mod' > {user_site}/leftover.pth && echo 'echo hi' > ~/.local/bin/leftover"
        " && printf '[global]\\nindex-url = http://evil\\n' > ~/.config/pip/pip.conf"
        " && echo 'alias ls=rm' > ~/.bashrc && echo leftover > /var/tmp/x && echo leftover > /dev/shm/x"
        " && echo ok")
    assert home.output.strip() == "ok", home.output
    # The interpreter's site-packages are root's: writing there and a plain pip install both fail.
    site = sb.exec(f"echo 'LEFT = 1' > {SITE}/leftover_mod.py 2>&1; touch {SITE}/leftover.pth 2>&1; "
                   "pip install --no-index leftover-pkg 2>&1; "
                   f"ls {SITE}/leftover_mod.py {SITE}/leftover.pth 2>&1")
    assert site.output.count("Permission denied") >= 2 and "No such file" in site.output, site.output

    sb.reset()

    after = sb.exec(f"ls -A /tmp /var/tmp /dev/shm; test -e {ARTIFACT_DIR} && echo artifact-dir-left; "
                    "python -c 'import leftover_mod' 2>&1 | tail -1; echo $HOME")
    assert "artifact-dir-left" not in after.output
    assert "No module named 'leftover_mod'" in after.output
    assert _fingerprint(sb) == before  # empty scratch dirs, site-packages and pip list unchanged


@pytest.mark.parametrize("uid", [AGENT_UID, RUNNER_UID, PARSER_UID])
def test_model_uids_can_write_nowhere_that_reset_does_not_restore(toolz_sandbox, uid):
    """The reason nothing else needs restoring: outside the workdir (restored and verified against the
    snapshot), the only places a model uid can write are the scratch tmpfs dirs reset empties."""
    sb = toolz_sandbox
    cmd = (f"{drop_privileges(uid)} find / \\( -path /proc -o -path /sys -o -path {sb.workdir} \\) -prune "
           "-o -writable ! -type c ! -type l -print 2>/dev/null")
    res = sb.exec(cmd, user="root", workdir="/")
    writable = set(res.output.split())
    # Character devices (/dev/null) and symlinks (/dev/stdout) aside, only the scratch dirs reset empties.
    assert writable and writable <= set(SCRATCH_DIRS), sorted(writable - set(SCRATCH_DIRS))
