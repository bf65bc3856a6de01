"""Continuous batching (`ContinuousScheduler` over `DecodeBatch`) and KV reuse across turns (`PrefixKVStore`).

Most tests run a tiny random Llama with the embedded tokenizer (`save_tiny_model`), so decode steps cost
milliseconds; the KV-reuse check also runs on the real SmolLM2 (slow). `_GatedBatch` is a documented test
double around the real `DecodeBatch`: it records each step's batch size and can hold a step until a second
request is queued, so "joins mid-batch" does not depend on thread timing.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

pytest.importorskip("transformers")

from agent_scaffold.policies.batching import BatchingPolicy
from agent_scaffold.policies.decode_batch import DecodeBatch
from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policies.kv_store import PrefixKVStore, common_prefix
from agent_scaffold.policy import SamplingParams


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return HFPolicy(tiny_dir)


@pytest.fixture(scope="module")
def prompts(tiny):
    tok = tiny.tokenizer
    return [tok.encode(t) for t in ("List the files.", "Write a function that merges two sorted lists.", "Hi")]


class _GatedBatch(DecodeBatch):
    """A real `DecodeBatch` that logs (step, batch size) and, at step `gate_at`, waits until `gate` is set.
    `joined` counts the rows admitted (a request can be admitted between two steps, before the gated one
    logs its size, so a test waits on either)."""

    def __init__(self, policy, store, log, gate, gate_at, joined=None):
        super().__init__(policy, store)
        self.log, self.gate, self.gate_at = log, gate, gate_at
        self.joined = joined if joined is not None else []

    def admit_many(self, requests):
        super().admit_many(requests)
        self.joined.extend(r[3] for r in requests)

    def step(self):
        if len(self.log) == self.gate_at:
            assert self.gate.wait(60), "the second request never arrived"
        self.log.append(len(self))
        return super().step()


def _until(condition, what: str, seconds: float = 60) -> None:
    """Poll `condition` every 10 ms; fail naming `what` after `seconds` (a test never hangs)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        threading.Event().wait(0.01)


def _serial(policy, prompt, params):
    return policy.generate_rows([prompt], [params])[0]


def test_a_request_arriving_mid_batch_joins_at_the_next_step_and_samples_as_it_would_alone(tiny, prompts,
                                                                                          monkeypatch):
    log: list[int] = []
    joined: list = []
    queued = threading.Event()
    monkeypatch.setattr(tiny, "decode_batch", lambda: _GatedBatch(tiny, None, log, queued, gate_at=5, joined=joined))
    policy = BatchingPolicy(tiny, max_batch=4)
    long_params = SamplingParams(max_new_tokens=60, seed=11, stop_token_ids=())
    short_params = SamplingParams(max_new_tokens=4, seed=22)
    out: dict[str, object] = {}
    order: list[str] = []
    try:
        first = threading.Thread(target=lambda: (out.__setitem__("long", policy.generate([prompts[1]], long_params)),
                                                 order.append("long")))
        first.start()
        _until(lambda: len(log) >= 5 or not first.is_alive(), "the long row's first steps")
        assert first.is_alive()  # the long row is decoding
        second = threading.Thread(target=lambda: (out.__setitem__("short", policy.generate([prompts[0]], short_params)),
                                                  order.append("short")))
        second.start()
        # queued behind the running row, or admitted already (between two steps)
        _until(lambda: policy._continuous._pending or len(joined) >= 2, "the second request to arrive")
        queued.set()
        second.join(60)
        first.join(60)
    finally:
        policy.close()
    long_c, short_c = out["long"][0], out["short"][0]
    # Served before the running batch ended: it joined at the next step, left after its 4 tokens, and the
    # long row went on alone.
    assert order == ["short", "long"]
    assert log[:5] == [1] * 5 and log.count(2) == 4 and log[-1] == 1
    assert list(short_c.batch_sizes) == [2] * len(short_c.token_ids)
    # Identical to serial sampling under the same seeds (per-row generators); logprobs up to float rounding.
    for c, prompt, params in ((long_c, prompts[1], long_params), (short_c, prompts[0], short_params)):
        alone = _serial(tiny, prompt, params)
        assert c.token_ids == alone.token_ids and c.finish_reason == alone.finish_reason
        assert c.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_concurrent_calls_with_mixed_params_equal_serial_sampling(tiny, prompts):
    params = [SamplingParams(max_new_tokens=12, seed=1), SamplingParams(temperature=0, max_new_tokens=7),
              SamplingParams(max_new_tokens=9, seed=3, top_k=20)]
    policy = BatchingPolicy(tiny, max_batch=8)
    out = [None] * 3
    try:
        threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, policy.generate([prompts[i]], params[i])))
                   for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for i in range(3):
            alone = _serial(tiny, prompts[i], params[i])
            assert out[i][0].token_ids == alone.token_ids
            assert out[i][0].logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        # A call of several prompts is several rows; it returns when the last one is done.
        many = policy.generate([prompts[0]] * 3, SamplingParams(max_new_tokens=5, seed=7))
        assert [c.token_ids for c in many] == [_serial(tiny, prompts[0], SamplingParams(max_new_tokens=5, seed=7 + i))
                                               .token_ids for i in range(3)]
        with pytest.raises(ValueError, match="prompt 1 is empty"):
            policy.generate([prompts[0], []], SamplingParams())
    finally:
        policy.close()


