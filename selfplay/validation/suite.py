"""One run of an artifact's test suite inside a sandbox: the I/O both validation and grading share.

The artifact's test_script.sh and test_parser.py are written from the artifact into a scratch folder
outside the repo, so nothing in the repo (which a bug or a prediction may have changed) can stand in
for them. The parser runs with `python3 -I` from that folder, so the repo is not on its sys.path.

Speed: a run is one `docker exec` of a generated bash job (clean the tree with git, apply the staged
diffs, restore paths, run the script under `timeout`, run the parser under `timeout`, print the map),
and staging all files is one more exec. Per-call overhead (~0.1 s each) would otherwise cost more than
a whole toolz suite run. Between runs of one validation the tree is cleaned with `git reset --hard`
and `git clean -fd` instead of a full sandbox reset.
"""

from __future__ import annotations

import base64
import io
import logging
import shlex
import tarfile
from dataclasses import dataclass, field

from sandboxes.sandbox import Sandbox
from selfplay.artifact import BugArtifact
from selfplay.errors import ValidationInfraError
from selfplay.grading import ParserOutputError, parse_status_map

log = logging.getLogger(__name__)

BASE_REF = "selfplay-base"
"""Git tag of the original commit in every repo image (see sandboxes.images)."""
SCRATCH = "/tmp/selfplay-artifact"
"""Where the artifact's script, parser, diffs and the raw output live inside the sandbox (outside the repo)."""
_MARK = "__selfplay__"


@dataclass(frozen=True)
class SuiteRun:
    """Outcome of one job: test_script.sh piped through test_parser.py (after patches and restores)."""

    statuses: dict[str, str] | None
    """The parsed map; None when a patch did not apply, the script timed out or the parser failed."""
    error: str | None = None
    """Why there is no map (patch, script timeout, parser crash, parser timeout, bad JSON)."""
    duration: float = 0.0
    """Seconds the script took."""
    output_tail: str = ""
    """Last lines of the script's output, for error messages."""
    apply_error: str | None = None
    """Set when a staged diff did not apply: `name: git's message`."""
    missing: tuple[str, ...] = ()
    """Paths asked about with `missing=` that do not exist in the original commit."""
    extra: dict[str, str] = field(default_factory=dict)


def check(result, what: str) -> None:
    """Raise ValidationInfraError when a bookkeeping command (not the artifact's) failed."""
    if not result.ok:
        raise ValidationInfraError(f"{what} failed in the sandbox (exit {result.exit_code}): "
                                   f"{result.output[-500:]}")


def stage(sb: Sandbox, files: dict[str, str]) -> None:
    """Write `files` (name -> text) into the scratch folder with one exec (a tarball on stdin)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in files.items():
            data = text.encode("utf-8", "surrogateescape")
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    payload = base64.b64encode(buf.getvalue()).decode()
    check(sb.exec(f"mkdir -p {SCRATCH} && base64 -d | tar -x -C {SCRATCH}", timeout=60, stdin=payload),
          "staging the artifact files")


def prepare(sb: Sandbox, artifact: BugArtifact, **extra: str) -> None:
    """Stage the artifact's script, parser and diffs (plus `extra` files) in the scratch folder."""
    stage(sb, {"test_script.sh": artifact.test_script, "test_parser.py": artifact.test_parser,
               "bug_inject.diff": artifact.bug_inject, "test_weaken.diff": artifact.test_weaken, **extra})


def _restore_cmd(paths: tuple[str, ...] | list[str]) -> str:
    quoted = " ".join(shlex.quote(p) for p in paths)
    return (f"for f in {quoted}; do if git cat-file -e {BASE_REF}:\"$f\" 2>/dev/null; "
            f"then git checkout -q {BASE_REF} -- \"$f\" || exit 90; else rm -rf -- \"$f\"; fi; done")


def restore_paths(sb: Sandbox, paths: tuple[str, ...] | list[str]) -> None:
    """Put `paths` back to their original version; a path absent from the original is deleted."""
    if paths:
        check(sb.exec(_restore_cmd(paths), timeout=60), f"restoring {len(paths)} file(s) from {BASE_REF}")


NO_BYTECODE = ("find . -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null; "
               "export PYTHONDONTWRITEBYTECODE=1")
"""Shell line run before a suite: bytecode caches go stale when an edit keeps a file's size within the
same second as its cached .pyc (e.g. `+= 1` -> `+= 2` right after a reset), and Python would run the
old code. So no caches at all."""


