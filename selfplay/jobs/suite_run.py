"""`run_job`: one run of an artifact's test suite inside a sandbox, the engine that validation, grading,
higher-order tasks and procedural seeding share.

A run is one `docker exec` of a generated bash job, run as root (the grader) in a repo sandbox, then one
exec in a parser box (`selfplay.jobs.parser_box`):
  root: clean the tree with git (the grader-owned git dir, hooks and configuration off:
        `sandboxes.shell.GIT_SAFE`), apply the staged diffs, restore oracle test files, append a
        neutral comment with a fresh token to each Python bug file and the canary tests
        (`selfplay.jobs.canary`) to each Python oracle test file;
  RUNNER_UID: test_script.sh under `timeout`, its stdout+stderr through a pipe into a capped root-only
        log (a pipe: the code under test cannot seek or truncate it); the repo is read-only to it;
  root: SIGKILL every RUNNER_UID process with bash builtins (works under a fork bomb), then collect
        the log; a process holding the pipe is dead by then, so the job never waits on it;
  parser box: test_parser.py on the log, as PARSER_UID, with nothing else to read.
A `Job(verify=True)` also leaves a copy of the patched tree for a verification run; the caller asks for
that run (`verify_run`: one more exec in the same sandbox, then one in a parser box) only when the main
verdict needs it, before the sandbox runs anything else (`selfplay.jobs.verification`).

Class 5 of docs/security.md (model output forging an infrastructure error): marker lines carry a random token per
job, and every model-controlled text (the test output, git's messages about model diffs, the parser's
stdout/stderr) crosses to the host base64-encoded, so nothing the model prints can be read as a marker.
A job that does not finish (killed, hung, sandbox gone) comes back as `SuiteRun.died`, never as an
exception: the grader and the validator decide whose fault it is with a control run.

Every run looks the same from inside, whether validation or grading: same tokens appended, same uids,
same parser box. Staged artifact files live in SCRATCH (root-only).
"""

from __future__ import annotations

import base64
import gzip
import logging
import uuid
from dataclasses import dataclass, replace

from sandboxes.errors import SandboxError
from sandboxes.sandbox import Sandbox
from selfplay.artifact import BugArtifact
from selfplay.diffs import touched_files
from selfplay.errors import ValidationInfraError
from selfplay.jobs.canary import Canary
from selfplay.jobs.job import MAX_TEST_OUTPUT, SCRATCH, Job, job_command, parse_job_output, verify_command
from selfplay.jobs.parser_box import parse_output
from selfplay.jobs.staging import UNPACK, tarball
from selfplay.jobs.verification import Verification
from selfplay.judge.verdict import ParserOutputError, parse_status_map

log = logging.getLogger(__name__)


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
    offsets: tuple[tuple[str, str], ...] = ()
    """(staged name, git's `Hunk #N succeeded at L (offset K lines).` lines) of each `Job.check_after` diff
    that git applied only away from the lines its hunk headers name: its headers do not say where it
    changes the file."""
    died: bool = False
    """The job itself did not finish (killed, hung past its own timeout, sandbox gone): whose fault it
    is takes a control run to tell."""
    timed_out: bool = False
    """test_script.sh ran past the suite timeout."""
    integrity: str = ""
    """The canary verdict: "ok", "inconclusive: ...", "tampered: ..." ("" when nothing was parsed)."""
    cpu_time: float | None = None
    """CPU seconds test_script.sh and the processes it waited for used (None when not measured)."""
    verification: SuiteRun | None = None
    """The verification run (`verify_run`): its own map, error, duration and CPU time; None when none ran
    (the job did not ask, the main run ended first, or the caller did not need it)."""
    pending: Verification | None = None
    """The verification copy a `Job(verify=True)` left in the sandbox, waiting for `verify_run`; None once
    verified, or when no copy is left (the main run timed out, or the job made none)."""

    @property
    def tampered(self) -> str | None:
        """The canary verdict when it says the run was tampered with, else None."""
        return self.integrity if self.integrity.startswith("tampered") else None


def _died(why: str) -> SuiteRun:
    return SuiteRun(None, f"the suite job did not finish: {why}", died=True)


@dataclass(frozen=True)
class Collected:
    """A finished job whose test output still has to go through the parser (see `parse_collected`)."""

    canary: Canary
    log: bytes
    parse_twice: bool
    fields: dict
    pending: Verification | None = None
    """The verification copy the job left in the sandbox (`SuiteRun.pending`)."""


