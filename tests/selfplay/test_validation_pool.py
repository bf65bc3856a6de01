"""Validations and episodes sharing one pool cannot deadlock.

A validation takes all its sandboxes at once (`checkout_many`). Taken one by one, with an episode holding
one of two, two validations could each take the other one in turn and wait for each other forever."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from selfplay.artifact import load_artifact
from selfplay.validation import ValidationConfig, validate

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ARTIFACTS = Path(__file__).resolve().parent.parent / "fixtures" / "artifacts"


def test_two_validations_and_an_episode_on_a_pool_of_two_finish(toolz_spec, toolz_pool):
    assert toolz_pool.size == 2
    name = "fail_test_files"  # stops after the first wave: cheap, and it still takes both sandboxes
    artifact = load_artifact(ARTIFACTS / name)
    overrides = ARTIFACTS / name / "validation.json"
    config = ValidationConfig(**(json.loads(overrides.read_text()) if overrides.exists() else {}), parallelism=2)
    reports: list = []
    errors: list[BaseException] = []
    episode_holds = threading.Event()

    def episode() -> None:
        try:
            with toolz_pool.checkout() as sb:
                episode_holds.set()
                sb.exec("sleep 3")  # the validations queue up behind it meanwhile
        except BaseException as exc:
            errors.append(exc)
            episode_holds.set()

    def validation() -> None:
        try:
            reports.append(validate(artifact, toolz_spec, config, pool=toolz_pool))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=episode)]
    threads[0].start()
    episode_holds.wait(60)
    threads += [threading.Thread(target=validation) for _ in range(2)]
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(600)
    assert not any(t.is_alive() for t in threads), "a validation or the episode never finished"
    assert not errors, errors
    assert len(reports) == 2
    for report in reports:
        assert not report.valid and report.failed_check == "test_files", report.to_json()
