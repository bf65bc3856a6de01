"""The seed cache's pure parts: its key names every input, and a stored report reads back unchanged (the
round trip through Docker is in test_demos_docker.py)."""

from __future__ import annotations

from repos.listfile import get_repo
from selfplay.demos.seed_cache import report_from_json, seed_key
from selfplay.procedural.seed import SeedConfig
from selfplay.validation import ValidationConfig
from selfplay.validation.report import CheckResult, ValidationReport


def test_the_key_changes_with_every_input():
    spec = get_repo("toolz")
    base = seed_key(spec, "img:1", 2, SeedConfig(seed=0), ValidationConfig(original_runs=1))
    assert base == seed_key(spec, "img:1", 2, SeedConfig(seed=0), ValidationConfig(original_runs=1))
    others = [seed_key(spec, "img:2", 2, SeedConfig(seed=0), ValidationConfig(original_runs=1)),
              seed_key(spec, "img:1", 3, SeedConfig(seed=0), ValidationConfig(original_runs=1)),
              seed_key(spec, "img:1", 2, SeedConfig(seed=1), ValidationConfig(original_runs=1)),
              seed_key(spec, "img:1", 2, SeedConfig(seed=0), ValidationConfig(original_runs=2)),
              seed_key(get_repo("cachetools"), "img:1", 2, SeedConfig(seed=0), ValidationConfig(original_runs=1))]
    assert base not in others and len(set(others)) == len(others)


def test_a_stored_report_reads_back_unchanged():
    report = ValidationReport(valid=True, checks=(CheckResult("test_files", True, "ok"),
                                                  CheckResult("parser", True, "12 tests")),
                              fail_to_pass=("t.py::a",), pass_to_pass=("t.py::b", "t.py::c"), flaky=("t.py::d",))
    back = report_from_json(report.to_json())
    assert back.to_json() == report.to_json()
    assert back.valid and back.fail_to_pass == ("t.py::a",) and back.failed_check is None


def test_a_seeding_run_that_found_nothing_is_not_cached(tmp_path, monkeypatch):
    """A run with no valid bug (a transient failure, an unlucky seed) must not answer every later call with
    "none". `seed` is replaced by a documented double here; the real round trip is in test_demos_docker.py."""
    from selfplay.demos.seed_cache import cached_seed

    calls = []
    monkeypatch.setattr("selfplay.demos.seed_cache.run_seed", lambda *a, **kw: calls.append(a) or [])
    for _ in range(2):
        results, hit = cached_seed(get_repo("toolz"), 2, image="img:1", config=SeedConfig(seed=0),
                                   validation=ValidationConfig(), cache=tmp_path)
        assert results == [] and hit is False
    assert len(calls) == 2
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == []
