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
from agent_scaffold.policies.llama_step import LlamaStep
from agent_scaffold.policies.lookup import NgramIndex, accepted, draft_lengths
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


def test_draft_positions_go_one_at_a_time_to_the_rows_likeliest_to_keep_them():
    assert draft_lengths([5, 5, 5], [0.5, 0.5, 0.5], 7) == [3, 2, 2]  # equal rates: shared evenly
    assert draft_lengths([5, 5, 5], [0.7, 0.5, 0.5], 6) == [3, 2, 1]  # kept with 0.7, 0.5, 0.5, 0.49, 0.34, 0.25
    assert draft_lengths([5, 5, 5], [0.9, 0.3, 0.3], 6) == [5, 1, 0]  # 0.9 ** 5 = 0.59 > 0.3
    assert draft_lengths([2, 0, 5], [0.9, 0.9, 0.5], 6) == [2, 0, 4]  # a row drafts no more than it has
    assert draft_lengths([5, 5], [0.5, 0.5], 0) == [0, 0] and draft_lengths([], [], 4) == []


@pytest.fixture(scope="module")
def plain(tiny_dir):
    return HFPolicy(tiny_dir)


@pytest.fixture(scope="module")
def lookup(tiny_dir):
    return HFPolicy(tiny_dir, lookup_tokens=4, lookup_rows=64)


@pytest.fixture(scope="module")
def scarce(tiny_dir):
    """Lookup with 2 drafted positions a step among 3 rows: most steps feed rows of different lengths."""
    return HFPolicy(tiny_dir, lookup_tokens=4, lookup_rows=5)


def _ragged_steps(monkeypatch):
    """Record each `LlamaStep.many` call's row lengths."""
    seen = []
    original = LlamaStep.many

    def recorded(self, ids, positions, kv, attend, lengths=None):
        seen.append(list(lengths) if lengths is not None else [ids.shape[1]] * ids.shape[0])
        return original(self, ids, positions, kv, attend, lengths)

    monkeypatch.setattr(LlamaStep, "many", recorded)
    return seen


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


def test_greedy_decoding_with_a_few_drafted_positions_a_step_equals_plain_decoding(plain, scarce, monkeypatch):
    """Rows that feed different numbers of positions in one step (the rest padding no product computes)
    decode exactly what plain decoding does."""
    seen = _ragged_steps(monkeypatch)
    prompts = _prompts(plain)
    params = SamplingParams(temperature=0.0, max_new_tokens=40)
    want, got = plain.generate(prompts, params), scarce.generate(prompts, params)
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    for g, w in zip(got, want):
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
    assert any(len(set(lengths)) > 1 for lengths in seen), "no step fed rows of different lengths"
    assert all(sum(lengths) <= scarce.lookup_rows for lengths in seen)


def test_padding_positions_change_no_fed_position(lookup):
    """One step fed as rows of 1, 3 and 2 positions gives, at the fed positions, the logits and key/value
    columns of the same step with every position fed."""
    prompts = _prompts(lookup)
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    batches = []
    for _ in range(2):
        batch = DecodeBatch(lookup, None)
        batch.admit_many([(p, params, 0, i) for i, p in enumerate(prompts)])
        batches.append(batch)
    ids = torch.tensor([[11, 12, 13], [21, 22, 23], [31, 32, 33]])
    lengths = [1, 3, 2]
    out = []
    for batch, fed in zip(batches, (None, lengths)):
        kv = batch.kv
        first = torch.tensor([len(r.prompt) for r in batch.rows])
        pos = first[:, None] + torch.arange(3)[None]
        with torch.inference_mode():
            logits = lookup.llama_step().many(ids, pos, kv, kv.step_attend(3), fed)
        out.append((logits, [(k[:3, :, kv.end:kv.end + 3].clone(), v[:3, :, kv.end:kv.end + 3].clone())
                             for k, v in kv.kv]))
    (full, full_kv), (ragged, ragged_kv) = out
    for row, n in enumerate(lengths):
        assert torch.allclose(ragged[row, :n], full[row, :n], atol=1e-4)
        assert not ragged[row, n:].any()  # padding's logits are zeros
        for (fk, fv), (rk, rv) in zip(full_kv, ragged_kv):
            assert torch.allclose(rk[row, :, :n], fk[row, :, :n], atol=1e-5)
            assert torch.allclose(rv[row, :, :n], fv[row, :, :n], atol=1e-5)
            assert not rk[row, :, n:].any() and not rv[row, :, n:].any()  # finite: zeros


@pytest.mark.parametrize("name", ["lookup", "scarce"])
def test_sampled_tokens_with_lookup_carry_their_own_logprobs(name, request):
    """At T = 1 each recorded logprob (kept draft, residual draw, plain draw) is the one a full forward gives."""
    lookup = request.getfixturevalue(name)
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