def job_command(*, patches: tuple[str, ...] = (), restore: tuple[str, ...] = (), clean: bool = True,
                missing: tuple[str, ...] = (), parse_twice: bool = False, check_after: tuple[str, ...] = (),
                suite_timeout: float, parser_timeout: float) -> str:
    """The bash job: [clean] -> [report missing originals] -> apply `patches` (staged file names) ->
    restore `restore` -> script -> parser (twice) -> print the map; then try applying `check_after`."""
    s, m = SCRATCH, _MARK
    lines = ["export GIT_PAGER=cat GIT_OPTIONAL_LOCKS=0"]
    if clean:
        lines.append(f"git reset -q --hard {BASE_REF} && git clean -qfd || exit 90")
    lines.append(NO_BYTECODE)
    if missing:
        quoted = " ".join(shlex.quote(p) for p in missing)
        lines.append(f"for f in {quoted}; do git cat-file -e {BASE_REF}:\"$f\" 2>/dev/null "
                     f"|| echo \"{m}MISSING $f\"; done")
    for name in patches:
        lines.append(f"git apply --whitespace=nowarn -- {s}/{name} > {s}/apply.err 2>&1 "
                     f"|| {{ echo \"{m}APPLY {name}\"; cat {s}/apply.err; exit 0; }}")
    if restore:
        lines.append(_restore_cmd(restore))
    lines += [
        "start=$(date +%s.%N)",
        f"timeout -k 5 {suite_timeout:g} bash {s}/test_script.sh > {s}/output.log 2>&1; rc=$?",
        f"echo \"{m}SCRIPT $rc $start $(date +%s.%N)\"",
        f"if [ $rc = 124 ] || [ $rc = 137 ]; then echo \"{m}TAIL\"; tail -c 1500 {s}/output.log; exit 0; fi",
    ]
    runs = 2 if parse_twice else 1
    for i in range(runs):
        lines += [f"(cd {s} && timeout -k 2 {parser_timeout:g} python3 -I {s}/test_parser.py "
                  f"< {s}/output.log > {s}/parsed{i}.json 2> {s}/parser.err); prc=$?",
                  f"if [ $prc != 0 ]; then echo \"{m}PARSER $prc\"; tail -c 600 {s}/parser.err; "
                  f"echo \"{m}TAIL\"; tail -c 1500 {s}/output.log; exit 0; fi"]
    if parse_twice:
        lines.append(f"cmp -s {s}/parsed0.json {s}/parsed1.json || echo \"{m}NONDETERMINISTIC\"")
    for name in check_after:
        lines.append(f"git apply --whitespace=nowarn -- {s}/{name} > {s}/apply.err 2>&1 "
                     f"|| {{ echo \"{m}CHECK {name}\"; cat {s}/apply.err; exit 0; }}")
    lines += [f"echo \"{m}JSON\"", f"cat {s}/parsed0.json"]
    return "\n".join(lines)


def _sections(output: str) -> list[tuple[str, str]]:
    """Split the job's output at marker lines into (marker line, text up to the next marker)."""
    out: list[tuple[str, str]] = []
    for chunk in output.split(_MARK)[1:]:
        head, _, body = chunk.partition("\n")
        out.append((head, body))
    return out


def parse_job_output(output: str, *, suite_timeout: float, parser_timeout: float) -> SuiteRun:
    """Turn the job's marked output into a SuiteRun."""
    missing, duration, tail, error, apply_error, extra = [], 0.0, "", None, None, {}
    for head, body in _sections(output):
        kind, *args = head.split(" ")
        if kind == "MISSING":
            missing.append(head.partition(" ")[2])
        elif kind in ("APPLY", "CHECK"):
            apply_error = f"{args[0]}: {body.strip()[:600]}"
            if kind == "APPLY":
                return SuiteRun(None, f"{args[0]} does not apply", 0.0, "", apply_error, tuple(missing))
            extra["check_failed"] = args[0]
        elif kind == "SCRIPT":
            rc, start, end = args
            duration, extra["script_exit"] = float(end) - float(start), rc
            if rc in ("124", "137"):
                error = f"test_script.sh did not finish within {suite_timeout:g}s"
        elif kind == "PARSER":
            rc = args[0]
            error = (f"test_parser.py did not finish within {parser_timeout:g}s (it must read stdin to EOF "
                     "and exit)" if rc in ("124", "137") else f"test_parser.py exited with {rc}: {body.strip()}")
        elif kind == "TAIL":
            tail = body
        elif kind == "NONDETERMINISTIC":
            error = "test_parser.py gave two different maps for the same output"
        elif kind == "JSON" and error is None:
            try:
                statuses = parse_status_map(body)
            except ParserOutputError as exc:
                error = f"test_parser.py output is invalid: {exc}"
            else:
                return SuiteRun(statuses, None, duration, tail, apply_error, tuple(missing), extra)
    return SuiteRun(None, error or "the job printed no result", duration, tail, apply_error, tuple(missing), extra)


def run_job(sb: Sandbox, *, suite_timeout: float, parser_timeout: float, **job) -> SuiteRun:
    """Run one job (see `job_command`) in `sb`, whose scratch folder was staged with `prepare`."""
    cmd = job_command(suite_timeout=suite_timeout, parser_timeout=parser_timeout, **job)
    res = sb.exec(cmd, timeout=suite_timeout + 2 * parser_timeout + 120)
    if res.timed_out or res.exit_code != 0:
        raise ValidationInfraError(f"a suite job failed in the sandbox (exit {res.exit_code}, "
                                   f"timed out: {res.timed_out}): {res.output[-500:]}")
    run = parse_job_output(res.output, suite_timeout=suite_timeout, parser_timeout=parser_timeout)
    log.debug("suite job: %.2fs, %s", run.duration, f"{len(run.statuses)} tests" if run.statuses else run.error)
    return run


def run_suite(sb: Sandbox, *, suite_timeout: float, parser_timeout: float, parse_twice: bool = False) -> SuiteRun:
    """Run the staged script on the tree as it is (no clean, no patches) and parse its output."""
    return run_job(sb, suite_timeout=suite_timeout, parser_timeout=parser_timeout, clean=False,
                   parse_twice=parse_twice)
