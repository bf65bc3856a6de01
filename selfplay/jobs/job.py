"""`Job`: what one suite job does around test_script.sh, the root bash script it becomes (`job_command`),
the verification exec that may follow it (`verify_command`), and the reading of their marker lines
(`parse_job_output`). Pure text, testable without Docker."""

from __future__ import annotations

import base64
import binascii
import shlex
from dataclasses import dataclass

from sandboxes.sandbox import BASE_MESSAGE, BASE_TAG
from sandboxes.shell import FRESH_GIT, GIT_SAFE, GRADER_GIT_DIR, STATE
from sandboxes.users import AGENT_UID, RUNNER_UID, drop_privileges
from selfplay.jobs.canary import Canary
from selfplay.jobs.parser_box import kill_uid_shell
from selfplay.jobs.verification import Verification, stale_lines

SCRATCH = f"{STATE}/artifact"
"""Where the artifact's script, parser, diffs and the raw output live inside the sandbox (root-only)."""
MAX_TEST_OUTPUT = 4 << 20
"""Default cap on the test output (bytes); more is a flood, which fails the run."""
INLINE = 600_000
"""Compressed output up to this size comes back in the job's own output; bigger is read as a file."""


@dataclass(frozen=True)
class Job:
    """What one suite job does around test_script.sh (see `job_command`); staged file names refer to the
    scratch folder."""

    patches: tuple[str, ...] = ()
    """Staged diffs applied in order before the run; the first that does not apply ends the job. With
    `clean`, the tree they leave is the one commit of the run's `.git` (`sandboxes.shell.FRESH_GIT`), as
    the solver's sandbox has it after `build_buggy_state`."""
    edits: tuple[str, ...] = ()
    """Staged diffs applied after `patches` and the run's `.git` (a prediction): uncommitted changes, as
    the solver's own edits are in its sandbox."""
    restore: tuple[str, ...] = ()
    """Paths put back to their original version after the patches (absent originals are deleted)."""
    clean: bool = True
    """Reset the tree to the base commit first, and give the run a fresh one-commit `.git` (code under test
    that reads the repository's history sees what the solver's sandbox shows, not the image's); False runs
    on the tree and `.git` as they are."""
    missing: tuple[str, ...] = ()
    """Paths to report when the original commit lacks them (`SuiteRun.missing`)."""
    check_after: tuple[str, ...] = ()
    """Staged diffs tried with `git apply` on the original tree after the run (`SuiteRun.check_failed`);
    one that applies only away from its hunk headers' lines is named in `SuiteRun.offsets`."""
    parse_twice: bool = False
    """Run the parser twice on the output and require the same map (determinism)."""
    verify: bool = False
    """Make the copy for a verification run (`selfplay.jobs.verification`); the run itself is a second exec,
    `selfplay.jobs.suite_run.verify_run`, which the caller asks for once the main verdict needs it."""


def git_env_line() -> str:
    """Shell line exporting the grader's safe git environment (run from the workdir, as root)."""
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in GIT_SAFE.items()) + ' GIT_WORK_TREE="$PWD"'


