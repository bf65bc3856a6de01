"""AST mutation operators (SWE-smith style: one small class per operator): the changes of procedural seed
bugs (`selfplay.procedural.seed`) and of the artifact kit's `mutate` command (`agent_scaffold.artifact_kit`).

Each operator lists the sites it can mutate inside function bodies (module-level code is left alone so
the module still imports) and rewrites one site. The rewrite replaces only that node's source span, so
the rest of the file, comments and formatting included, is unchanged and the diff stays minimal.

The module needs only the standard library: the artifact kit runs its source, as text, inside a sandbox's
interpreter, so that the kit lists exactly the changes the host's expert and seeds compute.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import ClassVar

_FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def _function_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node that lies inside a function body, in source order."""
    out: list[ast.AST] = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in fn.body:
                out.extend(ast.walk(stmt))
    seen, uniq = set(), []
    for node in out:  # nested functions are walked twice
        if id(node) not in seen and hasattr(node, "lineno"):
            seen.add(id(node))
            uniq.append(node)
    return sorted(uniq, key=lambda n: (n.lineno, n.col_offset))


class Operator:
    """Base: subclasses set `name` and implement `matches` and `rewrite`."""

    name: ClassVar[str] = ""
    statement: ClassVar[bool] = False
    """True when the operator replaces whole statement lines rather than an expression span."""

    def matches(self, node: ast.AST) -> bool:
        raise NotImplementedError

    def rewrite(self, node: ast.AST) -> str:
        """Source text replacing `node`."""
        raise NotImplementedError

    def sites(self, tree: ast.AST, nodes: list[ast.AST] | None = None) -> list[ast.AST]:
        """The nodes this operator can rewrite, in source order; `nodes`: `_function_nodes(tree)`, when the
        caller already walked it (one walk for every operator)."""
        return [n for n in (_function_nodes(tree) if nodes is None else nodes) if self.matches(n)]


class FlipComparison(Operator):
    """`a < b` -> `a >= b`, `==` <-> `!=`, `in` <-> `not in`, `is` <-> `is not`."""

    name = "flip_comparison"

    def matches(self, node):
        return isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP

    def rewrite(self, node):
        new = copy.deepcopy(node)
        new.ops = [_FLIP[type(node.ops[0])]()]
        return ast.unparse(new)


class ShiftBound(Operator):
    """Off-by-one: `range(a, n)` -> `range(a, n + 1)`, `x[:n]` -> `x[:n + 1]`, `x[0]` -> `x[1]`."""

    name = "shift_bound"

    def matches(self, node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            return bool(node.args) and not isinstance(node.args[-1], ast.Starred)
        if isinstance(node, ast.Slice):
            return node.upper is not None or node.lower is not None
        return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and type(node.slice.value) is int)

    def rewrite(self, node):
        new = copy.deepcopy(node)
        if isinstance(new, ast.Call):
            new.args[-1] = ast.BinOp(new.args[-1], ast.Add(), ast.Constant(1))
        elif isinstance(new, ast.Slice):
            if new.upper is not None:
                new.upper = ast.BinOp(new.upper, ast.Add(), ast.Constant(1))
            else:
                new.lower = ast.BinOp(new.lower, ast.Add(), ast.Constant(1))
        else:
            new.slice = ast.Constant(new.slice.value + 1)
        return ast.unparse(new)


class SwapBooleanOperator(Operator):
    """`a and b` <-> `a or b`."""

    name = "swap_boolean_operator"

    def matches(self, node):
        return isinstance(node, ast.BoolOp)

    def rewrite(self, node):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return ast.unparse(new)


class DropStatement(Operator):
    """Replace an assignment or expression statement (not the only one in its block) with `pass`."""

    name = "drop_statement"
    statement = True

    def matches(self, node):
        return isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr)) and not (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))  # not a docstring

    def rewrite(self, node):
        return "pass"


class ReturnEarly(Operator):
    """Turn an `if cond: return x` guard's condition always true: `if True: return x`."""

    name = "return_early"

    def matches(self, node):
        return (isinstance(node, ast.If) and len(node.body) == 1 and isinstance(node.body[0], ast.Return)
                and not isinstance(node.test, ast.Constant))

    def sites(self, tree, nodes=None):
        return [n.test for n in (_function_nodes(tree) if nodes is None else nodes) if self.matches(n)]

    def rewrite(self, node):
        return "True"


class SwapArguments(Operator):
    """`f(a, b)` -> `f(b, a)` (the first two positional arguments)."""

    name = "swap_arguments"

    def matches(self, node):
        return (isinstance(node, ast.Call) and len(node.args) >= 2
                and not any(isinstance(a, ast.Starred) for a in node.args[:2])
                and ast.dump(node.args[0]) != ast.dump(node.args[1]))

    def rewrite(self, node):
        new = copy.deepcopy(node)
        new.args[0], new.args[1] = new.args[1], new.args[0]
        return ast.unparse(new)


