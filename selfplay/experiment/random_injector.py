"""The control of a `kit` injector's valid-bug rate: an injector that makes each of the kit plan's choices
uniformly at random among what its observations offer.

With the artifact kit's `mutate`, a bug's text comes from the procedural operators, so some valid bugs are
the kit's, not the policy's. This injector plays the kit plan (`selfplay.demos.injector`, `kit`) with no
judgement at all: a random listed test file as the oracle, a random function of the listing `oracle` prints,
a random change of those `mutate NAME` numbers. Its valid-bug rate, through the real kit and the real
`validate`, is the floor a trained injector's rate is read against (docs/benchmarks.md). Where a step
offers nothing (no code file named after the test file, no function, no change), it cannot go on and
submits what it has, as a policy would be judged.

`random_kit_choices` is pure; `random_kit_episode` plays one episode in a real sandbox.
"""

from __future__ import annotations

import logging
import posixpath
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_scaffold.artifact_kit import DEF_LISTING, KIT_COMMAND, KIT_STRATEGY, MUTATIONS_LISTED
from agent_scaffold.mutation_operators import function_mutations
from selfplay.demos.injector import LIST_TESTS, code_file
from selfplay.demos.solver_plan import block

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KitChoices:
    """What the random injector chose; None from the first step that offered nothing."""

    test_file: str
    code_file: str | None
    function: str | None
    change: int | None


def listed_functions(source: str) -> list[str]:
    """The function names of the `def` lines the kit's listing prints (its first `DEF_LISTING`)."""
    lines = [line for line in source.split("\n") if "def " in line][:DEF_LISTING]
    return [m[1] for line in lines if (m := re.search(r"\bdef (\w+)\(", line))]


def random_kit_choices(listed_tests: Sequence[str], repo_files: Sequence[str], read: Callable[[str], str],
                       rng: random.Random) -> KitChoices:
    """Uniform choices at each step of the kit plan, as the kit would offer them: `listed_tests` (what
    `LIST_TESTS` printed), `repo_files` (`git ls-files`), `read` (a file's committed text)."""
    test = rng.choice(list(listed_tests))
    name = posixpath.basename(test)
    path = code_file(name[len("test_"):], repo_files) if name.startswith("test_") else None
    if path is None:
        return KitChoices(test, None, None, None)
    source = read(path)
    names = listed_functions(source)
    if not names:
        return KitChoices(test, path, None, None)
    function = rng.choice(names)
    try:
        changes = (function_mutations(source, function) or [])[:MUTATIONS_LISTED]
    except SyntaxError:
        changes = []
    return KitChoices(test, path, function, rng.randint(1, len(changes)) if changes else None)


def kit_actions(choices: KitChoices) -> list[str]:
    """The kit plan's replies for `choices`, up to the first step with nothing chosen, then submit."""
    actions = [block("bash", LIST_TESTS), block("bash", f"{KIT_COMMAND} oracle {choices.test_file}")]
    if choices.change is not None:
        actions += [block("bash", f"{KIT_COMMAND} mutate {choices.function}"),
                    block("bash", f"{KIT_COMMAND} mutate {choices.function} {choices.change}"),
                    block("bash", f"{KIT_COMMAND} weaken")]
    return actions + [block("submit")]


@dataclass(frozen=True)
class RandomEpisode:
    repo: str
    choices: KitChoices
    valid: bool
    failed_check: str | None
    """The first validation check that failed; None when valid; "no_submission" when the episode did not
    submit, "incomplete" when its files are not an artifact (it stopped before the bug), "error" when
    validation stopped outside its checks (`detail` says why)."""
    detail: str = ""
    """The failed check's detail, or why validation or the artifact failed."""


def random_kit_episode(spec, tokenizer, rng: random.Random, *, image: str | None = None) -> RandomEpisode:
    """One episode of the random injector in a fresh sandbox of `spec`, validated for real."""
    from agent_scaffold.agent import run_episode
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.roles import load_role
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.artifact import BugArtifact
    from selfplay.demos.injector import ARTIFACT_DIR, INJECTOR_LIMITS, listed_tests
    from selfplay.errors import SelfPlayError
    from selfplay.validation import validate

    with DockerSandbox.create(image or repo_image(spec), workdir=spec.workdir) as sb:
        files = sb.exec("git ls-files", timeout=30).output.split()
        choices = random_kit_choices(listed_tests(sb), files, lambda p: sb.read_file(p).decode(), rng)
        ep = run_episode(ScriptedPolicy(kit_actions(choices), tokenizer=tokenizer), sb, load_role("injector", KIT_STRATEGY),
                         {"artifact_dir": ARTIFACT_DIR}, limits=INJECTOR_LIMITS)
    if ep.termination != "submitted" or not isinstance(ep.submission, dict):
        return RandomEpisode(spec.name, choices, False, "no_submission")
    try:
        report = validate(BugArtifact.from_files(ep.submission), spec)
    except SelfPlayError as exc:
        log.info("random injector: the submission is not an artifact: %s", exc)
        return RandomEpisode(spec.name, choices, False, "incomplete", str(exc))
    if report.valid:
        return RandomEpisode(spec.name, choices, True, None)
    failed = next((c for c in report.checks if not c.passed), None)
    return RandomEpisode(spec.name, choices, False, failed.name if failed else "error",
                         failed.detail if failed else report.error or "")
