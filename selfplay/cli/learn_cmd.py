"""`selfplay learn-demo`: a short real RL run on CPU showing the learner improve the embedded policy."""

from __future__ import annotations

import typer


def learn_demo(
    steps: int = typer.Option(10, "--steps", help="Optimizer steps."),
    lr: float = typer.Option(3e-5, "--lr", help="Learning rate (0 gives the control run)."),
    group_size: int = typer.Option(8, "--group-size", help="Samples per prompt per step."),
    target: str = typer.Option("no", "--target", help="Reward +1 when the answer's first word is this."),
    sync: str = typer.Option("memory", "--sync", help="memory (state copy) or disk (checkpoint + load_weights)."),
    seed: int = typer.Option(0, "--seed", help="Sampling and torch seed."),
) -> None:
    """Train SmolLM2-135M-Instruct to answer "Say yes or no." with TARGET, printing reward per step."""
    from rich.console import Console
    from rich.table import Table

    from selfplay.learner.demo import DemoConfig, run_demo

    if sync not in ("memory", "disk"):
        raise typer.BadParameter(f"--sync must be memory or disk, got {sync!r}")
    console = Console()
    table = Table("step", "reward", "P(target)", "loss", "clipfrac", "entropy", "grad_norm", "tokens/s")

    def show(step: int, m: dict[str, float]) -> None:
        def f(key: str, fmt: str = ".3f") -> str:
            return format(m[key], fmt) if key in m else "-"

        table.add_row(str(step), f("demo/reward_mean"), f("demo/target_prob"), f("learner/loss", ".4f"),
                      f("learner/clipfrac"), f("learner/entropy"), f("learner/grad_norm"),
                      f("learner/tokens_per_s", ".0f"))
        console.print(f"step {step}: reward {m['demo/reward_mean']:+.3f}  P({target}) {m['demo/target_prob']:.3f}")

    run_demo(DemoConfig(steps=steps, lr=lr, group_size=group_size, target=target, sync=sync, seed=seed), show)
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("learn-demo")(learn_demo)
