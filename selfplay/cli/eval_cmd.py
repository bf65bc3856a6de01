"""`selfplay eval swebench`: the solver on SWE-bench instances, graded by the swebench package.
`selfplay eval offline-dataset`: write the offline SWE-bench-format dataset of fixture tasks."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policies import BACKENDS, make_policy
from agent_scaffold.policy import SSR_SAMPLING
from selfplay.cli.model_option import TOKENIZER_HELP, check_model_option, check_tokenizer_option
from selfplay.dir_lock import holder, in_use_message
from selfplay.eval.errors import EvalError

eval_app = typer.Typer(help="Evaluate a policy on SWE-bench (Verified, verified-50, or any SWE-bench-format "
                            "file, our exported tasks included).", no_args_is_help=True)

POLICY_HELP = "hf (embedded SmolLM2 or --model DIR), openai (any OpenAI-compatible --base-url), vllm or scripted."
REPEATS_HELP = ("End the episode when this many turns in a row repeat the turn before, the same action answered "
                "the same (ending `repeated`); default: never.")


def policy_factory(policy: str, *, model: str | None, base_url: str, script: Path | None,
                   api_key: str | None = None, tokenizer: str | None = None) -> Callable[[str], Any]:
    """instance id -> Policy. `scripted` replays `script`: a JSON list of actions (every instance) or an
    object {instance_id: [actions]}; the other backends share one policy across instances. `tokenizer`:
    the openai server's (`served_client`)."""
    if policy not in BACKENDS:
        raise typer.BadParameter(f"--policy must be one of {', '.join(BACKENDS)}, got {policy!r}")
    check_model_option(model, policy)
    check_tokenizer_option(tokenizer, policy)
    if policy == "scripted":
        if script is None:
            raise typer.BadParameter("the scripted policy needs --script FILE (a JSON list of actions, or "
                                     "an object mapping instance ids to lists)", param_hint="--script")
        try:
            actions = json.loads(script.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise typer.BadParameter(f"{script} cannot be read as JSON ({exc}); pass a JSON list of actions",
                                     param_hint="--script") from None
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:
            raise ImportError("the scripted policy renders the embedded model's chat template: "
                              "pip install 'selfplay-swe[train]'") from exc

        tok = AutoTokenizer.from_pretrained(default_model_dir())

        def scripted(iid: str) -> Any:
            steps = actions.get(iid) if isinstance(actions, dict) else actions
            if steps is None:
                raise typer.BadParameter(f"--script {script} has no actions for instance {iid}")
            return make_policy("scripted", actions=steps, tokenizer=tok)

        return scripted
    if policy == "openai":
        from selfplay.rollout.policy_factory import served_client  # lazy: keeps `selfplay --help` fast

        shared = served_client(base_url, model, tokenizer=tokenizer, api_key=api_key)
    else:
        shared = make_policy(policy, model_dir=model)
    return lambda _iid: shared


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # sys.modules holds None for it: its import is blocked
        return False


@eval_app.command("swebench")
def swebench(
    policy: str = typer.Option("hf", "--policy", help=POLICY_HELP),
    dataset: str | None = typer.Option(None, "--dataset", help="Hub name or .json/.jsonl/.parquet file "
                                          "(default SWE-bench/SWE-bench_Verified)."),
    split: str = typer.Option("verified", "--split", help="verified (all instances) or verified-50 (the "
                              "fixed subset, docs/eval.md)."),
    instances: str | None = typer.Option(None, "--instances", help="Comma-separated instance ids."),
    runs: int = typer.Option(1, "--runs", min=1, help="K runs (mean ± stderr, pass@K)."),
    workers: int = typer.Option(1, "--workers", min=1, help="Instances at once."),
    out: Path = typer.Option(Path("runs/eval"), "--out", help="DIR: predictions, logs, report.json; resumed."),
    grader: str = typer.Option("local", "--grader", help="local (swebench's grading on logs from our "
                               "sandboxes) or harness (official swebench.harness.run_evaluation)."),
    namespace: str | None = typer.Option(None, "--namespace", help="Image namespace: swebench, epoch, "
                                            "logicstar, or a template with {id} / {id_1776}."),
    model: str | None = typer.Option(None, "--model", help="hf/vllm: checkpoint dir; openai: model name."),
    model_name: str | None = typer.Option(None, "--model-name", help="model_name_or_path in predictions."),
    base_url: str = typer.Option("http://127.0.0.1:8000", "--base-url", help="openai: server URL."),
    api_key: str | None = typer.Option(None, "--api-key", envvar="OPENAI_API_KEY", help="openai: key."),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help=TOKENIZER_HELP),
    script: Path | None = typer.Option(None, "--script", help="scripted: JSON actions (list, or per id)."),
    temperature: float = typer.Option(1.0, "--temperature", help="SSR default 1.0."),
    top_p: float = typer.Option(0.95, "--top-p", help="SSR default 0.95."),
    seed: int | None = typer.Option(None, "--seed", help="Base sampling seed."),
    max_turns: int | None = typer.Option(None, "--max-turns", min=1, help="Override the solver's turn limit."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", min=1, help="Override tokens per turn."),
    max_context: int | None = typer.Option(None, "--max-context", min=1, help="Override the context budget."),
    max_repeats: int | None = typer.Option(None, "--max-repeats", min=1, help=REPEATS_HELP),
) -> None:
    """Solve each instance's problem statement in its image (history stripped, no network), write
    harness-format predictions, grade them, and print resolved % per run, mean ± stderr and pass@K."""
    from rich.console import Console
    from rich.table import Table

    # lazy: keeps `selfplay --help` fast
    from selfplay.cli.eval_progress import EvalProgressDisplay
    from selfplay.eval.dataset import load_instances
    from selfplay.eval.runner import EvalConfig, evaluate, lock_names

    if grader not in ("local", "harness"):
        raise typer.BadParameter(f"--grader must be local or harness, got {grader!r}", param_hint="--grader")
    if who := holder(out):  # before the model loads; `evaluate` takes the lock itself
        raise typer.BadParameter(in_use_message(out, who, *lock_names(out)), param_hint="--out")
    check_model_option(model, policy)  # before the dataset loads (a Hub download); policy_factory checks again
    check_tokenizer_option(tokenizer, policy)
    if not _installed("swebench"):
        raise EvalError("`selfplay eval swebench` grades with the swebench package, which is not installed: "
                        "pip install 'selfplay-swe[eval]'")
    ids = [i.strip() for i in instances.split(",") if i.strip()] if instances else None
    try:
        insts = load_instances(dataset, split=split, instance_ids=ids, namespace=namespace)
    except EvalError as exc:
        raise typer.BadParameter(str(exc)) from exc
    factory = policy_factory(policy, model=model, base_url=base_url, script=script, api_key=api_key,
                             tokenizer=tokenizer)
    config = EvalConfig(out_dir=out, model_name=model_name or model or policy, runs=runs, workers=workers,
                        grader=grader,  # type: ignore[arg-type]
                        sampling=SSR_SAMPLING.with_(temperature=temperature, top_p=top_p), seed=seed,
                        max_turns=max_turns, max_new_tokens=max_new_tokens, max_context=max_context,
                        max_repeats=max_repeats)
    console = Console()
    with EvalProgressDisplay(console) as show:
        report = evaluate(insts, factory, config, on_step=show)
    table = Table("instance", *[f"run {k}" for k in range(runs)], "resolved")
    for row in report.table():
        table.add_row(row["instance_id"], *["[green]yes[/]" if r else "no" for r in row["resolved"]],
                      f"{row['resolved_runs']}/{runs}")
    console.print(table)
    mean, stderr = report.mean_and_stderr()
    per_run = ", ".join(f"{p:.1f}%" for p in report.resolved_pct())
    console.print(f"resolved per run: {per_run}; mean {mean:.1f}% ± {stderr:.1f} (stderr over {runs} runs); "
                  f"pass@{runs} {report.pass_at_k():.1f}%")
    console.print(f"report: {out / 'report.json'}")


@eval_app.command("offline-dataset")
def offline_dataset(
    fixtures: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder of task folders."),
    out: Path = typer.Argument(..., help="Output .jsonl."),
) -> None:
    """Write the SWE-bench-format dataset of the fixture tasks (tests/fixtures/swebench) to OUT."""
    # lazy: keeps `selfplay --help` fast
    from selfplay.eval.offline import build_offline_dataset

    rows = build_offline_dataset(fixtures, out)
    typer.echo(f"wrote {len(rows)} instances to {out}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.add_typer(eval_app, name="eval")
