"""How a decode step slows down beside the rest of a self-play run: a busy core, and Python threads.

One `DecodeBatch` of `HFPolicy` (the model of `--model`, default the embedded one) holds rows of 600-1,700
tokens; each measurement is the median of `--steps` decode steps, run on a worker thread as the continuous
scheduler does.
- **A busy core:** another process runs a loop at 10%, 50% or 100% duty (20 ms period); torch at 2
  threads and at 1.
- **The GIL:** 18 Python threads each run 0.5 ms of pure Python every 50 ms (an episode thread's parsing
  and rendering, roughly), at Python's 5 ms switch interval and at 0.5 ms. (At 2 ms every 20 ms, more
  Python than 2 cores can run, a step takes tens of seconds at 5 ms; left out, it runs for minutes.)

Usage: .venv/bin/python scripts/bench_decode_contention.py [--model DIR] [--steps 10] [--json F]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HOG = ("import sys, time\nd = float(sys.argv[1])\nwhile True:\n    t = time.perf_counter()\n"
       "    while time.perf_counter() - t < 0.02 * d: pass\n    time.sleep(0.02 * (1 - d))")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    from agent_scaffold.policies.hf import HFPolicy
    from agent_scaffold.policy import SamplingParams

    policy = HFPolicy(args.model, cpu_threads=2)
    batch = policy.decode_batch()
    params = SamplingParams(max_new_tokens=10**6, temperature=1.0)
    ids = list(range(1000, 3000))
    batch.admit_many([(ids[:n], params, i, i) for i, n in enumerate(range(600, 1800, 120))])

    def step_ms(threads: int) -> float:
        out: list[float] = []

        def run() -> None:
            torch.set_num_threads(threads)
            times = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                batch.step()
                times.append(time.perf_counter() - t0)
            out.append(statistics.median(times) * 1e3)

        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        return out[0]

    results: dict = {"rows": len(batch), "load_1m": os.getloadavg()[0], "busy_core": [], "gil": []}
    step_ms(2)  # warm-up
    for duty in (0.0, 0.1, 0.5, 1.0):
        hog = subprocess.Popen([sys.executable, "-c", HOG, str(duty)]) if duty else None
        time.sleep(0.3)
        try:
            row = {"duty": duty, "ms_2_threads": step_ms(2), "ms_1_thread": step_ms(1)}
        finally:
            if hog:
                hog.kill()
                hog.wait()
        results["busy_core"].append(row)
        print(f"busy loop at {duty:.0%} duty: 2 threads {row['ms_2_threads']:.0f} ms, 1 thread "
              f"{row['ms_1_thread']:.0f} ms per step", flush=True)

    stop = threading.Event()

    def episode_thread(work_ms: float, sleep_ms: float) -> None:
        while not stop.is_set():
            t0, x = time.perf_counter(), 0
            while time.perf_counter() - t0 < work_ms / 1e3:
                x += 1
            time.sleep(sleep_ms / 1e3)

    default_interval = sys.getswitchinterval()
    for work, sleep in ((0.0, 0.0), (0.5, 50.0)):
        stop.clear()
        threads = [threading.Thread(target=episode_thread, args=(work, sleep), daemon=True)
                   for _ in range(18 if work else 0)]
        for t in threads:
            t.start()
        row = {"work_ms": work, "sleep_ms": sleep}
        for interval in (0.005, 0.0005):
            sys.setswitchinterval(interval)
            row[f"ms_at_{interval * 1e3:g}ms"] = step_ms(2)
        sys.setswitchinterval(default_interval)
        stop.set()
        for t in threads:
            t.join()
        results["gil"].append(row)
        label = f"18 threads x {work} ms of Python every {sleep} ms" if threads else "no other threads"
        print(f"{label}: {row['ms_at_5ms']:.0f} ms per step at a 5 ms switch interval, "
              f"{row['ms_at_0.5ms']:.0f} ms at 0.5 ms", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
