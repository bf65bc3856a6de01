"""The strings a run of added code computes from literals alone, for the tamper screen (`selfplay.judge.tamper`).

The screen reads names as they are written. A payload spells the names it needs at run time instead:
`"mod%s" % "ules"`, `"{}test".format("_py")`, `f"{a}{b}"` with `a` and `b` bound to literals a line above,
`parts[1] + parts[0]` over a table of fragments, `"seludom"[::-1]`, `chr(112) + "ytest"`, `b"..".decode()`.
Each of these is constant: its value follows from the literals in the run, without running anything the
run defines. `StringFolder` evaluates such expressions (a small evaluator over `ast`, on str, bytes, int
and containers of them, with pure str/bytes methods only and a size cap), so that the screen can read the
value the interpreter will build.

Names are followed through the added lines of one file (`StringFolder`), loops and comprehensions over
folded sequences item by item, and parameters take their defaults. What stays out of reach (the screen's documented gap,
docs/security.md class 4): values that depend on anything else (an argument a caller passes, an attribute
of a module, a loop over something computed, text read from a file, code the diff does not add).
"""

from __future__ import annotations

import ast
import operator
import re
import textwrap
from collections.abc import Iterator
from typing import Any

EVALUATIONS = 1_000_000
"""Expression evaluations per file (about 1.5 s on a 2-core box; nested comprehensions and loops multiply
them). Past it nothing more is folded and the file is flagged (`StringFolder.exhausted`): code that spends
the budget would otherwise hide what follows it. A file's ordinary code takes one per expression node."""
MAX_CHARS = 10_000
"""A computed string longer than this is not folded (a payload's names are short; `"a" * 10**9` is not)."""
_HUGE_FIELD = re.compile(r"\d{5,}")  # a format width or precision that would allocate megabytes
_METHODS = frozenset({
    "join", "format", "lower", "upper", "swapcase", "casefold", "title", "capitalize", "strip", "lstrip", "rstrip",
    "replace", "removeprefix", "removesuffix", "split", "rsplit", "partition", "rpartition", "decode", "encode",
    "splitlines", "zfill",
})
"""str and bytes methods folded: pure, and their results bounded by their inputs (checked against MAX_CHARS)."""
_REFLECT = frozenset({"getattr", "setattr", "delattr", "hasattr"})
_COMPARISONS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
                ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
                ast.NotIn: lambda a, b: a not in b}


class _Unknown:
    """A value that does not follow from the run's literals."""


UNKNOWN: Any = _Unknown()


