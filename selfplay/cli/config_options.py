"""`config_options`: a command's options taken from a config dataclass, so defaults and help live once.

    @config_options(ValidationConfig, exclude=("tamper",))
    def validate(artifact_dir: Path = typer.Argument(...), *, config: ValidationConfig) -> None: ...

gives `validate` one `--field-name` option per scalar field of the dataclass (int, float, str, bool, a
`Literal` of strings, or one of those or None), whose default is the field's default and whose help is the
field's docstring (the string literal under it, as docs/config.md reads it). The command receives the
built dataclass as `config`; a `ValueError` from its checks becomes a usage error (exit 2) with the
dataclass's message. Nested sections and tuples are left out: a command that needs them takes a YAML file.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import typer

from selfplay.config.reference import field_docs

F = TypeVar("F", bound=Callable[..., Any])
_SCALARS = (int, float, str, bool)


def _option_type(tp: Any) -> Any | None:
    """The type typer parses for `tp`, or None when `tp` is not a scalar the command line can give."""
    if tp in _SCALARS:
        return tp
    origin = typing.get_origin(tp)
    if origin is Literal and all(isinstance(a, str) for a in typing.get_args(tp)):
        return tp
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2 and _option_type(args[0]) is not None:
            return args[0] | None
    return None


def field_help(cls: type) -> dict[str, str]:
    """{field: docstring} of a dataclass (the string literal under each field), whitespace collapsed."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # a subclass's docstring wins over its base's
        if dataclasses.is_dataclass(klass):
            docs.update(field_docs(klass))
    return docs


def config_options(cls: type, *, exclude: Sequence[str] = (), param: str = "config") -> Callable[[F], F]:
    """Decorator: replace the command's `param` parameter by one option per scalar field of dataclass `cls`
    (except `exclude`), and call the command with `cls(**options)`. See the module docstring."""
    hints = typing.get_type_hints(cls)
    docs = field_help(cls)
    fields = [(f, _option_type(hints[f.name])) for f in dataclasses.fields(cls) if f.init and f.name not in exclude]
    chosen = [(f, tp) for f, tp in fields if tp is not None]
    defaults = cls()  # the defaults as built (default_factory included)

    def decorate(command: F) -> F:
        own = typing.get_type_hints(command, localns={cls.__name__: cls})
        sig = inspect.signature(command)
        if param not in sig.parameters:
            raise TypeError(f"{command.__name__} has no parameter {param!r} to receive a {cls.__name__}")
        kept = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=own.get(p.name, p.annotation))
                for p in sig.parameters.values() if p.name != param]
        taken = {p.name for p in kept}
        clash = [f.name for f, _ in chosen if f.name in taken]
        if clash:
            raise TypeError(f"{command.__name__}: parameters {clash} clash with {cls.__name__} fields; rename them")
        options = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=tp,
                                     default=typer.Option(getattr(defaults, f.name), "--" + f.name.replace("_", "-"),
                                                          help=docs.get(f.name, "")))
                   for f, tp in chosen]

        def run(**kwargs: Any) -> Any:
            values = {f.name: kwargs.pop(f.name) for f, _ in chosen}
            try:
                config = cls(**values)
            except ValueError as exc:
                raise typer.BadParameter(str(exc)) from None
            return command(**kwargs, **{param: config})

        run.__name__, run.__qualname__, run.__doc__ = command.__name__, command.__qualname__, command.__doc__
        run.__module__ = command.__module__
        run.__signature__ = sig.replace(parameters=[*kept, *options])  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in (*kept, *options)}
        return run  # type: ignore[return-value]

    return decorate
