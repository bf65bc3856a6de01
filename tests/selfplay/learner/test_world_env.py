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


def test_joining_the_world_on_cpu_does_not_wait_on_a_stale_op_build_lock(tmp_path):
    """A process killed while JIT-compiling DeepSpeed's shared-memory op leaves torch's build lock behind;
    a learner that then tried to build the op waited on it forever. On CPU the op is not built at all."""
    import os
    import subprocess
    import sys

    (tmp_path / "deepspeed_shm_comm").mkdir()
    (tmp_path / "deepspeed_shm_comm" / "lock").touch()  # what the killed build left
    dist_keys = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "SELFPLAY_DIST_OWNER")
    env = {**{k: v for k, v in os.environ.items() if k not in dist_keys},
           "TORCH_EXTENSIONS_DIR": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    code = ("from selfplay.learner.engine import init_distributed\n"
            "import deepspeed.comm.comm as comm\n"
            "init_distributed()\n"
            "print('shm op:', comm.cdb.shm_comm_op)\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "shm op: None" in done.stdout, done.stdout[-2000:]