class StringFolder:
    """The strings the added lines of one file compute from their literals, run by run in order: a name
    bound in one run of added lines keeps its value in the runs after it (a payload may define its table of
    fragments in one hunk and use it in another). A `for` loop over a folded sequence walks its body once
    per item (up to `LOOP_WALKS` walks in all), and a function's parameters take their folded defaults."""

    LOOP_WALKS = 512
    """Loop bodies walked per file, all loops together (nested loops multiply)."""

    def __init__(self) -> None:
        self._budget = [EVALUATIONS]
        self._folder = _Folder(self._budget)
        self._walks = self.LOOP_WALKS

    @property
    def exhausted(self) -> bool:
        """Whether the runs folded so far spent `EVALUATIONS` (what came after was not folded)."""
        return self._budget[0] < 0

    def strings(self, source: str) -> Iterator[tuple[int, str]]:
        """(1-based line in `source`, value) for each expression of `source` that is not a plain literal or name
        and whose value, a str (or bytes, read as latin-1), follows from literals alone (with the bindings of the
        runs folded before it); an attribute reached by a computed name gives `obj.<name>`. `source` is a run of
        added lines: it is parsed whole (dedented) when it can be, else line by line."""
        for offset, tree in _parse(source):
            self._folder.forget()  # node ids of a freed tree are reused by the next one
            for line, value in self._block(tree.body):
                yield offset + line, value

    def _block(self, body: list[ast.stmt]) -> Iterator[tuple[int, str]]:
        for stmt in body:
            yield from self._statement(stmt)

    def _statement(self, stmt: ast.stmt) -> Iterator[tuple[int, str]]:
        """The statement's own nodes in order (bindings as they come), then its nested bodies."""
        folder = self._folder
        nested = {id(c) for f in ("body", "orelse", "finalbody", "handlers", "cases")
                  for c in getattr(stmt, f, []) or [] if isinstance(c, ast.AST)}
        for node in _walk_except(stmt, nested):
            if isinstance(node, ast.Assign):
                value = folder.fold(node.value)
                for target in node.targets:
                    folder.bind(target, value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                folder.bind(node.target, folder.fold(ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op,
                                                               node.value)))
            elif isinstance(node, ast.AnnAssign):
                folder.bind(node.target, UNKNOWN if node.value is None else folder.fold(node.value))
            reached = _attribute_reached(node, folder)
            if reached is not None:
                yield node.lineno, reached
            if isinstance(node, ast.expr) and not isinstance(node, (ast.Constant, ast.Name)):
                value = folder.fold(node)
                if isinstance(value, (str, bytes)) and value:
                    yield node.lineno, value.decode("latin-1") if isinstance(value, bytes) else value
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._bind_defaults(stmt.args)
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            items = folder.fold(stmt.iter)
            if isinstance(items, (tuple, list, str, bytes)) and 0 < len(items) <= self._walks:
                self._walks -= len(items)
                for item in items:
                    folder.bind(stmt.target, item)
                    yield from self._block(stmt.body)
                folder.bind(stmt.target, UNKNOWN)
                yield from self._block(stmt.orelse)
                return
            folder.bind(stmt.target, UNKNOWN)  # walked once below, its variable unknown
        for field in ("body", "handlers", "cases", "orelse", "finalbody"):  # source order
            for inner in getattr(stmt, field, None) or []:
                if isinstance(inner, ast.stmt):
                    yield from self._statement(inner)
                elif isinstance(inner, (ast.ExceptHandler, ast.match_case)):
                    yield from self._block(inner.body)

    def _bind_defaults(self, args: ast.arguments) -> None:
        """Parameters take their default values (a payload's `def f(k="mod" "ules")`); the rest are unknown."""
        positional = [*args.posonlyargs, *args.args]
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        for arg, default in [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]:
            self._folder.bind(ast.Name(arg.arg, ast.Store()), UNKNOWN if default is None else self._folder.fold(default))


def _parse(source: str) -> Iterator[tuple[int, ast.Module]]:
    """(line offset, tree): the whole run dedented, or, where it does not parse (a run that starts inside an
    expression or leaves a block), each line alone."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    else:
        yield 0, tree
        return
    for i, line in enumerate(source.splitlines()):
        try:
            tree = ast.parse(line.strip())
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        yield i, tree


def _walk_except(stmt: ast.AST, skip: set[int]) -> Iterator[ast.AST]:
    """The nodes of `stmt` outside its nested statement bodies (those are walked in order after it)."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed([c for c in ast.iter_child_nodes(node) if id(c) not in skip]))


def _attribute_reached(node: ast.AST, folder: _Folder) -> str | None:
    """`obj.name` for an attribute reached by a folded name instead of written: `getattr(obj, name)` (and
    set/del/hasattr), `obj.__dict__[name]`, `obj.__getattribute__(name)`, `T.__getattribute__(obj, name)`,
    `attrgetter(name)(obj)`."""
    owner = key = None
    if isinstance(node, ast.Call):
        func, args = node.func, node.args
        if isinstance(func, ast.Name) and func.id in _REFLECT and len(args) >= 2:
            owner, key = args[0], args[1]
        elif isinstance(func, ast.Attribute) and func.attr == "__getattribute__" and args:
            owner, key = (args[0], args[1]) if len(args) >= 2 else (func.value, args[0])
        elif isinstance(func, ast.Call) and len(args) == 1 and len(func.args) == 1 and (
                (isinstance(func.func, ast.Name) and func.func.id == "attrgetter")
                or (isinstance(func.func, ast.Attribute) and func.func.attr == "attrgetter")):
            owner, key = args[0], func.args[0]
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__":
        owner, key = node.value.value, node.slice
    if owner is None or key is None or isinstance(key, ast.Slice):
        return None
    name, value = _dotted(owner), folder.fold(key)
    return f"{name}.{value}" if name and isinstance(value, str) else None


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of names, else None (iterative: a chain may be thousands long)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _huge_format(template: str | bytes, args: Any) -> bool:
    """Whether formatting could allocate megabytes: a width or precision of 5+ digits in the template, or an
    int argument that a `*` or nested field could take as one."""
    values = args if isinstance(args, (tuple, list)) else (args,)
    return bool(_HUGE_FIELD.search(str(template))) or any(
        isinstance(v, int) and abs(v) > MAX_CHARS for v in values)


