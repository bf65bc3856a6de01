"""The scripted injector: writes a known-valid procedural artifact as an injector episode, through the real
tools in a real sandbox, and keeps it only if `validate` accepts what the episode submitted.

Plan (a careful injector, `direct` strategy): list the tests; write test_files.txt and test_script.sh;
run the script; write test_parser.py and check it on the original log; inject the bug with
`str_replace`; re-run the tests; save `git diff` as bug_inject.diff; weaken the revealing tests (apply the
deletions); save test_weaken.diff; check the five files; submit. Departure from the 2k-token budget of
solver demonstrations: the injector's prompt alone is ~1,300 tokens and the parser must be written out,
so an injector demonstration takes ~3-4k tokens; `selfplay rft --injector` trains on them, the default
CPU warm start does not.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from agent_scaffold.roles import EpisodeLimits
from repos.spec import RepoSpec
from selfplay.artifact import BugArtifact
from selfplay.demos.bug import parse_hunks, repair, reversed_hunk
from selfplay.demos.solver_plan import FENCE, _pick, block
from selfplay.errors import DiffError, SelfPlayError

log = logging.getLogger(__name__)

ARTIFACT_DIR = "/tmp/ssr_artifact"
"""Where the expert writes the artifact (the injector role's default; the prompt names whichever
directory is passed)."""
INJECTOR_LIMITS = EpisodeLimits(max_turns=16, max_new_tokens=1536, max_context_tokens=6144, command_timeout=90.0,
                                wall_clock=900.0, max_observation_chars=1200)
"""Budgets of an injector demonstration (see the module docstring for why above 2k)."""


def injector_actions(artifact: BugArtifact, original_sources: dict[str, str], rng: random.Random) -> list[str]:
    """The replies of one injector demonstration that writes `artifact` (whose bug is a one-file mutant)."""
    for text in (artifact.test_parser, artifact.test_weaken, artifact.test_script):
        if any(line.startswith(FENCE) for line in text.splitlines()):
            raise DiffError("an artifact file holds a code-fence line; it cannot be written from a bash block")
    d = ARTIFACT_DIR
    files = " ".join(artifact.test_files)
    test_dir = artifact.test_files[0].rsplit("/", 1)[0] if "/" in artifact.test_files[0] else "."
    actions = [
        _pick(rng, ["Let me see how the tests are laid out.", "First, the test files."])
        + "\n" + block("bash", f"mkdir -p {d} && ls {test_dir} | head -n 20"),
        _pick(rng, ["I will use {f} as the oracle. Writing test_files.txt and test_script.sh.",
                    "Select {f} and write the runner script."], f=files)
        + "\n" + block("bash", f"printf '%s\\n' {files} > {d}/test_files.txt\ncat > {d}/test_script.sh <<'EOF'\n"
                               f"{artifact.test_script.rstrip(chr(10))}\nEOF"),
        _pick(rng, ["Run it on the original code.", "Check that the selected tests pass now."])
        + "\n" + block("bash", f"bash {d}/test_script.sh > /tmp/original.log 2>&1; tail -n 3 /tmp/original.log"),
        _pick(rng, ["Now a parser for pytest's -rA summary.", "Write the test parser."])
        + "\n" + block("bash", f"cat > {d}/test_parser.py <<'EOF'\n{artifact.test_parser.rstrip(chr(10))}\nEOF\n"
                               f"python {d}/test_parser.py < /tmp/original.log | head -c 300"),
    ]
    for h in parse_hunks(artifact.bug_inject):
        # the injection is the repair of the reversed hunk: SEARCH unique in the original file
        search, replace = repair(reversed_hunk(h), original_sources[h.path], rng, extra_context=1)
        actions.append(_pick(rng, ["Introduce the bug in {p}.", "Now the bug: a small change in {p}."], p=h.path)
                       + "\n" + block("edit", f"str_replace {h.path}\n<<<<<<< SEARCH\n{search}\n=======\n"
                                              f"{replace}\n>>>>>>> REPLACE"))
    code = " ".join(sorted({h.path for h in parse_hunks(artifact.bug_inject)}))
    weakened = " ".join(sorted({h.path for h in parse_hunks(artifact.test_weaken)}))
    actions += [
        _pick(rng, ["Some tests must fail now.", "Run the tests with the bug."])
        + "\n" + block("bash", f"bash {d}/test_script.sh 2>&1 | tail -n 4"),
        _pick(rng, ["Save the bug.", "Save the bug diff."])
        + "\n" + block("bash", f"git diff -- {code} > {d}/bug_inject.diff && wc -l {d}/bug_inject.diff"),
        _pick(rng, ["Delete the tests that reveal it.", "Weaken the suite: remove the failing tests."])
        + "\n" + block("bash", f"git apply <<'EOF'\n{artifact.test_weaken.rstrip(chr(10))}\nEOF"),
        _pick(rng, ["Save the weakening and check the files.", "Save test_weaken.diff."])
        + "\n" + block("bash", f"git diff -- {weakened} > {d}/test_weaken.diff && ls {d}"),
        _pick(rng, ["All five files are written.", "Done."]) + "\n" + block("submit"),
    ]
    return actions


@dataclass(frozen=True)
class InjectorDemo:
    trajectory: Any
    """The episode's Trajectory (reward 1.0 when the submitted artifact validated, else -1.0)."""
    artifact: BugArtifact | None
    """The artifact read back from the episode's submission."""
    report: Any
    """The ValidationReport of that artifact (None when the episode did not submit)."""
    wall_time: float

    @property
    def kept(self) -> bool:
        return self.report is not None and bool(self.report.valid)


def run_injector_demo(artifact: BugArtifact, spec: RepoSpec, tokenizer: Any, rng: random.Random, *,
                      limits: EpisodeLimits = INJECTOR_LIMITS, image: str | None = None) -> InjectorDemo:
    """One injector demonstration of `artifact` in a fresh sandbox; the submission is validated for real."""
    import dataclasses

    from agent_scaffold.agent import run_episode
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.roles import load_role
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.validation import validate

    start = time.monotonic()
    image = image or repo_image(spec)
    role = load_role("injector", "direct")
    with DockerSandbox.create(image, workdir=spec.workdir) as sb:
        sources = {h.path: sb.read_file(h.path).decode() for h in parse_hunks(artifact.bug_inject)}
        policy = ScriptedPolicy(injector_actions(artifact, sources, rng), tokenizer=tokenizer)
        ep = run_episode(policy, sb, role, {"artifact_dir": ARTIFACT_DIR}, limits=limits)
    if ep.infra_failure:
        raise SelfPlayError(f"injector demonstration: sandbox failure ({ep.error}); check the Docker engine and retry")
    submitted = report = None
    if ep.termination == "submitted" and isinstance(ep.submission, dict):
        try:
            submitted = BugArtifact.from_files(ep.submission)
        except SelfPlayError as exc:
            log.info("injector demonstration: submission is not an artifact: %s", exc)
        else:
            report = validate(submitted, spec)
    reward = 1.0 if report is not None and report.valid else -1.0
    traj = dataclasses.replace(ep.trajectory, reward=reward, metadata={
        **ep.trajectory.metadata, "repo": spec.name, "source": "demo", "strategy": "direct",
        "validation": None if report is None else ("valid" if report.valid else report.failed_check)})
    return InjectorDemo(traj, submitted, report, time.monotonic() - start)