def test_a_weight_swap_waits_for_the_running_rows_and_stops_admission(tiny, tiny_dir, prompts, monkeypatch):
    log: list[int] = []
    swap_waiting = threading.Event()
    monkeypatch.setattr(tiny, "decode_batch", lambda: _GatedBatch(tiny, None, log, swap_waiting, gate_at=3))
    policy = BatchingPolicy(tiny, max_batch=4)
    out: dict[str, object] = {}
    try:
        a = threading.Thread(target=lambda: out.__setitem__("a", policy.generate([prompts[1]], SamplingParams(
            max_new_tokens=30, seed=1))))
        a.start()
        while len(log) < 3:
            threading.Event().wait(0.01)
        swap = threading.Thread(target=lambda: policy.load_weights(tiny_dir, 5))
        swap.start()
        while not policy._lock.waiting:
            threading.Event().wait(0.01)
        b = threading.Thread(target=lambda: out.__setitem__("b", policy.generate([prompts[0]], SamplingParams(
            max_new_tokens=3, seed=2))))
        b.start()
        while not policy._continuous._pending:
            threading.Event().wait(0.01)
        swap_waiting.set()
        for t in (a, swap, b):
            t.join(60)
    finally:
        policy.close()
        tiny.version = 0
    assert out["a"][0].policy_version == 0 and out["b"][0].policy_version == 5
    assert 2 not in log  # b did not join a's batch: admission stopped while the swap waited


def test_kv_reuse_across_turns_matches_a_full_prefill(tiny, prompts):
    _check_kv_reuse(tiny, prompts[1], turns=3, tokens=12)


@pytest.mark.slow
def test_kv_reuse_across_turns_matches_a_full_prefill_on_smollm2(hf_policy):
    tok = hf_policy.tokenizer
    prompt = tok.encode(tok.apply_chat_template([{"role": "user", "content": "List the files, then run pytest."}],
                                                add_generation_prompt=True, tokenize=False), add_special_tokens=False)
    _check_kv_reuse(hf_policy, prompt, turns=3, tokens=10)


def _check_kv_reuse(policy, prompt, turns, tokens):
    """An episode's turns sampled through a store (prefill of the new tokens only) vs a full prefill each turn."""
    obs = policy.tokenizer.encode("\n<observation>\nok: 3 passed\n</observation>\n")
    store = PrefixKVStore(256 * 2**20)
    reused, full = list(prompt), list(prompt)
    prefilled = 0
    for turn in range(turns):
        params = SamplingParams(max_new_tokens=tokens, seed=100 + turn)
        batch = DecodeBatch(policy, store)
        batch.admit(reused, params, params.seed, tag=0)
        (_, c_reused), = _run(batch)
        prefilled += batch.prefilled_tokens
        # the completion reports the positions its prefill computed, and engine time for both phases
        assert c_reused.prefill_tokens == batch.prefilled_tokens
        assert c_reused.prefill_s > 0 and c_reused.decode_s > 0
        c_full = _serial(policy, full, params)
        assert c_reused.token_ids == c_full.token_ids
        assert c_reused.logprobs == pytest.approx(c_full.logprobs, abs=1e-4)
        reused += list(c_reused.token_ids) + obs
        full += list(c_full.token_ids) + obs
    # Turn 1 prefilled the prompt; each later turn only the last sampled token and the observation.
    assert prefilled == len(prompt) + (turns - 1) * (1 + len(obs))
    assert store.hits == turns - 1 and store.reused_tokens > 0


