"""One run of an artifact's test suite inside a sandbox: the I/O both validation and grading share.

A run is one `docker exec` of a generated bash job, run as root (the grader) in a repo sandbox, then one
exec in a parser box (`selfplay.validation.parser_box`):
  root: clean the tree with git (the grader-owned git dir, hooks and configuration off:
        `sandboxes.shell.GIT_SAFE`), apply the staged diffs, restore oracle test files, append a
        neutral comment with a fresh token to each Python bug file and the canary tests
        (`selfplay.validation.canary`) to each Python oracle test file;
  RUNNER_UID: test_script.sh under `timeout`, its stdout+stderr through a pipe into a capped root-only
        log (a pipe: the code under test cannot seek or truncate it); the repo is read-only to it;
  root: SIGKILL every RUNNER_UID process with bash builtins (works under a fork bomb), then collect
        the log; a process holding the pipe is dead by then, so the job never waits on it;
  parser box: test_parser.py on the log, as PARSER_UID, with nothing else to read.

Class 5 of issue 15 (model output forging an infrastructure error): marker lines carry a random token per
job, and every model-controlled text (the test output, git's messages about model diffs, the parser's
stdout/stderr) crosses to the host base64-encoded, so nothing the model prints can be read as a marker.
A job that does not finish (killed, hung, sandbox gone) comes back as `SuiteRun.died`, never as an
exception: the grader and the validator decide whose fault it is with a control run.

Every run looks the same from inside, whether validation or grading: same tokens appended, same uids,
same parser box. Staged artifact files live in SCRATCH (root-only).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import logging
import shlex
import tarfile
import uuid
from dataclasses import dataclass

from sandboxes.errors import SandboxError
from sandboxes.sandbox import BASE_TAG, Sandbox
from sandboxes.shell import GIT_SAFE, STATE
from sandboxes.users import RUNNER_UID, drop_privileges
from selfplay.artifact import BugArtifact
from selfplay.diffs import touched_files
from selfplay.errors import ValidationInfraError
from selfplay.grading import ParserOutputError, parse_status_map
from selfplay.validation.canary import Canary
from selfplay.validation.parser_box import kill_uid_shell, parse_output

log = logging.getLogger(__name__)
SCRATCH = f"{STATE}/artifact"
"""Where the artifact's script, parser, diffs and the raw output live inside the sandbox (root-only)."""
MAX_TEST_OUTPUT = 4 << 20
"""Default cap on the test output (bytes); more is a flood, which fails the run."""
_INLINE = 600_000
"""Compressed output up to this size comes back in the job's own output; bigger is read as a file."""


@dataclass(frozen=True)
class Job:
    """What one suite job does around test_script.sh (see `job_command`); staged file names refer to the
    scratch folder."""

    patches: tuple[str, ...] = ()
    """Staged diffs applied in order before the run; the first that does not apply ends the job."""
    restore: tuple[str, ...] = ()
    """Paths put back to their original version after the patches (absent originals are deleted)."""
    clean: bool = True
    """Reset the tree to the base commit first; False runs on the tree as it is."""
    missing: tuple[str, ...] = ()
    """Paths to report when the original commit lacks them (`SuiteRun.missing`)."""
    check_after: tuple[str, ...] = ()
    """Staged diffs tried with `git apply` on the original tree after the run (`SuiteRun.check_failed`)."""
    parse_twice: bool = False
    """Run the parser twice on the output and require the same map (determinism)."""


@dataclass(frozen=True)
class SuiteRun:
    """Outcome of one job: test_script.sh piped through test_parser.py (after patches and restores)."""

    statuses: dict[str, str] | None
    """The parsed map (canary ids removed); None when a patch did not apply, the script timed out or
    flooded, the parser failed, or the job died."""
    error: str | None = None
    """Why there is no map (patch, script timeout, flood, parser crash, parser timeout, bad JSON, died)."""
    duration: float = 0.0
    """Seconds the script took."""
    output_tail: str = ""
    """Last lines of the script's output, for error messages (model text: show, never parse)."""
    apply_error: str | None = None
    """Set when a staged diff did not apply: `name: git's message`."""
    missing: tuple[str, ...] = ()
    """Paths asked about with `missing=` that do not exist in the original commit."""
    script_exit: int | None = None
    """test_script.sh's exit status as the job printed it (None when the script did not run)."""
    check_failed: str | None = None
    """The first `Job.check_after` diff that did not apply (its message is in `apply_error`)."""
    died: bool = False
    """The job itself did not finish (killed, hung past its own timeout, sandbox gone): whose fault it
    is takes a control run to tell."""
    timed_out: bool = False
    """test_script.sh ran past the suite timeout."""
    integrity: str = ""
    """The canary verdict: "ok", "inconclusive: ...", "tampered: ..." ("" when nothing was parsed)."""

    @property
    def tampered(self) -> str | None:
        """The canary verdict when it says the run was tampered with, else None."""
        return self.integrity if self.integrity.startswith("tampered") else None


