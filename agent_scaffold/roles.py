"""`RoleConfig` and `EpisodeLimits`: a role is prompt template files plus budgets, read from
`prompts/roles.toml`, never a subclass.

Templates use `{{name}}` placeholders and `{{> file.md}}` includes (resolved in the prompts folder);
rendering fails with a `ValueError` naming any placeholder left without a value.

Departure from SSR: the paper samples removal or history per injection ("removal + history"); here the
strategy is an explicit argument and the caller (the orchestrator) does the sampling.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

PROMPTS_DIR = Path(__file__).parent / "prompts"
ROLES_FILE = PROMPTS_DIR / "roles.toml"
SUBMISSIONS = ("diff", "artifact")
SPEC_KINDS = ("tests", "issue")
CONTEXT_FULL = ("stop", "compact")
ARTIFACT_FILES: tuple[str, ...] = (
    "test_script.sh", "test_files.txt", "test_parser.py", "bug_inject.diff", "test_weaken.diff")
"""SSR's five artifact files in their canonical order: what a role with submit = "artifact" writes to its
artifact_dir and `submit` reads back. The one definition (`selfplay.artifact` imports it)."""

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_INCLUDE = re.compile(r"\{\{>\s*([A-Za-z0-9_.-]+)\s*\}\}")


@dataclass(frozen=True)
class EpisodeLimits:
    """Budgets of one episode."""

    max_turns: int = 50
    """Assistant turns before the episode ends with `max_turns`."""
    max_new_tokens: int = 2048
    """Sampled tokens per turn (less when the context budget is nearly spent)."""
    max_context_tokens: int = 32768
    """Tokens of the context the policy sees (prompt + turns + observations); never exceeded: see
    `on_context_full` for what happens instead."""
    min_turn_tokens: int = 16
    """A turn is only started when at least this many tokens of context budget remain."""
    command_timeout: float = 120.0
    """Seconds per bash command before it is killed."""
    wall_clock: float = 3600.0
    """Seconds for the whole episode before it ends with `timeout` (checked between turns; commands are
    cut to the remaining time)."""
    max_observation_chars: int = 8000
    """Longer observations keep their head and tail around a truncation marker."""
    max_format_errors: int = 3
    """Consecutive malformed replies before the episode ends with `format_errors`."""
    max_repeats: int | None = None
    """Consecutive repeats of the previous turn before the episode ends with `repeated`: a reply whose action
    equals the previous reply's, answered with the same observation, is a repeat. The policy is then in a
    loop that leaves the sandbox and its context as they were, and the turns it would still sample change
    nothing but the cost (a third of the default run's solver tokens went to such repeats; docs/benchmarks.md).
    None never ends an episode for repeating."""
    on_context_full: Literal["stop", "compact"] = "stop"
    """When the next observation would leave fewer than `min_turn_tokens` of `max_context_tokens`:
    "stop" ends the episode with `context_exhausted`; "compact" starts a new trajectory segment whose
    context replaces all but the `keep_observations` newest observations by a short marker (and still ends
    with `context_exhausted` when even that does not fit). See docs/scaffold.md, "Context compaction"."""
    keep_observations: int = 2
    """With "compact": observations kept in full, the newest one included (fewer if they do not fit)."""
    refused_submits: int = 0
    """Submits of an incomplete submission (an artifact file missing or empty; for a diff role, an empty
    diff) answered with what is missing, as an observation, instead of ending the episode; the submit after
    that many ends it as it is. 0 ends the episode on every submit. Each refusal costs its turn."""
    submit_on_limit: bool = False
    """When the episode runs out of turns, context or wall clock, take the sandbox's state as its submission
    (SWE-agent's autosubmission) unless that is incomplete (an empty diff, an artifact file missing or
    empty); the ending stays the limit hit. False: such an episode has no submission and fails."""

    def __post_init__(self) -> None:
        if self.on_context_full not in CONTEXT_FULL:
            raise ValueError(f"EpisodeLimits.on_context_full must be one of {CONTEXT_FULL}, "
                             f"got {self.on_context_full!r}")
        for f in fields(self):
            if f.name == "refused_submits":
                if self.refused_submits < 0:
                    raise ValueError(f"EpisodeLimits.refused_submits must be 0 or more, got {self.refused_submits}")
            elif f.name == "max_repeats":
                if self.max_repeats is not None and self.max_repeats <= 0:
                    raise ValueError(f"EpisodeLimits.max_repeats must be positive or None, got {self.max_repeats}")
            elif f.name not in ("on_context_full", "submit_on_limit") and getattr(self, f.name) <= 0:
                raise ValueError(f"EpisodeLimits.{f.name} must be positive, got {getattr(self, f.name)}")
        if self.min_turn_tokens >= self.max_context_tokens:
            raise ValueError("EpisodeLimits.min_turn_tokens must be below max_context_tokens")

    def overridden(self, **values: Any) -> EpisodeLimits:
        """These limits with each of `values` that is not None in its place (a command's optional overrides),
        checked as any limits are."""
        return replace(self, **{k: v for k, v in values.items() if v is not None})


@dataclass(frozen=True)
class RoleConfig:
    """One role: which templates, what the submission is, default variables and budgets."""

    name: str
    """"solver" or "injector" (the trajectory's role)."""
    system_template: str
    """Template text of the system message."""
    task_template: str
    """Template text of the first user message."""
    submit: Literal["diff", "artifact"] = "diff"
    """What `submit` returns: the repo's git diff, or the five artifact files read from artifact_dir."""
    strategy: str | None = None
    """Injector strategy (removal, history, direct); None for the solver."""
    defaults: dict[str, str] = field(default_factory=dict)
    """Variable values used when the caller gives none."""
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    """Default budgets."""


def render_template(template: str, variables: dict[str, Any]) -> str:
    """Fill `{{name}}` placeholders (after expanding includes); ValueError naming missing variables."""
    for _ in range(5):  # includes may nest a little; a cycle stops here
        expanded = _INCLUDE.sub(lambda m: _read_prompt(m.group(1)), template)
        if expanded == template:
            break
        template = expanded
    missing = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template)} - set(variables))
    if missing:
        raise ValueError(f"prompt template needs values for {', '.join(missing)}; pass them in `variables` "
                         f"or add defaults in {ROLES_FILE}")
    return _PLACEHOLDER.sub(lambda m: str(variables[m.group(1)]), template)