def _run(batch):
    done = []
    while len(batch):
        done += batch.step()
    return done


def test_the_store_keeps_the_longest_prefix_drops_subsumed_and_stale_entries_and_caps_memory():
    import torch

    def kv(n):
        return [(torch.zeros(1, 2, n, 4), torch.zeros(1, 2, n, 4))]  # 2 * 2*n*4 floats = 64n bytes

    store = PrefixKVStore(max_bytes=64 * 10)
    store.put([1, 2, 3], kv(3), version=0)
    store.put([1, 2, 3, 4, 5], kv(5), version=0)  # subsumes [1, 2, 3]
    assert len(store) == 1 and store.nbytes == 64 * 5
    hit = store.lookup([1, 2, 3, 4, 9, 9], version=0)
    assert hit.length == 4 and hit.layers()[0][0].shape[-2] == 4
    assert store.lookup([1, 2, 3, 4, 5], version=0).length == 4  # one token always left to prefill
    assert store.lookup([7, 1], version=0) is None
    assert store.lookup([1, 2, 3, 4, 9], version=1) is None and len(store) == 0  # new weights: dropped
    store.put([5] * 6, kv(6), version=1)
    store.put([6] * 5, kv(5), version=1)  # 11 tokens > cap of 10: the least recently used goes
    assert len(store) == 1 and store.lookup([6] * 5 + [1], version=1).length == 5
    store.put([7] * 11, kv(11), version=1)  # alone over the cap: not kept
    assert store.lookup([7] * 12, version=1) is None
    assert common_prefix([1, 2, 3, 4], [1, 2, 9, 4]) == 2 and common_prefix([], [1]) == 0
    with pytest.raises(ValueError, match="max_bytes"):
        PrefixKVStore(-1)


def test_a_bad_engine_setting_is_refused_with_its_name(tiny_dir):
    from selfplay.config.run_config import PolicyConfig, RunConfig

    with pytest.raises(ValueError, match="kv_cache_mb must be a non-negative int"):
        HFPolicy(tiny_dir, kv_cache_mb=-5)
    with pytest.raises(ValueError, match=r"policy.max_batch must be >= 1 and policy.kv_cache_mb >= 0"):
        RunConfig(policy=PolicyConfig(kv_cache_mb=-1))
    with pytest.raises(ValueError, match="policy.gil_switch_ms must be >= 0"):
        RunConfig(policy=PolicyConfig(gil_switch_ms=-1))
    with pytest.raises(ValueError, match="switch_interval_s must be > 0"):
        BatchingPolicy(HFPolicy(tiny_dir), switch_interval_s=0)


@pytest.fixture()
def switch_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # Python's default
    yield
    sys.setswitchinterval(before)


def test_continuous_batching_shortens_the_gil_switch_interval_unless_told_not_to(tiny, switch_interval):
    """The decode worker re-takes the GIL after every torch op; at 5 ms it waits on the episode threads."""
    BatchingPolicy(tiny, switch_interval_s=None).close()
    assert sys.getswitchinterval() == pytest.approx(0.005)
    BatchingPolicy(tiny).close()
    assert sys.getswitchinterval() == pytest.approx(0.0005)
    BatchingPolicy(tiny, switch_interval_s=0.002).close()  # never raised back
    assert sys.getswitchinterval() == pytest.approx(0.0005)


