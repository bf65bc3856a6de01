"""`WarmStartConfig`: what the warm start demonstrates and how it trains, its named sizes, and the repo
split. Plain configuration, so loading a `RunConfig` pulls none of the demonstration machinery
(`selfplay.demos.warm_start` builds it).

The repo split is fixed here and in docs: demonstrations come from `TRAIN_REPOS`; `HELDOUT_REPOS`
contribute none (refused by `WarmStartConfig`) and are what `scripts/bench_learning.py` measures on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from selfplay.config.bounds import check_bounds
from selfplay.learner.rft import LOSS_TURNS

TRAIN_REPOS = ("toolz", "boltons", "marshmallow")
"""Repos whose procedural tasks the warm start demonstrates. Chosen for fast per-file suites (seeding runs
the related test file about five times per mutant) and short specs: more-itertools was dropped (its
test_more.py alone made seeding take over 20 minutes under load), and so was cachetools (about 1 in 6 of
its valid mutants has a spec that fits the 2,048-token demonstration, so seeding 6 took over 10 minutes)."""
HELDOUT_REPOS = ("parse", "inflection", "humanize")
"""Repos kept out of the warm start, for measuring generalisation (tabulate cannot be seeded: no code file
has a same-named test file)."""
HELDOUT_SEED_OFFSET = 500
"""The held-out bench seeds its rounds `1000 * seed + HELDOUT_SEED_OFFSET + round`; the warm start's are
`1000 * seed + round` with round < `max_rounds` <= this, so the two never draw the same mutants."""
RECOVERY_FORMAT = 2
"""Version of the recovery demonstrations (`localize_recover`); part of the config key of the builds that have
them only, so a change to them leaves every other build's key (and cached checkpoint) as it was. 2: the wrong
edit is undone with `undo PATH`, where 1 wrote the reversed `str_replace`, and its policy, localizing again
after a wrong edit and saying it would undo it, wrote that edit's new line as both SEARCH and REPLACE."""
KIT_FORMAT = 4
"""Version of the `kit` injector demonstrations and the kit (`injector_strategy: kit`); part of the config key
of the builds that have them only. 2: the kit's `code` and `show NAME` list and print the function, where 1
had the policy type the `direct` plan's grep and sed, and its policy copied the prompt's placeholders
(`sed -n '/def NAME(/,+20p'`) instead of a listed name. 3: six turns, `oracle` lists the functions and the
bug is a change `mutate NAME` lists, applied by number, where 2's policies never wrote a `str_replace` that
applied (0 of 24 episodes at 1 and at 3 epochs). 4: `oracle`, `bug` and `weaken` end with the next command
(`Next: ...`), where 3's policies repeated `oracle` until they ran out of turns."""
FORMAT = 20
"""Version of the expert and the recipe; part of the config key. 6: the expert locates with a repo-wide
`git grep` and views from the `def` line it printed. 7: the injector expert prints the lines it changes
(`sed -n`) before its str_replace. 8: the injector expert lists the test files with one command in every
repo (`git ls-files`), and demonstrates only artifacts whose test files that listing shows, in 2,304
tokens instead of 2,048. 9: the injector expert lists the code file's functions and views the one it
changes by name (`selfplay.demos.injector.located_function`) instead of printing recalled line numbers,
in 10 turns and 3,072 tokens. 10: that listing finds the code file by the oracle test file's name
(`git ls-files '*X.py'`) and prints its path, which FORMAT 9 policies recalled, wrong in every boltons
episode. 11: the expert names the change before its bug edit ("`<` becomes `>=`", `change_note`), because
FORMAT 10 policies copied SEARCH into REPLACE unchanged. 12: `locate: visible` views from the `def` line the
grep printed to a few lines past the bug (`solver_plan.def_view`), where its first build (FORMAT 11) viewed a
window whose first line the policy had to compute; the `any` expert is unchanged. 13: the `visible` locate
command copies the spec's call whole and lets the shell strip its qualifier (`n=CALL; ... ${n##*.}`),
because FORMAT 12 policies grepped `def humanize.natural_list(`. 14: the `visible` view is `view PATH N`, N the
`def` line the grep printed, and the editor shows a page of whole lines from it that fits the observation
(`editor.page_last`), because FORMAT 13 policies copied START and typed an END before it (`view P 13 1`). 15:
the `visible` expert names the buggy line and the change before its repair ("Line 40: delete `+ 1`.",
`solver_plan._repair_thought`), because FORMAT 14 policies read the buggy line on that page and then copied
another line into SEARCH and REPLACE unchanged; and a page from a `def` line ends with that function
(`editor.block_end`), because FORMAT 14 pages of the next functions overflowed 2,048 tokens in 5 of 20
demonstrations. 16: the `visible` view copies the grep hit's prefix (`view PATH:N`), because FORMAT 15
policies copied N and wrote a training repo's PATH from memory (`view toolz/itertoolz.py 309`). 17: its
str_replace copies that prefix too (`str_replace PATH:N`, the first match from line N on), because FORMAT 16
policies viewed `PATH:N` and then wrote `str_replace PATH`, the literal word, or the call. 18: the `visible`
expert views and edits the call the spec makes (`view parse.search`, `str_replace parse.search`; the editor
goes to its definition, `agent_scaffold.symbols`) with no grep before it, because FORMAT 17 policies grepped
the right `def` line and then wrote the call, not the hit's path, in 0 of 32 parse and inflection views. 19:
the `visible` expert quotes the buggy line in the thought before its repair ("Line 40, `return s[:n + 1]`:
delete `+ 1`."), and its tasks are demonstrated in an order that balances their operators
(`collect.balanced_next`), because FORMAT 18 policies left 62 of 194 SEARCH texts unchanged and flipped a
comparison (13 of 44 demonstrations) whatever the bug was. 20: that thought ends with the line as the repair
leaves it ("..., so it reads `return s[:n]`."), because FORMAT 19 policies quoted the line, named the change
and then copied the line into REPLACE unchanged (75 of 88 SEARCH texts)."""


