"""`Task`: a validated bug the solver is asked to fix, in SWE-bench's instance shape."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from agent_scaffold.localize import Localizer
from agent_scaffold.roles import solver_variables
from sandboxes.sandbox import BASE_TAG
from selfplay.artifact import BugArtifact
from selfplay.diffs import bug_site, normalised_hash, reverse_diff, touched_files
from selfplay.errors import DiffError

Origin = Literal["injector", "procedural", "higher_order", "imported"]
TASK_IMAGE_RECIPE = "3"
"""Version of `selfplay.eval.task_image`'s build recipe, part of every task image name: bump it when the
recipe changes so stale task images are not reused."""
LOG_PARSER = "parse_log_pytest"
"""The swebench parser (`PARSER_REGISTRY` key) of task logs: test scripts run `pytest -rA`."""


@dataclass(frozen=True)
class Task:
    """A solver task derived from a valid artifact (plus, for higher orders, a failed prediction)."""

    task_id: str
    """Stable id: derived from the repo and the normalised diff hashes."""
    repo: str
    """Name in the repo list."""
    artifact: BugArtifact
    fail_to_pass: tuple[str, ...]
    """Oracle tests passing on the original code and failing in the buggy state."""
    pass_to_pass: tuple[str, ...]
    """Oracle tests passing in both."""
    origin: Origin = "injector"
    order: int = 1
    """1 for a bug from an artifact; 2 when a failed solver patch was layered on top."""
    parent_id: str | None = None
    """The task this higher-order task was derived from."""
    pred_patch: str | None = None
    """Higher-order only: the failed prediction that is part of the buggy state."""
    metadata: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def spec(self) -> str:
        """The solver's specification: the reversed test_weaken.diff (the test-suite improvement)."""
        return reverse_diff(self.artifact.test_weaken)

    def localizer(self, test_command: str) -> Localizer:
        """The solver's `localize` tool for this task: `test_command` (the repo's suite command) narrowed to
        the test files the spec touches, the files the solver was shown."""
        from selfplay.procedural.seed import restricted_command  # seed imports this module
        return Localizer(self.spec, restricted_command(test_command, [
            p for p in touched_files(self.spec) if p.endswith(".py")]))

    @property
    def gold_patch(self) -> str:
        """The reference fix over the buggy state (never shown to solvers): the reverse of the bug; for a
        higher-order task the reverse of the failed prediction first, then the reverse of the bug (two
        diffs in one file, applied in that order)."""
        fix = reverse_diff(self.artifact.bug_inject)
        return reverse_diff(self.pred_patch) + fix if self.pred_patch else fix

    @property
    def problem_statement(self) -> str:
        """The solver's task text: the test-spec prompt section rendered with the reversed weakening."""
        return solver_variables(self.spec, "tests")["spec_section"]

    @property
    def image_name(self) -> str:
        """The task image (`selfplay.eval.task_image.build_task_image` builds it): the repo image with the
        buggy state committed as the only commit, tagged `selfplay-base`. The tag hashes the layers."""
        key = f"{TASK_IMAGE_RECIPE}\0{self.artifact.digest()}\0{self.pred_patch or ''}"
        h = hashlib.sha256(key.encode()).hexdigest()[:12]
        safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in self.task_id.lower())
        return f"selfplay-task-{safe}:{h}"

    def eval_script(self, workdir: str = "/testbed") -> str:
        """SWE-bench's eval.sh for this task: restore the oracle test files, apply `test_patch`, run the
        artifact's test script between the harness's output markers, restore the test files again."""
        files = " ".join(shlex.quote(f) for f in self.artifact.test_files)
        test_patch = reverse_diff(self.artifact.test_weaken)
        marker = "EOF_114329324912"  # the harness's heredoc marker
        if marker in test_patch:
            raise ValueError(f"task {self.task_id}: its test patch contains the heredoc marker {marker}")
        return "\n".join([
            "#!/bin/bash", "set -uxo pipefail", f"cd {shlex.quote(workdir)}",
            f"git checkout {BASE_TAG} -- {files}",
            f"git apply -v - <<'{marker}'", test_patch.rstrip("\n"), marker,
            ": '>>>>> Start Test Output'",
            f"bash -c {shlex.quote(_without_shebang(self.artifact.test_script))}",
            ": '>>>>> End Test Output'",
            f"git checkout {BASE_TAG} -- {files}", ""])

    def to_swebench(self, *, version: str | None = None, created_at: str = "") -> dict[str, object]:
        """The task as a SWE-bench 5.x instance, the one serialiser (`tasks export` adds its own fields).

        `image` is the task image, whose `/testbed` holds the buggy state as commit `selfplay-base`
        (`base_commit`), so the official harness applies a prediction and runs `eval_script` unchanged.
        FAIL_TO_PASS/PASS_TO_PASS are JSON-encoded lists, as the published datasets store them.
        `log_parser` is swebench's pytest parser: task test scripts run `pytest -rA`."""
        return {
            "instance_id": self.task_id,
            "repo": self.repo,
            "version": version or "selfplay",
            "base_commit": BASE_TAG,
            "image": self.image_name,
            "problem_statement": self.problem_statement,
            "hints_text": "",
            "created_at": created_at,
            "patch": self.gold_patch,
            "test_patch": reverse_diff(self.artifact.test_weaken),
            "FAIL_TO_PASS": json.dumps(list(self.fail_to_pass)),
            "PASS_TO_PASS": json.dumps(list(self.pass_to_pass)),
            "eval_script": self.eval_script(),
            "log_parser": LOG_PARSER,
            "eval_type": "pass_and_fail",
        }


