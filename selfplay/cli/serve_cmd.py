"""`selfplay serve-policy`: an OpenAI-compatible HTTP server around the hf policy (CPU or one GPU)."""

from __future__ import annotations

import errno
import logging
import socket
from pathlib import Path

import typer

from selfplay.cli.model_option import check_model_option


def serve_policy(
    model: Path | None = typer.Option(None, "--model", help="HF checkpoint dir (default: the embedded "
                                         "SmolLM2-135M-Instruct, converted once and cached)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address; loopback by default (no auth)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port (0 picks a free one)."),
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
    # every input checked before the model loads, which takes a while
    check_model_option(model, hub=False)
    _check_device(device)
    _check_bind(host, port)
    # lazy: keeps `selfplay --help` fast
    from agent_scaffold.policies.hf import HFPolicy
    from agent_scaffold.policy_server import PolicyServer

    policy = HFPolicy(model, device=device, kv_cache_mb=kv_cache_mb, cpu_threads=cpu_threads,
                      decode_engine=decode_engine)
    try:
        server = PolicyServer(policy, host=host, port=port, max_batch=max_batch)
    except OSError as exc:  # taken since the check above
        raise _bind_error(host, port, exc) from None
    logging.getLogger(__name__).info("policy server on %s (Ctrl-C stops it)", server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()


def _check_device(device: str) -> None:
    """`--device` must name a torch device this machine has."""
    try:
        import torch
    except ImportError:
        return  # HFPolicy's own ImportError names the extra to install
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise typer.BadParameter(f"{exc}; use cpu or cuda", param_hint="--device") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise typer.BadParameter(f"{device}: CUDA is not available on this machine (torch {torch.__version__}); "
                                     "use --device cpu, or a machine with an NVIDIA GPU and a CUDA build of torch",
                                     param_hint="--device")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise typer.BadParameter(f"{device}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                                     "numbered from 0", param_hint="--device")


def _check_bind(host: str, port: int) -> None:
    """Bind `host:port` as the server will (IPv4, SO_REUSEADDR, as `http.server.HTTPServer`) and let it go."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise _bind_error(host, port, exc) from None


def _bind_error(host: str, port: int, exc: OSError) -> typer.BadParameter:
    """What a failed bind of `host:port` says, and what to do about it."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        todo = "another process listens there (a server still running?); stop it, or pick another --port (0: a free one)"
    elif exc.errno == errno.EACCES:
        todo = "ports below 1024 need privileges; pick a --port of 1024 or more"
    else:
        todo = "--host must be an IPv4 address of this machine: 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
    return typer.BadParameter(f"cannot listen on {host}:{port} ({reason}); {todo}", param_hint="--host/--port")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("serve-policy")(serve_policy)
