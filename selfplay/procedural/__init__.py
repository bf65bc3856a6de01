"""Procedural seed bugs: AST mutation operators, a built-in pytest parser, and `seed()`."""
