"""The scripted injector: writes a known-valid procedural artifact as a `direct`-strategy injector
episode, through the real tools in a real sandbox, and keeps it only if `validate` accepts what the
episode submitted.

Plan (eight turns; the run's injector budget allows ten): list the repo's test files with one command
that is the same in every repo (`LIST_TESTS`), and select listed ones; write test_files.txt,
test_script.sh and a compact test_parser.py, and check them on the original code; find the code file by
the oracle test file's name (`git ls-files '*X.py'` for `test_X.py`), print its path and its functions
(`grep -n "def "`), and print the one to change by name (`sed -n '/def NAME(/,+20p'`), so that the path,
the name and the SEARCH text the policy types are in its context, never recalled (`located_function`);
inject the bug into it with `str_replace`; run the tests, show which fail and save `git diff` as
bug_inject.diff; delete the tests that failed (one fixed script that reads the buggy log) and save
test_weaken.diff; submit. Departures from the procedural artifact, to fit 3,072 tokens: the expert writes
a 7-line parser instead of the built-in one (510 tokens) and deletes the failing tests with a fixed script
instead of quoting the weakening diff (up to ~750 tokens); the `direct` prompt is a short one (~330
tokens, against ~820 for removal/history). Only the bug and the repo's tests come from the procedural
artifact; `validate` judges the rest. The `kit` strategy's plan is six turns with the artifact kit
(`agent_scaffold.artifact_kit`): it writes the test files and lists the functions, lists the operators'
changes to one function and applies the one chosen by number, saves the bug diff and the weakening; the
policy types the oracle file, the function's name and the change's number.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
import posixpath
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_scaffold.agent import run_episode
from agent_scaffold.artifact_kit import (
    DEF_LISTING,
    KIT_COMMAND,
    KIT_STRATEGY,
    MUTATIONS_LISTED,
    PARSER,
    VIEW_AFTER,
    WEAKEN,
)
from agent_scaffold.mutation_operators import function_mutations
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.roles import EpisodeLimits, load_role
from repos.spec import RepoSpec
from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image
from selfplay.artifact import BugArtifact
from selfplay.demos.bug import change_note, enclosing_function, parse_hunks, repair, reversed_hunk
from selfplay.demos.solver_plan import FENCE, _pick, block
from selfplay.demos.warm_start_config import WarmStartConfig
from selfplay.errors import DiffError, NotDemonstrable, SelfPlayError
from selfplay.validation import validate

log = logging.getLogger(__name__)

ARTIFACT_DIR = "/tmp/ssr_artifact"
"""Where the expert writes the artifact (the injector role's default; the prompt names whichever
directory is passed)."""
INJECTOR_LIMITS = EpisodeLimits(max_turns=10, max_new_tokens=1024,
                                max_context_tokens=WarmStartConfig.injector_max_context_tokens, command_timeout=90.0,
                                wall_clock=900.0, max_observation_chars=1200)
"""Budgets of an injector demonstration (the context budget is `WarmStartConfig.injector_max_context_tokens`)."""
LIST_TESTS = "git ls-files '*test_*.py' | head -n 12"
"""The expert's first command, the same in every repo: the policy cannot know a repo's test folder before it
has looked (the prompt does not name the repo), so a per-repo `ls tests` was a guess from memory, wrong in
6 of 12 episodes of the fourth attempt's warm start (docs/benchmarks.md)."""


def listed_tests(sandbox: Any) -> tuple[str, ...]:
    """The test files `LIST_TESTS` prints in `sandbox`."""
    return tuple(sandbox.exec(LIST_TESTS, timeout=30).output.split())


def view_lines(source: str, search: str, pad: int = 1) -> tuple[int, int]:
    """1-based first and last line of `sed -n` that prints `search` (which occurs once in `source`) with
    `pad` lines around it (the FORMAT 7-8 view; `injector_actions(lines_fallback=True)` still uses it)."""
    start = source[:source.index(search)].count("\n") + 1
    return max(1, start - pad), start + search.count("\n") + pad


