"""The Markdown reference of `RunConfig`: every key with its type, default and field docstring, read from
the dataclasses' source, so docs/config.md cannot drift from the code (a test compares them).

    python -m selfplay.config.reference           # prints the block docs/config.md embeds
    python -m selfplay.config.reference --write   # replaces it in docs/config.md
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

from selfplay.config.loader import describe, init_fields, to_data, type_hints
from selfplay.config.run_config import RunConfig
from selfplay.config.yaml_io import write_yaml

BEGIN = "<!-- BEGIN GENERATED REFERENCE (python -m selfplay.config.reference --write) -->"
END = "<!-- END GENERATED REFERENCE -->"


@cache
def field_docs(cls: type) -> dict[str, str]:
    """{field: docstring} from the string literal under each annotated field of a dataclass and of its
    dataclass bases (`GraderConfig` inherits `SuiteLimits`'s fields); a subclass's docstring wins."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _default(value: Any) -> str:
    if dataclasses.is_dataclass(value) or (isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0])):
        return "(section)" if dataclasses.is_dataclass(value) else f"({len(value)} entries)"
    text = write_yaml(to_data(value), flow=True).strip()
    return f"`{text}`" if len(text) <= 40 else f"`{text[:37]}...`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def reference(cls: type = RunConfig, prefix: str = "", instance: Any = None) -> str:
    """Markdown: one table per section, depth first."""
    instance = instance if instance is not None else cls()
    docs = field_docs(cls)
    title = prefix.rstrip(".") or "top level"
    lines = [f"#### `{title}` ({cls.__name__})", "", "| key | type | default | meaning |", "|---|---|---|---|"]
    nested: list[str] = []
    for f in init_fields(cls):
        tp = type_hints(cls)[f.name]
        value = getattr(instance, f.name)
        lines.append(f"| `{prefix}{f.name}` | {_cell(describe(tp))} | {_cell(_default(value))} | "
                     f"{_cell(docs.get(f.name, ''))} |")
        if dataclasses.is_dataclass(tp):
            nested.append(reference(tp, f"{prefix}{f.name}.", value))
    return "\n".join(lines) + "\n\n" + "".join(nested)


def block() -> str:
    """The generated part of docs/config.md, markers included."""
    return f"{BEGIN}\n\n{reference().rstrip()}\n\n{END}\n"


def write(doc: Path) -> None:
    """Replace the generated block of `doc` (between BEGIN and END) with the current one."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc} has no generated block; add the lines {BEGIN!r} and {END!r} first")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    doc.write_text(text[:start] + block().rstrip("\n") + text[end:])


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write(Path(__file__).resolve().parents[2] / "docs" / "config.md")
    else:
        print(block(), end="")
