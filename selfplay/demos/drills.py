"""Repair drills: short SFT samples of the one turn a `locate: localize` warm start shows too rarely.

The rank-1 localize demonstrations teach a policy to call `localize` and copy the first listed line into a
`str_replace`; what they cannot teach from 40-odd tasks is the change itself (the eighteenth attempt's
policy left a third of its SEARCH texts unchanged). A drill is that edit turn alone, on many more lines: one
procedural mutant of one line of a training repo's code file, by a seeding operator whose change the line
itself can undo (`DRILL_OPERATORS`: a flipped comparison, an off-by-one, a swapped `and`/`or`, swapped
arguments, a constant plus one). Its conversation is the `localize` tool's answer listing the mutated line
first (a few of its neighbours below it, with made-up falling scores: no
test is run), and the expert's edit turn as `solver_plan.localize_actions` writes it: the repair thought
and `str_replace PATH:LINE` putting the original line back.

What this teaches is the inverse of the seeding operators, and held-out bugs are drawn from the same
operators: a gain from drills is a gain on this bug family. Drills come only from the warm start's
training repos (the held-out repos are refused), and never run anything: the mutant is not tested.

`line_drills`, `drill_messages` and `drill_sample` are pure; `repo_drills` reads a repo's source.
"""

from __future__ import annotations

import ast
import random
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_scaffold.chat_format import chat_format
from agent_scaffold.localize import Suspect, observation
from agent_scaffold.mutation_operators import OPERATORS_BY_NAME, Operator
from agent_scaffold.transcript import encode, render
from repos.sources import fetch_source
from repos.spec import RepoSpec
from selfplay.demos.bug import LINE_OPERATORS, line_mutants
from selfplay.demos.solver_plan import localized_edit
from selfplay.learner.batch import Sample
from selfplay.procedural.seed import mutable_files

DRILL_OPERATORS = LINE_OPERATORS
"""Seeding operators whose one-line change the buggy line itself can undo (`drop_statement` and
`return_early` delete what the line said, so no drill can show their repair)."""
NEIGHBOURS = 6
"""Lines either side of the drill's line that may be listed below it."""


@dataclass(frozen=True)
class Drill:
    """One mutated line and what the tool would list with it."""

    path: str
    line: int
    buggy: str
    """The mutated line, as in the file (indented)."""
    original: str
    operator: str
    neighbours: tuple[tuple[int, str], ...]
    """(line, stripped code) of the other lines listed, in listing order."""


def _statement_lines(tree: ast.AST) -> set[int]:
    """The lines a line tracer reports: where a statement starts."""
    return {node.lineno for node in ast.walk(tree) if isinstance(node, ast.stmt)}


def _neighbours(lines: Sequence[str], statements: set[int], around: int) -> list[tuple[int, str]]:
    return [(n, lines[n - 1].strip()) for n in range(around - NEIGHBOURS, around + NEIGHBOURS + 1)
            if n != around and n in statements and 0 < n <= len(lines)]


def line_drills(path: str, source: str, operator: Operator, rng: random.Random) -> Iterator[Drill]:
    """Drills of `operator` on `source` (the file `path`), one per site, the sites in a random order; a site
    whose mutant changes more or less than one line is skipped."""
    try:
        statements = _statement_lines(ast.parse(source))
    except SyntaxError:
        return
    old = source.splitlines()
    for n, buggy in line_mutants(source, operator, rng):
        near = _neighbours(old, statements, n)
        yield Drill(path, n, buggy, old[n - 1], operator.name,
                    tuple(rng.sample(near, min(len(near), rng.randint(1, 4)))))


