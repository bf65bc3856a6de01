"""Benchmark the learner against plain HF training on the same batch (CPU here; GPU when present).

    .venv/bin/python scripts/bench_learner.py [--lengths 1024,2048,4096] [--repeats 3] [--chunk-lengths 2048,4096,8192]

1. Learner step (packing, chunked logprobs, DAPO loss, DeepSpeed backward) vs plain HF
   `model(input_ids, labels).loss.backward()` on one sequence of each length, both fp32 without
   gradient checkpointing (the same work): tokens/s (forward+backward only, the optimizer step timed
   apart) and peak resident memory added during forward+backward (and, for the learner, the whole step). Ratio = learner time / HF time.
   Both sides run one 64-token warm-up step first, so one-time allocations (gradients, Adam states,
   DeepSpeed buckets) are not counted in the measured step.
2. Peak memory and time of chunked vs naive logprobs+entropy (forward+backward) through the real lm_head.
3. GPU section: tokens/s, MFU and peak memory for a random-init model at 32k tokens when CUDA is present.

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


def worker(kind: str, length: int) -> dict:
    import torch

    torch.manual_seed(0)
    ids = torch.randint(0, 49152, (length,)).tolist()
    if kind == "hf":
        from transformers import AutoModelForCausalLM

        from agent_scaffold.embedded import default_model_dir

        model = AutoModelForCausalLM.from_pretrained(default_model_dir(), dtype=torch.float32,
                                                     attn_implementation="sdpa")
        model.train()
        warm = torch.tensor([ids[:64]])
        model(input_ids=warm, labels=warm).loss.backward()
        model.zero_grad(set_to_none=True)  # as optimizer.zero_grad() does: the step allocates its gradients
        x = torch.tensor([ids])
        with PeakRSS() as mem:
            t = time.perf_counter()
            model(input_ids=x, labels=x).loss.backward()
            dt = time.perf_counter() - t
        return {"fwd_bwd_s": dt, "peak_mb": mem.added_mb}
    if kind == "learner":
        from selfplay.learner.batch import Sample
        from selfplay.learner.config import EngineConfig
        from selfplay.learner.engine import LearnerEngine

        engine = LearnerEngine(EngineConfig(lr=1e-6, gradient_checkpointing=False, token_budget=1 << 20,
                                            logprob_chunk=1024))
        half = length // 2
        sample = Sample(tuple(ids), (0,) * half + (1,) * (length - half), (0.0,) * half + (-1.0,) * (length - half), 1.0)
        step_times: list[float] = []
        fb_peak: list[int] = []
        meter: list[PeakRSS] = []
        orig = engine.engine.step

        def timed_step(*a: object, **k: object) -> object:
            if meter:
                fb_peak.append(meter[0].peak)  # the forward+backward part of the step ends here
            t = time.perf_counter()
            out = orig(*a, **k)
            step_times.append(time.perf_counter() - t)
            return out

        engine.engine.step = timed_step
        # Warm-up step at 64 tokens: allocates optimizer states and gradient buckets once, as in training.
        engine.train_step([Sample(tuple(ids[:64]), (0,) * 32 + (1,) * 32, (0.0,) * 32 + (-1.0,) * 32, 1.0)])
        step_times.clear()
        with PeakRSS() as mem:
            meter.append(mem)
            t = time.perf_counter()
            engine.train_step([sample])
            total = time.perf_counter() - t
        return {"fwd_bwd_s": total - step_times[0], "opt_step_s": step_times[0],
                "peak_mb": (fb_peak[-1] - mem.start) / 2**20, "step_peak_mb": mem.added_mb}
    if kind in ("chunked", "naive"):
        from transformers import AutoModelForCausalLM

        from agent_scaffold.embedded import default_model_dir
        from selfplay.learner.logprobs import chunked_logprobs, naive_logprobs

        head = AutoModelForCausalLM.from_pretrained(default_model_dir(), dtype=torch.float32).get_output_embeddings()
        hidden = torch.randn(length, head.in_features, requires_grad=True)
        targets = torch.tensor(ids)
        with PeakRSS() as mem:
            t = time.perf_counter()
            lp, _ = chunked_logprobs(head, hidden, targets, 1024) if kind == "chunked" else naive_logprobs(head, hidden, targets)
            lp.sum().backward()
            dt = time.perf_counter() - t
        return {"fwd_bwd_s": dt, "peak_mb": mem.added_mb}
    raise SystemExit(f"unknown worker kind {kind}")


def run(kind: str, length: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", kind, str(length)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} {length} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lengths", default="1024,2048,4096")
    p.add_argument("--chunk-lengths", default="2048,4096,8192")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--worker", nargs=2, metavar=("KIND", "LENGTH"))
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker[0], int(a.worker[1]))))
        return
    import torch

    print(f"# bench_learner: torch {torch.__version__}, {os.cpu_count()} CPUs, repeats {a.repeats}\n")
    print("## Learner step vs plain HF forward+backward (SmolLM2-135M, fp32, CPU, one sequence)\n")
    print("| tokens | HF tok/s | learner tok/s | time ratio learner/HF | HF peak MB | learner peak MB "
          "| memory ratio | learner peak MB incl. optimizer step | optimizer step s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in a.lengths.split(",") if x]:
        hf, ln = [], []
        for _ in range(a.repeats):  # interleaved so machine load drifts hit both alike
            hf.append(run("hf", n))
            ln.append(run("learner", n))
        ratios = [l["fwd_bwd_s"] / h["fwd_bwd_s"] for h, l in zip(hf, ln)]
        print(f"| {n} | {n / median(hf, 'fwd_bwd_s'):.0f} | {n / median(ln, 'fwd_bwd_s'):.0f} | "
              f"{statistics.median(ratios):.2f} | {median(hf, 'peak_mb'):.0f} | {median(ln, 'peak_mb'):.0f} | "
              f"{median(ln, 'peak_mb') / median(hf, 'peak_mb'):.2f} | {median(ln, 'step_peak_mb'):.0f} | "
              f"{median(ln, 'opt_step_s'):.2f} |", flush=True)
    print("\n## Chunked (1024 positions) vs naive logprobs+entropy, forward+backward through the lm_head (V=49152)\n")
    print("| positions | naive peak MB | chunked peak MB | memory ratio chunked/naive | time ratio chunked/naive |")
    print("|---|---|---|---|---|")
    for n in [int(x) for x in a.chunk_lengths.split(",") if x]:
        nv, ch = [], []
        for _ in range(a.repeats):
            nv.append(run("naive", n))
            ch.append(run("chunked", n))
        print(f"| {n} | {median(nv, 'peak_mb'):.0f} | {median(ch, 'peak_mb'):.0f} | "
              f"{median(ch, 'peak_mb') / median(nv, 'peak_mb'):.2f} | "
              f"{statistics.median(c['fwd_bwd_s'] / v['fwd_bwd_s'] for c, v in zip(ch, nv)):.2f} |", flush=True)
    print("\n## GPU\n")
    if not torch.cuda.is_available():
        print("no GPU available")
    else:
        print(f"device: {torch.cuda.get_device_name()} — GPU benchmark not implemented in this script yet")


if __name__ == "__main__":
    main()
