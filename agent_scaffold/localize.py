"""The solver's `localize` tool: spectrum-based fault localization over the spec's tests.

The spec's tests are put back (`git apply` of the spec the solver was given, unless they already are), run
once under a line tracer (`line_spectrum.py`, a pytest plugin run in the sandbox), and put back as they
were. Each line of non-test code the failing tests ran is scored by Ochiai, ef / sqrt(F * (ef + ep)) (ef,
ep: the failing and passing tests that ran it; F: all failing tests), as AutoCodeRover ranks lines when a
failing test is known. The tool knows only what the solver was shown, the spec; never the bug.

`ochiai`, `read_spectrum` and `observation` are pure; `localize` runs in the sandbox as the agent uid. The
plugin's output is written by a process that runs the repository's (agent-edited) code, so it is parsed as
hostile input.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sandboxes.sandbox import Sandbox

PLUGIN = "line_spectrum"
WORK_DIR = "/tmp/.localize"
MAX_SPECTRUM_BYTES = 32 * 1024 * 1024


class LocalizeError(Exception):
    """The tool could not rank lines; the message says why and what to do, for the agent."""


@dataclass(frozen=True)
class Localizer:
    """What the `localize` tool of one solver episode runs."""

    spec: str
    """The spec diff the solver was shown (the reversed test weakening): it puts the failing tests back."""
    test_command: str
    """The pytest command, run from the workdir, that runs the spec's test files."""
    listed: int = 5
    """Lines shown, most suspicious first."""


@dataclass(frozen=True)
class Suspect:
    """One ranked line."""

    path: str
    line: int
    score: float


@dataclass(frozen=True)
class Spectrum:
    """The ranking of one run."""

    failed: int
    passed: int
    suspects: tuple[Suspect, ...]
    """Every line a failing test ran, by falling score, then path and line (file order breaks ties)."""


def ochiai(files: list[str], tests: list[tuple[bool, list[tuple[int, int]]]]) -> Spectrum:
    """Rank lines from per-test coverage: `tests` holds (failed, [(file index, line), ...]) per test."""
    failed = sum(1 for f, _ in tests if f)
    ef: dict[tuple[int, int], int] = {}
    ep: dict[tuple[int, int], int] = {}
    for f, lines in tests:
        counts = ef if f else ep
        for key in set(lines):
            counts[key] = counts.get(key, 0) + 1
    scored = [Suspect(files[i], n, e / math.sqrt(failed * (e + ep.get((i, n), 0)))) for (i, n), e in ef.items()]
    scored.sort(key=lambda s: (-s.score, s.path, s.line))
    return Spectrum(failed, len(tests) - failed, tuple(scored))


def read_spectrum(text: str) -> Spectrum:
    """The plugin's JSON ranked; ValueError when it is not what the plugin writes."""
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("files"), list) or not isinstance(data.get("tests"), list):
        raise ValueError("not a line spectrum: expected an object with `files` and `tests` lists")
    files = data["files"]
    if not all(isinstance(f, str) for f in files):
        raise ValueError("not a line spectrum: `files` holds a non-string")
    tests: list[tuple[bool, list[tuple[int, int]]]] = []
    for entry in data["tests"]:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], bool)
                and isinstance(entry[1], list)):
            raise ValueError("not a line spectrum: a test is not [failed, lines]")
        lines = []
        for pair in entry[1]:
            if not (isinstance(pair, list) and len(pair) == 2 and all(type(x) is int for x in pair)
                    and 0 <= pair[0] < len(files) and pair[1] > 0):
                raise ValueError("not a line spectrum: a line is not [file index, line number]")
            lines.append((pair[0], pair[1]))
        tests.append((entry[0], lines))
    return ochiai(files, tests)


@cache
def _plugin_source() -> str:
    """The tracer's source, read once per process (every `localize` call writes it into its sandbox)."""
    return (Path(__file__).parent / f"{PLUGIN}.py").read_text()