def check(result, what: str) -> None:
    """Raise ValidationInfraError when a bookkeeping command (not the artifact's) failed."""
    if not result.ok:
        raise ValidationInfraError(f"{what} failed in the sandbox (exit {result.exit_code}): "
                                   f"{result.output[-500:]}")


_UNPACK = f"install -d -m 700 {STATE} {SCRATCH} && base64 -d | tar -x --no-same-owner -C {SCRATCH}"
"""Shell line that unpacks a `_tarball` from stdin into the scratch folder."""


def _tarball(files: dict[str, str]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in files.items():
            data = text.encode("utf-8", "surrogateescape")
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def stage(sb: Sandbox, files: dict[str, str]) -> None:
    """Write `files` (name -> text) into the root-only scratch folder with one exec (a tarball on stdin)."""
    check(sb.exec(_UNPACK, timeout=60, stdin=_tarball(files), user="root"), "staging the artifact files")


def staged_files(artifact: BugArtifact, **extra: str) -> dict[str, str]:
    """The files a run needs in the scratch folder: script and diffs (plus `extra`); never the parser."""
    return {"test_script.sh": artifact.test_script, "bug_inject.diff": artifact.bug_inject,
            "test_weaken.diff": artifact.test_weaken, **extra}


def prepare(sb: Sandbox, artifact: BugArtifact, **extra: str) -> None:
    """Stage the artifact's script and diffs (plus `extra` files) in the scratch folder."""
    stage(sb, staged_files(artifact, **extra))


def git_env_line() -> str:
    """Shell line exporting the grader's safe git environment (run from the workdir, as root)."""
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in GIT_SAFE.items()) + ' GIT_WORK_TREE="$PWD"'


def _restore_cmd(paths: tuple[str, ...] | list[str]) -> str:
    quoted = " ".join(shlex.quote(p) for p in paths)
    return (f"for f in {quoted}; do if git cat-file -e {BASE_TAG}:\"$f\" 2>/dev/null; "
            f"then git checkout -q {BASE_TAG} -- \"$f\" || exit 90; else rm -rf -- \"$f\"; fi; done")


def restore_paths(sb: Sandbox, paths: tuple[str, ...] | list[str]) -> None:
    """Put `paths` back to their original version; a path absent from the original is deleted."""
    if paths:
        check(sb.exec(f"{git_env_line()}; {_restore_cmd(paths)}", timeout=60, user="root"),
              f"restoring {len(paths)} file(s) from {BASE_TAG}")


NO_BYTECODE = ("find . -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null; "
               "export PYTHONDONTWRITEBYTECODE=1")
"""Shell line run before a suite: bytecode caches go stale when an edit keeps a file's size within the
same second as its cached .pyc (e.g. `+= 1` -> `+= 2` right after a reset), and Python would run the
old code. So no caches at all."""

_SAFE_FILE = """safe_file() {  # a regular file reached through no symlink: root may append to it
  local p=. c parts; IFS=/ read -ra parts <<< "$1"
  for c in "${parts[@]}"; do p="$p/$c"; [ -L "$p" ] && return 1; done
  [ -f "$p" ]
}"""


