"""`selfplay episode`: run one injector or solver episode in a fresh sandbox and save its trajectory.

With `--artifact DIR` the solver starts exactly as in the run loop: a fresh sandbox of the repo image turned
into the task's buggy state by `selfplay.judge.grader.build_buggy_state` (no history, no copy of the original
code), and the reversed test_weaken.diff as its spec. Its prediction is saved as `<role>-<time>.diff`, the
file `selfplay grade --patch` takes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import typer

from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policies import make_policy
from agent_scaffold.policy import TRAINING
from agent_scaffold.roles import SPEC_KINDS, injector_strategies, load_role, solver_variables
from agent_scaffold.trajectory import save_jsonl
from repos.listfile import get_repo
from selfplay.artifact import load_artifact
from selfplay.cli.model_option import TOKENIZER_HELP, check_model_option, check_tokenizer_option
from selfplay.diffs import reverse_diff
from selfplay.errors import ArtifactError, SelfPlayError
from selfplay.judge.grader import build_buggy_state
from selfplay.task import Task

DEMO_ISSUE = "Calling the library's main functions with an empty input raises an exception instead of " \
             "returning an empty result."
SPEC_CHOICES = ("auto", "weaken", *SPEC_KINDS)
"""--spec-kind: auto (a diff is a weakening, other text an issue), weaken (reversed here), or the solver
template's own kinds."""
DEMO_SCRIPT = ["Let me look at the repository.\n```bash\ngit log --oneline | head -5 && ls\n```", "```submit\n```"]


def _spec_variables(spec: Path | None, kind: str) -> dict[str, str]:
    text = spec.read_text() if spec else DEMO_ISSUE
    if kind == "auto":
        kind = "weaken" if spec and text.lstrip().startswith(("diff --git", "--- ")) else "issue"
    if kind == "weaken":  # the solver's spec is the reverse of the injector's test-weakening diff
        text, kind = reverse_diff(text), "tests"
    return solver_variables(text, kind)


def episode(
    role: str = typer.Option(..., "--role", help="injector or solver."),
    repo: str = typer.Option("toolz", "--repo", help="Name in the repo list."),
    policy: str = typer.Option("hf", "--policy", help="hf (embedded SmolLM2 by default), openai or scripted."),
    strategy: str | None = typer.Option(None, "--strategy", help="Injector: removal, history, direct or kit "
                                           "(direct with the artifact kit; default removal)."),
    spec: Path | None = typer.Option(None, "--spec", exists=True, dir_okay=False,
                                        help="Solver: a test_weaken.diff (reversed into the spec), a reversed "
                                             "diff or an issue text (default: a demo issue)."),
    spec_kind: str = typer.Option("auto", "--spec-kind", help=f"{', '.join(SPEC_CHOICES)}."),
    artifact: Path | None = typer.Option(None, "--artifact", file_okay=False,
                                            help="Solver: start from this artifact's buggy state, with its "
                                                 "reversed test_weaken.diff as the spec (as the run loop)."),
    out: Path = typer.Option(Path("runs/episodes"), "--out", help="Directory for the trajectory files."),
    model: str | None = typer.Option(None, "--model", help="hf: checkpoint dir; openai: model name."),
    base_url: str = typer.Option("http://127.0.0.1:8000", "--base-url", help="openai: server URL."),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help=TOKENIZER_HELP),
    script: Path | None = typer.Option(None, "--script", exists=True, dir_okay=False,
                                       help="scripted: JSON list of action texts."),
    max_turns: int | None = typer.Option(None, "--max-turns", help="Override the role's turn limit."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="Override tokens per turn."),
    max_context: int | None = typer.Option(None, "--max-context", help="Override the context budget."),
    seed: int | None = typer.Option(None, "--seed", help="Sampling seed."),
) -> None:
    """Run one episode with the training sampling settings and save <out>/<role>-<time>.jsonl plus a .txt
    view (and, for the solver, its prediction as a .diff). Prints the ending; infrastructure failures are
    marked as such."""
    from rich.console import Console

    # lazy: keeps `selfplay --help` fast
    from agent_scaffold.agent import run_episode
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.cli.turn_progress import TurnProgress

    if role not in ("injector", "solver"):
        raise typer.BadParameter(f"--role must be injector or solver, got {role!r}")
    _check_choices(role, strategy, spec_kind)
    check_model_option(model, policy)
    check_tokenizer_option(tokenizer, policy)
    if script is not None and policy != "scripted":
        raise typer.BadParameter(f"--script replays actions for --policy scripted only; this run's policy is "
                                 f"{policy!r} (add --policy scripted, or leave --script out)", param_hint="--script")
    actions = _read_script(script) if policy == "scripted" and script else DEMO_SCRIPT
    cfg = load_role(role, (strategy or "removal") if role == "injector" else strategy)
    task = _load_task(artifact, role, spec)
    if task is not None:
        variables = solver_variables(task.spec, "tests")
    else:
        variables = _spec_variables(spec, spec_kind) if role == "solver" else {}
    pol = _make_policy(policy, model=model, base_url=base_url, tokenizer=tokenizer, actions=actions)
    # run_episode clamps the context budget to the policy's window itself
    overrides = {k: v for k, v in (("max_turns", max_turns), ("max_new_tokens", max_new_tokens),
                                   ("max_context_tokens", max_context)) if v is not None}
    limits = dataclasses.replace(cfg.limits, **overrides)
    console = Console()
    spec_repo = get_repo(repo)
    with DockerSandbox.create(repo_image(spec_repo), workdir=spec_repo.workdir) as box:
        if task is not None:
            _enter_buggy_state(box, task.artifact, artifact)
        console.print(f"[bold]{role}[/] episode on {repo} with the {policy} policy ...")
        with TurnProgress(console, limits.max_turns) as progress:
            ep = run_episode(pol, box, cfg, variables, limits=limits, sampling=TRAINING.with_(seed=seed),
                             on_turn=progress)
    traj = dataclasses.replace(ep.trajectory, metadata={**ep.trajectory.metadata, "repo": repo, "policy": policy,
                                                        "submission": ep.submission})
    saved = _save(traj, ep.submission, role, out)
    style = "red" if ep.infra_failure else "green"
    console.print(f"[{style}]ended: {ep.termination}[/] after {ep.turns} turns ({ep.format_errors} format errors, "
                  f"{sum(traj.loss_mask)} sampled tokens, {ep.timings['wall']:.1f} s)"
                  + (f"; infrastructure failure: {ep.error}" if ep.infra_failure else ""))
    console.print(f"saved {saved}")


