"""`check_model_option`: a command's `--model` checkpoint folder is checked before anything loads or starts."""

from __future__ import annotations

import typer

from selfplay.config.loader import ConfigError
from selfplay.config.refs import check_model_dir


def check_model_option(model: object | None, backend: str = "hf", *, hub: bool = True) -> None:
    """typer.BadParameter naming `--model` and what is wrong with it, when `backend` loads `model` as a local
    checkpoint folder that transformers cannot build (see `check_model_dir`). `hub`: whether a name like
    org/model may be a Hub repo id (commands whose option is a path take none)."""
    try:
        check_model_dir("--model", None if model is None else str(model), backend, default="leave --model out",
                        hub=hub)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--model: "), param_hint="--model") from None
