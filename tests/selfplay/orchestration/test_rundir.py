"""Run directory units: atomic summary writes, torn trajectory files, retention of trajectory files and
checkpoints, the loop state's round trip, and the metrics sinks."""

from __future__ import annotations

import gzip
import json
import logging
import threading

import pytest

from selfplay.config.run_config import MetricsConfig
from selfplay.orchestration.metrics import JsonlSink, Metrics, make_metrics
from selfplay.orchestration.rundir import (
    RunDir,
    append_trajectories,
    attach_log_file,
    detach_log_file,
    new_run_id,
    prune_checkpoints,
    prune_files,
    read_trajectories,
    write_json_atomic,
)
from selfplay.orchestration.state import InjectorVerdict, IterationProgress, LoopState
from tests.selfplay.orchestration.loop_double import trajectory


def test_run_id_and_layout(tmp_path):
    assert new_run_id("smoke", 0) == "smoke-19700101-000000"
    run = RunDir.create(tmp_path, "r-1")
    assert run.trajectories.is_dir() and run.checkpoints.is_dir() and run.logs.is_dir()
    assert run.trajectory_file(3, "solver").name == "it00003-solver.jsonl.gz"
    with pytest.raises(FileExistsError, match="--resume"):
        RunDir.create(tmp_path, "r-1")
    with pytest.raises(FileNotFoundError, match="config.yaml"):
        RunDir.open(tmp_path / "r-1")


def test_summary_is_never_torn(tmp_path):
    """Readers racing a writer always see a whole JSON object (the old one or the new one)."""
    path = tmp_path / "summary.json"
    write_json_atomic(path, {"n": 0, "pad": "x" * 100_000})
    stop = threading.Event()
    seen: list[int] = []

    def read():
        while not stop.is_set():
            seen.append(json.loads(path.read_text())["n"])

    reader = threading.Thread(target=read)
    reader.start()
    for n in range(1, 200):
        write_json_atomic(path, {"n": n, "pad": "x" * 100_000})
    stop.set()
    reader.join()
    assert seen and seen == sorted(seen) and json.loads(path.read_text())["n"] == 199
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary left


def test_trajectories_survive_a_torn_tail(tmp_path, caplog):
    path = tmp_path / "it00000-solver.jsonl.gz"
    append_trajectories(path, [trajectory("solver", 0)])
    append_trajectories(path, [trajectory("solver", 1), trajectory("solver", 2)])
    assert [t.policy_version for t in read_trajectories(path)] == [0, 1, 2]
    whole = gzip.compress(trajectory("solver", 3).to_json().encode() + b"\n")
    with open(path, "ab") as fh:  # a kill -9 in the middle of a write
        fh.write(whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING):
        assert [t.policy_version for t in read_trajectories(path)] == [0, 1, 2]
    assert "torn write" in caplog.text
    assert list(read_trajectories(tmp_path / "missing.jsonl.gz")) == []


def test_trajectory_retention_keeps_newest(tmp_path):
    for i in range(5):
        (tmp_path / f"it{i:05d}-solver.jsonl.gz").write_bytes(b"")
    (tmp_path / "it00004-injector.pending.gz").write_bytes(b"")
    gone = prune_files(tmp_path, 2)
    assert [p.name for p in gone] == [f"it{i:05d}-solver.jsonl.gz" for i in range(3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["it00003-solver.jsonl.gz", "it00004-injector.pending.gz",
                                                          "it00004-solver.jsonl.gz"]
    assert prune_files(tmp_path, 0) == []


def test_checkpoint_retention_keeps_latest(tmp_path):
    for v in (1, 2, 3, 4):
        (tmp_path / f"v{v:06d}").mkdir()
    (tmp_path / "latest").write_text("v000004\n")
    prune_checkpoints(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.glob("v*")) == ["v000003", "v000004"]
    (tmp_path / "latest").write_text("v000003\n")  # latest is kept even when it is not the newest name
    prune_checkpoints(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.glob("v*")) == ["v000003", "v000004"]
    (tmp_path / "latest").write_text("v000004\n")
    prune_checkpoints(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.glob("v*")) == ["v000004"]


def test_state_round_trip_and_bad_file(tmp_path):
    state = LoopState("r", completed=2, policy_version=5, repo_cursor=1, baseline={"values": {"*": 0.1}})
    state.count("solved", 3)
    state.progress[2] = IterationProgress(2, 5, {"e": InjectorVerdict("e", "toolz", "removal", True, "t", "a")},
                                          ["t"], False, 5)
    state.save(tmp_path / "state.json")
    back = LoopState.load(tmp_path / "state.json")
    assert back == state and back.progress[2].injectors["e"].task_id == "t"
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="cannot be resumed"):
        LoopState.load(tmp_path / "bad.json")


def test_metrics_jsonl_and_missing_tensorboard(tmp_path, caplog):
    metrics = Metrics([JsonlSink(tmp_path / "m.jsonl")])
    metrics.log({"iteration": 0, "solve_rate/all": 0.5, "x": float("nan")}, step=0)
    metrics.close()
    (rec,) = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert rec["solve_rate/all"] == 0.5 and rec["x"] is None and "time" in rec
    m = make_metrics(MetricsConfig(tensorboard=True), tmp_path / "n.jsonl", tmp_path / "tb", run_id="r",
                     run_config={})
    m.log({"iteration": 0, "a": 1.0})
    m.close()
    from selfplay.orchestration.metrics import tensorboard_available

    if tensorboard_available():
        assert any((tmp_path / "tb").iterdir())
    else:
        assert "TensorBoard metrics are off" in caplog.text


def test_log_file_gets_library_records(tmp_path):
    handler = attach_log_file(tmp_path / "run.log")
    logging.getLogger("selfplay.orchestration.test").info("hello from the loop")
    detach_log_file(handler)
    logging.getLogger("selfplay.orchestration.test").info("after detaching")
    text = (tmp_path / "run.log").read_text()
    assert "hello from the loop" in text and "after detaching" not in text
