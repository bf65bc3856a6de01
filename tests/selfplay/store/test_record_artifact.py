"""What the run loop needs from the store: artifact ids for every injector attempt, duplicates flagged,
the higher-order `seen` set persisted, and draws filtered by origin, order and repo. On SQLite and
PostgreSQL (see conftest)."""

from __future__ import annotations

import random

import pytest
from store_data import make_artifact, make_report

from selfplay.diffs import normalised_hash
from selfplay.higher_order import HigherOrderConfig, refuse_reason
from selfplay.store import SamplingConfig, StoredArtifact, StoreError, open_store
from selfplay.task import Task

PRED = (
    "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
    "@@ -9,1 +9,1 @@\n-a\n+b\n"
)


def test_record_artifact_returns_the_artifact_id_valid_or_not(store):
    bad = store.record_artifact(make_artifact(1), "toolz", make_report(valid=False), origin="injector",
                                episode_id="run-it0-injector-0")
    assert isinstance(bad, StoredArtifact)
    assert bad.task_id is None and not bad.duplicate
    record = store.get_artifact(bad.artifact_id)
    assert record.valid is False and record.episode_id == "run-it0-injector-0"
    # An injector attempt can now point at its artifact.
    store.record_attempt(None, role="injector", policy_version=0, reward=-1.0, turns=3, tokens=10,
                         termination="submitted", artifact_id=bad.artifact_id)
    assert store.attempts()[0].artifact_id == bad.artifact_id

    good = store.record_artifact(make_artifact(2), "toolz", make_report(n=2), origin="injector")
    assert good.task_id is not None and not good.duplicate
    assert store.get_task(good.task_id).metadata["artifact_id"] == good.artifact_id
    # record_validation keeps its contract: the task id, or None.
    assert store.record_validation(make_artifact(3), "toolz", make_report(valid=False), origin="injector") is None


def test_a_duplicate_bug_is_flagged_not_silently_merged(store):
    art = make_artifact(5)
    first = store.record_artifact(art, "toolz", make_report(n=5), origin="injector")
    for _ in range(3):
        store.record_attempt(first.task_id, role="solver", policy_version=0, reward=1.0, turns=1, tokens=1,
                             termination="submitted")
    # The same bug again, with a different test script (another artifact, the same normalised diff).
    again = art.__class__(test_script="pytest -x\n", test_files=art.test_files, test_parser=art.test_parser,
                          bug_inject=art.bug_inject, test_weaken=art.test_weaken)
    dup = store.record_artifact(again, "toolz", make_report(n=5), origin="injector")
    assert dup.task_id == first.task_id and dup.duplicate
    assert dup.artifact_id != first.artifact_id  # the new artifact is stored in its own right
    # Re-recording the very same artifact is a duplicate too (its statistics are the older ones).
    assert store.record_artifact(art, "toolz", make_report(n=5), origin="injector").duplicate
    assert not store.record_artifact(art, "boltons", make_report(n=5), origin="injector").duplicate


def test_the_same_text_on_other_lines_is_a_new_bug_not_a_duplicate(store):
    """Two functions holding the same line (`d2 = factory()`): the same change in each writes the same diff
    text at other lines and breaks other tests. The second is a task of its own, with an id of its own
    (the text-derived id is taken), and only writing it again is a duplicate."""
    art = make_artifact(5)
    first = store.record_artifact(art, "toolz", make_report(n=5), origin="injector", episode_id="r-it0-injector-0")
    elsewhere = art.__class__(test_script=art.test_script, test_files=art.test_files, test_parser=art.test_parser,
                              bug_inject=art.bug_inject.replace("@@ -5,1 +5,1 @@", "@@ -25,1 +25,1 @@"),
                              test_weaken=art.test_weaken)
    second = store.record_artifact(elsewhere, "toolz", make_report(n=5), origin="injector",
                                   episode_id="r-it0-injector-1")
    assert not second.duplicate and second.task_id != first.task_id
    assert store.get_task(second.task_id).artifact.bug_inject == elsewhere.bug_inject
    again = store.record_artifact(elsewhere, "toolz", make_report(n=5), origin="injector", episode_id="r-it1-injector-0")
    assert again.duplicate and again.task_id == second.task_id
    assert store.record_artifact(art, "toolz", make_report(n=5), origin="injector").task_id == first.task_id