VIEW_MAX_CHARS = 1100
"""Longest listing or view the expert shows: under the demonstrations' 1,200-character observation cap
(`INJECTOR_LIMITS`), so no line the policy copies is cut out of its context."""


def list_functions_command(module: str) -> str:
    """Finds the code file named `module` (the oracle test file's name without `test_`) wherever the repo
    keeps it, prints its path, then its first `DEF_LISTING` `def` lines: the path the later commands
    need is printed, not recalled (FORMAT 9 typed it, and boltons episodes named a marshmallow folder)."""
    return f"f=$(git ls-files '*{module}' | grep -v test | head -n 1); echo $f; grep -n \"def \" $f | head -n {DEF_LISTING}"


def code_file(module: str, repo_files: Sequence[str]) -> str | None:
    """The path `list_functions_command(module)` prints, given `git ls-files` (sorted, as git prints it)."""
    return next((f for f in repo_files if fnmatch.fnmatchcase(f, f"*{module}") and "test" not in f), None)


def oracle_module(path: str, test_files: Sequence[str]) -> str:
    """The code file name the policy derives from a selected test file (`tests/test_X.py` -> `X.py`) that
    names `path`; NotDemonstrable when no selected test file does."""
    module = posixpath.basename(path)
    if not any(posixpath.basename(t) == f"test_{module}" for t in test_files):
        raise NotDemonstrable(f"no selected test file is named test_{module}")
    return module


def view_function_command(path: str, name: str) -> str:
    return f"sed -n '/def {name}(/,+{VIEW_AFTER}p' {path}"


def located_function(source: str, search: str, *, viewed: bool = True, max_chars: int = VIEW_MAX_CHARS) -> str:
    """The name of the function that holds `search` (which occurs once in `source`), when the expert's
    locate commands show it: its `def` line is among the listing's `DEF_LISTING` lines, the name's `def NAME(`
    is on no other line, and (`viewed`: sed prints one window) `search` lies inside the window of `VIEW_AFTER`
    lines; the listing (and the window) are at most `max_chars` long. So every token the policy types in its
    bug edit, the name and the SEARCH text, is copied from what it has just read. NotDemonstrable otherwise."""
    lines = source.split("\n")
    first = source[:source.index(search)].count("\n") + 1
    last = first + search.count("\n")
    fn = enclosing_function(source, first)
    if fn is None:
        raise NotDemonstrable(f"the bug at line {first} lies in no function")
    listed = [i for i, line in enumerate(lines, 1) if "def " in line][:DEF_LISTING]
    listing = "\n".join(f"{i}:{lines[i - 1]}" for i in listed)
    window = "\n".join(lines[fn.start - 1:fn.start + VIEW_AFTER]) if viewed else ""
    if fn.start not in listed:
        raise NotDemonstrable(f"{fn.name} (line {fn.start}) is not among the first {DEF_LISTING} `def ` lines")
    if sum(f"def {fn.name}(" in line for line in lines) != 1:
        raise NotDemonstrable(f"`def {fn.name}(` is on more than one line")
    if viewed and last > fn.start + VIEW_AFTER:
        raise NotDemonstrable(f"the bug (line {last}) is more than {VIEW_AFTER} lines below `def {fn.name}(`")
    if max(len(listing), len(window)) > max_chars:
        raise NotDemonstrable(f"the listing or the view of {fn.name} is over {max_chars} characters")
    return fn.name


KIT_LISTING_MAX_CHARS = VIEW_MAX_CHARS - 150
"""Longest function listing of a `kit` demonstration: `oracle` prints it after its own line of counts."""


def kit_mutation(source: str, name: str, search: str, replace: str) -> int:
    """The number `kit.py mutate NAME` gives the change that turns `search` (unique in `source`) into
    `replace`: the kit lists `agent_scaffold.mutation_operators.function_mutations` of the committed file, the
    first `MUTATIONS_LISTED`. NotDemonstrable when the change is not among them."""
    buggy = source.replace(search + "\n", replace + "\n", 1)
    found = (function_mutations(source, name) or [])[:MUTATIONS_LISTED]
    at = next((k for k, m in enumerate(found, 1) if m.source == buggy), None)
    if at is None:
        raise NotDemonstrable(f"the bug is not among the {len(found)} changes `mutate {name}` lists")
    return at