def drill_messages(drill: Drill, rng: random.Random, system: str | None = None) -> list[dict[str, str]]:
    """[`system`,] the tool's answer listing the drill's line first, the expert's edit turn."""
    scores = sorted((round(rng.uniform(0.3, 1.0), 2) for _ in drill.neighbours), reverse=True)
    top = max([round(rng.uniform(0.6, 1.0), 2), *scores[:1]])
    rows = [(Suspect(drill.path, drill.line, top), drill.buggy.strip())]
    rows += [(Suspect(drill.path, n, s), code) for (n, code), s in zip(drill.neighbours, scores, strict=True)]
    failed = rng.randint(1, 12)
    return [*([{"role": "system", "content": system}] if system is not None else []),
            {"role": "user", "content": observation(failed, rng.randint(0, 60), rows)},
            {"role": "assistant", "content": localized_edit(rng, 0, drill.path, drill.line, drill.buggy.strip(),
                                                            drill.original.strip())}]


def drill_sample(tokenizer: Any, messages: list[dict[str, str]]) -> Sample:
    """The conversation as one SFT sample, token-exact under `tokenizer`'s chat template: loss on the last
    (assistant) message up to and including its end-of-turn token."""
    fmt = chat_format(tokenizer)
    prompt_text = render(tokenizer, messages[:-1], True)
    # The turn is tokenized after the prompt's ids, as a policy continues them: a prompt that ends in
    # whitespace ("\n\n" in Llama-3's) tokenizes differently when the whole text is tokenized at once.
    prompt = encode(tokenizer, prompt_text)
    if fmt.reply_opening:  # a final turn renders without the opened reasoning: the scripted policy's tokens
        full = [*prompt, *encode(tokenizer, fmt.scripted_reply(messages[-1]["content"])), fmt.turn_end_id]
    else:
        text = render(tokenizer, messages, False)
        full = prompt + encode(tokenizer, text[len(prompt_text):]) if text.startswith(prompt_text) else []
    end_id = fmt.turn_end_id
    ends = [i for i in range(len(prompt), len(full)) if full[i] == end_id]
    if not ends:
        raise ValueError("the chat template does not render the assistant turn after the prompt and close it "
                         "with the end-of-turn token; drills need a template that does")
    end = ends[-1] + 1
    mask = [0] * len(prompt) + [1] * (end - len(prompt)) + [0] * (len(full) - end)
    return Sample(input_ids=tuple(full), loss_mask=tuple(mask), old_logprobs=(0.0,) * len(full), advantage=1.0,
                  role="solver")


def repo_drills(spec: RepoSpec, n: int, seed: int, tokenizer: Any, heldout: Sequence[str]) -> list[Sample]:
    """`n` drill samples on `spec`'s code files (those seeding mutates), the operators taking turns. They
    carry no system prompt (the chat template's default stands in): the solver's is about 400 tokens, which
    would make a drill of about 250 tokens 2.5 times as long to train on."""
    if spec.name in heldout:
        raise ValueError(f"repair drills from {spec.name}, a held-out repo: drills come from training repos only")
    root = fetch_source(spec)
    if root is None:
        raise ValueError(f"{spec.name}: no local source to draw repair drills from")
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    sources = {path: (Path(root) / path).read_text(errors="replace")
               for path, _ in mutable_files(files, spec.test_patterns)}
    rng = random.Random(f"drills:{spec.name}:{seed}")
    pools = {name: _pool(sources, OPERATORS_BY_NAME[name], rng) for name in DRILL_OPERATORS}
    samples: list[Sample] = []
    while len(samples) < n and any(pools.values()):
        for name in DRILL_OPERATORS:
            drill = next(pools[name], None) if pools[name] else None
            if drill is None:
                pools[name] = None
                continue
            samples.append(drill_sample(tokenizer, drill_messages(drill, rng)))
            if len(samples) >= n:
                break
    return samples


def _pool(sources: dict[str, str], operator: Operator, rng: random.Random) -> Iterator[Drill]:
    """Drills of `operator`, the files taking turns (in a random order), so that no one large file fills
    the repo's share."""
    order = sorted(sources)
    rng.shuffle(order)
    files = [line_drills(path, sources[path], operator, rng) for path in order]
    while files:
        alive = []
        for it in files:
            drill = next(it, None)
            if drill is not None:
                alive.append(it)
                yield drill
        files = alive