def test_an_episode_replayed_after_a_kill_is_not_its_own_duplicate(store):
    """A run killed between recording an episode's artifact and noting its verdict replays the episode: the
    task its first write made is its own (also when the replay's artifact differs in a file), while another
    episode writing the same bug, or a write without an episode id, is a duplicate."""
    art = make_artifact(7)
    first = store.record_artifact(art, "toolz", make_report(n=7), origin="injector", episode_id="r-it0-injector-0")
    assert not first.duplicate
    replayed = store.record_artifact(art, "toolz", make_report(n=7), origin="injector", episode_id="r-it0-injector-0")
    assert replayed.task_id == first.task_id and not replayed.duplicate
    reworded = art.__class__(test_script="pytest -x\n", test_files=art.test_files, test_parser=art.test_parser,
                             bug_inject=art.bug_inject, test_weaken=art.test_weaken)
    assert not store.record_artifact(reworded, "toolz", make_report(n=7), origin="injector",
                                     episode_id="r-it0-injector-0").duplicate
    assert store.record_artifact(art, "toolz", make_report(n=7), origin="injector", episode_id="r-it0-injector-1").duplicate
    assert store.record_artifact(art, "toolz", make_report(n=7), origin="injector").duplicate


def test_task_episodes_names_the_episode_whose_artifact_made_each_task(store):
    """`task_episodes`: the episode id of a task's first artifact (what the loop's near-duplicate rule leaves
    out for that episode's replay), None for a task recorded without one; unknown ids are left out."""
    made = store.record_artifact(make_artifact(7), "toolz", make_report(n=7), origin="injector", episode_id="r-it0-injector-3")
    store.record_artifact(make_artifact(7), "toolz", make_report(n=7), origin="injector", episode_id="r-it1-injector-0")
    bare = store.record_artifact(make_artifact(8), "toolz", make_report(n=8), origin="injector")
    assert store.task_episodes([made.task_id, bare.task_id, "no-such-task"]) == {made.task_id: "r-it0-injector-3",
                                                                                 bare.task_id: None}
    assert store.task_episodes([]) == {}


def _child(store, parent_id: str, layer: str, meta: dict | None = None) -> str:
    parent = store.get_task(parent_id)
    child = Task(task_id=f"{parent_id}-ho-{normalised_hash(layer)[:8]}", repo=parent.repo,
                 artifact=parent.artifact, fail_to_pass=parent.fail_to_pass, pass_to_pass=(),
                 origin="higher_order", order=2, parent_id=parent_id, pred_patch=layer,
                 metadata=dict(meta or {}))
    return store.add_task(child)


def test_used_failed_patches_persists_the_higher_order_seen_set(store_url):
    store = open_store(store_url)
    parent_id = store.record_validation(make_artifact(6), "toolz", make_report(n=6), origin="injector")
    assert store.used_failed_patches(parent_id) == set()
    _child(store, parent_id, PRED)
    raw = PRED + "diff --git a/conftest.py b/conftest.py\n--- a/conftest.py\n+++ b/conftest.py\n@@ -1 +1 @@\n-x\n+y\n"
    other = PRED.replace("+b", "+c")
    _child(store, parent_id, other, {"failed_patch_hash": normalised_hash(raw)})
    store.close()

    # A fresh process (a resumed run) sees what the crashed one used: refuse_reason refuses both.
    reopened = open_store(store_url)
    seen = reopened.used_failed_patches(parent_id)
    parent = reopened.get_task(parent_id)
    for used in (PRED, raw, other):
        assert refuse_reason(parent, used, seen, HigherOrderConfig()) is not None, used
    fresh = PRED.replace("+b", "+d")
    assert refuse_reason(parent, fresh, seen, HigherOrderConfig()) is None
    assert reopened.used_failed_patches("no-such-task") == set()
    reopened.close()


def test_sample_tasks_filters_by_origin_order_and_repo(store):
    ids = {}
    for i in range(1, 7):
        repo = "toolz" if i <= 4 else "boltons"
        origin = "procedural" if i in (1, 2) else "injector"
        ids[i] = store.record_validation(make_artifact(i), repo, make_report(n=i), origin=origin)
    ho = store.record_validation(make_artifact(3), "toolz", make_report(n=3), origin="higher_order",
                                 parent_id=ids[3], order=2, pred_patch=PRED)
    cfg = SamplingConfig(max_repo_share=1.0, max_per_family=5)

    def draw(**kw) -> set[str]:
        return {t.task_id for t in store.sample_tasks(20, config=cfg, rng=random.Random(0), **kw)}

    assert draw() == {*ids.values(), ho}
    assert draw(origin="procedural") == {ids[1], ids[2]}
    assert draw(origin=("procedural", "higher_order")) == {ids[1], ids[2], ho}
    assert draw(order=2) == {ho}
    assert draw(order=1, repo="boltons") == {ids[5], ids[6]}
    assert draw(repo=("toolz",), origin="injector", order=(1,)) == {ids[3], ids[4]}
    assert draw(repo="nope") == set()
    # Seen tasks go through the same filters (the in-band tier and the fill-up tier).
    for task_id in (ids[5], ids[6], ho):
        store.record_attempt(task_id, role="solver", policy_version=0, reward=-1.0, turns=1, tokens=1,
                             termination="submitted")
    assert draw(repo="boltons") == {ids[5], ids[6]}
    assert draw(origin="higher_order") == {ho}
    with pytest.raises(StoreError, match="unknown origin"):
        store.sample_tasks(1, origin="magic")
