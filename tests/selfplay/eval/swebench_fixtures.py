"""Paths and ids of the offline SWE-bench-format fixture dataset (tests/fixtures/swebench)."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "swebench"
KEYFILTER, FREQUENCIES = "toolz__selfplay-keyfilter", "toolz__selfplay-frequencies"