def run_job(sb: Sandbox, artifact: BugArtifact, job: Job = Job(), *, suite_timeout: float, parser_timeout: float,
            max_output: int = MAX_TEST_OUTPUT, stage: dict[str, str] | None = None,
            cpu_limit: float | None = None) -> SuiteRun:
    """Run one job (see `job_command`) in `sb` and parse its output in a parser box. The scratch folder
    was staged with `prepare`, or `stage` (see `staged_files`) is staged by the job itself (one exec
    fewer). `cpu_limit`: CPU seconds each run may use (more ends it as timed out). Never raises for what
    the artifact or the prediction did. A `Job(verify=True)`'s run comes back with `pending` set: pass it
    to `verify_run` when its verdict needs the verification run."""
    done = exec_job(sb, artifact, job, suite_timeout=suite_timeout, max_output=max_output, stage=stage,
                    cpu_limit=cpu_limit)
    return done if isinstance(done, SuiteRun) else parse_collected(done, artifact, parser_timeout)


def exec_job(sb: Sandbox, artifact: BugArtifact, job: Job = Job(), *, suite_timeout: float,
             max_output: int = MAX_TEST_OUTPUT, stage: dict[str, str] | None = None,
             cpu_limit: float | None = None) -> SuiteRun | Collected:
    """The repo-sandbox half of `run_job`: a SuiteRun when the run ended without output to parse (a diff
    did not apply, the script timed out or flooded, the job died), else the collected output. Once it
    returns, `sb` is free for the next job while the output is parsed, unless the run may need its
    verification run: the next job deletes the copy (`Collected.pending`) that `verify_run` needs."""
    marker, canary = f"__sp{uuid.uuid4().hex}__", Canary.new()
    copy = Verification.new() if job.verify else None
    py = lambda paths: tuple(p for p in paths if p.endswith(".py"))  # noqa: E731
    cmd = job_command(job, marker=marker, canary=canary, suite_timeout=suite_timeout, max_output=max_output,
                      perturb=py(touched_files(artifact.bug_inject)), canary_files=py(artifact.test_files),
                      verification=copy, cpu_limit=cpu_limit)
    if stage is not None:
        cmd = f"{UNPACK} || exit 90\n{cmd}"
    try:
        res = sb.exec(cmd, timeout=suite_timeout + 30 + 90, user="root",
                      stdin=None if stage is None else tarball(stage))
    except SandboxError as exc:
        return _died(f"the sandbox failed ({exc})")
    found = parse_job_output(res.output, marker, job.missing)
    missing = tuple(found["missing"])
    if "apply" in found:
        return SuiteRun(None, f"{found['apply_name']} does not apply", apply_error=found["apply"], missing=missing)
    if res.timed_out or not found["end"] or "script" not in found:
        return _died(f"exit {res.exit_code}, timed out: {res.timed_out}")
    main = _collect(sb, found, "", suite_timeout, max_output, cpu_limit,
                    dict(apply_error=found.get("check"), missing=missing, check_failed=found.get("check_name"),
                         offsets=tuple(found.get("offsets", ()))))
    if isinstance(main, SuiteRun):
        return main
    return Collected(canary, main[0], job.parse_twice, main[1], pending=copy)


def verify_run(sb: Sandbox, artifact: BugArtifact, run: SuiteRun, *, suite_timeout: float, parser_timeout: float,
               max_output: int = MAX_TEST_OUTPUT, cpu_limit: float | None = None) -> SuiteRun:
    """`run` with its verification run (`selfplay.jobs.verification`): one exec in `sb`, the sandbox whose
    last job made `run.pending`, then one parser-box call. The verification's own failures (timed out,
    flooded, died, parser errors) are in `verification`; never raises for what the artifact or the
    prediction did. Raises ValidationInfraError when the copy is gone (`sb` ran another job or a reset
    since), and ValueError when `run` has no pending copy."""
    if run.pending is None:
        raise ValueError("verify_run: the run has no verification copy (a Job(verify=True) run that finished)")
    got = exec_verification(sb, artifact, run.pending, suite_timeout=suite_timeout, max_output=max_output,
                            cpu_limit=cpu_limit)
    return replace(run, pending=None, verification=parse_verification(got, artifact, parser_timeout))