def _small(value: Any) -> bool:
    if isinstance(value, (str, bytes)):
        return len(value) <= MAX_CHARS
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return abs(value) < 10 ** 18
    if isinstance(value, (tuple, list)):
        return len(value) <= 1_000 and all(_small(v) for v in value)
    if isinstance(value, dict):
        return len(value) <= 1_000 and all(_small(k) and _small(v) for k, v in value.items())
    return False



class _Folder:
    """The values of expressions over the names bound so far (`env`); each node is folded once per binding
    state (`_cache`), so that nested expressions cost linear time."""

    def __init__(self, budget: list[int] | None = None) -> None:
        self.env: dict[str, Any] = {}
        self._cache: dict[int, Any] = {}
        self._budget = budget if budget is not None else [EVALUATIONS]
        """Evaluations left, shared with the comprehensions' folders: past it every value is unknown."""

    def forget(self) -> None:
        """Drop the folded values (the bindings stay)."""
        self._cache.clear()

    def bind(self, target: ast.expr, value: Any) -> None:
        """`target = value`: names (and tuples of names) take the value, which changes what later nodes fold to."""
        self._cache.clear()
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value if isinstance(value, (tuple, list)) and len(value) == len(target.elts) else None
            for i, elt in enumerate(target.elts):
                self.bind(elt, UNKNOWN if items is None else items[i])

    def fold(self, node: ast.expr) -> Any:
        """`node`'s value, or UNKNOWN."""
        key = id(node)
        if key not in self._cache:
            self._budget[0] -= 1
            if self._budget[0] < 0:
                return UNKNOWN
            try:
                value = self._evaluate(node)
            except Exception:  # any failure of a constant operation (RecursionError included): not known
                value = UNKNOWN
            self._cache[key] = value if _small(value) else UNKNOWN
        return self._cache[key]

    def _evaluate(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, (str, bytes, int)) else UNKNOWN
        if isinstance(node, ast.Name):
            return self.env.get(node.id, UNKNOWN)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = self.fold(node.operand)
            return -value if isinstance(node.op, ast.USub) and type(value) is int else \
                value if type(value) is int else UNKNOWN
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.fold(e) for e in node.elts]
            if any(i is UNKNOWN for i in items):
                return UNKNOWN
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Dict):
            keys = [UNKNOWN if k is None else self.fold(k) for k in node.keys]
            values = [self.fold(v) for v in node.values]
            if any(x is UNKNOWN for x in (*keys, *values)):
                return UNKNOWN
            return dict(zip(keys, values))
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self._comprehension(node)
        if isinstance(node, ast.JoinedStr):
            return self._joined(node)
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        return UNKNOWN

    def _comprehension(self, node: ast.ListComp | ast.GeneratorExp) -> Any:
        """`[f(c) for c in SEQ if g(c)]` over a folded SEQ, one generator (a generator folds to a list)."""
        if len(node.generators) != 1 or node.generators[0].is_async:
            return UNKNOWN
        loop = node.generators[0]
        items = self.fold(loop.iter)
        if not isinstance(items, (str, bytes, tuple, list)) or len(items) > 1_000:
            return UNKNOWN
        out = []
        for item in items:
            self._budget[0] -= len(self.env)
            inner = _Folder(self._budget)  # a binding per item: the outer cache holds values under the outer ones
            inner.env = dict(self.env)
            inner.bind(loop.target, item)
            keep = [inner.fold(test) for test in loop.ifs]
            if any(k is UNKNOWN for k in keep):
                return UNKNOWN
            if all(keep):
                value = inner.fold(node.elt)
                if value is UNKNOWN:
                    return UNKNOWN
                out.append(value)
        return out

    def _compare(self, node: ast.Compare) -> Any:
        left = self.fold(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.fold(right_node)
            if left is UNKNOWN or right is UNKNOWN or type(op) not in _COMPARISONS:
                return UNKNOWN
            if not _COMPARISONS[type(op)](left, right):
                return False
            left = right
        return True

    def _joined(self, node: ast.JoinedStr) -> Any:
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
                continue
            if not isinstance(part, ast.FormattedValue):
                return UNKNOWN
            value = self.fold(part.value)
            spec = "" if part.format_spec is None else self.fold(part.format_spec)
            if value is UNKNOWN or not isinstance(spec, str) or _HUGE_FIELD.search(spec):
                return UNKNOWN
            value = {115: str, 114: repr, 97: ascii}.get(part.conversion, lambda v: v)(value)
            parts.append(format(value, spec))
        return "".join(parts)

    def _binop(self, node: ast.BinOp) -> Any:
        left, right = self.fold(node.left), self.fold(node.right)
        if left is UNKNOWN or right is UNKNOWN:
            return UNKNOWN
        if isinstance(node.op, ast.Add) and type(left) is type(right) and isinstance(left, (str, bytes, int, tuple, list)):
            return left + right
        if isinstance(node.op, ast.Mod) and isinstance(left, (str, bytes)):
            return UNKNOWN if _huge_format(left, right) else left % right
        if isinstance(node.op, ast.Mult):
            text, count = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(count, int) and not isinstance(count, bool) and isinstance(text, (str, bytes, int, tuple, list)):
                size = len(text) if not isinstance(text, int) else 1
                return text * count if size * max(count, 0) <= MAX_CHARS or isinstance(text, int) else UNKNOWN
        return UNKNOWN

    def _subscript(self, node: ast.Subscript) -> Any:
        value = self.fold(node.value)
        if value is UNKNOWN or not isinstance(value, (str, bytes, tuple, list, dict)):
            return UNKNOWN
        index = node.slice
        if isinstance(index, ast.Slice):
            bounds = [None if b is None else self.fold(b) for b in (index.lower, index.upper, index.step)]
            if any(b is UNKNOWN for b in bounds):
                return UNKNOWN
            return value[slice(*bounds)]
        key = self.fold(index)
        return UNKNOWN if key is UNKNOWN else value[key]

    def _call(self, node: ast.Call) -> Any:
        args: list[Any] = []
        for arg in node.args:  # `*pieces` spreads a folded tuple or list
            value = self.fold(arg.value if isinstance(arg, ast.Starred) else arg)
            if isinstance(arg, ast.Starred):
                if not isinstance(value, (tuple, list)):
                    return UNKNOWN
                args.extend(value)
            else:
                args.append(value)
        kwargs: dict[str, Any] = {}
        for keyword in node.keywords:  # `**table` spreads a folded dict of str keys
            value = self.fold(keyword.value)
            if keyword.arg is not None:
                kwargs[keyword.arg] = value
            elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
                kwargs.update(value)
            else:
                return UNKNOWN
        if any(a is UNKNOWN for a in (*args, *kwargs.values())):
            return UNKNOWN
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "chr" and len(args) == 1 and not kwargs:
                return chr(args[0])
            if func.id == "str" and len(args) == 1 and not kwargs and isinstance(args[0], (str, int)):
                return str(args[0])
            if func.id in ("reversed", "sorted", "list", "tuple") and len(args) == 1 and not kwargs:
                items = list(reversed(args[0])) if func.id == "reversed" else \
                    sorted(args[0]) if func.id == "sorted" else list(args[0])
                return tuple(items) if func.id == "tuple" else items
            return UNKNOWN
        if isinstance(func, ast.Attribute) and func.attr in _METHODS:
            receiver = self.fold(func.value)
            if not isinstance(receiver, (str, bytes)):
                return UNKNOWN
            if func.attr == "format" and _HUGE_FIELD.search(str(receiver)):
                return UNKNOWN
            if func.attr == "replace" and len(args) >= 2 and isinstance(args[1], (str, bytes)) and \
                    len(receiver) * (len(args[1]) + 1) > MAX_CHARS * 10:
                return UNKNOWN
            if func.attr == "zfill" and (not args or not isinstance(args[0], int) or args[0] > MAX_CHARS):
                return UNKNOWN
            return getattr(receiver, func.attr)(*args, **kwargs)
        return UNKNOWN
