"""`selfplay learn-demo`: a short real RL run on CPU showing the learner improve the embedded policy."""

from __future__ import annotations

import typer

from selfplay.cli.config_options import config_options
from selfplay.learner.demo import DemoConfig, run_demo


@config_options(DemoConfig)
def learn_demo(*, config: DemoConfig) -> None:
    """Train SmolLM2-135M-Instruct to answer "Say yes or no." with --target, printing reward per step."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table("step", "reward", "P(target)", "loss", "clipfrac", "entropy", "grad_norm", "tokens/s")

    def show(step: int, m: dict[str, float]) -> None:
        def f(key: str, fmt: str = ".3f") -> str:
            return format(m[key], fmt) if key in m else "-"

        table.add_row(str(step), f("demo/reward_mean"), f("demo/target_prob"), f("learner/loss", ".4f"),
                      f("learner/clipfrac"), f("learner/entropy"), f("learner/grad_norm"),
                      f("learner/tokens_per_s", ".0f"))
        console.print(f"step {step}: reward {m['demo/reward_mean']:+.3f}  "
                      f"P({config.target}) {m['demo/target_prob']:.3f}")

    run_demo(config, show)
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("learn-demo")(learn_demo)
