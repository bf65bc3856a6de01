"""`one_process_world_env`: a learner's one-process world is not inherited by the processes it starts."""

from __future__ import annotations

import pytest

pytest.importorskip("deepspeed")

from selfplay.learner.engine import one_process_world_env


def test_fresh_env_gets_a_marked_world():
    env: dict[str, str] = {}
    one_process_world_env(env, pid=10)
    assert env["WORLD_SIZE"] == "1" and env["RANK"] == "0"
    assert env["SELFPLAY_DIST_OWNER"] == f"10:{env['MASTER_PORT']}"


def test_a_child_remakes_the_world_its_parent_made():
    parent: dict[str, str] = {}
    one_process_world_env(parent, pid=10)
    child = dict(parent)
    one_process_world_env(child, pid=11)
    assert child["SELFPLAY_DIST_OWNER"] == f"11:{child['MASTER_PORT']}"
    same = dict(parent)
    one_process_world_env(same, pid=10)  # the maker itself keeps its world
    assert same == parent


def test_a_launchers_world_is_left_alone():
    launched = {"MASTER_PORT": "29500", "MASTER_ADDR": "10.0.0.1", "RANK": "3", "WORLD_SIZE": "8",
                "LOCAL_RANK": "3", "SELFPLAY_DIST_OWNER": "10:41234"}  # inherited mark, another port
    env = dict(launched)
    one_process_world_env(env, pid=11)
    assert env == launched
