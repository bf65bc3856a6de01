"""`selfplay serve-policy`: an OpenAI-compatible HTTP server around the hf policy (CPU or one GPU)."""

from __future__ import annotations

import logging
from pathlib import Path

import typer


def serve_policy(
    model: Path | None = typer.Option(None, "--model", help="HF checkpoint dir (default: the embedded "
                                         "SmolLM2-135M-Instruct, converted once and cached)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address; loopback by default (no auth)."),
    port: int = typer.Option(8000, "--port", help="TCP port (0 picks a free one)."),
    device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda."),
    max_batch: int = typer.Option(8, "--max-batch", min=1, help="Rows decoding together at most (continuous "
                                  "batching: a request joins the running batch at the next decode step)."),
    kv_cache_mb: int = typer.Option(1024, "--kv-cache-mb", min=0, help="MiB of KV caches kept between a client's "
                                    "turns, so a growing context prefills only its new tokens (0: off)."),
    cpu_threads: int = typer.Option(0, "--cpu-threads", min=0, help="On CPU, torch threads per forward "
                                    "(0: torch's count)."),
    decode_engine: str = typer.Option("torch", "--decode-engine", help="What runs a decode step: torch "
                                      "(LlamaStep) or onnxruntime (CPU float32; pip install -e '.[ort]')."),
) -> None:
    """Serve /v1/completions (token ids in and out), /v1/chat/completions, /v1/models, /health,
    /reload_weights and /weight_info. On GPUs prefer `vllm serve --generation-config vllm`."""
    if decode_engine not in ("torch", "onnxruntime"):
        raise typer.BadParameter(f"must be torch or onnxruntime, got {decode_engine!r}", param_hint="--decode-engine")
    # lazy: keeps `selfplay --help` fast
    from agent_scaffold.policies.hf import HFPolicy
    from agent_scaffold.policy_server import PolicyServer

    server = PolicyServer(HFPolicy(model, device=device, kv_cache_mb=kv_cache_mb, cpu_threads=cpu_threads,
                                   decode_engine=decode_engine), host=host, port=port,
                          max_batch=max_batch)
    logging.getLogger(__name__).info("policy server on %s (Ctrl-C stops it)", server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("serve-policy")(serve_policy)