def restore_cmd(paths: tuple[str, ...] | list[str]) -> str:
    """Shell loop putting `paths` back to their base-commit version (deleting those the base lacks)."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return (f"for f in {quoted}; do if git cat-file -e {BASE_TAG}:\"$f\" 2>/dev/null; "
            f"then git checkout -q {BASE_TAG} -- \"$f\" || exit 90; else rm -rf -- \"$f\"; fi; done")


FRESH_GIT_LINE = (f"fresh_git {GRADER_GIT_DIR}/info/exclude {shlex.quote(BASE_MESSAGE)} > {SCRATCH}/git.err 2>&1 "
                  f"&& chown -R {AGENT_UID}:{AGENT_UID} .git || exit 94")
"""Root line giving the run a one-commit `.git` of the tree as it is (`sandboxes.shell.FRESH_GIT`), owned by
the agent uid as the solver's sandbox's is; exit 94 when git fails."""

NO_BYTECODE = ("find . -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null; "
               "export PYTHONDONTWRITEBYTECODE=1")
"""Shell line run before a suite: bytecode caches go stale when an edit keeps a file's size within the
same second as its cached .pyc (e.g. `+= 1` -> `+= 2` right after a reset), and Python would run the
old code. So no caches at all."""

_DRAIN = """drain() {  # $1: a log reader. Kill the model uids until it has seen EOF: a process forked while the
  local n      # last kill round ran can appear after it and hold the pipe. ~10 s at most, then kill the reader.
  for ((n = 0; n < 200; n++)); do
    kill -0 "$1" 2>/dev/null || { wait "$1"; return 0; }
    killuid; killagent
    read -t 0.05 <>/var/lib/selfplay/fifo 2>/dev/null
  done
  kill -9 "$1"; wait "$1"; return 1
}"""

_SAFE_FILE = """safe_file() {  # a regular file reached through no symlink: root may append to it
  local p=. c parts; IFS=/ read -ra parts <<< "$1"
  for c in "${parts[@]}"; do p="$p/$c"; [ -L "$p" ] && return 1; done
  [ -f "$p" ]
}"""


def job_command(job: Job, *, marker: str, canary: Canary, perturb: tuple[str, ...] = (),
                canary_files: tuple[str, ...] = (), suite_timeout: float, max_output: int = MAX_TEST_OUTPUT,
                verification: Verification | None = None, cpu_limit: float | None = None) -> str:
    """The root bash job: [delete a stale verification copy] -> [clean] -> [report missing originals] ->
    apply `job.patches` (staged file names) -> [a fresh one-commit `.git`, when clean; exit 94 when git
    fails] -> apply `job.edits` -> restore `job.restore` -> [copy for the verification run] ->
    perturb/canaries -> script as RUNNER_UID -> kill RUNNER_UID -> ship the log [-> delete the copy when
    the script timed out]; then try applying `job.check_after`. `cpu_limit` (seconds) is each script
    process's RLIMIT_CPU; the CPU time of the script's waited-for processes is reported (CPU line)."""
    s, m = SCRATCH, marker
    if verification is not None and job.check_after and (job.patches or job.edits):
        # check_after resets the tree, and the verification exec restores only the canary and bug files
        raise ValueError("Job: check_after with patches cannot be verified (the tree is reset after the run)")
    ulimit = f"ulimit -t {max(1, int(cpu_limit + 0.999))}; " if cpu_limit else ""
    missing, restore, check_after = job.missing, job.restore, job.check_after
    lines = [*stale_lines(), git_env_line(), *_functions()]
    if job.clean:
        lines.append(f"git reset -q --hard {BASE_TAG} && git clean -qfd || exit 90")
    lines.append(NO_BYTECODE)
    if missing:
        quoted = " ".join(shlex.quote(p) for p in missing)
        lines.append(f"i=0; for f in {quoted}; do git cat-file -e {BASE_TAG}:\"$f\" 2>/dev/null "
                     f"|| echo \"{m} MISSING $i\"; i=$((i + 1)); done")
    for name in job.patches:
        lines.append(_apply_line(name, m))
    if job.clean:
        lines.append(FRESH_GIT_LINE)  # after the layers, before the edits: HEAD is the solver's starting tree
    for name in job.edits:
        lines.append(_apply_line(name, m))
    if restore:
        lines.append(restore_cmd(restore))
    if verification is not None:
        lines += verification.copy_lines()
    token = canary.cls
    if perturb:  # a neutral edit with a fresh token: no run's tree state is ever seen twice
        quoted = " ".join(shlex.quote(p) for p in perturb)
        lines.append(f"for f in {quoted}; do safe_file \"$f\" && printf '\\n# {token}\\n' >> \"$f\"; done")
    if canary_files:
        quoted = " ".join(shlex.quote(p) for p in canary_files)
        lines.append(f"C={shlex.quote(canary.source())}")
        lines.append(f"for f in {quoted}; do safe_file \"$f\" && printf '%s' \"$C\" >> \"$f\"; done")
    lines += [
        f"exec 3<{s}/test_script.sh 4> >(exec head -c {max_output + 1} > {s}/output.log); rd=$!",
        f"times > {s}/cpu0; start=$EPOCHREALTIME",
        # bash reads the script through fd 3 (the file sits in a root-only folder); stdout and stderr go
        # into the pipe only, so nothing the script prints reaches this job's own output.
        f"({ulimit}exec timeout -k 5 {suite_timeout:g} {drop_privileges(RUNNER_UID)} bash /dev/fd/3 < /dev/null "
        ">&4 2>&4 4>&-); rc=$?",
        f"end=$EPOCHREALTIME; times > {s}/cpu1",
        "exec 3<&- 4>&-",
        f"killuid || {{ echo \"{m} UNKILLABLE\"; kill -9 $rd; }}",  # then the reader must not wait on it
        f"drain $rd || echo \"{m} UNKILLABLE\"",
        f"echo \"{m} SCRIPT $rc $start $end $(stat -c %s {s}/output.log)\"",
        f"echo \"{m} CPU $(cat {s}/cpu0 {s}/cpu1 | tr '\\n' ' ')\"",
        *_ship(m, s, "output", ""),
    ]
    if verification is not None:  # a main run that timed out has its verdict (the codes `_collect` reads so)
        codes = "124|137|152|158" if cpu_limit else "124|137"
        lines.append(f'case "$rc" in {codes}) {" ".join(verification.drop_lines())} ;; esac')
    if check_after:  # on the original tree: the appended tokens and canaries would shift end-of-file hunks
        lines.append(f"git reset -q --hard {BASE_TAG} || exit 90")
    for name in check_after:  # -v: git names each hunk it had to apply away from its header's line (in English)
        lines.append(f"if LC_ALL=C git apply -v --whitespace=nowarn -- {s}/{name} > {s}/apply.err 2>&1; then "
                     f"grep -a '^Hunk #[0-9]* succeeded at' {s}/apply.err > {s}/offset.err "
                     f"&& {{ echo \"{m} OFFSET {name}\"; head -c 2000 {s}/offset.err | base64 -w0; echo; }}; "
                     f"else echo \"{m} CHECK {name}\"; head -c 2000 {s}/apply.err | base64 -w0; echo; fi")
    lines.append(f"echo \"{m} END\"")
    return "\n".join(lines)


def _apply_line(name: str, m: str) -> str:
    """`git apply` of one staged diff; the first that fails ends the job with an APPLY marker."""
    s = SCRATCH
    return (f"git apply --whitespace=nowarn -- {s}/{name} > {s}/apply.err 2>&1 "
            f"|| {{ echo \"{m} APPLY {name}\"; head -c 2000 {s}/apply.err | base64 -w0; echo; exit 0; }}")


def verify_command(verification: Verification, *, marker: str, restored: tuple[str, ...], suite_timeout: float,
                   max_output: int = MAX_TEST_OUTPUT, cpu_limit: float | None = None) -> str:
    """The root bash job of a verification exec, run in the sandbox whose last job made `verification`'s
    copy: check the copy is still pending (else a NOCOPY line), the verification run
    (`Verification.run_lines`), its log shipped after VOUTPUT/VOUTFILE. `restored`: the files the main
    job appended tokens or canaries to."""
    lines = [*_functions(), *verification.found_lines(marker),
             *verification.run_lines(marker=marker, scratch=SCRATCH, restored=restored, suite_timeout=suite_timeout,
                                     max_output=max_output, cpu_limit=cpu_limit),
             *_ship(marker, SCRATCH, "verify", "V"), f"echo \"{marker} END\""]
    return "\n".join(lines)


def _functions() -> list[str]:
    """The shell functions both jobs use: killuid, killagent, drain, safe_file, fresh_git."""
    return [kill_uid_shell(RUNNER_UID), kill_uid_shell(AGENT_UID, "killagent"), _DRAIN, _SAFE_FILE, FRESH_GIT]


def _ship(m: str, s: str, name: str, prefix: str) -> list[str]:
    """Lines sending `name`.log back gzip'ed: inline after an OUTPUT line, or as a file (OUTFILE)."""
    return [f"gzip -1 -c {s}/{name}.log > {s}/{name}.gz || exit 91",
            f"if [ $(stat -c %s {s}/{name}.gz) -le {INLINE} ]; then echo \"{m} {prefix}OUTPUT\"; "
            f"base64 -w0 {s}/{name}.gz; echo; else echo \"{m} {prefix}OUTFILE\"; fi"]