def injector_actions(artifact: BugArtifact, original_sources: dict[str, str], rng: random.Random, *,
                     repo_files: Sequence[str] | None = None, lines_fallback: bool = False,
                     strategy: str = "direct") -> list[str]:
    """The replies of one injector demonstration that writes `artifact` (whose bug is a one-file mutant).
    NotDemonstrable when `located_function` cannot show the bug's function, unless `lines_fallback`: then
    the changed lines are printed by number (the FORMAT 7-8 view), for test harnesses that need any plan
    that writes a given artifact; demonstrations never use it. `repo_files` (`git ls-files` of the repo):
    the listing must find the bug's file by the oracle test file's name; None trusts that it does.
    `strategy` "kit" runs the artifact kit (`agent_scaffold.artifact_kit`) instead: six turns. The listing
    of the test files; `oracle` (the test files, and the function listing `grep` would print: the kit finds
    the code by the first oracle file's name); `mutate NAME` (the operators' changes in the bug's function,
    numbered); `mutate NAME K` with the number of the artifact's change (it saves the bug diff); `weaken`;
    submit. NotDemonstrable when the artifact's bug is not among the changes `mutate` lists (`kit_mutation`)."""
    if strategy not in ("direct", KIT_STRATEGY):
        raise ValueError(f"the injector expert demonstrates the direct and {KIT_STRATEGY} strategies, not {strategy!r}")
    kit = strategy == KIT_STRATEGY
    for text in (artifact.test_script,):
        if any(line.startswith(FENCE) for line in text.splitlines()):
            raise DiffError("an artifact file holds a code-fence line; it cannot be written from a bash block")
    d = ARTIFACT_DIR
    files = " ".join(artifact.test_files)
    code = " ".join(sorted({h.path for h in parse_hunks(artifact.bug_inject)}))
    actions = [
        _pick(rng, ["Let me see how the tests are laid out.", "First, the test files."])
        + "\n" + block("bash", LIST_TESTS),
        _pick(rng, ["I will use {f} as the oracle: write the three test files and run them on the original code.",
                    "Select {f}, write the runner script and the parser, and check them."], f=files)
        + "\n" + block("bash", f"{KIT_COMMAND} oracle {files}" if kit else
                        f"mkdir -p {d} && printf '%s\\n' {files} > {d}/test_files.txt\n"
                        f"cat > {d}/test_script.sh <<'EOF'\n{artifact.test_script.rstrip(chr(10))}\nEOF\n"
                        f"cat > {d}/test_parser.py <<'EOF'\n{PARSER.rstrip(chr(10))}\nEOF\n"
                        f"bash {d}/test_script.sh > /tmp/original.log 2>&1; "
                        f"python {d}/test_parser.py < /tmp/original.log | head -c 120"),
    ]
    hunks = parse_hunks(artifact.bug_inject)
    if kit and len(hunks) != 1:
        raise NotDemonstrable(f"`mutate` makes one change; the bug has {len(hunks)} hunks")
    for h in hunks:
        # the injection is the repair of the reversed hunk: SEARCH unique in the original file
        search, replace_ = repair(reversed_hunk(h), original_sources[h.path], rng, extra_context=1)
        try:
            module = oracle_module(h.path, artifact.test_files)
            if kit and posixpath.basename(artifact.test_files[0]) != f"test_{module}":
                raise NotDemonstrable(f"the kit lists the code of the first oracle file, not test_{module}")
            if repo_files is not None and code_file(module, repo_files) != h.path:
                raise NotDemonstrable(f"the listing of {module} finds {code_file(module, repo_files)}, not {h.path}")
            name = located_function(original_sources[h.path], search, viewed=not kit,
                                    max_chars=KIT_LISTING_MAX_CHARS if kit else VIEW_MAX_CHARS)
        except NotDemonstrable:
            if not lines_fallback or kit:
                raise
            first, last = view_lines(original_sources[h.path], search)
            actions.append(_pick(rng, ["Let me read a few lines of {p} to change.", "Now the code: a few lines of {p}."],
                                 p=h.path) + "\n" + block("bash", f"sed -n '{first},{last}p' {h.path}"))
        else:
            if kit:
                k = kit_mutation(original_sources[h.path], name, search, replace_)
                actions.append(_pick(rng, ["Which changes could break {n}?", "I will break {n}; its changes:"], n=name)
                               + "\n" + block("bash", f"{KIT_COMMAND} mutate {name}"))
                actions.append(_pick(rng, ["Change {k} it is: apply it and run the tests.",
                                           "Apply change {k}, then see which tests fail."], k=k)
                               + "\n" + block("bash", f"{KIT_COMMAND} mutate {name} {k}"))
                continue
            actions.append(_pick(rng, ["Now the code: the functions of {m}.", "Which functions does {m} define?"],
                                 m=module) + "\n" + block("bash", list_functions_command(module)))
            actions.append(_pick(rng, ["Let me read {n}.", "I will change {n}; let me read it."], n=name)
                           + "\n" + block("bash", view_function_command(h.path, name)))
        note = change_note(search, replace_)
        intro = (_pick(rng, ["Introduce the bug: {c}.", "Now the bug: {c}."], c=note) if note else
                 _pick(rng, ["Introduce the bug in those lines.", "Now the bug: a small change in them."]))
        actions.append(intro + "\n" + block("edit", f"str_replace {h.path}\n<<<<<<< SEARCH\n{search}\n=======\n"
                                              f"{replace_}\n>>>>>>> REPLACE"))
    if not kit:  # `mutate NAME K` ran the tests and saved the bug
        actions.append(_pick(rng, ["Run the tests with the bug, see which fail, and save the bug.",
                                   "Some tests must fail now; then save the bug diff."])
                       + "\n" + block("bash", f"bash {d}/test_script.sh > /tmp/buggy.log 2>&1; grep -E '^(FAILED|ERROR) ' "
                                       f"/tmp/buggy.log | cut -c 1-80 | head -n 3; git diff -- {code} > {d}/bug_inject.diff"))
    actions += [
        _pick(rng, ["Delete the failing tests and save the weakening.",
                    "Weaken the suite: remove the tests that failed, then save test_weaken.diff."])
        + "\n" + block("bash", f"{KIT_COMMAND} weaken" if kit else
                        f"python - <<'EOF'\n{WEAKEN.rstrip(chr(10))}\nEOF\n"
                        f"git diff -- {files} > {d}/test_weaken.diff && ls {d}"),
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
                      limits: EpisodeLimits = INJECTOR_LIMITS, image: str | None = None,
                      strategy: str = "direct") -> InjectorDemo:
    """One injector demonstration of `artifact` in a fresh sandbox, as an episode of `strategy` (direct or
    kit); the submission is validated for real."""
    start = time.monotonic()
    image = image or repo_image(spec)
    role = load_role("injector", strategy)
    with DockerSandbox.create(image, workdir=spec.workdir) as sb:
        unlisted = sorted(set(artifact.test_files) - set(listed_tests(sb)))
        if unlisted:  # the demonstration selects only test files its first observation shows
            raise NotDemonstrable(f"test files {', '.join(unlisted)} are not among those `{LIST_TESTS}` prints")
        sources = {h.path: sb.read_file(h.path).decode() for h in parse_hunks(artifact.bug_inject)}
        files = sb.exec("git ls-files", timeout=30).output.split()
        policy = ScriptedPolicy(injector_actions(artifact, sources, rng, repo_files=files, strategy=strategy), tokenizer=tokenizer)
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
        **ep.trajectory.metadata, "repo": spec.name, "source": "demo", "strategy": strategy,
        "validation": None if report is None else ("valid" if report.valid else report.failed_check)})
    return InjectorDemo(traj, submitted, report, time.monotonic() - start)
