"""Test runners' durations are taken out of what the agent sees, so an episode's tokens do not vary with timing."""

import os
import subprocess
import sys

from agent_scaffold.actions import parse_action
from agent_scaffold.durations import mask_durations, pytest_rule
from agent_scaffold.tools import Toolbox
from tests.agent_scaffold.local_sandbox import LocalSandbox

SUITE = {"test_x.py": "def test_a():\n    pass\n\n\ndef test_b():\n    assert 0\n"}


def pytest_output(root, *args):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # not a terminal: pytest's 80 columns
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=root, env=env,
                          capture_output=True, text=True).stdout


def test_pytest_summaries_lose_their_duration_and_keep_pytests_rule(tmp_path):
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    out = pytest_output(tmp_path)
    summary = out.rstrip().splitlines()[-1]
    assert " in " in summary and summary.endswith("=")
    assert summary == pytest_rule(summary.strip("= "))  # the rule is drawn as pytest draws it
    masked = mask_durations(out)
    assert masked.rstrip().splitlines()[-1] == pytest_rule("1 failed, 1 passed")
    assert masked.rstrip().splitlines()[:-1] == out.rstrip().splitlines()[:-1]  # only the summary changed
    assert mask_durations(pytest_output(tmp_path)) == masked  # a second run reads the same
    quiet = mask_durations(pytest_output(tmp_path, "-q")).rstrip().splitlines()[-1]
    assert quiet == "1 failed, 1 passed"


def test_other_summaries_and_other_lines():
    assert mask_durations("...\nRan 12 tests in 0.004s\n\nOK\n") == "...\nRan 12 tests\n\nOK\n"
    assert mask_durations("no tests ran in 0.01s") == "no tests ran"
    long = "= 3 failed, 120 passed, 4 skipped, 2 xfailed, 7 warnings, 1 error in 12.31s (0:00:12) ="
    assert mask_durations(long) == pytest_rule("3 failed, 120 passed, 4 skipped, 2 xfailed, 7 warnings, 1 error")
    for kept in ("sleeping in 0.5s", "the job passed in 3 tries", "passed in 0.5 seconds",
                 "x = f(passed) in 0.5s and more"):
        assert mask_durations(kept) == kept


def test_the_toolbox_shows_a_test_run_without_its_duration(tmp_path):
    box = Toolbox(LocalSandbox(tmp_path, SUITE))
    action = parse_action(f"```bash\n{sys.executable} -m pytest -q -p no:cacheprovider test_x.py\n```")
    outcome = box.run(action)
    assert "1 failed, 1 passed\n" in outcome.observation and " in 0." not in outcome.observation
    assert outcome.observation.endswith("[exit code 1]") and outcome.error


def test_a_megabyte_the_model_shaped_is_masked_without_backtracking():
    """The output is the model's to shape, up to the sandbox's 1 MiB: one line of outcome words (which a
    backtracking pattern scanned once per word: 12 s for 112 KB, hours for a megabyte), or a megabyte of
    summary-like lines, must not stall the episode. The bound is loose; the point is linear time."""
    import time

    attacks = ["passed " * 150_000, "passed in 1s in " * 60_000, "= 1 passed " * 100_000 + "in 1s =",
               "x passed in 0.5s =\n" * 55_000]
    t0 = time.monotonic()
    masked = [mask_durations(text) for text in attacks]
    assert time.monotonic() - t0 < 10
    assert masked[0] == attacks[0] and masked[3] == attacks[3]  # not summaries: kept as they are
    assert masked[2] == pytest_rule(attacks[2][2:-len(" in 1s =")])  # one long summary: its duration goes
