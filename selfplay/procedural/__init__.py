"""Procedural seed bugs: AST mutation operators, a built-in pytest parser, and `seed()`."""

from pathlib import Path

PARSER_SOURCE = (Path(__file__).parent / "pytest_parser.py").read_text()
"""The built-in pytest parser (`pytest_parser.py`) as the `test_parser.py` an artifact carries: procedural
seeds and the offline SWE-bench-format tasks (`selfplay.eval.offline`) use it."""
