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
_RANK = {op.name: rank for rank, op in enumerate(OPERATORS)}
"""An operator's place in OPERATORS: a listing's order among changes of one line."""


def mutate(source: str, operator: Operator, site: int) -> str:
    """`source` with site number `site` (an index into `operator.sites`) rewritten.

    Raises IndexError for a site that does not exist and ValueError when the result does not parse or
    the node cannot be rewritten in place (e.g. a statement sharing its line with another).
    """
    return _mutant(source, operator, operator.sites(ast.parse(source))[site])


def _mutant(source: str, operator: Operator, node: ast.AST, unit: tuple[int, int] | None = None) -> str:
    """`source` with `node` (a site of `operator` in a parse of `source`) rewritten; `mutate`'s errors.
    `unit`: the 0-based first and last line of the top-level statement holding `node`, the only text whose
    parse the rewrite can change (`FileChanges`); None parses the whole mutant."""
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
    try:  # the rewritten lines first..last are one item of new_raw now
        ast.parse(result if unit is None else b"".join(new_raw[unit[0]:unit[1] - (last - first) + 1]).decode())
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


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of `tree` (methods and nested ones included), in source order."""
    return sorted((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
                  key=lambda n: n.lineno)


def function_node(tree: ast.AST, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The first function (in source order, methods and nested ones included) called `name`."""
    return next((n for n in _functions(tree) if n.name == name), None)


def function_names(source: str) -> list[str]:
    """The names of `source`'s functions (methods and nested ones included), each once, in the order of
    the first `def` of each name: the functions `function_mutations` can tell apart."""
    return list(dict.fromkeys(n.name for n in _functions(ast.parse(source))))


def function_mutations(source: str, name: str) -> list[Mutation] | None:
    """Every operator's changes inside function `name` of `source`, by line then operator, a change that
    makes the same file as an earlier one left out; None when `source` defines no function `name`."""
    return FileChanges(source).of(name)


class FileChanges:
    """`function_mutations` of one file's functions, each worked out when first asked for, from one parse and
    one pass over the operators' sites. The kit's move-on may look at every function of a file: a call of
    `function_mutations` per function parsed and walked the whole file each time, and checked each mutant
    by parsing the whole file again (docs/benchmarks.md: a minute on a 5,600-line file). Here a mutant is
    checked by parsing only the top-level statement it changes, which the rest of the file cannot make
    parse or fail: every rewrite is an `ast.unparse`, balanced by construction, and top-level statements
    start at column 0."""

    def __init__(self, source: str) -> None:
        self.source = source
        tree = ast.parse(source)
        self._functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for fn in _functions(tree):
            self._functions.setdefault(fn.name, fn)
        nodes = _function_nodes(tree)  # the rewrites copy nodes, so one parse serves every site
        self._sites = [(op, site, node) for op in OPERATORS for site, node in enumerate(op.sites(tree, nodes))]
        self._units = [(min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))]) - 1, s.end_lineno - 1)
                       for s in tree.body]
        self._lines = source.splitlines()
        self._done: dict[str, list[Mutation]] = {}

    @property
    def names(self) -> list[str]:
        """`function_names(source)`."""
        return list(self._functions)

    def of(self, name: str) -> list[Mutation] | None:
        """`function_mutations(source, name)`."""
        fn = self._functions.get(name)
        if fn is None:
            return None
        if name not in self._done:
            found: dict[str, Mutation] = {}
            for op, site, node in self._sites:
                if not fn.lineno <= node.lineno <= node.end_lineno <= fn.end_lineno:
                    continue
                try:
                    mutant = _mutant(self.source, op, node, self._unit(node))
                except ValueError:
                    continue
                if mutant not in found:
                    found[mutant] = _change(op.name, site, self._lines, mutant)
            self._done[name] = sorted(found.values(), key=lambda m: (m.line, _RANK[m.operator], m.site))
        return self._done[name]

    def _unit(self, node: ast.AST) -> tuple[int, int]:
        """0-based first and last line of the top-level statement holding `node` (decorators included)."""
        return next(u for u in self._units if u[0] <= node.lineno - 1 <= u[1])


def _change(operator: str, site: int, lines: list[str], mutant: str) -> Mutation:
    """The `Mutation` that turns the file of `lines` into `mutant`."""
    new_lines = mutant.splitlines()
    at = next(i for i, (a, b) in enumerate(zip(lines + [""], new_lines + [""])) if a != b)
    same_end = 0  # lines after the change that both files share
    while same_end < min(len(lines), len(new_lines)) - at - 1 and lines[-1 - same_end] == new_lines[-1 - same_end]:
        same_end += 1
    return Mutation(operator, site, at + 1, max(at + 1, len(lines) - same_end), lines[at].strip(),
                    new_lines[at].strip(), mutant)