def test_concurrent_episodes_record_batch_sizes_and_stay_token_exact(tiny_dir, tmp_path):
    """Two real episodes (tiny model, local sandboxes) through one continuous BatchingPolicy with KV reuse:
    every turn's sampled ids and logprobs are in the trajectory verbatim, and each episode says at which
    batch sizes its tokens were sampled."""
    from local_sandbox import LocalSandbox

    from agent_scaffold.agent import run_episode
    from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
    from selfplay.orchestration.iteration_metrics import batch_size_metrics, engine_metrics

    inner = HFPolicy(tiny_dir, kv_cache_mb=64)
    policy = BatchingPolicy(inner, max_batch=4)
    limits = EpisodeLimits(max_turns=3, max_new_tokens=8, max_context_tokens=4096, max_format_errors=3)
    episodes = [None, None]
    try:
        def play(i):
            box = LocalSandbox(tmp_path / str(i), {"a.py": "x = 1\n"})
            episodes[i] = run_episode(policy, box, load_role("solver"), solver_variables("spec"), limits=limits,
                                      sampling=SamplingParams(seed=i))
        threads = [threading.Thread(target=play, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        policy.close()
    for ep in episodes:
        traj = ep.trajectory
        sizes = traj.metadata["batch_sizes"]
        # Every sampled token is in the trajectory with loss mask 1, and nothing else is.
        assert set(sizes) <= {"1", "2"} and sum(sizes.values()) == sum(traj.loss_mask) > 0
    assert inner.kv_store.hits >= 1  # later turns reused the earlier turns' KV
    metrics = batch_size_metrics([ep.trajectory for ep in episodes])
    assert 1 <= metrics["rollout/batch_size_mean"] <= 2 and metrics["rollout/batch_size_p90"] in (1.0, 2.0)
    engine = engine_metrics([ep.trajectory for ep in episodes])
    # KV reuse: fewer positions were prefilled than the turns' prompts hold together
    positions = sum(len(ep.trajectory.input_ids) * len(ep.trajectory.turn_spans) for ep in episodes)
    assert 0 < engine["rollout/prefill_tokens"] < positions
    assert engine["rollout/sampled_tokens"] == sum(sum(ep.trajectory.loss_mask) for ep in episodes)
    assert engine["rollout/prefill_s"] > 0 and engine["rollout/decode_s"] > 0
    assert 0 < engine["rollout/prefill_share"] < 1
    # two rows of other lengths: some tokens were sampled beside the other row's padding
    fills = [ep.trajectory.metadata["engine"]["batch_fill"] for ep in episodes]
    assert all(0 < f <= sum(ep.trajectory.loss_mask) for f, ep in zip(fills, episodes))
    assert 0.5 <= engine["rollout/batch_fill_mean"] <= 1.0


def test_engine_metrics_split_the_engine_time_and_rate_each_phase():
    from types import SimpleNamespace

    from selfplay.orchestration.iteration_metrics import engine_metrics

    trajs = [SimpleNamespace(metadata={"engine": {"prefill_tokens": 900, "prefill_s": 3.0, "decode_s": 1.0}},
                             loss_mask=(0,) * 5 + (1,) * 10),
             SimpleNamespace(metadata={"engine": {"prefill_tokens": 300, "prefill_s": 1.0, "decode_s": 3.0}},
                             loss_mask=(1,) * 30),
             SimpleNamespace(metadata={}, loss_mask=(1,) * 99)]  # a backend that does not report: left out
    m = engine_metrics(trajs)
    assert m["rollout/prefill_share"] == 0.5 and m["rollout/prefill_tok_per_s"] == 300.0
    assert m["rollout/sampled_tokens"] == 40.0 and m["rollout/decode_tok_per_s"] == 10.0
    assert "rollout/lookup_keep_rate" not in m  # no drafts: no lookup metrics
    assert engine_metrics([SimpleNamespace(metadata={}, loss_mask=(1,))]) == {}
    trajs[0].metadata["engine"].update(drafted=40, drafts_kept=10)
    trajs[1].metadata["engine"].update(drafted=0, drafts_kept=0)
    m = engine_metrics(trajs)
    assert (m["rollout/lookup_drafted"], m["rollout/lookup_kept"], m["rollout/lookup_keep_rate"]) == (40, 10, 0.25)
    assert "rollout/batch_fill_mean" not in m  # no fill reported
    trajs[0].metadata.update(batch_sizes={"2": 10})
    trajs[0].metadata["engine"].update(batch_fill=8.0)
    trajs[1].metadata.update(batch_sizes={"1": 20, "2": 10})
    trajs[1].metadata["engine"].update(batch_fill=26.0)
    assert engine_metrics(trajs)["rollout/batch_fill_mean"] == pytest.approx(34 / 40)


def test_batch_size_metrics_are_token_weighted():
    from types import SimpleNamespace

    from selfplay.orchestration.iteration_metrics import batch_size_metrics

    trajs = [SimpleNamespace(metadata={"batch_sizes": {"1": 10, "4": 30}}),
             SimpleNamespace(metadata={"batch_sizes": {"8": 60}}), SimpleNamespace(metadata={})]
    m = batch_size_metrics(trajs)
    assert m["rollout/batch_size_mean"] == pytest.approx((10 + 120 + 480) / 100)
    assert m["rollout/batch_size_p90"] == 8.0 and m["rollout/batched_tokens"] == 100.0
    assert batch_size_metrics([SimpleNamespace(metadata={})]) == {}


def test_the_policy_server_batches_http_requests_continuously(tiny, prompts, monkeypatch):
    import httpx

    from agent_scaffold.policy_server import PolicyServer

    log: list[int] = []
    joined: list = []
    queued = threading.Event()
    monkeypatch.setattr(tiny, "decode_batch", lambda: _GatedBatch(tiny, None, log, queued, gate_at=5, joined=joined))
    srv = PolicyServer(tiny, port=0, max_batch=4)
    srv.start()
    out: dict[str, dict] = {}

    def ask(name, prompt, max_tokens, seed):
        r = httpx.post(f"{srv.url}/v1/completions", timeout=60, json={
            "prompt": prompt, "max_tokens": max_tokens, "seed": seed, "logprobs": 0, "return_token_ids": True})
        out[name] = r.json()["choices"][0]

    try:
        first = threading.Thread(target=ask, args=("long", prompts[1], 60, 11))
        first.start()
        _until(lambda: len(log) >= 5, "the long row's first steps")
        second = threading.Thread(target=ask, args=("short", prompts[0], 4, 22))
        second.start()
        _until(lambda: srv.policy._continuous._pending or len(joined) >= 2, "the second request to arrive")
        queued.set()
        second.join(60)
        first.join(60)
    finally:
        srv.shutdown()
    assert 2 in log  # the second request decoded beside the first
    for name, prompt, n, seed in (("long", prompts[1], 60, 11), ("short", prompts[0], 4, 22)):
        alone = _serial(tiny, prompt, SamplingParams(max_new_tokens=n, seed=seed))
        assert out[name]["token_ids"] == list(alone.token_ids)
        assert out[name]["logprobs"]["token_logprobs"] == pytest.approx(alone.logprobs, abs=1e-4)


def test_after_a_weight_sync_greedy_output_equals_the_new_models_and_old_kv_is_not_reused(tiny_dir, tmp_path,
                                                                                         prompts):
    """A memory-mode sync (tensors copied in place, as the CPU demo does) through the continuous BatchingPolicy:
    the KV kept from the old weights must not be reused, and greedy output must equal the new model's own."""
    from selfplay.learner.tiny_model import save_tiny_model
    from selfplay.learner.weight_sync import HFPolicySync

    other = HFPolicy(save_tiny_model(tmp_path / "other", seed=1))
    inner = HFPolicy(tiny_dir, kv_cache_mb=64)
    policy = BatchingPolicy(inner, max_batch=4)
    greedy = SamplingParams(temperature=0, max_new_tokens=6)
    try:
        first = policy.generate([prompts[1]], greedy)[0]
        turn2 = prompts[1] + list(first.token_ids) + prompts[0]
        assert len(inner.kv_store) >= 1
        HFPolicySync(policy, mode="memory").push(1, state_dict=other.model.state_dict())
        after = policy.generate([turn2], greedy)[0]
    finally:
        policy.close()
    assert after.policy_version == 1 and inner.kv_store.hits == 0  # the old entries were dropped, not used
    assert after.token_ids == _serial(other, turn2, greedy).token_ids
