"""Benchmark the learner against plain HF training on the same batch (CPU here; GPU when present).

    .venv/bin/python scripts/bench_learner.py [--lengths 1024,2048,4096] [--repeats 3] [--chunk-lengths 2048,4096,8192]
        [--variants learner,learner-ckpt] [--gpu-lengths 8192,32768]

1. Learner step (packing, chunked logprobs, DAPO loss, DeepSpeed backward) vs plain HF
   `model(input_ids, labels).loss.backward()` on one sequence of each length, both fp32 without
   gradient checkpointing (the same work): tokens/s (forward+backward only, the optimizer step timed
   apart) and peak resident memory added during forward+backward (and, for the learner, the whole step). Ratio = learner time / HF time.
   Both sides run one 64-token warm-up step first, so one-time allocations (gradients, Adam states,
   DeepSpeed buckets) are not counted in the measured step.
   Variants: `learner` is the default path (fused head); `learner-ckpt` checkpoints head chunks instead.
2. Peak memory and time of naive, chunked (checkpointed) and fused logprobs (forward+backward) through
   the real lm_head.
3. GPU section (CUDA only): tokens/s, MFU and peak memory of a learner step on a random-init model of
   Qwen2.5-0.5B's shape in bf16 at 8k and 32k tokens.
4. Rollout generation (--rollout-batches; GPU, or CPU with the `tiny` shape as a smoke test): tokens/s of the
   scaffold's continuous batching (B threads, one prompt each, as concurrent episodes call it) against
   `model.generate` on the whole batch. Without deepspeed (a GPU box with only torch and transformers):
   `--gpu-only --gpu-lengths ''` runs this section alone; the learner engine is imported only where used.

Each measurement runs in a fresh subprocess (so peaks do not mix); figures are medians over --repeats.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policies.batching import BatchingPolicy
from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policy import SamplingParams
from selfplay.learner.batch import Sample
from selfplay.learner.config import EngineConfig

# selfplay.learner.engine imports deepspeed: it is imported inside the learner workers only, so the rollout
# section runs where deepspeed is not installed.


class PeakRSS:
    """Polls this process's resident set size; `.peak` - `.start` is what a block added at its peak."""
    def __enter__(self) -> PeakRSS:
        self.start = self.peak = self._rss()
        self._stop = False
        self._t = threading.Thread(target=self._poll, daemon=True)
        self._t.start()
        return self

    def _poll(self) -> None:
        while not self._stop:
            self.peak = max(self.peak, self._rss())
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._t.join()
        self.peak = max(self.peak, self._rss())

    @property
    def added_mb(self) -> float:
        return (self.peak - self.start) / 2**20

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def half_sample(ids: list[int], rollout_logprob: float = -1.0):  # -> Sample
    """One training sample: the first half of `ids` is prompt, the second half sampled tokens."""
    n, h = len(ids), len(ids) // 2
    return Sample(tuple(ids), (0,) * h + (1,) * (n - h), (0.0,) * h + (rollout_logprob,) * (n - h), 1.0)


