"""`selfplay solve`: the agent on a real issue in a real repository; writes the patch (and a branch)."""

from __future__ import annotations

from pathlib import Path

import typer

from selfplay.cli.eval_cmd import POLICY_HELP, REPEATS_HELP, policy_factory
from selfplay.cli.failure import print_error
from selfplay.cli.model_option import TOKENIZER_HELP
from selfplay.solve.errors import SolveError


def solve(
    repo: str = typer.Option(..., "--repo", help="Clone URL or local repository path."),
    issue: str | None = typer.Option(None, "--issue", help="The issue's text, a GitHub issue URL, or @PATH "
                                     "for a file."),
    issue_file: Path | None = typer.Option(None, "--issue-file", help="A file holding the issue's text."),
    commit: str | None = typer.Option(None, "--commit", help="Commit to start from (default HEAD)."),
    policy: str = typer.Option("hf", "--policy", help=POLICY_HELP),
    model: str | None = typer.Option(None, "--model", help="hf/vllm: checkpoint dir; openai: model name."),
    base_url: str = typer.Option("http://127.0.0.1:8000", "--base-url", help="openai: server URL."),
    api_key: str | None = typer.Option(None, "--api-key", envvar="OPENAI_API_KEY", help="openai: key."),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help=TOKENIZER_HELP),
    script: Path | None = typer.Option(None, "--script", help="scripted: JSON list of actions."),
    setup: str | None = typer.Option(None, "--setup", help="Install command run in the repo (default: "
                                        "detected from pyproject.toml / setup.py / requirements*.txt)."),
    out: Path = typer.Option(Path("patch.diff"), "--out", help="Where to write the patch."),
    branch: str | None = typer.Option(None, "--branch", help="Also commit the patch to this new local "
                                         "branch (local repos; needs a clean working tree)."),
    max_turns: int | None = typer.Option(None, "--max-turns", min=1, help="Override the solver's turn limit."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", min=1, help="Override tokens per turn."),
    max_repeats: int | None = typer.Option(None, "--max-repeats", min=1, help=REPEATS_HELP),
) -> None:
    """Run the solver on an issue in a sandbox built for the repo (no network while the agent works), write
    the patch, and print the files changed, the turns taken and the tests the agent ran. The repo's working
    tree is never touched; with --branch the patch becomes a commit on a new branch."""
    from rich.console import Console

    # lazy: keeps `selfplay --help` fast
    from agent_scaffold.roles import load_role
    from selfplay.cli.turn_progress import TurnProgress
    from selfplay.solve.solver import check_inputs
    from selfplay.solve.solver import solve as run_solve

    console = Console()
    if out.exists() and out.is_dir():
        raise typer.BadParameter(f"--out {out} is a directory; name a file", param_hint="--out")
    if issue is None and issue_file is None:
        raise typer.BadParameter("name the issue: --issue TEXT, --issue URL, --issue @PATH or --issue-file PATH",
                                 param_hint="--issue")
    try:  # every input is checked before a model is loaded (minutes on a CPU) or a sandbox built
        text = check_inputs(repo, issue, issue_file=issue_file, commit=commit, branch=branch)
    except SolveError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from None
    pol = policy_factory(policy, model=model, base_url=base_url, script=script, api_key=api_key,
                         tokenizer=tokenizer)("solve")
    console.print(f"solving in {repo}: building the sandbox, then the agent works turn by turn", highlight=False)
    progress = TurnProgress(console, max_turns or load_role("solver").limits.max_turns,
                            first="the sandbox image builds (once per repo and commit), then the model writes")
    try:
        with progress:
            res = run_solve(repo, None, pol, commit=commit, setup=setup, out=out, branch=branch, max_turns=max_turns,
                            max_new_tokens=max_new_tokens, max_repeats=max_repeats, issue_text=text,
                            on_turn=progress)
    except SolveError as exc:
        print_error(str(exc))
        raise typer.Exit(1) from None
    console.print(f"ended: {res.termination} after {res.turns} turns (from commit {res.commit[:12]})")
    console.print(f"files changed: {', '.join(res.files) or 'none'}")
    console.print("tests the agent ran: " + ("; ".join(res.tests_run) or "none"))
    if not res.patch.strip():
        console.print(f"[yellow]the patch is empty[/]: the agent changed nothing; {out} is empty"
                      + (f" and no branch {branch} was made" if branch else ""), highlight=False)
        return
    console.print(f"patch: {out}" + (f"; branch {branch} at {res.branch_commit[:12]}" if res.branch_commit else ""))


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("solve")(solve)
