"""Who runs what inside a sandbox: the uids model-controlled code runs as, and how a root shell drops to one.

Root inside the container is the grader's: it keeps the reset snapshot, the grader-owned git dir and the
staged grading files in `sandboxes.shell.STATE` (0700). Everything a model wrote runs as one of the
unprivileged uids below, with no capabilities and `no_new_privs` (setuid binaries do not elevate):

- AGENT_UID: an episode's commands and the agent's file reads and writes. Owns the repo workdir, so it
  can edit the repo and its `.git`; it can also write the private tmpfs dirs (/tmp, /var/tmp, /dev/shm,
  /run/lock) and nothing else.
- RUNNER_UID: test_script.sh and the code under test during validation and grading; the repo is
  read-only to it (owned by AGENT_UID, mode 755), /tmp is its scratch space.
- PARSER_UID: test_parser.py; sees only what the grader hands it.
"""

from __future__ import annotations

AGENT_UID = 1000
"""Model commands in agent episodes; owns the workdir."""
RUNNER_UID = 1001
"""test_script.sh and the code under test during validation and grading (repo read-only to it)."""
PARSER_UID = 1002
"""test_parser.py."""

NAMES = {AGENT_UID: "selfplay-agent", RUNNER_UID: "selfplay-runner", PARSER_UID: "selfplay-parser"}
"""Login names the keeper adds to /etc/passwd (tools such as `whoami` and `getpass` want one)."""

USERS = {"agent": AGENT_UID, "root": 0}
"""Values of the `user=` keyword of `Sandbox.exec`/`read_file`/`write_file`."""

# Variables our own grader-side git calls export (see sandboxes.shell.GIT_SAFE); unset for model code so
# that its git finds its own repository, as a developer's would.
_GRADER_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL",
                "GIT_CONFIG_COUNT", "GIT_ATTR_NOSYSTEM", "GIT_NO_REPLACE_OBJECTS")


def setpriv(uid: int) -> str:
    """The setpriv command alone: `uid` as real, effective and saved uid and gid, no supplementary
    groups, no capabilities in any set, no_new_privs."""
    if not isinstance(uid, int) or uid <= 0:
        raise ValueError(f"drop_privileges needs an unprivileged uid (> 0), got {uid!r}")
    return (f"setpriv --reuid={uid} --regid={uid} --clear-groups --inh-caps=-all --bounding-set=-all "
            "--no-new-privs")


def environment(uid: int) -> tuple[tuple[str, ...], dict[str, str]]:
    """(variables to unset, variables to set) for a process running as `uid`."""
    name = NAMES.get(uid, f"uid{uid}")
    # A fixed hash seed: hash() of a str and the order of a set of str otherwise change with every process, so
    # a bug built on them fails some runs and passes others (validation sees it fail, an empty prediction
    # then "solves" it by luck). Fixed, the suite runs of validation and grading and the agent's own runs
    # all see one behaviour.
    return _GRADER_VARS, {"HOME": "/tmp", "USER": name, "LOGNAME": name, "PYTHONDONTWRITEBYTECODE": "1",
                          "PYTHONHASHSEED": "0"}


def drop_privileges(uid: int) -> str:
    """Shell prefix that runs the command after it as `uid` (same gid, no supplementary groups, no
    capabilities in any set, no_new_privs) from a root shell inside the container.

    The environment is kept (the image's variables and the exec token the killer finds processes by),
    except the grader's git variables; HOME is /tmp (a private tmpfs emptied by reset), USER and LOGNAME
    name the uid, and PYTHONDONTWRITEBYTECODE=1 keeps stale bytecode out of the tree.
    """
    unset, assign = environment(uid)
    return (f"{setpriv(uid)} env {' '.join(f'-u {v}' for v in unset)} "
            f"{' '.join(f'{k}={v}' for k, v in assign.items())}")


def shell_environment(uid: int) -> str:
    """The same environment changes as `drop_privileges`, as bash builtins (no process of its own)."""
    unset, assign = environment(uid)
    return f"unset {' '.join(unset)}; export {' '.join(f'{k}={v}' for k, v in assign.items())}"


def passwd_lines() -> str:
    """/etc/passwd entries for the uids above (each with its own group id and /tmp as home)."""
    return "".join(f"{name}:x:{uid}:{uid}::/tmp:/bin/bash\n" for uid, name in NAMES.items())


def group_lines() -> str:
    """/etc/group entries for the uids' own groups."""
    return "".join(f"{name}:x:{uid}:\n" for uid, name in NAMES.items())
