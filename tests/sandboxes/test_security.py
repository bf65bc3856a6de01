"""Attacks a model could make from inside a sandbox (classes 1, 6 and 7 of docs/security.md), each against the real
container: what it tries, and what must hold afterwards. docs/security.md is the threat model."""

from __future__ import annotations

import resource
import time

import pytest

from sandboxes.docker import DockerSandbox, DockerSandboxConfig
from sandboxes.errors import FileTooLarge
from sandboxes.pool import SandboxPool
from sandboxes.shell import SCRATCH_DIRS

pytestmark = pytest.mark.docker

ORIGINAL = "selfplay-original-line-5c1e"  # in pkg/calc.py of the test image (conftest.SETUP), nowhere else
TREE = ("find . -printf '%p %y %m %u %l\\n' | LC_ALL=C sort; "
        "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum")
SMALL = DockerSandboxConfig(cpus=1.0, mem_limit="512m", pids_limit=128)


def _edit_calc(sb, old: str, new: str) -> None:
    text = sb.read_file("pkg/calc.py").decode()
    assert old in text
    sb.write_file("pkg/calc.py", text.replace(old, new))


# -- class 1: the interpreter, the image and the grader's state are out of the model's reach --------------

@pytest.mark.parametrize("target", [
    "/usr/lib/python3/dist-packages/selfplay_evil.pth",
    "/usr/lib/python3.11/sitecustomize.py",
    "/usr/local/lib/python3.11/dist-packages/usercustomize.py",
    "/opt/venv/bin/python3",
    "/etc/profile.d/evil.sh",
    "/var/lib/selfplay/pristine.tar",
])
def test_agent_cannot_write_the_interpreter_or_grader_state(sandbox, target):
    payload = "import os; os.system('touch /tmp/pwned-by-startup-hook')\n"
    r = sandbox.exec(f"mkdir -p $(dirname {target}) 2>&1; printf %s {payload!r} > {target}; echo rc=$?")
    assert "rc=1" in r.output and ("Permission denied" in r.output), r.output
    with pytest.raises(PermissionError):
        sandbox.write_file(target, payload)
    sandbox.reset()
    fresh = sandbox.exec("python3 -c 'print(42)'; ls /tmp")
    assert fresh.output == "42\n"  # the hook did not load, and wrote no marker


def test_agent_writes_only_the_workdir_and_its_private_tmpfs(sandbox):
    """Everything the agent uid can write, found by walking the whole filesystem as that uid."""
    r = sandbox.exec("find / \\( -path /proc -o -path /sys \\) -prune -o -writable ! -type l -print 2>/dev/null",
                     timeout=120)  # a symlink (/var/lock) is writable where its target is
    allowed = (sandbox.workdir, *SCRATCH_DIRS)
    bad = [p for p in r.output.splitlines()
           if not any(p == a or p.startswith(a + "/") for a in allowed)
           and not (p.startswith("/dev/") and sandbox.exec(f"test -c {p}").ok)]
    assert bad == []
    ids = sandbox.exec("id -u; id -g; id -G; grep Cap /proc/self/status; cat /proc/self/status | grep NoNewPrivs")
    lines = ids.output.splitlines()
    assert lines[:3] == ["1000", "1000", "1000"]
    assert all(line.endswith("0000000000000000") for line in lines[3:8]), lines
    assert lines[8].split() == ["NoNewPrivs:", "1"]


@pytest.mark.parametrize("path", [
    "/var/lib/selfplay/pristine.tar", "/var/lib/selfplay/git/config", "/proc/1/environ", "/proc/1/cmdline_x",
    "/root/.bashrc", "leak",  # `leak` is a symlink the agent planted to the snapshot
])
def test_agent_cannot_read_grader_state(sandbox, path):
    from agent_scaffold.editor import EditError, Editor

    sandbox.exec("ln -sf /var/lib/selfplay/pristine.tar leak")
    with pytest.raises((PermissionError, FileNotFoundError)):
        sandbox.read_file(path)
    with pytest.raises(EditError):
        Editor(sandbox).view(path)
    r = sandbox.exec(f"cat {path} | head -c 100")
    assert "Permission denied" in r.output or "No such file" in r.output
    listing = sandbox.exec("ls /var/lib/selfplay")
    assert listing.exit_code == 2 and "Permission denied" in listing.output