def hf_train_model(grad_ckpt: bool = False):  # -> transformers model
    """The embedded model as plain HF training sees it: fp32, SDPA, train mode."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(default_model_dir(), dtype=torch.float32, attn_implementation="sdpa")
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def time_optimizer_steps(engine, before_step=None) -> list[float]:
    """Wraps `engine`'s DeepSpeed step so each call's seconds are appended to the returned list (the
    optimizer step is timed apart from forward+backward); `before_step()` runs just before each."""
    times: list[float] = []
    orig = engine.engine.step

    def timed_step(*a: object, **k: object) -> object:
        if before_step:
            before_step()
        t = time.perf_counter()
        out = orig(*a, **k)
        times.append(time.perf_counter() - t)
        return out

    engine.engine.step = timed_step
    return times


def worker(kind: str, length: int, opts: argparse.Namespace) -> dict:
    import torch

    torch.manual_seed(0)
    ids = torch.randint(0, 49152, (length,)).tolist()
    warm_ids = ids if opts.warm_full else ids[:64]
    if kind == "hf":
        model = hf_train_model(opts.grad_ckpt)
        warm = torch.tensor([warm_ids])
        model(input_ids=warm, labels=warm).loss.backward()
        model.zero_grad(set_to_none=True)  # as optimizer.zero_grad() does: the step allocates its gradients
        x = torch.tensor([ids])
        with PeakRSS() as mem:
            t = time.perf_counter()
            model(input_ids=x, labels=x).loss.backward()
            dt = time.perf_counter() - t
        return {"fwd_bwd_s": dt, "peak_mb": mem.added_mb}
    if kind in ("learner", "learner-ckpt"):
        from selfplay.learner.engine import LearnerEngine

        engine = LearnerEngine(EngineConfig(lr=1e-6, gradient_checkpointing=opts.grad_ckpt, token_budget=1 << 20,
                                            logprob_chunk=1024, fused_head=kind == "learner"))
        fb_peak: list[int] = []
        meter: list[PeakRSS] = []
        # The forward+backward part of the step ends when DeepSpeed's step starts.
        step_times = time_optimizer_steps(engine, lambda: meter and fb_peak.append(meter[0].peak))
        # Warm-up step (64 tokens, or full length): allocates optimizer states and gradient buckets once.
        engine.train_step([half_sample(warm_ids)])
        step_times.clear()
        with PeakRSS() as mem:
            meter.append(mem)
            t = time.perf_counter()
            engine.train_step([half_sample(ids)])
            total = time.perf_counter() - t
        return {"fwd_bwd_s": total - step_times[0], "opt_step_s": step_times[0],
                "peak_mb": (fb_peak[-1] - mem.start) / 2**20, "step_peak_mb": mem.added_mb}
    if kind in ("chunked", "naive", "fused"):
        from transformers import AutoModelForCausalLM

        from selfplay.learner.logprobs import chunked_logprobs, fused_head_loss, naive_logprobs

        head = AutoModelForCausalLM.from_pretrained(default_model_dir(), dtype=torch.float32).get_output_embeddings()
        hidden = torch.randn(length, head.in_features, requires_grad=True)
        targets = torch.tensor(ids)
        with PeakRSS() as mem:
            t = time.perf_counter()
            if kind == "fused":  # the same loss, sum of logprobs, with its gradients made in forward
                fused_head_loss(head, hidden, targets, lambda lp, s, e: lp.sum(), 1024)[0].backward()
            else:
                lp, _ = chunked_logprobs(head, hidden, targets, 1024) if kind == "chunked" else naive_logprobs(head, hidden, targets)
                lp.sum().backward()
            dt = time.perf_counter() - t
        return {"fwd_bwd_s": dt, "peak_mb": mem.added_mb}
    if kind.startswith("gpu"):  # gpu:<model>:<side>
        _, model, side = kind.split(":")
        return gpu_worker(length, model, side, opts.tokenizer)
    if kind.startswith("rollout"):  # rollout:<model>, LENGTH is the batch size
        return rollout_worker(length, kind.partition(":")[2] or "0.5b", opts.tokenizer, opts.rollout_new_tokens,
                              opts.rollout_prompt_len, opts.rollout_decodes.split(","), opts.repeats)
    if kind == "ab":
        return ab_worker(ids, opts.ab_reps)
    raise SystemExit(f"unknown worker kind {kind}")


def ab_worker(ids: list[int], reps: int) -> dict:
    """HF and learner in one process, steps alternating (HF, learner, HF, ...) after a full-length warm-up
    of each: the steady state that training sees, with machine-load drift hitting both sides alike."""
    import torch

    from selfplay.learner.engine import LearnerEngine

    sample = half_sample(ids)
    engine = LearnerEngine(EngineConfig(lr=1e-6, gradient_checkpointing=False, token_budget=1 << 20))
    opt_s = time_optimizer_steps(engine)
    model = hf_train_model()
    x = torch.tensor([ids])
    hf, ln = [], []
    for _ in range(reps + 1):  # the first pair is the warm-up
        t = time.perf_counter()
        model(input_ids=x, labels=x).loss.backward()
        hf.append(time.perf_counter() - t)
        model.zero_grad(set_to_none=True)
        t = time.perf_counter()
        engine.train_step([sample])
        ln.append(time.perf_counter() - t - opt_s[-1])
    return {"hf_s": hf[1:], "learner_s": ln[1:]}


# Qwen2.5 shapes (151,936-token vocabulary, tied embeddings), randomly initialised: no download.
GPU_MODELS = {
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6),
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6),
    # Not a Qwen size: a 10M-parameter shape (mostly embeddings) for CPU smoke tests of the GPU code paths.
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6),
    # SmolLM2-135M's shape, a Llama: the one shape here whose decode steps run through `LlamaStep`.
    "smollm2": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True, rope_theta=1e5),
}
LLAMA_MODELS = {"smollm2"}
"""The GPU_MODELS built as `LlamaConfig` (the others as `Qwen2Config`)."""
GPU_MODEL = GPU_MODELS["0.5b"]
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}
"""Dense bf16 peak of each device family (no sparsity), for MFU."""


def gpu_model_dir(name: str, tokenizer_dir: str | None) -> str:
    """A random-init checkpoint of `name`'s shape (bf16 safetensors), saved once per machine and reused by
    every worker subprocess; positions up to 131,072 (the 128k target)."""
    target = Path(tempfile.gettempdir()) / f"bench-gpu-model-{name}"
    with open(f"{target}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "config.json").exists():
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, Qwen2Config

            if tokenizer_dir is None:
                tokenizer_dir = str(default_model_dir())
            torch.manual_seed(0)
            config_class = LlamaConfig if name in LLAMA_MODELS else Qwen2Config
            config = config_class(max_position_embeddings=131072, **GPU_MODELS[name])
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
            model.save_pretrained(f"{target}.tmp")
            AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(f"{target}.tmp")  # the engine saves it
            Path(f"{target}.tmp").rename(target)
    return str(target)


def step_flops(params: int, layers: int, hidden: int, length: int) -> float:
    """Model FLOPs of one training step on one sequence: 6 per parameter per token (forward + backward)
    plus causal attention, 6 * layers * hidden * T per token (half of the 12 L H T of full attention).
    Gradient checkpointing's recompute is not counted (MFU, not hardware utilisation)."""
    return 6 * params * length + 6 * layers * hidden * length * length


