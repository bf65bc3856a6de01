"""`pytest` over the whole tests/ folder (the README's way to run one file or all of them) imports each test
module by its file name, since the test folders are not packages: two test files with one name stop the
collection of both parts."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_module_has_a_name_of_its_own():
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "fixtures" not in path.relative_to(TESTS).parts:
            where[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
