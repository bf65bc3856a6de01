"""The README's rule "under CI=true only gpu tests may skip" holds by construction (tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT_CONFTEST = Path(__file__).with_name("conftest.py")
TESTS = """
import pytest

def test_missing_package():
    pytest.importorskip("selfplay_no_such_package")

@pytest.mark.gpu
def test_gpu_only():
    pytest.skip("no CUDA GPU")

def test_plain():
    assert True
"""
MODULE_SKIP = """
import pytest
pytest.importorskip("selfplay_no_such_package")

def test_never_collected():
    assert True
"""


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: bool, **files: str) -> pytest.RunResult:
    shutil.copy(ROOT_CONFTEST, pytester.path / "conftest.py")
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    pytester.makepyfile(**files)
    monkeypatch.setenv("CI", "true" if ci else "false")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider")


def test_a_non_gpu_skip_fails_under_ci(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    result = _run(pytester, monkeypatch, True, test_inner=TESTS)
    result.assert_outcomes(passed=1, failed=1, skipped=1)  # the gpu skip stays a skip
    result.stdout.fnmatch_lines(["*CI=true: only gpu tests may skip*selfplay_no_such_package*"])


def test_a_module_skipped_at_import_fails_under_ci(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    result = _run(pytester, monkeypatch, True, test_module_skip=MODULE_SKIP)
    result.assert_outcomes(errors=1)
    assert result.ret != 0


def test_outside_ci_skips_stay_skips(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    result = _run(pytester, monkeypatch, False, test_inner=TESTS, test_module_skip=MODULE_SKIP)
    result.assert_outcomes(passed=1, skipped=3)
