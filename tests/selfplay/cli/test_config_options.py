"""`config_options`: a command's options, defaults and help come from its config dataclass."""

from __future__ import annotations

import dataclasses

import typer
from typer.testing import CliRunner

from selfplay.cli.config_options import config_options, field_help
from selfplay.learner.demo import DemoConfig
from selfplay.validation.config import ValidationConfig


def _app(cls, **kw) -> tuple[typer.Typer, list]:
    seen: list = []
    app = typer.Typer()

    @app.command()
    @config_options(cls, **kw)
    def cmd(name: str = typer.Argument("x"), *, config) -> None:
        seen.append((name, config))

    @app.command()
    def other() -> None:  # a second command keeps typer from folding `cmd` into the root
        pass

    return app, seen


def test_defaults_are_the_dataclass_defaults_and_options_set_fields():
    app, seen = _app(ValidationConfig, exclude=("tamper",))
    assert CliRunner().invoke(app, ["cmd"]).exit_code == 0
    assert seen[-1] == ("x", ValidationConfig())
    res = CliRunner().invoke(app, ["cmd", "y", "--min-passing-tests", "3", "--flaky-policy", "reject",
                                   "--suite-timeout", "7.5"])
    assert res.exit_code == 0, res.output
    assert seen[-1] == ("y", ValidationConfig(min_passing_tests=3, flaky_policy="reject", suite_timeout=7.5))


def test_help_is_each_fields_docstring():
    app, _ = _app(DemoConfig)
    params = {p.name: p for p in typer.main.get_command(app).commands["cmd"].params}  # type: ignore[attr-defined]
    docs = field_help(DemoConfig)
    for f in dataclasses.fields(DemoConfig):
        if f.name in ("prompts", "engine"):  # a tuple and a section: not command-line scalars
            assert f.name not in params
            continue
        opt = params[f.name]
        assert opt.opts == [f"--{f.name.replace('_', '-')}"] and opt.help == docs[f.name] and docs[f.name]
        assert opt.default == getattr(DemoConfig(), f.name)


def test_a_value_the_dataclass_refuses_is_a_usage_error_with_its_message():
    app, seen = _app(ValidationConfig, exclude=("tamper",))
    res = CliRunner().invoke(app, ["cmd", "--parallelism", "0"])
    assert res.exit_code == 2 and not seen
    assert "parallelism must be >= 1" in res.output
    res = CliRunner().invoke(app, ["cmd", "--flaky-policy", "sometimes"])
    assert res.exit_code == 2 and "sometimes" in res.output