def test_grader_command_text_is_invisible_to_model_code(sandbox):
    """A grader job's script (markers, canaries) must not be readable by model code running meanwhile:
    /proc/PID/cmdline is world-readable, so the text travels in the exec's environment."""
    import threading

    secret = "selfplay-job-secret-93ab"
    job = threading.Thread(target=sandbox.exec, args=(f"sleep 3; : {secret}; echo done",),
                           kwargs={"user": "root", "timeout": 30})
    job.start()
    try:
        time.sleep(1)
        # The pattern is built at run time, so no argv of this command holds the secret either.
        r = sandbox.exec(f"printf '%s-%s\\n' {secret[:12]} {secret[13:]} > /tmp/pat; ps -eo args= | grep -cf "
                         "/tmp/pat; cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | "
                         "grep -cf /tmp/pat; ps -eo args= | grep -c '^sleep 3'")
    finally:
        job.join()
    assert r.output.split() == ["0", "0", "1"], r.output  # the job is running, its text unseen


def test_grader_git_runs_no_model_hook_filter_or_config(any_sandbox):
    """The model owns .git: hooks, fsmonitor, filters, textconv, external diff, include, worktree and
    prefixes in its config, attributes in the tree, a global config in its HOME. The grader's diff,
    apply_patch and reset run none of it, and the prediction keeps its fixed shape."""
    sb = any_sandbox
    hook = "#!/bin/sh\ntouch /etc/pwned-$(basename $0) /tmp/pwned-$(basename $0)\n"
    for name in ("post-checkout", "pre-commit", "post-index-change", "reference-transaction", "pre-auto-gc",
                 "post-applypatch", "fsmonitor-watchman"):
        sb.write_file(f".git/hooks/{name}", hook)
    sb.write_file("evil.cfg", "[core]\n\tpager = touch /etc/pwned-include\n")
    r = sb.exec("chmod +x .git/hooks/*; mkdir -p hooks2; cp .git/hooks/post-checkout hooks2/; "
                "git config core.hooksPath hooks2 && "
                "git config core.fsmonitor 'touch /etc/pwned-fsmonitor /tmp/pwned-fsmonitor; echo' && "
                "git config filter.x.clean 'touch /etc/pwned-clean; cat' && "
                "git config filter.x.smudge 'touch /etc/pwned-smudge; cat' && "
                "git config diff.x.textconv 'touch /etc/pwned-textconv; cat' && "
                "git config diff.external 'touch /etc/pwned-external' && "
                "git config diff.mnemonicPrefix true && git config diff.noprefix true && "
                "git config include.path ../evil.cfg && git config core.worktree /tmp && "
                "git tag -f selfplay-base HEAD~0 && "
                "printf '* filter=x diff=x\\n' > .gitattributes && "
                "git config --global core.fsmonitor 'touch /etc/pwned-global; echo' && ls /tmp/.gitconfig")
    assert r.ok, r.output
    _edit_calc(sb, "return a + b", "return a * b")
    diff = sb.diff()
    assert "diff --git a/pkg/calc.py b/pkg/calc.py" in diff and "+    return a * b" in diff
    assert "diff --git a/.gitattributes b/.gitattributes" in diff and "/dev/null" in diff
    undo = sb.apply_patch(diff, reverse=True)
    assert undo.applied, undo.error
    assert sb.apply_patch(diff).applied
    assert sb.exec("stat -c %u pkg/calc.py .gitattributes").output.split() == ["1000", "1000"]
    sb.reset()
    markers = sb.exec("ls /etc/pwned-* /tmp/pwned-* 2>&1", user="root").output
    assert "pwned" not in markers.replace("ls: cannot access", "").replace("'/etc/pwned-*'", "") \
        .replace("'/tmp/pwned-*'", ""), markers
    assert sb.diff() == ""


def test_reset_ignores_bookkeeping_the_model_fakes(any_sandbox):
    """Content changed with size and mtime kept, timestamps faked with `touch -d`, the state dir poked:
    reset restores the exact tree anyway."""
    sb = any_sandbox
    before = sb.exec(TREE).output
    r = sb.exec("touch /var/lib/selfplay/ready 2>&1; touch -d '2000-01-01' /var/lib/selfplay/ready 2>&1; "
                "cp -p README.txt /tmp/r && printf 'HELLO\\n' > README.txt && touch -r /tmp/r README.txt; "
                "echo 'x = 1' >> pkg/calc.py && touch -d '2001-02-03' pkg/calc.py pkg .; "
                "mkdir -p old && echo planted > old/f && touch -d '1999-01-01' old/f old; "
                "touch -d '2030-01-01' data.bin")
    assert r.output.count("Permission denied") == 2
    assert sb.exec(TREE).output != before
    sb.reset()
    assert sb.exec(TREE).output == before
    assert sb.exec("ls -A /tmp").output == ""


# -- class 7: reads are capped before transfer; disk writes are limited ---------------------------------

