"""`selfplay rft`: rejection fine-tuning on the store's successful trajectories -> an HF checkpoint;
`selfplay warm-start`: demonstrations on the training repos + RFT, cached by its inputs."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import typer

from selfplay.cli.model_option import check_model_option
from selfplay.config.component_presets import sft_preset, warm_start_size
from selfplay.learner.rft import RFTDataError, collect, sft_samples
from selfplay.learner.sft import train_sft

STORE_HELP = "Store URL or SQLite path (default: $SELFPLAY_STORE, else ./selfplay.db)."


def rft(
    out: Path = typer.Option(..., "--out", help="Directory for the fine-tuned HF checkpoint."),
    store: str | None = typer.Option(None, "--store", help=STORE_HELP),
    source: str = typer.Option("all", "--source", help="success (the policy's), demo (scripted experts') or all."),
    max_per_task: int = typer.Option(4, "--max-per-task", help="At most this many trajectories per task."),
    injector: bool = typer.Option(False, "--injector/--no-injector",
                                  help="Also train on injector trajectories whose artifact validated."),
    preset: str = typer.Option("cpu", "--preset", help="nebius (paper: lr 5e-6, batch 64, 1 epoch) or cpu."),
    model: str | None = typer.Option(None, "--model", help="Starting checkpoint (default: embedded SmolLM2)."),
    lr: float | None = typer.Option(None, "--lr", min=0.0, help="Override the preset's peak learning rate."),
    epochs: int | None = typer.Option(None, "--epochs", min=1, help="Override the preset's epochs."),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Override trajectories per step."),
    seed: int = typer.Option(0, "--seed", help="Shuffling and torch seed."),
    dtype: str | None = typer.Option(None, "--dtype", help="auto, fp32 or bf16: the SFT engine's weights and "
                                     "compute (the preset's: auto, fp32 on a CPU). bf16 on a CPU with bf16 "
                                     "instructions takes about 0.67x the time a step and learns less a step "
                                     "(docs/benchmarks.md)."),
) -> None:
    """Collect successful trajectories (deduplicated, capped per task, format-error turns masked), run SFT on
    the learner's engine and save a checkpoint usable as `--policy hf --model OUT`."""
    from rich.console import Console

    console = Console()
    check_model_option(model)
    try:
        config = sft_preset(preset, lr=lr, epochs=epochs, batch_size=batch_size, model_dir=model, seed=seed,
                            dtype=dtype)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--dtype" if "dtype" in str(exc) else "--preset") from exc
    from selfplay.store import open_store  # lazy: SQLAlchemy, off `selfplay --help`

    with open_store(store, create=False) as st:  # rft only reads the store
        try:
            data = collect(st, source=source, max_per_task=max_per_task, injector=injector)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        except RFTDataError as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2) from exc
    _make_out(out)
    samples = sft_samples(data.trajectories)
    console.print(f"{len(data.trajectories)} trajectories ({', '.join(f'{k}={v}' for k, v in data.stats.items())}), "
                  f"{len(samples)} sequences, {sum(sum(s.loss_mask) for s in samples)} loss tokens")
    result = train_sft(samples, out, config, metadata={"source": source, **data.stats},
                       on_step=lambda i, m: console.print(f"step {i + 1}: loss {m['sft/loss']:.4f} "
                                                          f"lr {m['sft/lr']:.2e} ({m['sft/step_s']:.1f} s)"))
    console.print(f"saved {result.out_dir} in {result.wall_time:.0f} s; use it with --policy hf --model {result.out_dir}")


