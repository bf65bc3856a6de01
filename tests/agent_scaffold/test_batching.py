"""Batched sampling: `HFPolicy.generate_rows` (the real embedded SmolLM2, float32 on CPU) and `BatchingPolicy`
merging the calls of concurrent threads.

`_RecordingPolicy` is a documented test double: it records when batches start and end so the tests can
check grouping and that a weight swap never lands inside a batch; the same paths run on the real
`HFPolicy` in the tests above it.
"""

from __future__ import annotations

import threading
import time

import pytest

from agent_scaffold.policies.batching import BatchingPolicy, batch_key
from agent_scaffold.policy import Completion, SamplingParams


@pytest.fixture(scope="module")
def prompts(tokenizer):
    def render(q):
        text = tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                             tokenize=False)
        return tokenizer.encode(text, add_special_tokens=False)

    # Different lengths, so the shorter prompts are left-padded inside the batch.
    return [render("List files."), render("Write a python function that merges two sorted lists, with a test."),
            render("Hi")]


def same_sample(a, b):
    """Equal samples; logprobs agree up to the float rounding that batch shape and padding change (~1e-5)."""
    return (a.token_ids == b.token_ids and a.text == b.text and a.finish_reason == b.finish_reason
            and a.policy_version == b.policy_version and a.logprobs == pytest.approx(b.logprobs, abs=1e-4))


