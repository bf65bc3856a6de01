"""The verification run: the same suite once more, under an environment that differs from the main run in
everything code under test can probe to tell "I am being graded" (docs/security.md, class 9).

An environment-conditional fix is correct only when it detects grading and stays buggy elsewhere; the
grading environment is easy to recognise (read-only repo, a runner uid that does not own the files,
/testbed, HOME=/tmp, USER=selfplay-runner, canary tests in the test files, files written just before the
run). So a graded prediction whose main run passes (and the original and buggy states in validation, where
their verdict still counts) is run once more, and both verdicts must agree. The verification run has:

- a writable copy of the patched tree (no `.git`), owned by the uid that runs it, at a random path under
  /tmp, with every mtime set to one random moment between an hour and a month ago;
- `sandboxes.users.AGENT_UID`: the uid the solver itself had in its episode, so no probe of the uid (`!=
  1000` no more than `== 1001`) sees it as graded; USER/LOGNAME name the agent, as in an episode;
- a random HOME, a random extra variable, PYTHONPATH pointing at the copy (so an editable install imports
  the copy, not the workdir);
- no canaries and no perturbation comment (the copy is taken before they are appended).

When it runs: the main job makes the copy (`copy_lines`, in a root-only 0700 folder the main run cannot
enter) and names it in PENDING; the main run is parsed and judged; only when its verdict still depends on
the verification (grading: the main run passes) does a second exec of the same sandbox run
`run_lines` (`selfplay.jobs.job.verify_command`). A run that fails already gets its verdict without it, and
its copy is stale: the next job of the sandbox deletes it before anything else (`stale_lines`; a reset
empties /tmp too), and a main run that timed out deletes its own at the end of its job.

Before the verification run starts, every RUNNER_UID process is dead and the scratch dirs and System V IPC
are emptied, so nothing the main run left can tell it that a graded run just happened. The workdir is
handed to root while it runs (the agent uid owns it otherwise), so the verification run cannot change
the tree later jobs of the same sandbox use; afterwards its processes are killed, the copy and the scratch
dirs are emptied, and the workdir goes back to the agent uid.

The hostname, the container, the image, the Python and the kernel are the same as the main run's (one
container; a second one would double the sandboxes grading holds): probes of those stay detection-only.
"""

from __future__ import annotations

import secrets
import shlex
import time
from dataclasses import dataclass

from sandboxes.shell import STATE
from sandboxes.users import AGENT_UID, RUNNER_UID, drop_privileges

WIPE = ("/var/tmp", "/run/lock", "/dev/shm", "/dev/mqueue")
"""Scratch dirs emptied between the runs (and /tmp, except the verification's own folder)."""
PENDING = f"{STATE}/verify.copy"
"""Root-only file naming the folder of the verification copy a job left for a later verification exec."""


def stale_lines() -> list[str]:
    """Root lines that open every job: delete a verification copy an earlier job of this sandbox left
    (its main run failed, so no verification exec followed), before any model code runs."""
    return [f'[ -f {PENDING} ] && {{ d=$(cat {PENDING}); case "$d" in /tmp/?*) rm -rf -- "$d" ;; esac; '
            f"rm -f {PENDING}; }}"]