def job_command(job: Job, *, marker: str, canary: Canary, perturb: tuple[str, ...] = (),
                canary_files: tuple[str, ...] = (), suite_timeout: float, max_output: int = MAX_TEST_OUTPUT) -> str:
    """The root bash job: [clean] -> [report missing originals] -> apply `job.patches` (staged file names)
    -> restore `job.restore` -> perturb/canaries -> script as RUNNER_UID -> kill RUNNER_UID -> ship the log;
    then try applying `job.check_after`."""
    s, m = SCRATCH, marker
    missing, restore, check_after = job.missing, job.restore, job.check_after
    lines = [git_env_line(), kill_uid_shell(RUNNER_UID), _SAFE_FILE]
    if job.clean:
        lines.append(f"git reset -q --hard {BASE_TAG} && git clean -qfd || exit 90")
    lines.append(NO_BYTECODE)
    if missing:
        quoted = " ".join(shlex.quote(p) for p in missing)
        lines.append(f"i=0; for f in {quoted}; do git cat-file -e {BASE_TAG}:\"$f\" 2>/dev/null "
                     f"|| echo \"{m} MISSING $i\"; i=$((i + 1)); done")
    for name in job.patches:
        lines.append(f"git apply --whitespace=nowarn -- {s}/{name} > {s}/apply.err 2>&1 "
                     f"|| {{ echo \"{m} APPLY {name}\"; head -c 2000 {s}/apply.err | base64 -w0; echo; exit 0; }}")
    if restore:
        lines.append(_restore_cmd(restore))
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
        "start=$EPOCHREALTIME",
        # bash reads the script through fd 3 (the file sits in a root-only folder); stdout and stderr go
        # into the pipe only, so nothing the script prints reaches this job's own output.
        f"timeout -k 5 {suite_timeout:g} {drop_privileges(RUNNER_UID)} bash /dev/fd/3 < /dev/null >&4 2>&4 4>&-; rc=$?",
        "end=$EPOCHREALTIME",
        "exec 3<&- 4>&-",
        f"killuid || {{ echo \"{m} UNKILLABLE\"; kill -9 $rd; }}",  # then the reader must not wait on it
        "wait $rd",
        f"echo \"{m} SCRIPT $rc $start $end $(stat -c %s {s}/output.log)\"",
        f"gzip -1 -c {s}/output.log > {s}/output.gz || exit 91",
        f"if [ $(stat -c %s {s}/output.gz) -le {_INLINE} ]; then echo \"{m} OUTPUT\"; base64 -w0 {s}/output.gz; "
        f"echo; else echo \"{m} OUTFILE\"; fi",
    ]
    if check_after:  # on the original tree: the appended tokens and canaries would shift end-of-file hunks
        lines.append(f"git reset -q --hard {BASE_TAG} || exit 90")
    for name in check_after:
        lines.append(f"git apply --whitespace=nowarn -- {s}/{name} > {s}/apply.err 2>&1 "
                     f"|| {{ echo \"{m} CHECK {name}\"; head -c 2000 {s}/apply.err | base64 -w0; echo; }}")
    lines.append(f"echo \"{m} END\"")
    return "\n".join(lines)


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
        elif kind == "SCRIPT":
            found["script"] = (args[0], float(args[2]) - float(args[1]), int(args[3]))
        elif kind == "OUTPUT":
            found["output"] = nxt
        elif kind in ("OUTFILE", "UNKILLABLE"):
            found[kind.lower()] = True
        elif kind == "END":
            found["end"] = True
    return found


def _died(why: str) -> SuiteRun:
    return SuiteRun(None, f"the suite job did not finish: {why}", died=True)


@dataclass(frozen=True)
class Collected:
    """A finished job whose test output still has to go through the parser (see `parse_collected`)."""

    canary: Canary
    log: bytes
    parse_twice: bool
    fields: dict


def run_job(sb: Sandbox, artifact: BugArtifact, job: Job = Job(), *, suite_timeout: float, parser_timeout: float,
            max_output: int = MAX_TEST_OUTPUT, stage: dict[str, str] | None = None) -> SuiteRun:
    """Run one job (see `job_command`) in `sb` and parse its output in a parser box. The scratch folder
    was staged with `prepare`, or `stage` (see `staged_files`) is staged by the job itself (one exec
    fewer). Never raises for what the artifact or the prediction did."""
    done = exec_job(sb, artifact, job, suite_timeout=suite_timeout, max_output=max_output, stage=stage)
    return done if isinstance(done, SuiteRun) else parse_collected(done, artifact, parser_timeout)


