"""The injector's artifact kit (`agent_scaffold.artifact_kit`) in a real Docker sandbox of toolz: a `kit`
episode gets it, writes a valid artifact with it (a change `mutate` lists, or its own `str_replace`), is
told plainly what it did out of order, and cannot rewrite it; episodes of other strategies never see it."""

import pytest

from agent_scaffold.agent import run_episode
from agent_scaffold.artifact_kit import KIT_COMMAND, KIT_PATH
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.roles import EpisodeLimits, load_role

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ART = "/tmp/ssr_artifact"
TESTS = "toolz/tests/test_itertoolz.py"
BUG_EDIT = ("```edit\nstr_replace toolz/itertoolz.py\n<<<<<<< SEARCH\n        d[item] += 1\n=======\n"
            "        d[item] = 1\n>>>>>>> REPLACE\n```")
LIMITS = EpisodeLimits(max_turns=12, max_new_tokens=512, max_context_tokens=8192, command_timeout=120.0,
                       max_observation_chars=4000)


@pytest.fixture(scope="module")
def kit_box():
    """A toolz sandbox of this module's own: the session's shared one may have been rebased onto a bug."""
    from toolz_box import toolz_box

    yield from toolz_box()


@pytest.fixture
def toolz_sandbox(kit_box):
    kit_box.reset()
    return kit_box


def _run(box, tokenizer, actions, strategy="kit"):
    ep = run_episode(ScriptedPolicy(actions, tokenizer), box, load_role("injector", strategy), {"artifact_dir": ART},
                     limits=LIMITS)
    assert not ep.infra_failure, ep.trajectory.to_text()
    return ep, [m["content"] for m in ep.trajectory.messages[3::2]]


def _valid(ep, removed_line):
    from repos.listfile import get_repo
    from selfplay.artifact import BugArtifact
    from selfplay.validation import validate

    assert ep.termination == "submitted", ep.trajectory.to_text()
    artifact = BugArtifact.from_files(ep.submission)
    assert artifact.test_files == (TESTS,)
    assert f"-{removed_line}" in artifact.bug_inject and "test_frequencies" in artifact.test_weaken
    report = validate(artifact, get_repo("toolz"))
    assert report.valid, report
    assert "toolz/tests/test_itertoolz.py::test_frequencies" in report.fail_to_pass


def test_a_kit_episode_of_a_listed_change_writes_an_artifact_that_validates(toolz_sandbox, tokenizer):
    """The kit plan: `oracle` (which lists the functions), `mutate NAME`, `mutate NAME K`, `weaken`."""
    ep, obs = _run(toolz_sandbox, tokenizer, [
        f"```bash\n{KIT_COMMAND} oracle {TESTS}\n```", f"```bash\n{KIT_COMMAND} mutate frequencies\n```",
        f"```bash\n{KIT_COMMAND} mutate frequencies 2\n```", f"```bash\n{KIT_COMMAND} weaken\n```", "```submit\n```"])
    assert obs[0].startswith("Wrote test_files.txt, test_script.sh, test_parser.py. On the original code: ")
    assert ", 0 failed.\ntoolz/itertoolz.py\n19:def remove(predicate, seq):\n" in obs[0] and "[exit code 0]" in obs[0]
    assert obs[1].startswith("1. line 546: d = collections.defaultdict(int)  ->  pass\n"
                             "2. line 548: d[item] += 1  ->  pass\n3. line 548: d[item] += 1  ->  d[item] += 2\n"
                             "Apply one: python /tmp/kit.py mutate frequencies K")
    assert "Saved bug_inject.diff (toolz/itertoolz.py). With the bug:" in obs[2]
    assert f"FAILED {TESTS}::test_frequencies" in obs[2]
    assert "saved test_weaken.diff" in obs[3] and "bug_inject.diff test_files.txt" in obs[3]
    _valid(ep, "        d[item] += 1")