def exec_verification(sb: Sandbox, artifact: BugArtifact, pending: Verification, *, suite_timeout: float,
                      max_output: int = MAX_TEST_OUTPUT, cpu_limit: float | None = None) -> SuiteRun | tuple[bytes, dict]:
    """The repo-sandbox half of `verify_run`: the verification run of the copy `pending`, as a SuiteRun
    when it ended without output to parse, else its log and fields for `parse_verification`. Validation
    calls it while the main run's output is still being parsed (`ValidationConfig.speculative_verification`)."""
    marker = f"__sp{uuid.uuid4().hex}__"
    py = tuple(p for p in (*artifact.test_files, *touched_files(artifact.bug_inject)) if p.endswith(".py"))
    cmd = verify_command(pending, marker=marker, restored=py, suite_timeout=suite_timeout,
                         max_output=max_output, cpu_limit=cpu_limit)
    try:
        res = sb.exec(cmd, timeout=suite_timeout + 30 + 90, user="root")
    except SandboxError as exc:
        return _died(f"the sandbox failed ({exc})")
    found = parse_job_output(res.output, marker)
    if found.get("nocopy"):
        raise ValidationInfraError(f"the verification copy {pending.root} is gone from sandbox {sb}: the "
                                   "sandbox ran another job or a reset after the main run (a caller's bug)")
    if res.timed_out or not found["end"] or "vscript" not in found:
        return _died(f"the verification run did not report (exit {res.exit_code}, timed out: {res.timed_out})")
    return _collect(sb, found, "v", suite_timeout, max_output, cpu_limit, {})


def parse_verification(got: SuiteRun | tuple[bytes, dict], artifact: BugArtifact, parser_timeout: float) -> SuiteRun:
    """The parser-box half of `verify_run`: the verification run's SuiteRun from `exec_verification`."""
    if isinstance(got, SuiteRun):
        return got
    runs = parse_output(artifact.test_parser, got[0], timeout=parser_timeout)
    if runs is None:
        raise ValidationInfraError("the parser box failed twice in a row on the verification run's output; "
                                   "check the Docker engine")
    return _parsed(runs[0], got[1], parser_timeout)


def _collect(sb: Sandbox, found: dict, prefix: str, suite_timeout: float, max_output: int,
             cpu_limit: float | None, extra: dict) -> SuiteRun | tuple[bytes, dict]:
    """One run's log and fields (`prefix` "" for the main run, "v" for the verification run), or the
    SuiteRun that ends it (timed out, over the CPU budget, flooded, not collectable)."""
    rc, duration, size = found[f"{prefix}script"]
    name = "verify" if prefix else "output"
    try:
        raw = (base64.b64decode(found[f"{prefix}output"], validate=True) if f"{prefix}output" in found
               else sb.read_file(f"{SCRATCH}/{name}.gz", user="root", max_bytes=max_output + (1 << 20)))
        log_bytes = gzip.decompress(raw)
    except Exception as exc:  # our own encoding: a failure here is the sandbox's
        return _died(f"the test output could not be collected ({exc.__class__.__name__}: {exc})")
    cpu = found.get(f"{prefix}cpu")
    which = "the verification run of test_script.sh" if prefix else "test_script.sh"
    fields = dict(duration=duration, script_exit=int(rc), cpu_time=cpu,
                  output_tail=log_bytes[-1500:].decode("utf-8", "replace"), **extra)
    if rc in ("124", "137"):
        return SuiteRun(None, f"{which} did not finish within {suite_timeout:g}s", timed_out=True, **fields)
    if cpu_limit is not None and (rc in ("152", "158") or (cpu is not None and cpu > cpu_limit)):
        return SuiteRun(None, f"{which} used {cpu or 0:.1f}s of CPU, over its budget of {cpu_limit:g}s",
                        timed_out=True, **fields)
    if size > max_output:
        return SuiteRun(None, f"{which} printed more than {max_output} bytes (output flood); keep the "
                              "test output under the cap", **fields)
    return log_bytes, fields


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
        return SuiteRun(None, error, pending=done.pending, **done.fields)
    real, integrity = done.canary.split(statuses)
    log.debug("suite job: %.2fs, %d tests, integrity %s", done.fields["duration"], len(real), integrity)
    return SuiteRun(real, None, integrity=integrity, pending=done.pending, **done.fields)


def _parsed(run, fields: dict, parser_timeout: float) -> SuiteRun:
    """The verification run's SuiteRun from its parser run (it has no canaries: their ids, which a script
    that cds into the workdir may still report, are dropped by the main run's split only)."""
    error = _parser_error([run], parser_timeout)
    if error is None:
        try:
            return SuiteRun(parse_status_map(run.stdout.decode("utf-8", "replace")), None, **fields)
        except ParserOutputError as exc:
            error = f"test_parser.py output is invalid: {exc}"
    return SuiteRun(None, f"on the verification run's output: {error}", **fields)


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