def test_huge_sparse_file_is_refused_before_transfer(sandbox):
    from agent_scaffold.editor import EditError, Editor

    r = sandbox.exec("truncate -s 40G huge.bin /tmp/huge.bin && mkfifo fifo && ln -s /dev/zero zero && "
                     "head -c 100 /dev/urandom > small.bin && du -k huge.bin")
    assert r.ok, r.output
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    for path in ("huge.bin", "/tmp/huge.bin"):
        for user in ("agent", "root"):
            with pytest.raises(FileTooLarge, match="larger than the read cap"):
                sandbox.read_file(path, user=user)
    with pytest.raises(EditError, match="larger than the read cap"):
        Editor(sandbox).view("huge.bin")
    with pytest.raises(FileTooLarge):
        sandbox.read_file("small.bin", max_bytes=99)
    assert len(sandbox.read_file("small.bin", max_bytes=100)) == 100
    for path in ("fifo", "zero"):  # would block or never end
        with pytest.raises(OSError, match="not a regular file"):
            sandbox.read_file(path)
    assert time.monotonic() - t0 < 15
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 64 << 10  # KiB: host memory untouched


def test_diff_refuses_a_huge_file_fast_and_survives_special_files(sandbox):
    """A 40 GB sparse file would take git minutes to hash and then fail as an infrastructure error; the
    diff refuses it up front with an error that blames the tree. FIFOs and sockets are skipped."""
    from sandboxes.errors import DiffTooLarge, SandboxError

    r = sandbox.exec("mkfifo pipe && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")' "
                     "&& echo new > added.txt")
    assert r.ok, r.output
    diff = sandbox.diff()
    assert "b/added.txt" in diff and "pipe" not in diff and "sock" not in diff
    sandbox.exec("mkdir -p deep/er && truncate -s 40G deep/er/huge.bin")
    t0 = time.monotonic()
    with pytest.raises(DiffTooLarge, match="deep/er/huge.bin .*larger than max_diff_bytes") as info:
        sandbox.diff()
    assert not isinstance(info.value, SandboxError)
    assert time.monotonic() - t0 < 10


def test_disk_flood_stops_at_the_limit_and_the_container_lives():
    import tests.sandboxes.conftest as c

    cfg = DockerSandboxConfig(cpus=1.0, mem_limit="512m", pids_limit=128)
    with DockerSandbox.create(c._build("snapshot"), config=cfg) as sb:
        for where, limit in (("/testbed", 128 << 20), ("/tmp", 64 << 20), ("/var/tmp", 32 << 20),
                             ("/dev/shm", 32 << 20)):
            r = sb.exec(f"dd if=/dev/zero of={where}/flood bs=1M count=2000 2>&1; echo rc=$?; "
                        f"stat -c %s {where}/flood", timeout=120)
            assert "No space left on device" in r.output and "rc=1" in r.output, r.output
            assert int(r.output.split()[-1]) <= limit
            many = sb.exec(f"for i in $(seq 100); do head -c 2000000 /dev/zero > {where}/m$i || exit 7; done",
                           timeout=120)
            assert many.exit_code == 7  # many small files hit the same limit
        assert sb.exec("echo alive").output == "alive\n"
        sb.reset()
        assert sb.exec("ls /tmp /var/tmp /dev/shm; git status --porcelain").output.split() == ["/dev/shm:", "/tmp:",
                                                                                            "/var/tmp:"]


# -- class 6: the solver's starting state holds no copy of the original ---------------------------------

@pytest.mark.parametrize("kind", ["snapshot", "plain"])
def test_rebase_leaves_no_copy_of_the_original_readable(kind):
    import tests.sandboxes.conftest as c

    with DockerSandbox.create(c._build(kind), config=SMALL) as sb:
        assert sb.exec(f"grep -c {ORIGINAL} pkg/calc.py; ls pkg/__pycache__").ok  # the original, with bytecode
        assert sb.apply_patch(
            "--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ -3 +3 @@\n-ORIGIN = \"" + ORIGINAL + "\"\n"
            "+ORIGIN = \"buggy\"\n").applied
        sb.exec("python3 -c 'import pkg.calc'")  # a fresh cache of the buggy code is fine; the old one is not
        sb.rebase()
        dirs = " ".join(["/", sb.workdir, *SCRATCH_DIRS])
        hits = sb.exec(f"find {dirs} -xdev \\( -path /proc -o -path /sys \\) -prune -o -type f -print0 2>/dev/null"
                       f" | xargs -0 grep -lsaF {ORIGINAL}; git cat-file --batch-all-objects --batch | "
                       f"grep -caF {ORIGINAL}", timeout=300)
        assert hits.output.split() == ["0"], hits.output  # no file, no git object
        root = sb.exec(f"grep -rlaF {ORIGINAL} /var/lib/selfplay; GIT_DIR=/var/lib/selfplay/git git cat-file "
                       f"--batch-all-objects --batch | grep -caF {ORIGINAL}", user="root")
        assert root.output.split() == ["0"], root.output  # not even in the grader's own state
        log = sb.exec("git log --format=%s; git tag; git status --porcelain; stat -c %u .git .git/HEAD pkg/calc.py")
        assert log.output.split("\n") == ["initial commit", "selfplay-base", "1000", "1000", "1000", ""]
        assert sb.diff() == ""
        _edit_calc(sb, '"buggy"', '"fixed"')
        assert '+ORIGIN = "fixed"' in sb.diff()
        sb.reset()  # back to the rebased (buggy) state, not the original
        assert 'ORIGIN = "buggy"' in sb.read_file("pkg/calc.py").decode() and sb.diff() == ""