def gpu_worker(length: int, name: str = "0.5b", side: str = "learner", tokenizer_dir: str | None = None,
               steps: int = 2) -> dict:
    """Timed training steps on one `length`-token sequence of a random-init model in bf16 with decoder
    gradient checkpointing, on CUDA when present (the CPU run is a smoke test of this code).

    side "learner": `LearnerEngine.train_step` (ZeRO-2 on one GPU, fused head, DAPO loss, optimizer step).
    side "hf": plain `model(input_ids, labels).loss.backward()` + AdamW step with the same settings (SDPA,
    bf16, gradient checkpointing): the baseline the learner is held against. An OOM is reported, not raised.
    The median of `steps` steps after a 64-token warm-up step is reported."""
    import torch

    cuda = torch.cuda.is_available()
    shape = GPU_MODELS[name]
    model_dir = gpu_model_dir(name, tokenizer_dir)
    torch.manual_seed(0)
    ids = torch.randint(0, shape["vocab_size"], (length,)).tolist()
    if side == "learner":
        from selfplay.learner.engine import LearnerEngine

        engine = LearnerEngine(EngineConfig(model_dir=model_dir, dtype="bf16" if cuda else "fp32", lr=1e-6,
                                            gradient_checkpointing=True, token_budget=max(length, 64),
                                            logprob_chunk=4096))
        params = sum(p.numel() for p in engine.module.parameters())
        opt_times = time_optimizer_steps(engine)

        def step(tokens: list[int]) -> None:
            engine.train_step([half_sample(tokens, -5.0)])
    else:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if cuda else torch.float32,
                                                     attn_implementation="sdpa").to("cuda" if cuda else "cpu")
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.1)
        params = sum(p.numel() for p in model.parameters())

        def step(tokens: list[int]) -> None:
            x = torch.tensor([tokens], device=model.device)
            model(input_ids=x, labels=x).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    name_dev = torch.cuda.get_device_name() if cuda else "cpu"
    out = {"device": name_dev, "model": name, "side": side, "params": params, "tokens": length}
    try:
        step(ids[:64])  # warm-up: optimizer states, buckets, kernels
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            step(ids)
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
    except RuntimeError as exc:  # torch.OutOfMemoryError, or an OOM that a library re-raised as RuntimeError
        if "out of memory" not in str(exc).lower():
            raise
        return {**out, "oom": True, "error": str(exc).splitlines()[0][:200]}
    dt = statistics.median(times)
    if side == "learner":
        out["opt_step_s"] = statistics.median(opt_times[-steps:])
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name_dev), None)
    flops = step_flops(params, shape["num_hidden_layers"], shape["hidden_size"], length)
    return {**out, "oom": False, "step_s": dt, "tokens_per_s": length / dt,
            "mfu": flops / dt / (peak * 1e12) if peak else None,
            "peak_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else None}


def rollout_worker(batch: int, name: str = "0.5b", tokenizer_dir: str | None = None, new_tokens: int = 128,
                   prompt_len: int = 512, decodes: Sequence[str] = ("fast",), repeats: int = 1) -> dict:
    """Generation tokens/s on `batch` random `prompt_len`-token prompts, temperature 1, eos disabled (random
    weights: every row samples all `new_tokens`, so every side makes the same number of tokens):

    - scaffold: `batch` threads each calling `BatchingPolicy(HFPolicy, max_batch=batch).generate([prompt])`
      at once, as concurrent episodes do: continuous batching (`ContinuousScheduler` driving a
      `DecodeBatch`); total sampled tokens / wall time. `mean_decode_batch` is the mean live rows per decode
      step (rows join as the scheduler admits them, so it can be a little under `batch`). Once per decode
      path in `decodes` ("fast": `LlamaStep` where the model is a Llama; "hf": the HF forward), each its own
      `HFPolicy`, the paths alternating `repeats` times in this one process.
    - generate: `model.generate` on the whole batch (no top-k/top-p).
    - single: `HFPolicy.generate` on one prompt (independent of `batch`), through the first decode path.
    Each side first runs a warm-up on the same prompts with 4 new tokens (kernels, cuBLAS heuristics and the
    allocator at these shapes: the old loop figure of 11 tok/s at batch 1 was 54 in steady state); the KV
    store is off, so the warm-up leaves nothing that the timed call reuses."""
    import torch

    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    model_dir = gpu_model_dir(name, tokenizer_dir)
    torch.manual_seed(0)
    prompts = torch.randint(0, GPU_MODELS[name]["vocab_size"], (batch, prompt_len)).tolist()
    params = SamplingParams(max_new_tokens=new_tokens, temperature=1.0, seed=1)
    warm = SamplingParams(max_new_tokens=4, temperature=1.0, seed=0)
    policies = {}
    for decode in decodes:
        hf = HFPolicy(model_dir, device="cuda" if cuda else "cpu", dtype=torch.bfloat16 if cuda else torch.float32,
                      fast_decode=decode == "fast")
        hf.eos_ids = frozenset()  # DecodeBatch reads the policy's stop ids: none, so no row ends early
        policies[decode] = BatchingPolicy(hf, max_batch=batch)
        assert policies[decode].continuous, "HFPolicy has decode_batch(): BatchingPolicy should batch it continuously"
    first = policies[decodes[0]].policy

    first.generate(prompts[:1], warm)
    sync()
    t = time.perf_counter()
    single = first.generate(prompts[:1], params)
    sync()
    single_s = time.perf_counter() - t

    def concurrent(policy: BatchingPolicy, rows: list[list[int]], p: SamplingParams) -> tuple[list, float]:
        """One thread per prompt, all released at once; (completions, wall seconds)."""
        out: list = [None] * len(rows)
        gate = threading.Barrier(len(rows) + 1)

        def call(i: int) -> None:
            gate.wait()
            out[i] = policy.generate([rows[i]], p.with_(seed=p.seed + i))[0]

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(rows))]
        for th in threads:
            th.start()
        gate.wait()
        t0 = time.perf_counter()
        for th in threads:
            th.join()
        sync()
        return out, time.perf_counter() - t0

    scaffold: dict[str, list[dict]] = {d: [] for d in decodes}
    for policy in policies.values():
        concurrent(policy, prompts, warm)
    for _ in range(repeats):
        for decode, policy in policies.items():
            before = Counter(policy.sizes)
            done, wall = concurrent(policy, prompts, params)
            steps = Counter(policy.sizes)
            steps.subtract(before)
            if any(c is None for c in done):
                raise RuntimeError("a scaffold call returned no completion")
            n_steps = sum(steps.values())
            tokens = sum(len(c.token_ids) for c in done)
            scaffold[decode].append({
                "tok_s": tokens / wall, "tokens": tokens, "s": wall,
                "prefill_s": sum(c.prefill_s for c in done),  # batched prefills shared by prompt length
                "mean_decode_batch": sum(b * n for b, n in steps.items()) / n_steps if n_steps else None,
                "decode_steps": n_steps})
    for policy in policies.values():
        policy.close()

    model = first.model
    x = torch.tensor(prompts, device=model.device)
    gen_kwargs = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=new_tokens,
                      min_new_tokens=new_tokens, pad_token_id=0)
    with torch.inference_mode():
        model.generate(x, attention_mask=torch.ones_like(x), **{**gen_kwargs, "max_new_tokens": 4, "min_new_tokens": 4})
        sync()
        t = time.perf_counter()
        gen = model.generate(x, attention_mask=torch.ones_like(x), **gen_kwargs)
        sync()
    gen_s = time.perf_counter() - t
    gen_tokens = (gen.shape[1] - prompt_len) * batch
    return {"device": torch.cuda.get_device_name() if cuda else "cpu", "model": name, "batch": batch,
            "prompt_len": prompt_len, "new_tokens": new_tokens, "scaffold": scaffold,
            "writes_out": first.llama_step() is not None if decodes[0] == "fast" else None,
            "generate_tok_s": gen_tokens / gen_s, "generate_tokens": gen_tokens, "generate_s": gen_s,
            "single_tok_s": len(single[0].token_ids) / single_s}