def _make_out(out: Path) -> None:
    """Make `--out` before training, which would otherwise make it only at its end and lose the whole run to
    a path that cannot be a directory; called once the store has something to train on, so a store with
    nothing leaves no folder behind."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next(p for p in (out, *out.parents) if p.exists() and not p.is_dir())
        raise typer.BadParameter(f"{out} cannot be a directory: {blocker} is a file; pass a new or existing "
                                 "directory", param_hint="--out") from None
    except OSError as exc:
        raise typer.BadParameter(f"{out} cannot be made ({exc.strerror or exc}); pass a directory under a "
                                 "writable folder", param_hint="--out") from None


def warm_start(
    size: str = typer.Option("default", "--size", help="default (what `selfplay run` starts from), medium "
                                                       "(about 45 solver demonstrations, 3 epochs), visible (about 45 "
                                                       "located by the spec's call, 2 epochs: the held-out "
                                                       "bench's) or full (>= 300 demonstrations)."),
    repos: str | None = typer.Option(None, "--repos", help="Comma-separated training repos "
                                        "(default: the warm-start split, see docs/warm_start.md)."),
    n: int | None = typer.Option(None, "-n", help="Demonstrated tasks per repo (default: the size's)."),
    injector_n: int | None = typer.Option(None, "--injector-n", min=0, help="Injector demonstrations per repo "
                                          "(default: the size's)."),
    injector_operators: str | None = typer.Option(None, "--injector-operators", help="Comma-separated "
                                                  "procedural operators whose bugs the injector demonstrations "
                                                  "write, e.g. drop_statement (default: the size's; every one)."),
    locate: str | None = typer.Option(None, "--locate", help="any: the solver demonstrations grep the bug's "
                                      "function whether or not the spec names it; visible: only tasks whose "
                                      "spec names it are demonstrated, quoting that call first; localize: the "
                                      "solver has the `localize` tool and the expert edits the line it lists "
                                      "(default: the size's)."),
    localize_ranks: int | None = typer.Option(None, "--localize-ranks", min=1, max=5, help="With --locate "
                                              "localize: demonstrate only tasks whose bug's line the tool lists "
                                              "among its first this many (default: 3)."),
    localize_recover: int | None = typer.Option(None, "--localize-recover", min=0, help="With --locate localize "
                                                "--localize-ranks 1: recovery demonstrations per repo on tasks whose "
                                                "bug's line is listed second (a wrong first edit, localize again, "
                                                "undo, repair; default: 0)."),
    drills: int | None = typer.Option(None, "--drills", min=0, help="With --locate localize: repair drills "
                                      "added to the SFT data, the edit turn after `localize` on mutated lines of "
                                      "the training repos (default: 0)."),
    seed: int | None = typer.Option(None, "--seed", help="Seeds bugs, expert choices and training."),
    epochs: int | None = typer.Option(None, "--epochs", min=1, help="Passes over the demonstrations "
                                      "(default: the size's, else the SFT preset's)."),
    injector_epochs: int | None = typer.Option(None, "--injector-epochs", min=1, help="Passes over the injector "
                                               "demonstrations, the first of --epochs (default: the size's)."),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Demonstrations per SFT step "
                                          "(default: the size's, else the SFT preset's)."),
    preset: str | None = typer.Option(None, "--preset", help="SFT preset: cpu or nebius."),
    model: Path | None = typer.Option(None, "--model", help="Base checkpoint to fine-tune (an HF model directory, "
                                                            "e.g. a larger model on a GPU machine); the "
                                                            "demonstrations use its tokenizer. Default: the "
                                                            "embedded SmolLM2-135M-Instruct."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when a cached checkpoint exists."),
) -> None:
    """Build demonstrations on the training repos, fine-tune, and cache the checkpoint under the selfplay cache
    (keyed by its inputs); prints the checkpoint directory and its manifest (config and content keys,
    demonstrations per role, SFT steps, operators covered, the commit of the code that built it)."""
    check_model_option(model, hub=False)
    # lazy: keeps `selfplay --help` fast (the demonstration machinery)
    from selfplay.demos.warm_start import warm_start_checkpoint, warm_start_info

    names = tuple(r.strip() for r in repos.split(",") if r.strip()) if repos else None
    try:
        ops = None if injector_operators is None else tuple(o.strip() for o in injector_operators.split(",") if o.strip())
        cfg = warm_start_size(size, n_per_repo=n, injector_per_repo=injector_n, injector_operators=ops, seed=seed,
                              locate=locate, localize_ranks=localize_ranks, drills=drills,
                              localize_recover=localize_recover,
                              epochs=epochs, injector_epochs=injector_epochs, batch_size=batch_size,
                              preset=preset, repos=names, model_dir=None if model is None else str(model.resolve()))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    with _stdout_to_stderr():
        path = warm_start_checkpoint(cfg, force=force)
    # the manifest to stderr, the path alone and unwrapped to stdout (`MODEL=$(selfplay warm-start)`)
    typer.echo(json.dumps({k: v for k, v in warm_start_info(cfg).__dict__.items() if k != "model_dir"}), err=True)
    typer.echo(str(path))


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """What the build writes to stdout goes to stderr, so stdout carries the path alone: DeepSpeed logs its
    accelerator warning to stdout (which broke `MODEL=$(selfplay warm-start)`), and native code writes to
    file descriptor 1 directly."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def register(app: typer.Typer) -> None:
    app.command("rft")(rft)
    app.command("warm-start")(warm_start)