def test_a_kit_episode_of_its_own_edit_writes_an_artifact_that_validates(toolz_sandbox, tokenizer):
    """The free-form path: `show NAME`, a `str_replace`, `bug`."""
    ep, obs = _run(toolz_sandbox, tokenizer, [
        f"```bash\n{KIT_COMMAND} oracle {TESTS}\n```", f"```bash\n{KIT_COMMAND} code\n```",
        f"```bash\n{KIT_COMMAND} show frequencies\n```", BUG_EDIT, f"```bash\n{KIT_COMMAND} bug\n```",
        f"```bash\n{KIT_COMMAND} weaken\n```", "```submit\n```"])
    assert obs[1].startswith("toolz/itertoolz.py\n19:def remove(predicate, seq):\n") and len(obs[1].splitlines()) == 22
    assert obs[2].startswith("def frequencies(seq):") and "        d[item] += 1" in obs[2]
    assert "Saved bug_inject.diff (toolz/itertoolz.py). With the bug:" in obs[4]
    assert f"FAILED {TESTS}::test_frequencies" in obs[4]
    _valid(ep, "        d[item] += 1")


def test_the_kit_names_what_is_missing_and_what_to_do(toolz_sandbox, tokenizer):
    _, obs = _run(toolz_sandbox, tokenizer, [
        f"```bash\n{KIT_COMMAND} bug\n```",                            # before oracle
        f"```bash\n{KIT_COMMAND} mutate frequencies\n```",             # before oracle
        f"```bash\n{KIT_COMMAND} oracle toolz/tests/test_nothere.py\n```",
        f"```bash\n{KIT_COMMAND} oracle {TESTS}\n```",
        f"```bash\n{KIT_COMMAND} bug\n```",                            # nothing changed yet
        f"```bash\n{KIT_COMMAND} weaken\n```",                         # no buggy run yet
        f"```bash\n{KIT_COMMAND} mutate frequencies 9\n```",          # not a listed number
        f"```bash\n{KIT_COMMAND} inject\n```",
        "```submit\n```"])
    assert obs[0].startswith("No test_files.txt yet: run `python /tmp/kit.py oracle FILE...` first.")
    assert obs[1].startswith("No test_files.txt yet: run `python /tmp/kit.py oracle FILE...` first.")
    assert "No such file: toolz/tests/test_nothere.py. Copy test file paths from the listing." in obs[2]
    assert "No code file is changed: apply a change with `mutate NAME K`, or edit with str_replace, first." in obs[4]
    assert "No buggy run yet: run `python /tmp/kit.py bug` first." in obs[5]
    assert "No change 9: K is one of the numbers `python /tmp/kit.py mutate frequencies` lists." in obs[6]
    assert "Usage:" in obs[7]
    assert all("[exit code 1]" in obs[i] for i in (0, 1, 2, 4, 5, 6, 7))


def test_the_policy_cannot_rewrite_the_kit(toolz_sandbox, tokenizer):
    _, obs = _run(toolz_sandbox, tokenizer, [
        f"```bash\necho 'print(1)' > {KIT_PATH}; rm -f {KIT_PATH}; mv {KIT_PATH} /tmp/k2; head -c 40 {KIT_PATH}\n```",
        "```submit\n```"])
    assert obs[0].count("Permission denied") + obs[0].count("Operation not permitted") >= 3, obs[0]
    assert '"""The injector\'s artifact kit' in obs[0]


def test_only_kit_episodes_get_the_kit_and_a_reset_removes_it(toolz_sandbox, tokenizer):
    _, obs = _run(toolz_sandbox, tokenizer, [f"```bash\nls {KIT_PATH}\n```", "```submit\n```"], strategy="direct")
    assert "No such file" in obs[0]
    _run(toolz_sandbox, tokenizer, ["```submit\n```"])
    assert toolz_sandbox.exec(f"test -f {KIT_PATH}").ok
    toolz_sandbox.reset()
    assert not toolz_sandbox.exec(f"test -f {KIT_PATH}").ok
