"""The options that name a model, `--model` and `--tokenizer`, checked before anything loads or starts."""

from __future__ import annotations

from pathlib import Path

import typer

from selfplay.config.loader import ConfigError
from selfplay.config.refs import check_model_dir, hub_id

TOKENIZER_HELP = ("openai: the served model's HF tokenizer, a folder or hub id (default: --model when it is "
                  "one, else the embedded model's).")


def check_model_option(model: object | None, backend: str = "hf", *, hub: bool = True) -> None:
    """typer.BadParameter naming `--model` and what is wrong with it, when `backend` loads `model` as a local
    checkpoint folder that transformers cannot build (see `check_model_dir`). `hub`: whether a name like
    org/model may be a Hub repo id (commands whose option is a path take none)."""
    try:
        check_model_dir("--model", None if model is None else str(model), backend, default="leave --model out",
                        hub=hub)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--model: "), param_hint="--model") from None


def check_tokenizer_option(tokenizer: str | None, backend: str) -> None:
    """`--tokenizer` is for the openai backend (the others load the checkpoint's own), and a local path must
    be a folder; a name with one slash and no such path is a hub id."""
    if tokenizer is None:
        return
    if backend != "openai":
        raise typer.BadParameter(f"--tokenizer names the served model's tokenizer for --policy openai; this "
                                 f"command's policy is {backend!r} (leave --tokenizer out)", param_hint="--tokenizer")
    path = Path(tokenizer).expanduser()
    if not hub_id(tokenizer) and not path.is_dir():
        raise typer.BadParameter(f"{tokenizer} {'is not a folder' if path.exists() else 'does not exist'}; name "
                                 "the folder of the served checkpoint's tokenizer, or a hub id",
                                 param_hint="--tokenizer")