WORKER_FLAGS: list[str] = []
"""The options main() forwards to every worker subprocess (--grad-ckpt, --warm-full, --ab-reps N)."""


def run(kind: str, length: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", kind, str(length), *WORKER_FLAGS]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} {length} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lengths", default="1024,2048,4096")
    p.add_argument("--chunk-lengths", default="2048,4096,8192")
    p.add_argument("--gpu-lengths", default="8192,32768,65536,131072")
    p.add_argument("--gpu-models", default="0.5b,1.5b", help=f"shapes among {sorted(GPU_MODELS)}")
    p.add_argument("--gpu-sides", default="learner,hf", help="learner and/or hf (plain HF baseline)")
    p.add_argument("--rollout-batches", default="1,8,32", help="HF generation batch sizes (GPU section)")
    p.add_argument("--rollout-model", default="0.5b", choices=sorted(GPU_MODELS),
                   help="shape of the rollout section's model; `tiny` also runs on CPU (a smoke test)")
    p.add_argument("--rollout-new-tokens", type=int, default=128)
    p.add_argument("--rollout-prompt-len", type=int, default=512)
    p.add_argument("--rollout-decodes", default="fast",
                   help="decode paths of the scaffold side, alternating in each worker: fast (LlamaStep where the "
                        "model is a Llama, `smollm2`) and/or hf (the HF forward)")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer folder for the random GPU models (default: the embedded model's)")
    p.add_argument("--gpu-only", action="store_true", help="skip the CPU sections")
    p.add_argument("--variants", default="learner",
                   help="learner (fused head, the default path) and/or learner-ckpt (checkpointed head chunks)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--grad-ckpt", action="store_true",
                   help="gradient checkpointing of decoder layers on both sides (needed for 16k in 24 GB)")
    p.add_argument("--warm-full", action="store_true",
                   help="warm up with a full-length step on both sides and time the second (steady state)")
    p.add_argument("--ab-lengths", default="",
                   help="also run the in-process A/B (steady state, alternating steps) at these lengths")
    p.add_argument("--ab-reps", type=int, default=4)
    p.add_argument("--worker", nargs=2, metavar=("KIND", "LENGTH"))
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker[0], int(a.worker[1]), a)))
        return
    WORKER_FLAGS[:] = (["--grad-ckpt"] * a.grad_ckpt + ["--warm-full"] * a.warm_full
                       + ["--ab-reps", str(a.ab_reps)] + (["--tokenizer", a.tokenizer] if a.tokenizer else [])
                       + ["--rollout-new-tokens", str(a.rollout_new_tokens),
                          "--rollout-prompt-len", str(a.rollout_prompt_len),
                          "--rollout-decodes", a.rollout_decodes, "--repeats", str(a.repeats)])
    import torch

    print(f"# bench_learner: torch {torch.__version__}, {os.cpu_count()} CPUs, repeats {a.repeats}\n")
    if not a.gpu_only:
        cpu_sections(a)
    gpu_section(a)