def _without_shebang(script: str) -> str:
    """The script minus its `#!` line: swebench's eval-script parser drops any line that is exactly
    `#!/bin/bash`, which would otherwise cut a line out of the quoted test command."""
    lines = script.splitlines()
    return "\n".join(lines[1:] if lines and lines[0].startswith("#!") else lines).strip("\n")


def make_task_id(repo: str, artifact: BugArtifact, pred_patch: str | None = None) -> str:
    """Stable id from the repo and the normalised diff hashes (the same text, the same id; the store gives a
    bug writing the same text on other lines this id with a suffix, `selfplay.store.rows.put_task`)."""
    h = hashlib.sha256(f"{repo}\0{artifact.digest()}".encode())
    if pred_patch:
        h.update(normalised_hash(pred_patch).encode())
    return f"{repo}-{h.hexdigest()[:16]}"


BugKey = tuple[str, frozenset[str], frozenset[tuple[str, str]]]
"""(repo, failing tests, changed lines): see `bug_key`."""


def bug_key(task: Task) -> BugKey | None:
    """What makes a first-order task the bug it is, whatever text it writes there: its repo, the lines it
    changes (`bug_site`) and the tests it breaks. None for a higher-order task, or a bug diff that does not
    parse or changes no line."""
    if task.order != 1:
        return None
    try:
        site = bug_site(task.artifact.bug_inject)
    except DiffError:
        return None
    return (task.repo, frozenset(task.fail_to_pass), site) if site else None


def keys_match(a: BugKey | None, b: BugKey | None) -> bool:
    """One bug: the same repo and failing tests, and at least one changed line in common, so that an extra
    edit elsewhere (which breaks nothing more) does not make the same bug another one. Two different
    changes of one line that break the same tests count as one bug too."""
    return a is not None and b is not None and a[0] == b[0] and a[1] == b[1] and bool(a[2] & b[2])


def stored_lines(tasks: Iterable[Task]) -> tuple[tuple[str, int], ...]:
    """(path, line) of every original line that the first-order bugs among `tasks` remove or rewrite
    (`bug_site`'s "-N"), sorted: a change of one of them breaking the same tests is, by `keys_match`, a
    bug already held. Higher-order tasks and bug diffs that do not parse add nothing."""
    lines: set[tuple[str, int]] = set()
    for task in tasks:
        if task.order != 1:
            continue
        try:
            site = bug_site(task.artifact.bug_inject)
        except DiffError:
            continue
        lines.update((path, int(at[1:])) for path, at in site if at.startswith("-"))
    return tuple(sorted(lines))


def same_bug(a: Task, b: Task) -> bool:
    """True when two first-order tasks are one bug written twice (`keys_match` of their `bug_key`s)."""
    return keys_match(bug_key(a), bug_key(b))


def count_bugs(keys: list[BugKey | None]) -> int:
    """How many bugs `keys` are: matching keys (`keys_match`), also through a chain of matches, are one
    bug; each None is a bug of its own."""
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(keys):
        for j in range(i):
            if keys_match(a, keys[j]):
                parent[root(i)] = root(j)
    return len({root(i) for i in range(len(keys))})
