"""Shared fixtures of the selfplay tests: the handmade toolz 1.2.0 artifacts and one session pool of
toolz sandboxes (the image is built once and reused by content hash)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ARTIFACTS = FIXTURES / "artifacts"
PREDICTIONS = FIXTURES / "predictions"


def fixture_config(name: str) -> dict:
    """Per-fixture ValidationConfig overrides (validation.json), e.g. min_changed_files for bug_scope."""
    path = ARTIFACTS / name / "validation.json"
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.fixture(scope="session")
def toolz_spec():
    from repos.listfile import get_repo

    return get_repo("toolz")


@pytest.fixture(scope="session")
def toolz_pool(toolz_spec):
    """Two warm toolz sandboxes shared by every Docker test of this folder."""
    from sandboxes.images import repo_image
    from sandboxes.pool import SandboxPool

    pool = SandboxPool(repo_image(toolz_spec), size=2, workdir=toolz_spec.workdir)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def valid_report(toolz_spec, toolz_pool):
    """The validation report of the valid two-file artifact (computed once)."""
    from selfplay.artifact import load_artifact
    from selfplay.validation import validate

    return validate(load_artifact(ARTIFACTS / "valid"), toolz_spec, pool=toolz_pool)