# -- persistence: attacks made in one checkout do not reach the next -------------------------------------

def test_pooled_sandbox_is_clean_after_an_attack(repo_image):
    attack = (
        "printf 'import os\\n' > /usr/lib/python3/dist-packages/evil.pth 2>/dev/null; "
        "echo 'x = 1' >> pkg/calc.py; printf '#!/bin/sh\\ntouch /etc/pwned\\n' > .git/hooks/post-checkout; "
        "mkdir -p /tmp/.cache && echo note > /tmp/.cache/answer; echo x > /dev/shm/answer; "
        "python3 -c 'import ctypes; l = ctypes.CDLL(None); assert l.shmget(0x5e1f, 4096, 0o1666) >= 0'; "
        "setsid nohup bash -c 'sleep 2; echo late >> pkg/calc.py' >/dev/null 2>&1 & "
        "(trap \"\" TERM HUP; exec -a innocent sleep 1000) >/dev/null 2>&1 &")
    with SandboxPool(repo_image, 1, config=SMALL, run_id="pytest-security") as pool:
        with pool.checkout() as sb:
            first = sb.id
            clean = sb.exec(TREE).output
            r = sb.exec(attack + " ipcs -m | grep -c 0x00005e1f")
            assert r.output.strip().endswith("1"), r.output
        with pool.checkout(timeout=60) as sb:
            assert sb.id == first  # reset, not recreated
            time.sleep(2.5)  # the late writer would have struck by now
            assert sb.exec(TREE).output == clean
            state = sb.exec("ls -A /tmp /dev/shm; ipcs -m | grep -c 0x; ps -eo args= | grep -cv -e '^ps' "
                            "-e selfplay-keeper -e '^bash -c ls' -e '^grep'; "
                            "ls /etc/pwned /usr/lib/python3/dist-packages/evil.pth 2>&1 | grep -c 'No such'")
            assert state.output.split() == ["/dev/shm:", "/tmp:", "0", "0", "2"], state.output
            assert sb.diff() == ""


def test_reset_that_does_not_verify_recreates_the_container(repo_image):
    with DockerSandbox.create(repo_image, config=SMALL) as sb:
        first = sb.id
        sb.exec("rm /var/lib/selfplay/pristine.tar", user="root")  # the snapshot is gone: cannot verify
        sb.reset()
        assert sb.id != first
        assert ORIGINAL in sb.read_file("pkg/calc.py").decode()


def test_rebase_keeping_history_moves_the_grader_base(repo_image):
    """history=True (after a caller cut the history down): the grader's diff base and the reset snapshot
    follow the repo's own selfplay-base tag, and its commits stay."""
    with DockerSandbox.create(repo_image, config=SMALL) as sb:
        r = sb.exec("echo v2 >> README.txt && git -c user.name=t -c user.email=t@t commit -qam v2 && "
                    "git tag -f selfplay-base >/dev/null && git log --oneline | wc -l")
        assert r.output.split()[-1] == "2", r.output
        assert "+v2" in sb.diff()  # the grader's base is still the image's
        sb.rebase(history=True)
        assert sb.diff() == ""
        sb.exec("echo v3 >> README.txt")
        assert "+v3" in sb.diff() and "+v2" not in sb.diff()
        sb.reset()
        assert sb.read_file("README.txt") == b"hello\nv2\n"
        assert sb.exec("git log --oneline | wc -l; stat -c %u .git/HEAD").output.split() == ["2", "1000"]
        with DockerSandbox.create(repo_image, config=SMALL) as other:
            other.exec("git tag -d selfplay-base")
            with pytest.raises(Exception, match="needs a tag selfplay-base"):
                other.rebase(history=True)
