"""Compare external CPU engines with the scaffold's own torch path, at the batch sizes rollouts reach.

Engines, all on the same weights (an HF checkpoint, the learner's format) and the same real solver prompt:
- torch fp32: `HFPolicy` through the scaffold's `DecodeBatch` (the default engine), the baseline;
- llama.cpp: its `llama-server` (built from source: see docs/benchmarks.md), one slot per row, continuous
  batching on, fed a GGUF converted from the checkpoint by llama.cpp's `convert_hf_to_gguf.py`, in each of
  `--gguf-types` (f32 keeps the weights; f16 and q8_0 trade accuracy for bandwidth);
- ONNX Runtime: `onnxruntime-genai`'s model builder exports the checkpoint (fp32, CPU), and its `Generator`
  decodes the B rows as one batch.

For each engine and batch size B: B rows of the prompt, `--tokens` greedy steps each (EOS ignored);
decode tokens/s = B * tokens / decode time, prefill timed apart (llama-server: the wall time of B concurrent
requests for 1 token is the prefill; for `tokens` tokens, the difference is tokens - 1 decode steps). Engines alternate within each repeat; medians and
ranges over `--repeats`. Every engine uses `--threads` threads.

Weight sync, as a rollout engine would need it after every learner update: the checkpoint is saved
(`save_pretrained`), converted and loaded; each part is timed.

Accuracy: each engine's greedy continuation at B = 1 with the logprobs it reports for its tokens, against
the torch fp32 model teacher-forced on the same tokens: the mean |logp_engine - logp_torch| over those
tokens (the rollout-learner mismatch truncated IS would see) and how many leading tokens equal torch's own
greedy continuation.

The external engines are not dependencies of the project; this script runs them where they are installed:
    --llama-server BIN --llama-convert .../convert_hf_to_gguf.py   (gguf-py must be importable)
    --ort   (onnxruntime-genai and onnx-ir importable, e.g. on PYTHONPATH)

Usage: .venv/bin/python scripts/bench_external_engines.py [--model DIR] [--batches 1,4,8,16] [--tokens 32]
    [--repeats 3] [--llama-server BIN --llama-convert PY] [--gguf-types f32,f16,q8_0] [--ort] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A `llama-server` process on one GGUF, with `slots` parallel sequences."""

    def __init__(self, binary: str, gguf: Path, *, slots: int, ctx_per_slot: int, threads: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [binary, "-m", str(gguf), "--port", str(self.port), "-np", str(slots), "-c", str(slots * ctx_per_slot),
               "-t", str(threads), "-tb", str(threads), "-cb", "--no-webui", "--log-disable"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}: {' '.join(cmd)}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("llama-server did not answer /health within 120 s")

    def complete(self, prompt: list[int], tokens: int, probs: bool = False) -> dict:
        body = {"prompt": prompt, "n_predict": tokens, "temperature": 0.0, "ignore_eos": True,
                "cache_prompt": False, "return_tokens": True, "n_probs": 1 if probs else 0}
        req = urllib.request.Request(self.url + "/completion", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def wall(self, prompt: list[int], batch: int, tokens: int) -> float:
        """Seconds for `batch` concurrent requests of `tokens` tokens each."""
        threads = [threading.Thread(target=self.complete, args=(prompt, tokens)) for _ in range(batch)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0

    def rate(self, prompt: list[int], batch: int, tokens: int) -> tuple[float, float]:
        # The server mixes one slot's prompt chunks into the batches that decode another's, so a request's
        # own predicted_ms counts other slots' prefill. Differential instead: the same requests for 1 token
        # (prefill and the first token) and for `tokens`; the difference is tokens - 1 decode steps of B rows.
        first = self.wall(prompt, batch, 1)
        full = self.wall(prompt, batch, tokens)
        return batch * len(prompt) / first, batch * (tokens - 1) / max(full - first, 1e-9)

    def greedy(self, prompt: list[int], tokens: int) -> tuple[list[int], list[float]]:
        r = self.complete(prompt, tokens, probs=True)
        probs = r["completion_probabilities"]
        return [int(p["id"]) for p in probs], [float(p["logprob"]) for p in probs]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class LlamaEngine:
    """A llama-server started for each measurement and stopped after it: an idle server's threads can spin
    (ggml's polling), which would take cores from the engine measured next."""

    def __init__(self, binary: str, gguf: Path, *, slots: int, ctx_per_slot: int, threads: int) -> None:
        self.kw = {"slots": slots, "ctx_per_slot": ctx_per_slot, "threads": threads}
        self.binary, self.gguf = binary, gguf

    def with_server(self, fn):
        server = LlamaServer(self.binary, self.gguf, **self.kw)
        try:
            return fn(server)
        finally:
            server.close()

    def rate(self, prompt: list[int], batch: int, tokens: int) -> tuple[float, float]:
        def measure(server: LlamaServer) -> tuple[float, float]:
            server.rate(prompt, batch, 4)  # warm-up: first requests allocate the slots' buffers
            return server.rate(prompt, batch, tokens)

        return self.with_server(measure)

    def greedy(self, prompt: list[int], tokens: int) -> tuple[list[int], list[float]]:
        return self.with_server(lambda server: server.greedy(prompt, tokens))


class OrtGenai:
    """An `onnxruntime-genai` model exported from the checkpoint, decoding B rows as one batch."""

    def __init__(self, folder: Path, threads: int) -> None:
        import onnxruntime_genai as og

        cfg_path = folder / "genai_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["model"]["decoder"]["session_options"].update(intra_op_num_threads=threads, inter_op_num_threads=1)
        cfg_path.write_text(json.dumps(cfg, indent=1))
        self.og = og
        self.model = og.Model(str(folder))

    def _generator(self, prompt: list[int], batch: int, tokens: int):
        import numpy as np

        params = self.og.GeneratorParams(self.model)
        n = len(prompt) + tokens
        params.set_search_options(max_length=n, min_length=n, do_sample=False, batch_size=batch)
        gen = self.og.Generator(self.model, params)
        return gen, np.array([prompt] * batch, dtype=np.int32)

    def rate(self, prompt: list[int], batch: int, tokens: int) -> tuple[float, float]:
        gen, ids = self._generator(prompt, batch, tokens)
        t0 = time.perf_counter()
        gen.append_tokens(ids)
        t1 = time.perf_counter()
        steps = 0
        while not gen.is_done():
            gen.generate_next_token()
            steps += 1
        t2 = time.perf_counter()
        # the prefill already produced the first token's logits; the loop's steps are the decode
        return batch * len(prompt) / (t1 - t0), batch * steps / (t2 - t1)

    def greedy(self, prompt: list[int], tokens: int) -> tuple[list[int], list[float]]:
        import numpy as np

        gen, ids = self._generator(prompt, 1, tokens)
        gen.append_tokens(ids)
        out, logps = [], []
        while not gen.is_done():
            logits = np.asarray(gen.get_logits(), dtype=np.float64).reshape(-1)
            gen.generate_next_token()
            tok = int(gen.get_next_tokens()[0])
            m = logits.max()
            logps.append(float(logits[tok] - m - np.log(np.exp(logits - m).sum())))
            out.append(tok)
        return out, logps


def torch_greedy(torch, model, prompt: list[int], tokens: int) -> list[int]:
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens, min_new_tokens=tokens,
                             do_sample=False)
    return out[0, len(prompt):].tolist()


def mismatch(torch, model, prompt: list[int], toks: list[int], logps: list[float], reference: list[int]) -> dict:
    """The engine's logprobs of its own greedy tokens against torch fp32 teacher-forced on them."""
    ids = torch.tensor([prompt + toks])
    with torch.inference_mode():
        lp = torch.log_softmax(model(input_ids=ids).logits[0, len(prompt) - 1:-1].float(), -1)
    ref = lp.gather(1, torch.tensor(toks)[:, None])[:, 0].tolist()
    same = next((i for i, (a, b) in enumerate(zip(toks, reference)) if a != b), min(len(toks), len(reference)))
    return {"mean_abs_dlogp": statistics.fmean(abs(a - b) for a, b in zip(logps, ref)),
            "max_abs_dlogp": max(abs(a - b) for a, b in zip(logps, ref)), "greedy_prefix_equal": same,
            "tokens": len(toks)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="HF checkpoint (default: the embedded model's)")
    ap.add_argument("--batches", default="1,4,8,16")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-server")
    ap.add_argument("--llama-convert")
    ap.add_argument("--gguf-types", default="f32,f16,q8_0")
    ap.add_argument("--ort", action="store_true")
    ap.add_argument("--work", help="folder for the converted models (default: a temporary one)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if bool(args.llama_server) != bool(args.llama_convert):
        ap.error("--llama-server and --llama-convert go together")
    for flag, path in (("--llama-server", args.llama_server), ("--llama-convert", args.llama_convert)):
        if path and not Path(path).is_file():
            ap.error(f"{flag} {path}: no such file (build llama.cpp as docs/benchmarks.md shows)")
    if args.ort:
        try:
            import onnx_ir  # noqa: F401  (the model builder's)
            import onnxruntime_genai  # noqa: F401
        except ImportError as exc:
            ap.error(f"--ort needs onnxruntime-genai and onnx-ir importable ({exc}); install them beside the venv "
                     "as docs/benchmarks.md shows and put that folder on PYTHONPATH")

    import torch

    from agent_scaffold.embedded import default_model_dir
    from agent_scaffold.policies.hf import HFPolicy
    from scripts.bench_engines import bandwidth_gb_s, decode_rate
    from scripts.bench_rollouts import solver_prompt

    torch.set_num_threads(args.threads)
    src = Path(args.model) if args.model else default_model_dir()
    prompt, _ = solver_prompt()
    batches = [int(x) for x in args.batches.split(",")]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="engines-"))
    work.mkdir(parents=True, exist_ok=True)
    ref = HFPolicy(str(src), dtype=torch.float32)
    model = ref.model
    reference = torch_greedy(torch, model, prompt, args.tokens)
    # the learner's side of a weight sync: its model written as a checkpoint
    hf_dir = work / "hf"
    shutil.rmtree(hf_dir, ignore_errors=True)
    _, save_s = timed(model.save_pretrained, hf_dir, safe_serialization=True)
    ref.tokenizer.save_pretrained(hf_dir)
    for extra in ("generation_config.json", "chat_template.jinja"):
        if (src / extra).exists():
            shutil.copy(src / extra, hf_dir / extra)
    print(f"model {src}; {len(prompt)}-token prompt, {args.tokens} greedy steps, {args.threads} threads; "
          f"save_pretrained {save_s:.1f} s", flush=True)

    engines: dict = {"torch fp32": ref}
    sync: dict[str, dict[str, float]] = {}
    accuracy: dict[str, dict] = {}
    slots = max(batches)
    if args.llama_server:
        for kind in args.gguf_types.split(","):
            gguf = work / f"model-{kind}.gguf"
            proc, conv_s = timed(subprocess.run, [sys.executable, args.llama_convert, str(hf_dir), "--outfile",
                                                  str(gguf), "--outtype", kind], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"convert_hf_to_gguf.py --outtype {kind} failed:\n{proc.stderr[-2000:]}")
            engine = LlamaEngine(args.llama_server, gguf, slots=slots, ctx_per_slot=len(prompt) + args.tokens + 64,
                                 threads=args.threads)
            _, load_s = timed(engine.with_server, lambda server: None)
            name = f"llama.cpp {kind}"
            engines[name] = engine
            sync[name] = {"save_s": save_s, "convert_s": conv_s, "load_s": load_s}
            print(f"{name}: convert {conv_s:.1f} s, server up {load_s:.1f} s", flush=True)
    if args.ort:
        out = work / "ort-fp32"
        shutil.rmtree(out, ignore_errors=True)
        proc, conv_s = timed(subprocess.run, [sys.executable, "-m", "onnxruntime_genai.models.builder", "-m",
                                              str(hf_dir), "-i", str(hf_dir), "-o", str(out), "-p", "fp32", "-e",
                                              "cpu", "-c", str(work / "ort-cache")], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"onnxruntime_genai.models.builder failed:\n{proc.stderr[-2000:]}")
        ort, load_s = timed(OrtGenai, out, args.threads)
        engines["onnxruntime fp32"] = ort
        sync["onnxruntime fp32"] = {"save_s": save_s, "convert_s": conv_s, "load_s": load_s}
        print(f"onnxruntime fp32: export {conv_s:.1f} s, load {load_s:.1f} s", flush=True)

    for name, eng in engines.items():
        if name == "torch fp32":
            continue
        toks, logps = eng.greedy(prompt, args.tokens)
        accuracy[name] = mismatch(torch, model, prompt, toks, logps, reference)
        a = accuracy[name]
        print(f"accuracy of {name}: mean |dlogp| {a['mean_abs_dlogp']:.2e} (max {a['max_abs_dlogp']:.2e}), "
              f"greedy equal to torch's for {a['greedy_prefix_equal']}/{a['tokens']} tokens", flush=True)

    def rate(name, eng, b, tokens):
        return decode_rate(eng, prompt, b, tokens) if name == "torch fp32" else eng.rate(prompt, b, tokens)

    for name, eng in engines.items():  # warm-up at every batch size
        for b in batches:
            rate(name, eng, b, 4)
    bw = bandwidth_gb_s(torch)
    rows = []
    for rep in range(args.repeats):
        for b in batches:
            order = list(engines.items()) if rep % 2 == 0 else list(reversed(engines.items()))
            for name, eng in order:
                pre, dec = rate(name, eng, b, args.tokens)
                rows.append({"engine": name, "batch": b, "repeat": rep, "prefill_tok_s": pre, "decode_tok_s": dec,
                             "load_1m": os.getloadavg()[0]})
                print(f"  repeat {rep} B={b} {name}: prefill {pre:.0f} tok/s, decode {dec:.1f} tok/s", flush=True)

    print(f"\nmemory bandwidth {bw:.1f} GB/s\n{'B':>3} {'engine':>18} {'decode tok/s':>13} {'range':>13} "
          f"{'vs torch':>9} {'prefill tok/s':>14}")
    summary = []
    for b in batches:
        base = statistics.median(r["decode_tok_s"] for r in rows if r["engine"] == "torch fp32" and r["batch"] == b)
        for name in engines:
            rs = [r for r in rows if r["engine"] == name and r["batch"] == b]
            dec = [r["decode_tok_s"] for r in rs]
            med = statistics.median(dec)
            pre = statistics.median(r["prefill_tok_s"] for r in rs)
            summary.append({"engine": name, "batch": b, "decode_tok_s": med, "min": min(dec), "max": max(dec),
                            "vs_torch": med / base, "prefill_tok_s": pre})
            print(f"{b:>3} {name:>18} {med:>13.1f} {min(dec):>6.1f}-{max(dec):<6.1f} {med / base:>8.2f}x {pre:>14.0f}")
    for name, s in sync.items():
        print(f"weight sync {name}: save {s['save_s']:.1f} s + convert {s['convert_s']:.1f} s + load "
              f"{s['load_s']:.1f} s = {sum(s.values()):.1f} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "model": str(src), "prompt_tokens": len(prompt),
                                               "bandwidth_gb_s": bw, "accuracy": accuracy, "sync": sync,
                                               "summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