def cpu_sections(a: argparse.Namespace) -> None:
    variants = [v for v in a.variants.split(",") if v]
    ckpt = ", decoder gradient checkpointing on both sides" if a.grad_ckpt else ""
    ckpt += ", steady state (full-length warm-up step)" if a.warm_full else ""
    print(f"## Learner step vs plain HF forward+backward (SmolLM2-135M, fp32, CPU, one sequence{ckpt})\n")
    print("| tokens | variant | HF tok/s | learner tok/s | time ratio learner/HF | HF peak MB | learner peak MB "
          "| memory ratio | learner peak MB incl. optimizer step | optimizer step s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in a.lengths.split(",") if x]:
        hf: list[dict] = []
        ln: dict[str, list[dict]] = {v: [] for v in variants}
        for _ in range(a.repeats):  # interleaved so machine load drifts hit all sides alike
            hf.append(run("hf", n))
            for v in variants:
                ln[v].append(run(v, n))
        for v, rows in ln.items():
            ratios = [r["fwd_bwd_s"] / h["fwd_bwd_s"] for h, r in zip(hf, rows)]
            print(f"| {n} | {v} | {n / median(hf, 'fwd_bwd_s'):.0f} | {n / median(rows, 'fwd_bwd_s'):.0f} | "
                  f"{statistics.median(ratios):.2f} | {median(hf, 'peak_mb'):.0f} | {median(rows, 'peak_mb'):.0f} | "
                  f"{median(rows, 'peak_mb') / median(hf, 'peak_mb'):.2f} | {median(rows, 'step_peak_mb'):.0f} | "
                  f"{median(rows, 'opt_step_s'):.2f} |", flush=True)
    if a.ab_lengths:
        print("\n## In-process A/B: HF and learner steps alternating in one process, after a full-length "
              "warm-up of each\n")
        print("| tokens | HF s (median) | learner s (median) | per-pair ratios | median ratio |")
        print("|---|---|---|---|---|")
        for n in [int(x) for x in a.ab_lengths.split(",") if x]:
            r = run("ab", n)
            ratios = [lv / hv for hv, lv in zip(r["hf_s"], r["learner_s"])]
            print(f"| {n} | {statistics.median(r['hf_s']):.2f} | {statistics.median(r['learner_s']):.2f} | "
                  f"{', '.join(f'{x:.2f}' for x in ratios)} | {statistics.median(ratios):.2f} |", flush=True)
    print("\n## Head: naive vs chunked (checkpointed, 1024 positions) vs fused logprobs, forward+backward "
          "through the lm_head (V=49152)\n")
    print("| positions | naive peak MB | chunked peak MB | fused peak MB | chunked/naive time | fused/naive time |")
    print("|---|---|---|---|---|---|")
    for n in [int(x) for x in a.chunk_lengths.split(",") if x]:
        res: dict[str, list[dict]] = {"naive": [], "chunked": [], "fused": []}
        for _ in range(a.repeats):
            for kind, rows in res.items():
                rows.append(run(kind, n))

        def time_ratio(kind: str, res: dict[str, list[dict]] = res) -> float:
            return statistics.median(r["fwd_bwd_s"] / v["fwd_bwd_s"] for r, v in zip(res[kind], res["naive"]))

        print(f"| {n} | {median(res['naive'], 'peak_mb'):.0f} | {median(res['chunked'], 'peak_mb'):.0f} | "
              f"{median(res['fused'], 'peak_mb'):.0f} | {time_ratio('chunked'):.2f} | {time_ratio('fused'):.2f} |",
              flush=True)


def gpu_section(a: argparse.Namespace) -> None:
    import torch

    cuda = torch.cuda.is_available()
    models = [x for x in a.gpu_models.split(",") if x]
    lengths = [int(x) for x in a.gpu_lengths.split(",") if x]
    if models and lengths:  # `--gpu-lengths ''` skips it (and deepspeed with it)
        if cuda:
            learner_table(a, models, lengths)
        else:
            print("\n## GPU: learner step\n\nno GPU available")
    if a.rollout_batches:
        if cuda or a.rollout_model == "tiny":
            rollout_table(a)
        else:
            print("\n## GPU: rollout generation\n\nno GPU available (`--rollout-model tiny` runs it on CPU)")


def learner_table(a: argparse.Namespace, models: list[str], lengths: list[int]) -> None:
    print("\n## GPU: one training step on one sequence, random-init Qwen2.5 shapes, bf16, decoder gradient "
          "checkpointing; learner = ZeRO-2 + fused head + DAPO loss, hf = plain forward+backward+AdamW\n")
    print("| device | model | params | tokens | side | step s | of which optimizer s | tokens/s | MFU | peak GB "
          "| learner/HF time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sides = [x for x in a.gpu_sides.split(",") if x]
    for model in models:
        oom = set()
        for n in lengths:
            got: dict[str, dict] = {}
            for side in sides:
                if side in oom:  # a longer sequence cannot fit where a shorter one did not
                    got[side] = {"oom": True}
                    continue
                rows = [run(f"gpu:{model}:{side}", n) for _ in range(a.repeats)]
                if any(r["oom"] for r in rows):
                    oom.add(side)
                    got[side] = {"oom": True}
                    print(f"| | {model} | | {n} | {side} | OOM | | | | | |", flush=True)
                    continue
                r = rows[0]
                got[side] = {"step_s": median(rows, "step_s")}
                mfu = statistics.median(x["mfu"] for x in rows) if r["mfu"] is not None else float("nan")
                learner = got.get("learner", {})
                ratio = f"{learner['step_s'] / got[side]['step_s']:.2f}" if side == "hf" and "step_s" in learner else ""
                opt = f"{median(rows, 'opt_step_s'):.2f}" if side == "learner" else ""
                print(f"| {r['device']} | {model} | {r['params'] / 1e9:.2f}B | {n} | {side} | "
                      f"{median(rows, 'step_s'):.2f} | {opt} | {median(rows, 'tokens_per_s'):.0f} | {mfu:.1%} | "
                      f"{median(rows, 'peak_gb'):.1f} | {ratio} |", flush=True)


def rollout_table(a: argparse.Namespace) -> None:
    shape = "Qwen2.5-0.5B" if a.rollout_model == "0.5b" else a.rollout_model
    print(f"\n## Rollout generation, random-init {shape} shape, bf16 on GPU (fp32 on CPU), "
          f"{a.rollout_prompt_len}-token prompts, {a.rollout_new_tokens} new tokens, temperature 1, eos off\n")
    print("Scaffold continuous: B threads each call `BatchingPolicy(HFPolicy, max_batch=B).generate([prompt])` at "
          "once (continuous batching, as concurrent episodes use it); mean decode batch = live rows per decode "
          "step; one row per decode path (fast: `LlamaStep` where the model is a Llama; hf: the HF forward), the "
          f"paths alternating {a.repeats} time(s) in the worker (tok/s: median, then each run). "
          "model.generate: the whole batch in one call. One worker process per batch size.\n")
    print("| device | batch | decode | scaffold continuous tok/s | runs | mean decode batch | model.generate tok/s | "
          "scaffold/generate |")
    print("|---|---|---|---|---|---|---|---|")
    single: list[float] = []
    for b in [int(x) for x in a.rollout_batches.split(",") if x]:
        r = run(f"rollout:{a.rollout_model}", b)
        single.append(r["single_tok_s"])
        for decode, runs in r["scaffold"].items():
            tok_s = statistics.median(x["tok_s"] for x in runs)
            mean = runs[0]["mean_decode_batch"]
            each = ", ".join(f"{x['tok_s']:.0f}" for x in runs)
            print(f"| {r['device']} | {b} | {decode} | {tok_s:.0f} | {each} "
                  f"| {'' if mean is None else f'{mean:.1f}'} | {r['generate_tok_s']:.0f} | "
                  f"{tok_s / r['generate_tok_s']:.2f} |", flush=True)
        print(f"<!-- raw {json.dumps(r)} -->", flush=True)
    if single:
        print(f"\nSingle prompt, `HFPolicy.generate` (no batching; measured in each worker): "
              f"{statistics.median(single):.0f} tok/s (median of {len(single)}: "
              f"{', '.join(f'{x:.0f}' for x in single)})", flush=True)


if __name__ == "__main__":
    main()
