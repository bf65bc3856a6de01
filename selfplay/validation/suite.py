"""One run of an artifact's test suite inside a sandbox: the I/O both validation and grading share.

The artifact's test_script.sh and test_parser.py are written from the artifact into a scratch folder
outside the repo, so nothing in the repo (which a bug or a prediction may have changed) can stand in
for them. The parser runs with `python3 -I` from that folder, so the repo is not on its sys.path.
"""

from __future__ import annotations

import logging
import shlex
import time
from dataclasses import dataclass, field

from sandboxes.sandbox import Sandbox
from selfplay.artifact import BugArtifact
from selfplay.errors import ValidationInfraError
from selfplay.grading import ParserOutputError, parse_status_map

log = logging.getLogger(__name__)

BASE_REF = "selfplay-base"
"""Git tag of the original commit in every repo image (see sandboxes.images)."""
SCRATCH = "/tmp/selfplay-artifact"
"""Where the artifact's script, parser and the raw output live inside the sandbox (outside the repo)."""


@dataclass(frozen=True)
class SuiteRun:
    """Outcome of test_script.sh piped through test_parser.py."""

    statuses: dict[str, str] | None
    """The parsed map; None when the script timed out or the parser failed."""
    error: str | None = None
    """Why there is no map (script timeout, parser crash, parser timeout, bad JSON)."""
    duration: float = 0.0
    """Seconds the script took."""
    output_tail: str = ""
    """Last lines of the script's output, for error messages."""
    extra: dict[str, str] = field(default_factory=dict)


def prepare(sb: Sandbox, artifact: BugArtifact) -> None:
    """Write the artifact's script and parser into the scratch folder (again after every reset)."""
    sb.write_file(f"{SCRATCH}/test_script.sh", artifact.test_script)
    sb.write_file(f"{SCRATCH}/test_parser.py", artifact.test_parser)


def check(result, what: str) -> None:
    """Raise ValidationInfraError when a bookkeeping command (not the artifact's) failed."""
    if not result.ok:
        raise ValidationInfraError(f"{what} failed in the sandbox (exit {result.exit_code}): "
                                   f"{result.output[-500:]}")


def restore_paths(sb: Sandbox, paths: tuple[str, ...] | list[str]) -> None:
    """Put `paths` back to their original version; a path absent from the original is deleted."""
    if not paths:
        return
    quoted = " ".join(shlex.quote(p) for p in paths)
    cmd = (f"for f in {quoted}; do if git cat-file -e {BASE_REF}:\"$f\" 2>/dev/null; "
           f"then git checkout -q {BASE_REF} -- \"$f\"; else rm -rf -- \"$f\"; fi; done")
    check(sb.exec(cmd, timeout=60), f"restoring {len(paths)} file(s) from {BASE_REF}")


def missing_files(sb: Sandbox, paths: tuple[str, ...]) -> list[str]:
    """Which of `paths` do not exist as files in the original commit."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    res = sb.exec(f"for f in {quoted}; do git cat-file -e {BASE_REF}:\"$f\" 2>/dev/null || echo \"$f\"; done",
                  timeout=60)
    check(res, "listing the original test files")
    return [line for line in res.output.splitlines() if line.strip()]


def run_parser(sb: Sandbox, timeout: float) -> tuple[dict[str, str] | None, str | None]:
    res = sb.exec(f"python3 -I {SCRATCH}/test_parser.py < {SCRATCH}/output.log 2>{SCRATCH}/parser.err",
                  timeout=timeout, workdir=SCRATCH)
    if res.timed_out:
        return None, f"test_parser.py did not finish within {timeout:g}s (it must read stdin to EOF and exit)"
    if res.exit_code != 0:
        err = sb.exec(f"tail -c 600 {SCRATCH}/parser.err", timeout=30).output.strip()
        return None, f"test_parser.py exited with {res.exit_code}: {err or res.output[-300:]}"
    try:
        return parse_status_map(res.output), None
    except ParserOutputError as exc:
        return None, f"test_parser.py output is invalid: {exc}"


def run_suite(sb: Sandbox, *, suite_timeout: float, parser_timeout: float, parse_twice: bool = False) -> SuiteRun:
    """Run the prepared script from the repo root and parse its output.

    With `parse_twice` the parser runs a second time on the same output, and a different map is an error
    (a parser must be a function of its input).
    """
    start = time.monotonic()
    res = sb.exec(f"bash {SCRATCH}/test_script.sh > {SCRATCH}/output.log 2>&1", timeout=suite_timeout)
    duration = time.monotonic() - start
    tail = sb.exec(f"tail -c 1500 {SCRATCH}/output.log", timeout=30).output
    if res.timed_out:
        return SuiteRun(None, f"test_script.sh did not finish within {suite_timeout:g}s", duration, tail)
    statuses, error = run_parser(sb, parser_timeout)
    if statuses is not None and parse_twice:
        again, error2 = run_parser(sb, parser_timeout)
        if again != statuses:
            return SuiteRun(None, error2 or "test_parser.py gave two different maps for the same output",
                            duration, tail)
    log.debug("suite run: %.2fs, %s tests", duration, len(statuses) if statuses else "no")
    return SuiteRun(statuses, error, duration, tail, {"script_exit": str(res.exit_code)})
