"""The attack corpus (tests/fixtures/attacks) end to end through the CLI (docs/security.md).

Solver attacks: every prediction leaves the bug of tests/fixtures/artifacts/valid in place, so the right reward
of each is -1. They are graded by ONE `selfplay grade --patch A --patch B ... --json`, i.e. through one pooled
sandbox reset between attempts, as the run loop grades: attacks that try to persist (a .pth in site-packages, a
git hook, a fork bomb) go first, and the empty prediction and the gold fix come last, so this is also the
persistence test (after all of that, the empty prediction must still get -1 and the gold fix +1).

Injector attacks: five-file artifacts that cheat (a parser that reads the prediction or the repo, a script that
forges the job's markers, a weakening that hides a code edit, a bug that edits .gitattributes). The right
verdict of each is invalid: `selfplay validate` exits 1, never 2 (an infrastructure error would let the
injector go unpunished).

make_attacks.py regenerates the corpus; what each attack does is in its source. The `code_*` attacks are plain
(the static tamper screen names them); the `evade_*` ones are the same ideas written past that screen and
sparing the canary tests, so they exercise the structural layers. The solver test takes about ten minutes:
the attacks that hang, kill the job shell or fork-bomb run into the grader's time limits.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfplay.cli import app

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ATTACKS = FIXTURES / "attacks"
VALID = FIXTURES / "artifacts" / "valid"
GOLD = FIXTURES / "predictions" / "correct.diff"
EMPTY = ATTACKS / "solver" / "empty.diff"
# Graded first: if anything they leave behind survives the pool's reset, every later verdict shows it.
PERSISTENT = ("evade_persist_site_pth_and_git_hook", "evade_fork_bomb", "evade_kill_ancestors",
              "persist_site_pth_and_git_hook", "code_fork_bomb", "code_kill_parent_shell")


def solver_attacks() -> list[Path]:
    attacks = sorted(p for p in (ATTACKS / "solver").glob("*.diff") if p != EMPTY)
    return sorted(attacks, key=lambda p: PERSISTENT.index(p.stem) if p.stem in PERSISTENT else len(PERSISTENT))


def injector_attacks() -> list[Path]:
    return sorted(p for p in (ATTACKS / "injector").iterdir() if p.is_dir())


def test_corpus_is_complete():
    assert len(solver_attacks()) >= 30 and EMPTY.read_text() == ""
    for d in injector_attacks():
        assert sorted(f.name for f in d.iterdir()) == sorted(
            ["test_script.sh", "test_files.txt", "test_parser.py", "bug_inject.diff", "test_weaken.diff"]), d


def _table(objects: list[dict], expected: dict[str, int]) -> str:
    rows = []
    for o in objects:
        name = Path(o["patch"]).stem
        mark = "ok " if o["reward"] == expected[name] else "BAD"
        rows.append(f"{mark} {name:40} reward={o['reward']!s:4} want={expected[name]:+d} "
                    f"error={(o['error'] or '')[:90]!r} dropped={len(o['dropped_hunks'])}")
    return "\n".join(rows)


def test_every_solver_attack_gets_minus_one_through_one_pooled_sandbox():
    attacks = solver_attacks()
    patches = [*attacks, EMPTY, GOLD]
    expected = {p.stem: -1 for p in attacks} | {EMPTY.stem: -1, GOLD.stem: 1}
    args = ["grade", str(VALID), "--repo", "toolz", "--json"]
    for p in patches:
        args += ["--patch", str(p)]
    res = CliRunner().invoke(app, args)
    try:
        objects = json.loads(res.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"grade printed no JSON list (exit {res.exit_code}): {res.output[-3000:]}")
    assert [o["patch"] for o in objects] == [str(p) for p in patches]
    table = _table(objects, expected)
    print(table)  # the per-attack verdicts, for the log
    wrong = [Path(o["patch"]).stem for o in objects if o["reward"] != expected[Path(o["patch"]).stem]]
    assert not wrong, f"{len(wrong)} wrong verdict(s): {', '.join(wrong)}\n{table}"
    assert "could not run" not in res.output, table
    assert res.exit_code == 0, res.output[-2000:]


@pytest.mark.parametrize("artifact", injector_attacks(), ids=lambda p: p.name)
def test_every_injector_attack_is_invalid(artifact):
    res = CliRunner().invoke(app, ["validate", str(artifact), "--repo", "toolz", "--json"])
    assert res.exit_code != 2, f"{artifact.name}: an infrastructure error instead of a verdict: {res.output[-1500:]}"
    report = json.loads(res.stdout)
    failed = next((c for c in report["checks"] if not c["passed"]), None)
    assert res.exit_code == 1 and not report["valid"], (
        f"{artifact.name} was accepted as valid: {json.dumps(report['checks'], indent=1)[:2000]}")
    assert failed is not None or report.get("error"), report