def cpu_seconds(fields: list[str]) -> float | None:
    """CPU seconds the job's waited-for children used between two `times` outputs (`XmY.YYYs` tokens:
    the shell's own user/sys, then its children's, twice)."""
    try:
        vals = [int(f.split("m")[0]) * 60 + float(f.split("m")[1].rstrip("s")) for f in fields]
    except (IndexError, ValueError):
        return None
    return (vals[6] + vals[7]) - (vals[2] + vals[3]) if len(vals) == 8 else None


def _b64(text: str) -> str:
    try:
        return base64.b64decode(text.strip(), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return "(undecodable)"


def parse_job_output(output: str, marker: str, missing: tuple[str, ...] = ()) -> dict:
    """The fields printed after `marker` lines; model text only ever appears base64-encoded."""
    lines = output.splitlines()
    found: dict = {"missing": [], "end": False}
    for k, line in enumerate(lines):
        if not line.startswith(marker + " "):
            continue
        kind, *args = line[len(marker) + 1:].split(" ")
        nxt = lines[k + 1] if k + 1 < len(lines) else ""
        if kind == "MISSING":
            found["missing"].append(missing[int(args[0])])
        elif kind in ("APPLY", "CHECK"):
            found[kind.lower()] = f"{args[0]}: {_b64(nxt).strip()[:600]}"
            found[f"{kind.lower()}_name"] = args[0]
        elif kind == "OFFSET":
            found.setdefault("offsets", []).append((args[0], _b64(nxt).strip()[:600]))
        elif kind in ("SCRIPT", "VSCRIPT"):
            found[kind.lower()] = (args[0], float(args[2]) - float(args[1]), int(args[3]))
        elif kind in ("CPU", "VCPU"):
            found[kind.lower()] = cpu_seconds([a for a in args if a])
        elif kind in ("OUTPUT", "VOUTPUT"):
            found[kind.lower()] = nxt
        elif kind in ("OUTFILE", "VOUTFILE", "UNKILLABLE", "NOCOPY"):
            found[kind.lower()] = True
        elif kind == "END":
            found["end"] = True
    return found