@dataclass(frozen=True)
class Verification:
    """The randomised environment of one verification run (see the module docstring)."""

    root: str
    """Root-owned folder under /tmp holding the copy and HOME (mode 0700 until the run starts)."""
    subdir: str
    """Random folder between `root` and the copy (the copy keeps the workdir's base name)."""
    home: str
    """HOME of the run."""
    mtime: int
    """Epoch seconds every file of the copy gets as its mtime."""
    var: tuple[str, str]
    """A random extra environment variable (name, value)."""

    @classmethod
    def new(cls) -> Verification:
        root = f"/tmp/{secrets.token_hex(5)}"
        mtime = int(time.time()) - 3600 - secrets.randbelow(30 * 86400)
        return cls(root=root, subdir=secrets.token_hex(3), home=f"{root}/{secrets.token_hex(4)}", mtime=mtime,
                   var=(f"X{secrets.token_hex(4).upper()}", secrets.token_hex(6)))

    def copy_lines(self) -> list[str]:
        """Root lines run in the workdir after the patches and restores, before the canaries: the copy,
        named in PENDING first (so that a job killed mid-copy leaves nothing the next job does not delete)."""
        r = shlex.quote(self.root)
        # one pass: the archive already names the agent uid as owner and the random moment as mtime, so
        # no chown or touch pass over the copy follows (root's tar -x keeps both; the copy stays out of
        # reach of the main run inside the 0700 root folder until the verification run starts)
        return [f'W="$PWD"; P={r}/{self.subdir}/"$(basename "$PWD")"',
                f"echo {r} > {PENDING} || exit 92",
                f'rm -rf {r} && mkdir -m 700 {r} && mkdir -p "$P" '
                f'&& tar -c --exclude=./.git --owner={AGENT_UID} --group={AGENT_UID} --numeric-owner '
                f'--mtime=@{self.mtime} -f - . | tar -x -f - -C "$P" || exit 92']

    def drop_lines(self) -> list[str]:
        """Root lines deleting the copy (and PENDING): the end of a job whose main run timed out."""
        return [f"rm -rf {shlex.quote(self.root)} {PENDING}"]

    def found_lines(self, marker: str) -> list[str]:
        """Root lines opening the verification exec (run in the workdir): set W and P as `copy_lines` did,
        and end with a NOCOPY marker line when the copy is not this sandbox's pending one (another job or
        a reset ran since the main run)."""
        r = shlex.quote(self.root)
        return [f'W="$PWD"; P={r}/{self.subdir}/"$(basename "$PWD")"',
                f'[ "$(cat {PENDING} 2>/dev/null)" = {r} ] && [ -d "$P" ] || {{ echo "{marker} NOCOPY"; exit 0; }}']

    def run_lines(self, *, marker: str, scratch: str, restored: tuple[str, ...], suite_timeout: float,
                  max_output: int, cpu_limit: float | None) -> list[str]:
        """Root lines of the verification exec, after `found_lines` (the main run's processes are dead):
        the verification run, its marker lines (VSCRIPT, VCPU), then the clean-up (the copy and PENDING
        go with it)."""
        m, s, r = marker, scratch, shlex.quote(self.root)
        name, value = self.var
        wipe = " ".join(WIPE)
        quoted = " ".join(shlex.quote(p) for p in restored)
        owned = "find . -path ./.git -prune -o -exec chown -h {uid}:{uid} {{}} +"
        env = (f"HOME={shlex.quote(self.home)} PYTHONPATH=\"$PP\" {name}={value}")
        ulimit = f"ulimit -t {max(1, int(cpu_limit + 0.999))}; " if cpu_limit else ""
        lines = [
            # the oracle test files and bug files back to their state before the canaries and tokens
            *([f'for f in {quoted}; do [ -f "$P/$f" ] && safe_file "$f" && cat "$P/$f" > "$f"; done']
              if restored else []),
            f"find /tmp -mindepth 1 -maxdepth 1 ! -path {r} -exec rm -rf {{}} + 2>/dev/null; "
            f"find {wipe} -mindepth 1 -delete 2>/dev/null",
            f"setpriv --reuid={RUNNER_UID} --regid={RUNNER_UID} --clear-groups ipcrm -a 2>/dev/null",
            "killuid || exit 93",  # again: no process of the main run may watch or signal this one
            owned.format(uid=0),  # the workdir is root's while the agent uid runs
            # the copy is the agent uid's with its mtimes from the tar pass (copy_lines): only the folders above it
            f"mkdir -p {shlex.quote(self.home)} && chown {AGENT_UID}:{AGENT_UID} {r} {r}/{self.subdir} "
            f"{shlex.quote(self.home)} && chmod 755 {r} || exit 92",
            'PP="$P"; [ -d "$P/src" ] && PP="$P:$P/src"',
            'cd "$P"',
            f"exec 3<{s}/test_script.sh 4> >(exec head -c {max_output + 1} > {s}/verify.log); rd=$!",
            f"times > {s}/vcpu0; start=$EPOCHREALTIME",
            f"({ulimit}exec timeout -k 5 {suite_timeout:g} {drop_privileges(AGENT_UID)} {env} "
            "bash /dev/fd/3 < /dev/null >&4 2>&4 4>&-); rc=$?",
            f"end=$EPOCHREALTIME; times > {s}/vcpu1",
            "exec 3<&- 4>&-",
            f"killagent || {{ echo \"{m} UNKILLABLE\"; kill -9 $rd; }}",
            f"drain $rd || echo \"{m} UNKILLABLE\"",
            'cd "$W"',
            owned.format(uid=AGENT_UID),
            f"find /tmp {wipe} -mindepth 1 -delete 2>/dev/null; rm -f {PENDING}",
            f"setpriv --reuid={AGENT_UID} --regid={AGENT_UID} --clear-groups ipcrm -a 2>/dev/null",
            f"echo \"{m} VSCRIPT $rc $start $end $(stat -c %s {s}/verify.log)\"",
            f"echo \"{m} VCPU $(cat {s}/vcpu0 {s}/vcpu1 | tr '\\n' ' ')\"",
        ]
        return lines