@dataclass(frozen=True)
class WarmStartConfig:
    """What the warm start demonstrates and how it trains (the config key hashes all of it)."""

    repos: tuple[str, ...] = TRAIN_REPOS
    """Training repos; none of `heldout_repos` may be among them."""
    n_per_repo: int = 2
    """Procedural tasks demonstrated per repo. 2 for `selfplay run`'s default: trained long (`epochs`), its
    policy repeats some demonstrated repairs at T = 0.5, so the run's groups on those tasks (`curriculum.demonstrated_tasks`)
    can have reward variance; 6 tasks at one epoch gave none (docs/benchmarks.md, the embedded default)."""
    per_task: int = 1
    """Solver demonstrations per task (each with other seeded choices of the expert)."""
    short_share: float = 0.5
    """Share of solver demonstrations that follow the 4-turn plan (grep, view, str_replace, submit; no test
    run) instead of the full one (reproduce, locate, view, repair, re-run, restore, submit: 6-9 turns): the
    default run allows its solver 4 turns of 96 tokens, where the full plan runs out of turns."""
    injector_per_repo: int = 1
    """Injector demonstrations (of `injector_strategy`) per repo, kept when their artifact validates; 0 is none."""
    locate: Literal["any", "visible", "localize"] = "any"
    """How the solver demonstrations find the bug's function: "any" greps its name whether or not the spec
    shows it (the expert's knowledge); "visible" demonstrates only tasks whose spec's added lines name it,
    quoting that call before the grep (`solver_plan.SolverTask.visible_only`), so every name the policy
    learns to grep is one it can read (held-out episodes of "any" warm starts grepped made-up names);
    "localize" gives the solver episodes the `localize` tool (spectrum-based fault localization over the spec's
    tests, `agent_scaffold.localize`) and demonstrates only tasks whose bug's line it lists among the first
    three (`solver_plan.localize_actions`): localize, edit that line, submit. Its policies need the tool at
    evaluation too (`bench_learning.py --localize`)."""
    localize_ranks: int = 3
    """With `locate: localize`: the expert edits the bug's line only when the tool lists it among the first
    this many (`solver_plan.localize_actions`); 1 demonstrates only tasks whose bug's line is listed first,
    so every demonstration edits the top line (a policy cannot tell which of three lines the expert chose)."""
    localize_recover: int = 0
    """With `locate: localize` and `localize_ranks` 1: recovery demonstrations per repo added to the direct ones
    (`collect.recovery_demos`), on the seeded tasks whose bug's line the tool lists second: a wrong edit of the
    first listed line (no loss), `localize` again, the undo, the second line's repair. Played on the build's
    tasks without a demonstration, in a budget of `collect.RECOVERY_CONTEXT_TOKENS`, so a build that differs
    from a finished one only here (and in `drills`) reuses that one's demonstrations. 0 for none."""
    drills: int = 0
    """Repair drills added to the SFT data, spread evenly over `repos` (`selfplay.demos.drills`): the edit
    turn after `localize` alone, on mutants of lines of the training repos' code, listed first. Only with
    `locate: localize`; 0 for none."""
    injector_strategy: Literal["direct", "kit"] = "kit"
    """The injector demonstrations' strategy, which the run's injector episodes must draw
    (`rollout.strategies`): "direct" types the runner script, the parser and the weakening script (about 700
    of a demonstration's 2,500 tokens); "kit" has the artifact kit write them (`agent_scaffold.artifact_kit`),
    and lists the procedural operators' changes to a function, so the policy learns only the choices: the
oracle test file, the function and the change's number. The default's
    three injector demonstrations at one epoch never held the direct plan (0 valid bugs in every default run,
    docs/benchmarks.md)."""
    injector_operators: tuple[str, ...] = ()
    """Procedural operators whose bugs the injector demonstrations write (names of
    `agent_scaffold.mutation_operators.OPERATORS`, seeded on their own); () is every operator, drawn from the
    solver demonstrations' seeds. ("drop_statement",) makes every demonstrated bug edit the same change,
    a statement becoming `pass`: the fourth to seventh attempts' policies (docs/benchmarks.md) copied the
    SEARCH text they had read and then failed to change it, whatever the plan around the edit."""
    seed: int = 0
    """Seeds bugs, the expert's choices and training."""
    max_rounds: int = 3
    """Seeding rounds per repo (each a new SeedConfig seed) before giving up on reaching `n_per_repo`."""
    preset: str = "cpu"
    """SFT preset (selfplay/config/presets/sft/: cpu or nebius)."""
    epochs: int | None = 5
    """Passes over the demonstrations; None is the SFT preset's (cpu: 1). 5 for the default, at `lr` 2e-4:
    8 epochs of 4 at 1e-4 (24 steps, final loss 0.065) took 26 min of SFT on an AVX2-only 2-core box, over
    the first run's 30-minute budget; 5 in steps of 2 at 1e-4 ended at loss 0.3 and its run solved
    nothing (docs/benchmarks.md, the embedded default)."""
    injector_epochs: int | None = 3
    """Passes over the injector demonstrations (the first ones of `epochs`); None is every epoch. A
    `direct` injector demonstration is about twice a solver one's length, so at 8 epochs they took 48% of the
    SFT time, and the default run's injector made no valid bug at 8 epochs either. The default's three `kit`
    demonstrations (KIT_FORMAT 4) at 3 epochs made 23 of 24 injector episodes valid, 19 of them a
    demonstrated bug replayed; at 1 epoch 0 of 24, the policy repeating `oracle` or giving `mutate` a path.
    3 epochs cost about 80 s more SFT (docs/benchmarks.md, "Thirtieth attempt")."""
    batch_size: int | None = 2
    """Demonstrations per SFT step; None is the preset's (cpu: 4). 2 gives the default 21 steps with under
    half the tokens of 8 epochs of 4."""
    lr: float | None = 2e-4
    """Peak SFT learning rate; None is the preset's (cpu: 1e-4). 2e-4 for the default's few steps."""
    loss_turns: Literal["valid", "edit"] = "valid"
    """Which assistant turns carry loss: every valid action ("valid"), or only the `edit` actions (view,
    str_replace: the repair the expert's opening and closing turns drown out). "edit" needs `direct` injector
    demonstrations (or none): a `kit` one has no edit."""
    max_context_tokens: int = 2048
    """Token budget of one solver demonstration."""
    injector_max_context_tokens: int = 3072
    """Token budget of one injector demonstration (the run's `rollout.injector_limits` must allow as much).
    2,304 since FORMAT 8: the repo-wide test listing costs 125-165 tokens, where the `ls` of one folder cost
    about 60, and at 2,048 most demonstrations ran out of context before their submit. 3,072 since FORMAT 9:
    the function listing and the function's view add 190-580 tokens."""
    model_dir: str | None = None
    """Base model; None is the embedded SmolLM2-135M-Instruct."""
    heldout_repos: tuple[str, ...] = field(default=HELDOUT_REPOS)
    """Repos that must feed no demonstration (the held-out bench's); `repos` may not name one."""

    def __post_init__(self) -> None:
        leaked = sorted(set(self.repos) & set(self.heldout_repos))
        if leaked:
            raise ValueError(f"warm_start.config.repos: {', '.join(leaked)} {'is' if len(leaked) == 1 else 'are'} held out (warm_start.config."
                             f"heldout_repos = {list(self.heldout_repos)}); held-out repos feed no "
                             "demonstration: drop them from repos")
        if not self.repos:
            raise ValueError("warm_start.config.repos: name at least one training repo")
        check_bounds(self, at_least={"epochs": 1, "lr": 0, "max_context_tokens": 1, "injector_max_context_tokens": 1})
        if not 0.0 <= self.short_share <= 1.0:
            raise ValueError(f"warm_start.config.short_share must be in [0, 1], got {self.short_share}")
        if self.n_per_repo < 1 or self.per_task < 1 or self.injector_per_repo < 0:
            raise ValueError("warm_start.config: n_per_repo and per_task must be >= 1, injector_per_repo >= 0")
        if not 1 <= self.max_rounds <= HELDOUT_SEED_OFFSET:
            raise ValueError(f"warm_start.config.max_rounds must be in 1..{HELDOUT_SEED_OFFSET} (above, its "
                             f"seeds would reach the held-out bench's), got {self.max_rounds}")

        from agent_scaffold.mutation_operators import OPERATORS_BY_NAME  # pure: the ast module only

        unknown = sorted(set(self.injector_operators) - set(OPERATORS_BY_NAME))
        if unknown:
            raise ValueError(f"warm_start.config.injector_operators: unknown operator {', '.join(unknown)}; "
                             f"choose from {', '.join(OPERATORS_BY_NAME)}")
        if any(v is not None and v < 1 for v in (self.injector_epochs, self.batch_size)):
            raise ValueError("warm_start.config: injector_epochs and batch_size must be >= 1 or null (the "
                             f"preset's), got {self.injector_epochs} and {self.batch_size}")
        if not 1 <= self.localize_ranks <= 5:
            raise ValueError(f"warm_start.config.localize_ranks must be 1 to 5, got {self.localize_ranks}")
        if self.drills < 0 or (self.drills and self.locate != "localize"):
            raise ValueError(f"warm_start.config.drills must be >= 0, and drills need locate: localize (they are "
                             f"the edit turn after `localize`), got drills {self.drills} with locate {self.locate!r}")
        if self.localize_recover < 0 or (self.localize_recover and (self.locate != "localize"
                                                                      or self.localize_ranks != 1)):
            raise ValueError(f"warm_start.config.localize_recover must be >= 0, and recovery demonstrations need "
                             f"locate: localize with localize_ranks 1 (with more ranks the expert edits a line listed "
                             f"second directly), got {self.localize_recover} with locate {self.locate!r} and "
                             f"localize_ranks {self.localize_ranks}")
        if self.injector_strategy not in ("direct", "kit"):
            raise ValueError(f"warm_start.config.injector_strategy must be direct or kit, got {self.injector_strategy!r}")
        if self.locate not in ("any", "visible", "localize"):
            raise ValueError(f"warm_start.config.locate must be any, visible or localize, got {self.locate!r}")
        if self.loss_turns not in LOSS_TURNS:
            raise ValueError(f"warm_start.config.loss_turns must be one of {LOSS_TURNS}, got {self.loss_turns!r}")
        if self.loss_turns == "edit" and self.injector_strategy == "kit" and self.injector_per_repo:
            raise ValueError("warm_start.config.loss_turns: edit trains only `edit` actions, and a kit injector "
                             "demonstration has none (`mutate` makes its change): set loss_turns: valid, "
                             "injector_strategy: direct, or injector_per_repo: 0")

    def seeds(self) -> tuple[int, ...]:
        """SeedConfig seeds of its seeding rounds (`collect.make_demos` draws them in this order)."""
        return tuple(1000 * self.seed + r for r in range(self.max_rounds))
