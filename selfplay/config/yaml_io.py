"""The YAML dialect of run configs: YAML 1.2 core scalars, read and written by the same rules.

PyYAML speaks YAML 1.1, where `3e-6` is a string and `yes`/`no`/`on`/`off` are booleans: an override
`learner.engine.lr=3e-6` would fail the float check and a repo named `on` would turn into True. Here only
true/false are booleans and `3e-6` is a float, and the dumper quotes exactly the strings the loader would
read as something else, so a dumped config loads back equal.
"""

from __future__ import annotations

import io
import re
import typing
from typing import Any

import yaml


class ConfigLoader(yaml.SafeLoader):
    """SafeLoader (no object tags) with YAML 1.2 core booleans, ints and floats, and no duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # PyYAML keeps the last of two equal keys silently; in a config that hides a lost setting.
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key) if isinstance(key, typing.Hashable) else None
        return super().construct_mapping(node, deep=deep)


class ConfigDumper(yaml.SafeDumper):
    """SafeDumper that quotes a string whenever `ConfigLoader` would resolve it to another type."""


_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")

for _cls in (ConfigLoader, ConfigDumper):
    _cls.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if not tag.endswith((":bool", ":float", ":int"))]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    _cls.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
    _cls.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def _bool(loader: ConfigLoader, node: yaml.ScalarNode) -> bool:
    return loader.construct_scalar(node).lower() == "true"


ConfigLoader.add_constructor("tag:yaml.org,2002:bool", _bool)


def read_yaml(text: str, name: str = "<string>") -> Any:
    """Plain data from YAML text; raises yaml.YAMLError (naming `name` and the line) when it does not parse."""
    stream = io.StringIO(text)
    stream.name = name  # PyYAML's error marks show the stream's name
    return yaml.load(stream, Loader=ConfigLoader)  # ConfigLoader subclasses SafeLoader: no object tags


def write_yaml(data: Any, *, flow: bool = False) -> str:
    """YAML text of plain data that `read_yaml` reads back equal (`flow`: one line, for overrides)."""
    text = yaml.dump(data, Dumper=ConfigDumper, sort_keys=False, default_flow_style=flow, allow_unicode=True,
                     width=10**6 if flow else 120)
    return text.removesuffix("...\n").strip() + "\n" if flow else text