def _read_prompt(name: str) -> str:
    path = PROMPTS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"prompt template {name} not found in {PROMPTS_DIR}")
    return path.read_text().rstrip("\n")


def load_role(name: str, strategy: str | None = None, roles_file: Path = ROLES_FILE) -> RoleConfig:
    """The role `name` ("solver" or "injector") from `roles_file`; injectors need a strategy."""
    table = tomllib.loads(roles_file.read_text())
    if name not in table:
        raise ValueError(f"unknown role {name!r}; {roles_file} defines {', '.join(table)}")
    entry = table[name]
    task = entry["task"]
    if isinstance(task, dict):
        if strategy not in task:
            raise ValueError(f"role {name!r} needs --strategy, one of {', '.join(task)} (got {strategy!r})")
        task = task[strategy]
    elif strategy is not None:
        raise ValueError(f"role {name!r} takes no strategy (got {strategy!r})")
    if entry.get("submit", "diff") not in SUBMISSIONS:
        raise ValueError(f"{roles_file}: role {name} submit must be one of {SUBMISSIONS}")
    return RoleConfig(name=name, system_template=_read_prompt(entry["system"]), task_template=_read_prompt(task),
                      submit=entry.get("submit", "diff"), strategy=strategy,
                      defaults={k: str(v) for k, v in entry.get("defaults", {}).items()},
                      limits=EpisodeLimits(**entry.get("limits", {})))


def injector_strategies(roles_file: Path = ROLES_FILE) -> tuple[str, ...]:
    """The injection strategies `roles_file` has a prompt for."""
    return tuple(tomllib.loads(roles_file.read_text())["injector"]["task"])


def solver_variables(spec: str, kind: str = "tests") -> dict[str, str]:
    """Variables for the solver template: `spec` is a reversed test-weakening diff (kind "tests") or a
    natural-language issue (kind "issue")."""
    if kind not in SPEC_KINDS:
        raise ValueError(f"solver spec kind must be one of {SPEC_KINDS}, got {kind!r}")
    return {"spec_section": render_template(_read_prompt(f"solver_spec_{kind}.md"), {"spec": spec.rstrip("\n")})}
