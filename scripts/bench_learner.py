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

Each measurement runs in a fresh subprocess (so peaks do not mix); figures are medians over --repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time


class PeakRSS:
    """Polls this process's resident set size; `.peak` - `.start` is what a block added at its peak."""

    def __enter__(self) -> "PeakRSS":
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
    from selfplay.learner.batch import Sample

    n, h = len(ids), len(ids) // 2
    return Sample(tuple(ids), (0,) * h + (1,) * (n - h), (0.0,) * h + (rollout_logprob,) * (n - h), 1.0)


def hf_train_model(grad_ckpt: bool = False):  # -> transformers model
    """The embedded model as plain HF training sees it: fp32, SDPA, train mode."""
    import torch
    from transformers import AutoModelForCausalLM

    from agent_scaffold.embedded import default_model_dir

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
        from selfplay.learner.config import EngineConfig
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

        from agent_scaffold.embedded import default_model_dir
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
    if kind == "gpu":
        return gpu_worker(length)
    if kind == "ab":
        return ab_worker(ids, opts.ab_reps)
    raise SystemExit(f"unknown worker kind {kind}")


def ab_worker(ids: list[int], reps: int) -> dict:
    """HF and learner in one process, steps alternating (HF, learner, HF, ...) after a full-length warm-up
    of each: the steady state that training sees, with machine-load drift hitting both sides alike."""
    import torch

    from selfplay.learner.config import EngineConfig
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


# Qwen2.5-0.5B's shape (151,936-token vocabulary, tied embeddings), randomly initialised: no download.
GPU_MODEL = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6)
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}
"""Dense bf16 peak of each device family (no sparsity), for MFU."""


def gpu_worker(length: int, model_shape: dict | None = None) -> dict:
    """One learner step on one `length`-token sequence of a random-init model in bf16 (gradient
    checkpointing on, fused head), on CUDA when present (the CPU run is a smoke test of this code)."""
    import shutil
    import tempfile

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    from agent_scaffold.embedded import default_model_dir
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine

    cuda = torch.cuda.is_available()
    shape = model_shape or GPU_MODEL
    tmp = tempfile.mkdtemp(prefix="bench-gpu-model-")
    try:
        config = Qwen2Config(max_position_embeddings=max(length, 32768), **shape)
        AutoModelForCausalLM.from_config(config).save_pretrained(tmp)
        AutoTokenizer.from_pretrained(default_model_dir()).save_pretrained(tmp)  # the engine saves it with checkpoints
        engine = LearnerEngine(EngineConfig(model_dir=tmp, dtype="bf16" if cuda else "fp32", lr=1e-6,
                                            gradient_checkpointing=True, token_budget=max(length, 64),
                                            logprob_chunk=4096))
        params = sum(p.numel() for p in engine.module.parameters())
        torch.manual_seed(0)
        ids = torch.randint(0, shape["vocab_size"], (length,)).tolist()
        engine.train_step([half_sample(ids[:64], -5.0)])  # warm-up: optimizer states, buckets, kernels
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        engine.train_step([half_sample(ids, -5.0)])
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
        layers, hidden = shape["num_hidden_layers"], shape["hidden_size"]
        # Model FLOPs of one training step: 6 per parameter per token (forward + backward) plus causal
        # attention, 6 * layers * hidden * T per token (half of the 12 L H T of full attention).
        # Gradient checkpointing's recompute is not counted (MFU, not hardware utilisation).
        flops = 6 * params * length + 6 * layers * hidden * length * length
        name = torch.cuda.get_device_name() if cuda else "cpu"
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
        return {"device": name, "params": params, "tokens": length, "step_s": dt, "tokens_per_s": length / dt,
                "mfu": flops / dt / (peak * 1e12) if peak else None,
                "peak_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else None}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
    p.add_argument("--gpu-lengths", default="8192,32768")
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
                       + ["--ab-reps", str(a.ab_reps)])
    import torch

    print(f"# bench_learner: torch {torch.__version__}, {os.cpu_count()} CPUs, repeats {a.repeats}\n")
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

        def time_ratio(kind: str) -> float:
            return statistics.median(r["fwd_bwd_s"] / v["fwd_bwd_s"] for r, v in zip(res[kind], res["naive"]))

        print(f"| {n} | {median(res['naive'], 'peak_mb'):.0f} | {median(res['chunked'], 'peak_mb'):.0f} | "
              f"{median(res['fused'], 'peak_mb'):.0f} | {time_ratio('chunked'):.2f} | {time_ratio('fused'):.2f} |",
              flush=True)
    print("\n## GPU: learner step, random-init Qwen2.5-0.5B shape, bf16, gradient checkpointing, one sequence\n")
    if not torch.cuda.is_available():
        print("no GPU available")
        return
    print("| device | params | tokens | step s | tokens/s | MFU | peak GB |")
    print("|---|---|---|---|---|---|---|")
    for n in [int(x) for x in a.gpu_lengths.split(",") if x]:
        rows = [run("gpu", n) for _ in range(a.repeats)]
        r = rows[0]
        mfu = statistics.median(x["mfu"] for x in rows) if r["mfu"] is not None else float("nan")
        print(f"| {r['device']} | {r['params'] / 1e9:.2f}B | {n} | {median(rows, 'step_s'):.2f} | "
              f"{median(rows, 'tokens_per_s'):.0f} | {mfu:.1%} | {median(rows, 'peak_gb'):.1f} |", flush=True)


if __name__ == "__main__":
    main()
