"""Procedural seed bugs: a built-in pytest parser and `seed()`, which applies the AST mutation operators of
`agent_scaffold.mutation_operators` (the artifact kit lists the same changes to the injector policy)."""

from pathlib import Path

PARSER_SOURCE = (Path(__file__).parent / "pytest_parser.py").read_text()
"""The built-in pytest parser (`pytest_parser.py`) as the `test_parser.py` an artifact carries: procedural
seeds and the offline SWE-bench-format tasks (`selfplay.eval.offline`) use it."""
