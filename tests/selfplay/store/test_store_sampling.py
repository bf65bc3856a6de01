"""The pure sampler on synthetic statistics: band targeting, unseen share, retirement, caps, dedup."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from selfplay.store.records import TaskStats
from selfplay.store.sampling import SamplingConfig, band_distance, retirement_reason, sample


def stats(
    task_id: str,
    recent: str = "",
    *,
    repo: str = "r",
    family: str | None = None,
    diff_hash: str | None = None,
    attempts: int | None = None,
    solves: int | None = None,
) -> TaskStats:
    return TaskStats(
        task_id=task_id,
        repo=repo,
        status="active",
        family=family or task_id,
        diff_hash=diff_hash or task_id,
        attempts=len(recent) if attempts is None else attempts,
        solves=recent.count("1") if solves is None else solves,
        recent=recent,
    )


NO_CAPS = dict(max_repo_share=1.0, max_per_family=10**6)


def test_band_targeting_draws_in_band_tasks_first():
    easy = [stats(f"easy{i}", "11110111") for i in range(50)]  # 0.875
    hard = [stats(f"hard{i}", "00000001") for i in range(50)]  # 0.125
    mid = [stats(f"mid{i}", "01001010") for i in range(20)]  # 0.375, in the band
    result = sample(easy + hard + mid, 20, SamplingConfig(**NO_CAPS), random.Random(0))
    assert set(result.chosen) == {s.task_id for s in mid}
    # Short of in-band tasks, the nearest to the band come next: hard (0.075 away) before easy (0.375).
    more = sample(easy + hard + mid, 40, SamplingConfig(**NO_CAPS), random.Random(0))
    assert Counter(t.rstrip("0123456789") for t in more.chosen) == {"mid": 20, "hard": 20}


def test_band_uses_recent_or_overall_rate():
    task = stats("t", "0000", attempts=20, solves=10)  # overall 0.5, recent 0.0
    assert band_distance(task, SamplingConfig(rate="overall")) == 0.0
    assert band_distance(task, SamplingConfig(rate="recent")) == pytest.approx(0.2)


def test_unseen_share_reserves_part_of_the_batch():
    unseen = [stats(f"new{i}") for i in range(100)]
    band = [stats(f"mid{i}", "0101") for i in range(100)]
    chosen = sample(unseen + band, 10, SamplingConfig(unseen_share=0.3, **NO_CAPS), random.Random(1)).chosen
    assert Counter(t[:3] for t in chosen) == {"new": 3, "mid": 7}
    only_unseen = sample(
        unseen + band, 10, SamplingConfig(unseen_share=1.0, **NO_CAPS), random.Random(1)
    ).chosen
    assert all(t.startswith("new") for t in only_unseen)
    # Unseen tasks still come before out-of-band ones once the band runs dry.
    far = [stats(f"far{i}", "1110") for i in range(100)]
    chosen = sample(unseen[:5] + band[:2] + far, 10, SamplingConfig(unseen_share=0.0, **NO_CAPS)).chosen
    assert Counter(t[:3] for t in chosen) == {"mid": 2, "new": 5, "far": 3}


def test_retirement_rules():
    cfg = SamplingConfig(retire_solved_last_k=3, retire_unsolved_after_m=5)
    assert retirement_reason(stats("a", "0111"), cfg) == "solved in all of the last 3 attempts"
    assert retirement_reason(stats("b", "1101"), cfg) is None
    assert retirement_reason(stats("c", "11"), cfg) is None  # fewer than K attempts
    assert retirement_reason(stats("d", "00000"), cfg) == "never solved in 5 attempts"
    assert retirement_reason(stats("e", "0000"), cfg) is None
    # The recent window may have forgotten an old solve: "never solved" uses the overall count.
    assert retirement_reason(stats("f", "00000", attempts=40, solves=1), cfg) is None
    result = sample([stats("a", "0111"), stats("d", "00000"), stats("b", "1101")], 5, cfg)
    assert result.chosen == ("b",)
    assert dict(result.retire) == {
        "a": "solved in all of the last 3 attempts",
        "d": "never solved in 5 attempts",
    }
    assert sample([stats("a", "0111")], 1, SamplingConfig(retire_solved_last_k=0)).chosen == ("a",)


def test_caps_per_repo_and_family():
    tasks = [stats(f"a{i}", "01", repo="A") for i in range(20)] + [
        stats(f"b{i}", "01", repo="B", family="fam") for i in range(20)
    ]
    strict = SamplingConfig(max_repo_share=0.5, max_per_family=3, relax_caps_when_short=False)
    chosen = sample(tasks, 10, strict, random.Random(2)).chosen
    assert Counter(t[0] for t in chosen) == {"a": 5, "b": 3}  # 5 = half of 10 per repo; 3 per family
    relaxed = SamplingConfig(max_repo_share=0.5, max_per_family=3)
    chosen = sample(tasks, 10, relaxed, random.Random(2)).chosen
    assert len(chosen) == len(set(chosen)) == 10  # filled past the caps, still distinct


def test_dedup_by_normalised_diff_hash_keeps_the_most_attempted():
    tasks = [
        stats("x1", "01", diff_hash="h"),
        stats("x2", "0101", diff_hash="h"),
        stats("y", "01", diff_hash="g"),
        stats("z", "01", diff_hash="h", repo="other"),
    ]  # same hash, other repo: a different task
    result = sample(tasks, 10, SamplingConfig(**NO_CAPS), random.Random(3))
    assert set(result.chosen) == {"x2", "y", "z"} and result.duplicates == ("x1",)


def test_sample_is_reproducible_and_skips_inactive():
    tasks = [stats(f"t{i}", "01") for i in range(50)] + [
        TaskStats(task_id="gone", repo="r", status="retired", family="gone", diff_hash="gone")
    ]
    a = sample(tasks, 10, SamplingConfig(**NO_CAPS), random.Random(5)).chosen
    assert a == sample(tasks, 10, SamplingConfig(**NO_CAPS), random.Random(5)).chosen and "gone" not in a
    assert sample([], 5).chosen == () and sample(tasks, 0).chosen == ()


@pytest.mark.parametrize(
    "bad, field",
    [
        (dict(band=(0.6, 0.2)), "band"),
        (dict(unseen_share=1.5), "unseen_share"),
        (dict(max_repo_share=0.0), "max_repo_share"),
        (dict(max_per_family=0), "max_per_family"),
        (dict(rate="x"), "rate"),
    ],
)
def test_config_errors_name_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        SamplingConfig(**bad)
