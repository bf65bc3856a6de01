"""The random-choice control of a `kit` injector (`selfplay.experiment.random_injector`): its choices are
uniform over what the kit would offer and stop where a step offers nothing; one episode in a real toolz
sandbox goes through the real kit and `validate`."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from agent_scaffold.actions import parse_action
from agent_scaffold.artifact_kit import KIT_COMMAND, MUTATIONS_LISTED
from agent_scaffold.mutation_operators import function_mutations
from selfplay.demos.injector import LIST_TESTS
from selfplay.experiment.random_injector import KitChoices, kit_actions, listed_functions, random_kit_choices

SOURCE = '''def f(x):
    """
    >>> def example(y):
    """
    if x < 1:
        return x + 1
    return x


def g():
    return None
'''
FILES = ["pkg/core.py", "tests/test_core.py", "tests/conftest_helpers.py"]


def test_the_listed_functions_are_the_names_the_kit_listing_shows():
    assert listed_functions(SOURCE) == ["f", "example", "g"]  # a docstring's `def` is listed, as grep lists it


def test_choices_are_uniform_over_what_each_step_offers():
    seen = Counter(random_kit_choices(["tests/test_core.py"], FILES, lambda p: SOURCE, random.Random(i))
                   for i in range(600))
    n_changes = len(function_mutations(SOURCE, "f")[:MUTATIONS_LISTED])
    assert {c.function for c in seen} == {"f", "example", "g"}
    f_changes = {c.change for c in seen if c.function == "f"}
    assert f_changes == set(range(1, n_changes + 1))
    # `example` is no function and `g` has no change: the injector stops there
    assert {c.change for c in seen if c.function in ("example", "g")} == {None}
    by_function = Counter(c.function for c in seen.elements())
    assert all(150 < by_function[name] < 250 for name in ("f", "example", "g")), by_function


def test_a_test_file_without_a_code_file_stops_at_the_oracle():
    choices = random_kit_choices(["tests/conftest_helpers.py"], FILES, lambda p: SOURCE, random.Random(0))
    assert choices == KitChoices("tests/conftest_helpers.py", None, None, None)
    actions = kit_actions(choices)
    assert [parse_action(a).tool for a in actions] == ["bash", "bash", "submit"]


def test_the_actions_are_the_kit_plan_with_the_choices_filled_in():
    actions = kit_actions(KitChoices("tests/test_core.py", "pkg/core.py", "f", 2))
    assert [parse_action(a).command.strip() for a in actions[:-1]] == [
        LIST_TESTS, f"{KIT_COMMAND} oracle tests/test_core.py", f"{KIT_COMMAND} mutate f",
        f"{KIT_COMMAND} mutate f 2", f"{KIT_COMMAND} weaken"]
    assert parse_action(actions[-1]).tool == "submit"


@pytest.mark.docker
@pytest.mark.slow
def test_a_random_episode_runs_the_real_kit_and_validate():
    from transformers import AutoTokenizer  # CI installs it: a missing one must fail, not skip

    from agent_scaffold.embedded import default_model_dir
    from repos.listfile import get_repo
    from selfplay.experiment.random_injector import random_kit_episode

    ep = random_kit_episode(get_repo("toolz"), AutoTokenizer.from_pretrained(default_model_dir()), random.Random(7))
    # seed 7 draws test_dicttoolz.py, `merge_with` and a change: the whole plan, then `validate`
    assert ep.repo == "toolz" and ep.choices.code_file == "toolz/dicttoolz.py" and ep.choices.change is not None
    assert ep.valid == (ep.failed_check is None)
    assert ep.failed_check not in ("no_submission", "incomplete"), ep  # what failed, if anything, is validation's