def exec_job(sb: Sandbox, artifact: BugArtifact, job: Job = Job(), *, suite_timeout: float,
             max_output: int = MAX_TEST_OUTPUT, stage: dict[str, str] | None = None) -> SuiteRun | Collected:
    """The repo-sandbox half of `run_job`: a SuiteRun when the run ended without output to parse (a diff
    did not apply, the script timed out or flooded, the job died), else the collected output. Once it
    returns, `sb` is free for the next job while the output is parsed."""
    marker, canary = f"__sp{uuid.uuid4().hex}__", Canary.new()
    py = lambda paths: tuple(p for p in paths if p.endswith(".py"))  # noqa: E731
    cmd = job_command(job, marker=marker, canary=canary, suite_timeout=suite_timeout, max_output=max_output,
                      perturb=py(touched_files(artifact.bug_inject)), canary_files=py(artifact.test_files))
    if stage is not None:
        cmd = f"{_UNPACK} || exit 90\n{cmd}"
    try:
        res = sb.exec(cmd, timeout=suite_timeout + 120, user="root",
                      stdin=None if stage is None else _tarball(stage))
    except SandboxError as exc:
        return _died(f"the sandbox failed ({exc})")
    found = parse_job_output(res.output, marker, job.missing)
    missing = tuple(found["missing"])
    if "apply" in found:
        return SuiteRun(None, f"{found['apply_name']} does not apply", apply_error=found["apply"], missing=missing)
    if res.timed_out or not found["end"] or "script" not in found:
        return _died(f"exit {res.exit_code}, timed out: {res.timed_out}")
    rc, duration, size = found["script"]
    try:
        raw = (base64.b64decode(found["output"], validate=True) if "output" in found
               else sb.read_file(f"{SCRATCH}/output.gz", user="root", max_bytes=max_output + (1 << 20)))
        log_bytes = gzip.decompress(raw)
    except Exception as exc:  # our own encoding: a failure here is the sandbox's
        return _died(f"the test output could not be collected ({exc.__class__.__name__}: {exc})")
    fields = dict(duration=duration, apply_error=found.get("check"), missing=missing, script_exit=int(rc),
                  check_failed=found.get("check_name"),
                  output_tail=log_bytes[-1500:].decode("utf-8", "replace"))
    if rc in ("124", "137"):
        return SuiteRun(None, f"test_script.sh did not finish within {suite_timeout:g}s", timed_out=True, **fields)
    if size > max_output:
        return SuiteRun(None, f"test_script.sh printed more than {max_output} bytes (output flood); keep the "
                              "test output under the cap", **fields)
    return Collected(canary, log_bytes, job.parse_twice, fields)


def parse_collected(done: Collected, artifact: BugArtifact, parser_timeout: float) -> SuiteRun:
    """The parser-box half of `run_job`: parse, check determinism and the canaries."""
    runs = parse_output(artifact.test_parser, done.log, runs=2 if done.parse_twice else 1, timeout=parser_timeout)
    if runs is None:
        raise ValidationInfraError("the parser box failed twice in a row (not the artifact's doing: it runs "
                                   "even a crashing parser fine); check the Docker engine")
    error = _parser_error(runs, parser_timeout)
    if error is None and done.parse_twice and runs[0].stdout != runs[1].stdout:
        error = "test_parser.py gave two different maps for the same output"
    if error is None:
        try:
            statuses = parse_status_map(runs[0].stdout.decode("utf-8", "replace"))
        except ParserOutputError as exc:
            error = f"test_parser.py output is invalid: {exc}"
    if error is not None:
        return SuiteRun(None, error, **done.fields)
    real, integrity = done.canary.split(statuses)
    log.debug("suite job: %.2fs, %d tests, integrity %s", done.fields["duration"], len(real), integrity)
    return SuiteRun(real, None, integrity=integrity, **done.fields)


def _parser_error(runs, parser_timeout: float) -> str | None:
    for run in runs:
        if run.exit_code in (124, 137):
            return (f"test_parser.py did not finish within {parser_timeout:g}s (it must read stdin to EOF "
                    "and exit)")
        if run.exit_code != 0:
            return f"test_parser.py exited with {run.exit_code}: {run.stderr.decode('utf-8', 'replace')[-600:]}"
        if run.flooded:
            return "test_parser.py printed more than the cap on stdout"
    return None


def run_suite(sb: Sandbox, artifact: BugArtifact, *, suite_timeout: float, parser_timeout: float,
              parse_twice: bool = False) -> SuiteRun:
    """Run the staged script on the tree as it is (no clean, no patches) and parse its output."""
    return run_job(sb, artifact, Job(clean=False, parse_twice=parse_twice), suite_timeout=suite_timeout,
                   parser_timeout=parser_timeout)
