"""Speculative decoding with prompt-lookup drafts (`lookup.py`, `DecodeBatch` with `lookup_tokens`).

The drafts and the acceptance rule are pure; the decode path runs a tiny random Llama with the embedded
tokenizer (`save_tiny_model`), whose greedy output repeats itself, so its drafts are kept often.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from agent_scaffold.policies.decode_batch import DecodeBatch
from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policies.kv_store import PrefixKVStore
from agent_scaffold.policies.lookup import NgramIndex, accepted
from agent_scaffold.policies.sampling import process_logits
from agent_scaffold.policy import SamplingParams


def test_a_draft_continues_the_latest_earlier_occurrence_of_the_longest_suffix():
    index = NgramIndex([1, 2, 3, 4, 1, 2])
    assert index.draft(3) == [3, 4, 1]
    index = NgramIndex([5, 1, 2, 9, 7, 1, 2, 8, 4, 1, 2])
    assert index.draft(2) == [8, 4]  # (4, 1, 2) was never seen; (1, 2) last continued with 8
    index.extend([8])
    assert index.draft(4) == [4, 1, 2, 8]  # (1, 2, 8) seen once, ending at 7
    assert NgramIndex([1, 2, 3]).draft(5) == [] and NgramIndex([1, 1]).draft(0) == []
    grown = NgramIndex()
    grown.extend([3, 3, 3])
    assert grown.draft(5) == [3]  # a continuation never runs past the sequence's end


def test_keeping_a_draft_with_probability_p_and_drawing_the_rest_otherwise_samples_p():
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logp = p.log()[None]
    rng = random.Random(0)
    trials, counts = 40_000, [0] * 4
    for draft in (1, 3):
        counts = [0] * 4
        for _ in range(trials):
            if accepted(logp, [draft], rng.random, greedy=False):
                counts[draft] += 1
            else:  # the residual: p without the draft, renormalised
                rest = [float(x) if i != draft else 0.0 for i, x in enumerate(p)]
                counts[rng.choices(range(4), weights=rest)[0]] += 1
        assert [c / trials for c in counts] == pytest.approx(p.tolist(), abs=0.01)
    assert accepted(logp.expand(2, -1), [0, 0], rng.random, greedy=True) == 2
    assert accepted(logp.expand(2, -1), [0, 1], rng.random, greedy=True) == 1


@pytest.fixture(scope="module")
def plain(tiny_dir):
    return HFPolicy(tiny_dir)


@pytest.fixture(scope="module")
def lookup(tiny_dir):
    return HFPolicy(tiny_dir, lookup_tokens=4, lookup_rows=64)


def _prompts(policy):
    tok = policy.tokenizer
    return [tok.encode(t) for t in ("def f(x):\n    return x\ndef f(x):\n    return", "a b c a b c a b", "Hi")]


def _teacher_logprobs(policy, prompt, ids, params):
    """Each sampled id's logprob under `params`' distribution, from one full forward of prompt + ids."""
    with torch.inference_mode():
        logits = policy.model(input_ids=torch.tensor([list(prompt) + list(ids)])).logits[0]
    logp = process_logits(logits[len(prompt) - 1:-1], params)
    return logp.gather(-1, torch.tensor(ids)[:, None]).squeeze(-1).tolist()


def test_greedy_decoding_with_lookup_drafts_equals_plain_decoding(plain, lookup):
    prompts = _prompts(plain)
    params = SamplingParams(temperature=0.0, max_new_tokens=40)
    want = plain.generate(prompts, params)
    got = lookup.generate(prompts, params)
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    for g, w in zip(got, want):
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
    assert sum(c.drafts_kept for c in got) > 0, "no draft was kept: the test did not exercise lookup steps"
    assert all(c.drafted == 0 for c in want)


def test_sampled_tokens_with_lookup_carry_their_own_logprobs(lookup):
    """At T = 1 each recorded logprob (kept draft, residual draw, plain draw) is the one a full forward gives."""
    prompts = _prompts(lookup)
    params = SamplingParams(temperature=1.0, top_k=3, max_new_tokens=40, seed=7)  # peaked: drafts get kept
    out = lookup.generate(prompts, params)
    assert sum(c.drafts_kept for c in out) > 0 and sum(c.drafted - c.drafts_kept for c in out) > 0
    for prompt, c in zip(prompts, out):
        assert len(c.token_ids) == 40 or c.finish_reason == "stop"
        assert list(c.logprobs) == pytest.approx(_teacher_logprobs(lookup, prompt, c.token_ids, params), abs=1e-4)


def test_kv_reuse_across_turns_with_lookup_stores_only_the_kept_positions(lookup):
    """A finished row's stored KV leaves out its rejected drafts' columns: the next turn, prefilled from the
    store, samples the logprobs a full forward gives."""
    prompt = _prompts(lookup)[0]
    obs = lookup.tokenizer.encode("\n<observation>\nok: 3 passed\n</observation>\n")
    store = PrefixKVStore(64 * 2**20)
    context, rejected = list(prompt), 0
    for turn in range(3):
        params = SamplingParams(temperature=1.0, top_k=3, max_new_tokens=24, seed=100 + turn)
        batch = DecodeBatch(lookup, store, lookup.lookup_tokens, lookup.lookup_rows)
        batch.admit(context, params, params.seed, tag=0)
        done = []
        while len(batch):
            done += batch.step()
        (_, c), = done
        assert list(c.logprobs) == pytest.approx(_teacher_logprobs(lookup, context, c.token_ids, params), abs=1e-4)
        context += list(c.token_ids) + obs
        rejected += c.drafted - c.drafts_kept
    assert store.hits == 2 and rejected > 0


def test_lookup_settings_out_of_range_are_refused_with_their_names(tiny_dir):
    from selfplay.config.run_config import PolicyConfig, RunConfig

    with pytest.raises(ValueError, match=r"lookup_tokens must be an int in \[0, 32\]"):
        HFPolicy(tiny_dir, lookup_tokens=33)
    with pytest.raises(ValueError, match="lookup_rows must be an int"):
        HFPolicy(tiny_dir, lookup_rows=-1)
    with pytest.raises(ValueError, match=r"policy.lookup_tokens must be in \[0, 32\]"):
        RunConfig(policy=PolicyConfig(lookup_tokens=-1))