def _script(localizer: Localizer, timeout: float) -> str:
    spec, out, log = f"{WORK_DIR}/spec.diff", f"{WORK_DIR}/spectrum.json", f"{WORK_DIR}/pytest.log"
    # The tests get `timeout` minus a margin, so that the spec is always taken back out. Plain asserts: a
    # rewritten assert calls repr() on its operands inside the test, which would count `__repr__` as run by
    # every failing test.
    return "\n".join([
        f"rm -f {out}",
        f"if git apply --check {spec} 2>/dev/null; then git apply {spec}; applied=1",
        f"elif git apply -R --check {spec} 2>/dev/null; then applied=0",
        "else echo 'LOCALIZE: the spec does not apply'; exit 3; fi",
        f"LINE_SPECTRUM_OUT={out} PYTHONPATH={WORK_DIR}${{PYTHONPATH:+:$PYTHONPATH}} "
        f"timeout {max(5, int(timeout) - 10)} {localizer.test_command} -p {PLUGIN} -q --assert=plain >{log} 2>&1",
        f"if [ $applied = 1 ]; then git apply -R {spec}; fi",
        f"tail -n 12 {log}",
    ])


def localize(sandbox: Sandbox, localizer: Localizer, timeout: float = 120.0) -> str:
    """Run the spec's tests under the tracer and show the most suspicious lines; LocalizeError otherwise."""
    return render(sandbox, localizer, run_spectrum(sandbox, localizer, timeout))


def run_spectrum(sandbox: Sandbox, localizer: Localizer, timeout: float = 120.0) -> Spectrum:
    """The spec's tests run once under the tracer, ranked; the test files are left as they were."""
    sandbox.write_file(f"{WORK_DIR}/{PLUGIN}.py", _plugin_source(), user="agent")
    sandbox.write_file(f"{WORK_DIR}/spec.diff", localizer.spec.rstrip("\n") + "\n", user="agent")
    res = sandbox.exec(f"bash -c {shlex.quote(_script(localizer, timeout))}", timeout=timeout, user="agent")
    if "LOCALIZE: the spec does not apply" in res.output:
        raise LocalizeError("the spec's tests do not apply to the test files as they are now; put the test files "
                            "back with `git checkout -- FILE` and localize again.")
    try:
        raw = sandbox.read_file(f"{WORK_DIR}/spectrum.json", max_bytes=MAX_SPECTRUM_BYTES, user="agent")
        spectrum = read_spectrum(raw.decode("utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        tail = res.output.strip()[-1500:]
        raise LocalizeError(f"the spec's tests did not run to the end ({exc}); their output ends:\n{tail}") from None
    return spectrum


def _sources(sandbox: Sandbox, paths: Sequence[str]) -> dict[str, list[str]]:
    texts: dict[str, list[str]] = {}
    for path in paths:
        try:
            texts[path] = sandbox.read_file(f"{sandbox.workdir}/{path}", user="agent").decode(
                "utf-8", errors="replace").split("\n")
        except OSError:  # deleted or unreadable since the run: listed without its code
            texts[path] = []
    return texts


_HEAD = "The spec's tests ran with line tracing: {failed} failed, {passed} passed."
# the answer's first sentence read back (`failed_count`), spelled once with `_head`
_HEAD_RE = re.compile(re.escape(_HEAD).replace(r"\{failed\}", r"(\d+)").replace(r"\{passed\}", r"\d+"))


def _head(failed: int, passed: int) -> str:
    return _HEAD.format(failed=failed, passed=passed)


def failed_count(answer: str) -> int | None:
    """The failing tests an answer of this tool reports (`_head`), None for text that is not one."""
    match = _HEAD_RE.match(answer)
    return int(match.group(1)) if match else None


def render(sandbox: Sandbox, localizer: Localizer, spectrum: Spectrum) -> str:
    """The observation: counts, then `PATH:LINE  SCORE  code` per listed line."""
    head = _head(spectrum.failed, spectrum.passed)
    if not spectrum.failed:
        return f"{head} No test fails, so there is nothing to localize."
    if not spectrum.suspects:
        return f"{head} The failing tests ran no line of the non-test code."
    listed = spectrum.suspects[:localizer.listed]
    texts = _sources(sandbox, sorted({s.path for s in listed}))
    rows = []
    for s in listed:
        lines = texts.get(s.path, [])
        rows.append((s, lines[s.line - 1].strip() if s.line <= len(lines) else ""))
    return observation(spectrum.failed, spectrum.passed, rows)


def observation(failed: int, passed: int, rows: Sequence[tuple[Suspect, str]]) -> str:
    """The tool's answer listing `rows` (a suspect and its stripped code each), for a run with `failed` > 0
    failing tests and at least one suspect."""
    return (f"{_head(failed, passed)} The lines the failing tests ran, most suspicious first (Ochiai score):\n"
            + "\n".join(f"{s.path}:{s.line}  {s.score:.2f}  {code}" for s, code in rows))