def _check_choices(role: str, strategy: str | None, spec_kind: str) -> None:
    """--strategy and --spec-kind, checked before anything loads."""
    if role == "injector" and strategy is not None and strategy not in (names := injector_strategies()):
        raise typer.BadParameter(f"must be one of {', '.join(names)} for the injector, got {strategy!r}",
                                 param_hint="--strategy")
    if role == "solver" and strategy is not None:
        raise typer.BadParameter(f"only the injector takes a strategy (got {strategy!r}); drop it for the solver",
                                 param_hint="--strategy")
    if spec_kind not in SPEC_CHOICES:
        raise typer.BadParameter(f"must be one of {', '.join(SPEC_CHOICES)}, got {spec_kind!r}",
                                 param_hint="--spec-kind")


def _read_script(script: Path) -> list[str]:
    """`--script`'s actions: a JSON list of strings, one assistant reply each."""
    try:
        actions = json.loads(script.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise typer.BadParameter(f"{script} is not JSON ({exc}); write a JSON list of action texts, e.g. "
                                 '["```bash\\nls\\n```", "```submit\\n```"]', param_hint="--script") from None
    if not isinstance(actions, list) or not actions or not all(isinstance(a, str) for a in actions):
        raise typer.BadParameter(f"{script} holds a JSON {type(actions).__name__}, not a non-empty list of "
                                 "strings; write a JSON list of action texts, one reply per turn",
                                 param_hint="--script")
    return actions


def _make_policy(kind: str, *, model: str | None, base_url: str, tokenizer: str | None, actions: list[str]):
    """The `--policy` backend: hf (the embedded model, or `model` as a checkpoint dir), openai (a server at
    `base_url`, prompts rendered with `tokenizer`: `served_client`), or scripted (`actions`, `--script`'s or
    a two-turn demo, through the embedded tokenizer)."""
    if kind == "hf":
        return make_policy("hf", model_dir=model)
    if kind == "openai":
        from selfplay.rollout.policy_factory import served_client  # lazy: keeps `selfplay --help` fast

        return served_client(base_url, model, tokenizer=tokenizer)
    if kind != "scripted":
        raise typer.BadParameter(f"--policy must be hf, openai or scripted, got {kind!r}")
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ImportError("the scripted policy renders the chat template of the embedded model's tokenizer: "
                          "pip install 'selfplay-swe[train]'") from exc

    return make_policy("scripted", actions=actions, tokenizer=AutoTokenizer.from_pretrained(default_model_dir()))


def _save(traj, submission, role: str, out: Path) -> str:
    """Write <out>/<role>-<time>.jsonl and .txt (and the solver's prediction as .diff, the file `selfplay
    grade --patch` takes; empty when nothing was submitted); returns what was saved, for the message."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{role}-{time.strftime('%Y%m%d-%H%M%S')}"
    save_jsonl([traj], stem.with_suffix(".jsonl"))
    stem.with_suffix(".txt").write_text(traj.to_text())
    if role != "solver":
        return f"{stem}.jsonl and {stem}.txt"
    stem.with_suffix(".diff").write_text(submission if isinstance(submission, str) else "")
    return f"{stem}.jsonl, {stem}.txt and {stem}.diff"


def _load_task(artifact: Path | None, role: str, spec: Path | None):
    """The Task (spec = reversed test_weaken.diff) of `--artifact`, or None without one."""
    if artifact is None:
        return None
    if role != "solver":
        raise typer.BadParameter("--artifact starts a solver from a task's buggy state; use it with --role solver")
    if spec is not None:
        raise typer.BadParameter("--artifact gives the spec (its reversed test_weaken.diff); drop --spec")

    try:
        loaded = load_artifact(artifact)
    except (FileNotFoundError, ArtifactError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--artifact") from None
    return Task(task_id=artifact.name, repo="", artifact=loaded, fail_to_pass=(), pass_to_pass=())


def _enter_buggy_state(box, artifact, directory: Path) -> None:
    """The run loop's solver start (`build_buggy_state`); a task whose layers do not apply exits 2."""
    from rich.console import Console

    try:
        build_buggy_state(box, artifact)
    except SelfPlayError as exc:
        Console(stderr=True).print(f"[red]error:[/] cannot build the buggy state of {directory}: {exc}")
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("episode")(episode)