class ChangeConstant(Operator):
    """An integer literal n -> n + 1."""

    name = "change_constant"

    def matches(self, node):
        return isinstance(node, ast.Constant) and type(node.value) is int

    def rewrite(self, node):
        return repr(node.value + 1)


OPERATORS: tuple[Operator, ...] = (FlipComparison(), ShiftBound(), SwapBooleanOperator(), DropStatement(),
                                   ReturnEarly(), SwapArguments(), ChangeConstant())
OPERATORS_BY_NAME = {op.name: op for op in OPERATORS}


def mutate(source: str, operator: Operator, site: int) -> str:
    """`source` with site number `site` (an index into `operator.sites`) rewritten.

    Raises IndexError for a site that does not exist and ValueError when the result does not parse or
    the node cannot be rewritten in place (e.g. a statement sharing its line with another).
    """
    return _mutant(source, operator, operator.sites(ast.parse(source))[site])


def _mutant(source: str, operator: Operator, node: ast.AST) -> str:
    """`source` with `node` (a site of `operator` in a parse of `source`) rewritten; `mutate`'s errors."""
    lines = source.splitlines(keepends=True)
    raw = [line.encode() for line in lines]  # ast column offsets count UTF-8 bytes
    first, last = node.lineno - 1, node.end_lineno - 1
    if operator.statement:
        indent, rest = raw[first][:node.col_offset], raw[last][node.end_col_offset:].strip()
        if indent.strip() or (rest and not rest.startswith(b"#")):
            raise ValueError(f"{operator.name}: statement at line {node.lineno} shares its line")
        new_raw = raw[:first] + [indent + operator.rewrite(node).encode() + b"\n"] + raw[last + 1:]
    else:
        head, tail = raw[first][:node.col_offset], raw[last][node.end_col_offset:]
        new_raw = raw[:first] + [head + operator.rewrite(node).encode() + tail] + raw[last + 1:]
    result = b"".join(new_raw).decode()
    if result == source:
        raise ValueError(f"{operator.name}: the rewrite at line {node.lineno} changes nothing")
    try:
        ast.parse(result)
    except SyntaxError as exc:
        raise ValueError(f"{operator.name}: the mutant does not parse ({exc.msg})") from None
    return result


@dataclass(frozen=True)
class Mutation:
    """One change `function_mutations` lists: an operator's site inside one function."""

    operator: str
    """The operator's `name`."""
    site: int
    """Index into the operator's `sites` of the whole file (`mutate`'s argument)."""
    line: int
    """1-based first line the change touches."""
    last: int
    """1-based last line of the original that the change touches (`line` for a one-line change; the
    statement's last line for a statement dropped from several)."""
    old: str
    """That line before the change, stripped."""
    new: str
    """That line after the change, stripped (a statement dropped from several lines shows its `pass`)."""
    source: str
    """The whole file with the change."""


def function_node(tree: ast.AST, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The first function (in source order, methods and nested ones included) called `name`."""
    found = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    return min(found, key=lambda n: n.lineno, default=None)


def function_names(source: str) -> list[str]:
    """The names of `source`'s functions (methods and nested ones included), each once, in the order of
    the first `def` of each name: the functions `function_mutations` can tell apart."""
    nodes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return list(dict.fromkeys(n.name for n in sorted(nodes, key=lambda n: n.lineno)))


def function_mutations(source: str, name: str) -> list[Mutation] | None:
    """Every operator's changes inside function `name` of `source`, by line then operator, a change that
    makes the same file as an earlier one left out; None when `source` defines no function `name`."""
    tree = ast.parse(source)
    fn = function_node(tree, name)
    if fn is None:
        return None
    lines = source.splitlines()
    nodes = _function_nodes(tree)
    out: dict[str, Mutation] = {}
    for op in OPERATORS:
        for site, node in enumerate(op.sites(tree, nodes)):
            if not fn.lineno <= node.lineno <= node.end_lineno <= fn.end_lineno:
                continue
            try:
                mutant = _mutant(source, op, node)  # the rewrites copy nodes, so one parse serves every site
            except ValueError:
                continue
            new_lines = mutant.splitlines()
            at = next(i for i, (a, b) in enumerate(zip(lines + [""], new_lines + [""])) if a != b)
            same_end = 0  # lines after the change that both files share
            while (same_end < min(len(lines), len(new_lines)) - at - 1
                   and lines[-1 - same_end] == new_lines[-1 - same_end]):
                same_end += 1
            out.setdefault(mutant, Mutation(op.name, site, at + 1, max(at + 1, len(lines) - same_end),
                                            lines[at].strip(), new_lines[at].strip(), mutant))
    order = {op.name: rank for rank, op in enumerate(OPERATORS)}
    return sorted(out.values(), key=lambda m: (m.line, order[m.operator], m.site))
