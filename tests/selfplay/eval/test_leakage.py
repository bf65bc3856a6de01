"""No leakage in the eval sandbox: history stripped to base_commit (no future commits, tags, reflog,
remote refs, unreachable objects), and no network."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Future history seeded into a toolz sandbox: a remote-tracking ref, a stash and a reflog entry on top of
# the 1.2.0 release commit and tags that already exist (toolz images carry 1.0.0 -> 1.1.0 -> 1.2.0).
SEED = r"""
set -e
git -c user.name=t -c user.email=t@t commit -q --allow-empty -m 'the future fix'
git update-ref refs/remotes/origin/main HEAD
git remote add origin https://example.invalid/toolz.git
echo x >> README.rst && git -c user.name=t -c user.email=t@t stash -q
git reset -q --hard v1.1.0
"""


def test_history_guard_leaves_nothing_after_base_commit(toolz_spec):
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.eval.guard import history_leaks, strip_history

    with DockerSandbox.create(repo_image(toolz_spec), workdir="/testbed") as sb:
        assert sb.exec(SEED, 60).ok
        base = sb.exec("git rev-parse v1.1.0", 30).output.strip()
        before = history_leaks(sb, base)
        assert any("refs/tags/v1.2.0" in leak for leak in before) and any("remotes" in leak for leak in before)
        assert any("not in the ancestry" in leak for leak in before)
        strip_history(sb, base)
        assert history_leaks(sb, base) == []
        everything = sb.exec("git log --all --oneline; git tag; git branch -a; git reflog --all; git stash list; "
                             "git cat-file --batch-all-objects --batch-check | grep -c commit", 60).output
        assert "1.2.0" not in everything and "future" not in everything and "origin" not in everything
        assert sb.exec("git rev-parse HEAD", 30).output.strip() == base
        assert sb.exec("git diff --stat selfplay-base", 30).output.strip() == ""  # the agent's diff baseline
        # the agent (the default, unprivileged user) can still write its git repository
        assert sb.exec("touch new.txt && git add new.txt && git reset -q new.txt && rm new.txt", 30).ok


def test_eval_sandbox_has_no_network(offline_dataset):
    from sandboxes.docker import DockerSandbox
    from sandboxes.sandbox import WORKDIR
    from selfplay.eval.dataset import load_instances
    from selfplay.eval.swebench_grading import sandbox_config
    from selfplay.eval.task_image import ensure_instance_image

    inst = load_instances(str(offline_dataset))[0]
    with DockerSandbox.create(ensure_instance_image(inst), workdir=WORKDIR, config=sandbox_config(inst)) as sb:
        probe = sb.exec("python -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"", 30)
        assert not probe.ok and "Network is unreachable" in probe.output
        assert sb.exec("ls /sys/class/net", 30).output.split() == ["lo"]
        # the task image itself carries one commit and no other ref
        assert sb.exec("git log --all --oneline | wc -l; git tag", 30).output.split() == ["1", "selfplay-base"]
