"""apply_patch, diff and reset on a real git repository inside a real container."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

GOOD = """\
diff --git a/pkg/calc.py b/pkg/calc.py
--- a/pkg/calc.py
+++ b/pkg/calc.py
@@ -1,3 +1,3 @@
 def add(a, b):
-    return a + b
+    return a - b
""" + " \n"


def test_apply_good_patch_then_reverse(any_sandbox):
    sandbox = any_sandbox
    r = sandbox.apply_patch(GOOD)
    assert r.applied and r.error is None and r.files == ("pkg/calc.py",) and not r.binary
    assert b"return a - b" in sandbox.read_file("pkg/calc.py")
    assert "-    return a + b\n+    return a - b" in sandbox.diff()
    back = sandbox.apply_patch(GOOD, reverse=True)
    assert back.applied
    assert sandbox.diff() == ""


def test_conflicting_patch_leaves_tree_unchanged(any_sandbox):
    sandbox = any_sandbox
    two_files = GOOD + """\
diff --git a/README.txt b/README.txt
--- a/README.txt
+++ b/README.txt
@@ -1 +1 @@
-this line is not there
+goodbye
"""
    r = sandbox.apply_patch(two_files)
    assert not r.applied
    assert "README.txt" in r.error and "patch does not apply" in r.error
    assert sandbox.diff() == ""  # the good hunk for calc.py was not applied either
    garbage = sandbox.apply_patch("this is not a diff\n")
    assert not garbage.applied and garbage.error
    assert not sandbox.apply_patch("").applied


def test_binary_and_non_utf8_diffs_roundtrip_through_diff(any_sandbox):
    sandbox = any_sandbox
    sandbox.write_file("new.bin", bytes(range(256)))
    sandbox.write_file("latin1.txt", b"na\xefve latin-1 \xe9\n")
    sandbox.exec("rm README.txt")
    diff = sandbox.diff_bytes()
    assert b"GIT binary patch" in diff and b"new file mode" in diff and b"deleted file mode" in diff
    assert b"\xef" in diff  # non-UTF-8 text kept as bytes
    assert sandbox.exec("git status --porcelain").output.count("??") == 1  # real index untouched
    sandbox.reset()
    assert sandbox.diff() == ""
    r = sandbox.apply_patch(diff)
    assert r.applied and r.binary
    assert set(r.files) == {"new.bin", "latin1.txt", "README.txt"}
    assert sandbox.read_file("new.bin") == bytes(range(256))
    assert sandbox.read_file("latin1.txt") == b"na\xefve latin-1 \xe9\n"
    assert sandbox.diff_bytes() == diff


def test_reset_restores_modified_new_deleted_binary_and_replaced_git(any_sandbox):
    sandbox = any_sandbox
    pristine = {p: sandbox.read_file(p) for p in ("pkg/calc.py", "README.txt", "data.bin", "latin1.txt")}
    head = sandbox.exec("git rev-parse selfplay-base").output.strip()
    sandbox.exec("echo 'x = 1' >> pkg/calc.py; rm README.txt; printf '\\x00\\xff' > data.bin; "
                 "mkdir -p junk/deep && echo new > junk/deep/f.txt; touch /tmp/scratch; "
                 "rm -rf .git && git init -q && git add -A && "
                 "git -c user.name=a -c user.email=a@b commit -qm buggy; sleep 1000 </dev/null &>/dev/null &")
    assert sandbox.exec("git rev-parse selfplay-base").exit_code != 0
    sandbox.reset()
    for path, data in pristine.items():
        assert sandbox.read_file(path) == data, path
    state = sandbox.exec("ls junk /tmp/scratch 2>&1; git rev-parse selfplay-base; git status --porcelain; "
                         "ps -eo args= | grep -c '^sleep 1000'").output.splitlines()
    assert "No such file" in state[0] and "No such file" in state[1]
    assert state[2] == head
    assert state[3] == "0"  # status clean, no leftover process
    assert sandbox.diff() == ""


TREE = ("find . -printf '%p %y %m %l\\n' | LC_ALL=C sort; "
        "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum")


def test_reset_restores_the_exact_tree_after_type_changes(any_sandbox):
    sandbox = any_sandbox
    before = sandbox.exec(TREE).output
    sandbox.exec("rm -rf pkg && echo file-now > pkg; rm README.txt && mkdir -p README.txt/sub; "
                 "chmod 600 data.bin; ln -sf /etc/passwd latin1.txt; mkdir -p .git/hooks/extra; "
                 "echo x > .git/hooks/extra/y; echo dirt >> .git/config")
    assert sandbox.exec(TREE).output != before
    sandbox.reset()
    assert sandbox.exec(TREE).output == before
    # The incremental restore did it (no fallback to a full re-extraction).
    assert sandbox.exec("cat /var/lib/selfplay/reset.err", user="root").output == ""


def test_diff_survives_a_gitignored_pytest_cache(any_sandbox):
    """An agent that ran plain pytest leaves .pytest_cache, which repos (and repo images) gitignore; a
    literal exclude pathspec made `git add -A` fail on it, so the episode ended as an infra failure."""
    sandbox = any_sandbox
    assert sandbox.exec("printf '.pytest_cache/\\n' >> .gitignore && mkdir -p .pytest_cache/v pkg/.pytest_cache "
                        "&& touch .pytest_cache/v/x pkg/.pytest_cache/y").ok
    assert sandbox.apply_patch(GOOD).applied
    diff = sandbox.diff()
    assert "+    return a - b" in diff
    assert "b/.pytest_cache/" not in diff and "b/pkg/.pytest_cache/" not in diff


@pytest.mark.parametrize("image", ["repo_image", "plain_image"])
def test_a_same_size_fix_in_the_second_of_the_bug_is_in_the_diff(image, request):
    """Git trusts a file's cached stat (mtime and ctime to the second, size, inode) unless the entry is
    racy: as new as the index file. The diff's private index copy must keep the index's mtime. Otherwise
    a same-size fix made in the second the bug was applied and rebased (a scripted solver), and diffed a
    second later (after its test run), is left out of the submitted diff."""
    import time

    from sandboxes.docker import DockerSandbox, DockerSandboxConfig

    def next_second():
        time.sleep(1.02 - time.time() % 1)

    config = DockerSandboxConfig(cpus=1.0, mem_limit="512m", pids_limit=128)
    with DockerSandbox.create(request.getfixturevalue(image), config=config, run_id="pytest-sandboxes") as sb:
        fixed = sb.read_file("pkg/calc.py")
        buggy = fixed.replace(b"a + b", b"a - b")
        assert len(buggy) == len(fixed) and buggy != fixed
        next_second()  # bug, rebase and fix (~0.5 s together) in one second, the diff in a later one
        sb.write_file("pkg/calc.py", buggy)
        sb.rebase("buggy state")
        sb.write_file("pkg/calc.py", fixed)
        next_second()
        assert "-    return a - b\n+    return a + b" in sb.diff()
