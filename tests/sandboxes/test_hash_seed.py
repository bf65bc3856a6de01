"""Every model-controlled process in a sandbox runs with one hash seed (`sandboxes.users.environment`).

Otherwise `hash()` of a str, and the order of a set of str, change with every process: a bug built on them
(red team, 2026-12-06: `step = 1 + (hash("frequencies") & 1)`) passed validation's two buggy runs about a
quarter of the time, and then an empty prediction earned +1 about a quarter of the time."""

from __future__ import annotations

import pytest

from sandboxes.users import AGENT_UID, PARSER_UID, RUNNER_UID, drop_privileges, environment

PROBE = "python3 -c 'print(hash(\"frequencies\"), list({\"a\", \"b\", \"c\", \"d\", \"e\"}))'"


@pytest.mark.parametrize("uid", [AGENT_UID, RUNNER_UID, PARSER_UID])
def test_each_model_uid_gets_a_fixed_hash_seed(uid):
    assert environment(uid)[1]["PYTHONHASHSEED"] == "0"


@pytest.mark.docker
def test_hash_and_set_order_are_the_same_in_every_run(sandbox):
    runs = [sandbox.exec(f"{drop_privileges(uid)} {PROBE}", user="root") for uid in (RUNNER_UID, RUNNER_UID,
                                                                                     AGENT_UID, PARSER_UID)]
    assert all(r.ok for r in runs), [r.output for r in runs]
    assert len({r.output for r in runs}) == 1, [r.output for r in runs]
    agent = sandbox.exec(PROBE)  # the agent's own commands (the episode's shell)
    assert agent.ok and agent.output == runs[0].output, (agent.output, runs[0].output)