def run_threads(fn, n):
    out, errors = [None] * n, [None] * n

    def work(i):
        try:
            out[i] = fn(i)
        except Exception as exc:  # delivered to this thread, checked by the test
            errors[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return out, errors


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_prompt_samples_the_same_alone_and_in_a_padded_batch(hf_policy, prompts, temperature):
    rows = [SamplingParams(temperature=temperature, max_new_tokens=m, seed=40 + i) for i, m in enumerate((8, 4, 6))]
    batch = hf_policy.generate_rows(prompts, rows)
    for prompt, params, b in zip(prompts, rows, batch):
        alone = hf_policy.generate_rows([prompt], [params])[0]
        # Padding changes float rounding only (~1e-5 in logprobs); it did not flip a sample here.
        assert alone.token_ids == b.token_ids and alone.finish_reason == b.finish_reason and alone.text == b.text
        assert alone.logprobs == pytest.approx(b.logprobs, abs=1e-4)
        assert len(b.token_ids) <= params.max_new_tokens and b.policy_version == hf_policy.version
    assert [len(c.token_ids) for c in batch if c.finish_reason == "length"] == \
        [r.max_new_tokens for r, c in zip(rows, batch) if c.finish_reason == "length"]


@pytest.mark.slow
def test_rows_stop_on_their_own_stop_ids_and_strings(hf_policy, prompts):
    free = hf_policy.generate_rows([prompts[0]], [SamplingParams(temperature=0, max_new_tokens=8)])[0]
    second = free.token_ids[1]
    word = hf_policy.tokenizer.decode(free.token_ids[:3], skip_special_tokens=True).split()[-1]
    rows = [SamplingParams(temperature=0, max_new_tokens=8, stop_token_ids=(second,)),
            SamplingParams(temperature=0, max_new_tokens=8, stop=(word,)),
            SamplingParams(temperature=0, max_new_tokens=8)]
    by_id, by_string, plain = hf_policy.generate_rows([prompts[0]] * 3, rows)
    assert by_id.token_ids == free.token_ids[:2] and by_id.finish_reason == "stop"  # the stop id is kept
    assert by_string.finish_reason == "stop" and word not in by_string.text
    assert free.text.startswith(by_string.text) and len(by_string.token_ids) <= 3
    # Batch shape changes float rounding (B=3 vs B=1 kernels), not the greedy path.
    assert plain.token_ids == free.token_ids and plain.logprobs == pytest.approx(free.logprobs, abs=1e-4)


@pytest.mark.slow
def test_hostile_prompts_get_a_clear_error_before_any_forward(hf_policy):
    with pytest.raises(ValueError, match=r"prompt 1 holds token ids outside the model's vocabulary \[0, 49152\)"):
        hf_policy.generate([[1, 2], [1, 10**9]], SamplingParams(max_new_tokens=1))
    with pytest.raises(ValueError, match="2 prompts but 1 sampling params"):
        hf_policy.generate_rows([[1], [2]], [SamplingParams()])
    assert hf_policy.generate([], SamplingParams()) == []


@pytest.mark.slow
def test_batching_policy_merges_concurrent_calls_and_matches_direct_sampling(hf_policy, prompts):
    policy = BatchingPolicy(hf_policy, max_batch=8, max_wait_s=0.5)
    try:
        params = [SamplingParams(max_new_tokens=4 + i, seed=100 * i) for i in range(3)]
        out, errors = run_threads(lambda i: policy.generate([prompts[i]], params[i]), 3)
        assert errors == [None] * 3
        # max_new_tokens and seed differ: still merged (continuous batching: some decode steps ran 2+ rows)
        assert policy.continuous and max(policy.sizes) >= 2
        for i in range(3):
            assert same_sample(out[i][0], hf_policy.generate([prompts[i]], params[i])[0])
        # One bad call fails alone; its batch mate still gets its completion.
        out, errors = run_threads(lambda i: policy.generate([prompts[0] if i else []], params[0]), 2)
        assert isinstance(errors[0], ValueError) and "empty" in str(errors[0])
        assert errors[1] is None and same_sample(out[1][0], hf_policy.generate([prompts[0]], params[0])[0])
    finally:
        policy.close()
    with pytest.raises(RuntimeError, match="closed"):
        policy.generate([prompts[0]], params[0])


@pytest.mark.slow
def test_weight_reload_through_batching_policy_reports_the_new_version(hf_policy, prompts):
    policy = BatchingPolicy(hf_policy)
    try:
        policy.load_weights(hf_policy.model_dir, 4)
        assert policy.version == hf_policy.version == 4
        assert policy.generate([prompts[2]], SamplingParams(max_new_tokens=1))[0].policy_version == 4
    finally:
        hf_policy.load_weights(hf_policy.model_dir, 0)
        policy.close()


class _RecordingPolicy:
    """Test double: sleeps instead of sampling and records each batch, to check grouping and swaps."""

    tokenizer = None

    def __init__(self, rows: bool = True) -> None:
        self.version = 0
        self.events: list[tuple] = []
        self.started = threading.Event()
        if rows:
            self.generate_rows = self._rows

    def _rows(self, prompts, params):
        self.events.append(("start", tuple(p.temperature for p in params)))
        self.started.set()
        time.sleep(0.1)
        self.events.append(("end", self.version))
        return [Completion((p[0],), (0.0,), "", "length", self.version) for p in prompts]

    def generate(self, prompts, params):
        return self._rows(prompts, [params] * len(prompts))

    def load_weights(self, checkpoint_dir, version):
        self.events.append(("swap", version))
        self.version = version


def test_calls_batch_by_key_and_weight_swaps_wait_for_the_batch():
    inner = _RecordingPolicy()
    policy = BatchingPolicy(inner, max_batch=4, max_wait_s=0.3)
    try:
        temps = [1.0, 1.0, 0.0, 1.0, 0.0]
        out, errors = run_threads(lambda i: policy.generate([[i]], SamplingParams(temperature=temps[i], seed=i,
                                                                                  max_new_tokens=i + 1)), 5)
        assert errors == [None] * 5 and [o[0].token_ids for o in out] == [(i,) for i in range(5)]
        starts = [e[1] for e in inner.events if e[0] == "start"]
        assert all(len(set(s)) == 1 for s in starts) and sorted(len(s) for s in starts) == [2, 3]
        # A swap requested while a batch runs waits for its end.
        inner.started.clear()
        swapper = threading.Thread(target=lambda: (inner.started.wait(), policy.load_weights("ckpt", 7)))
        swapper.start()
        out, errors = run_threads(lambda i: policy.generate([[i]], SamplingParams(seed=i)), 3)
        swapper.join()
        kinds = [e[0] for e in inner.events]
        at = kinds.index("swap")
        assert kinds[at - 2:at] == ["start", "end"] and (at + 1 == len(kinds) or kinds[at + 1] == "start")
        assert {c.policy_version for o in out for c in o} <= {0, 7} and policy.version == 7
    finally:
        policy.close()


def test_a_policy_without_generate_rows_merges_only_equal_unseeded_calls():
    inner = _RecordingPolicy(rows=False)
    policy = BatchingPolicy(inner, max_batch=8, max_wait_s=0.3)
    try:
        seeds = [None, None, 5]
        out, errors = run_threads(lambda i: policy.generate([[i]], SamplingParams(seed=seeds[i])), 3)
        assert errors == [None] * 3 and [o[0].token_ids for o in out] == [(0,), (1,), (2,)]
        assert sorted(len(e[1]) for e in inner.events if e[0] == "start") == [1, 2]
    finally:
        policy.close()
    assert batch_key(SamplingParams(seed=1, max_new_tokens=3)) == batch_key(SamplingParams())
    assert batch_key(SamplingParams(stop=("x",))) != batch_key(SamplingParams())
    with pytest.raises(ValueError, match="max_batch"):
        BatchingPolicy(inner, max_batch=0)
