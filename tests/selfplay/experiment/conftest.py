"""Fixtures of the experiment tests: `scripts/bench_learning.py` loaded as a module, and a runner that calls
its `main` with an argv and returns the SystemExit it raised (the script's refusals)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_learning", ROOT / "scripts" / "bench_learning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def refused(bench, monkeypatch):
    """`refused(*argv)`: run the script with argv; the message of the SystemExit it must raise."""
    def run(*argv: str) -> str:
        monkeypatch.setattr(sys, "argv", ["bench_learning.py", *argv])
        with pytest.raises(SystemExit) as exc:
            bench.main()
        return str(exc.value)

    return run
