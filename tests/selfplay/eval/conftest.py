"""The offline SWE-bench-format dataset (two toolz tasks from tests/fixtures/swebench), built once."""

from __future__ import annotations

from pathlib import Path

import pytest
from swebench_fixtures import FIXTURES


@pytest.fixture(scope="session")
def offline_dataset(tmp_path_factory) -> Path:
    from selfplay.eval.offline import build_offline_dataset

    path = tmp_path_factory.mktemp("swebench") / "offline.jsonl"
    build_offline_dataset(FIXTURES, path)
    return path
