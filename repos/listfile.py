"""Repo list files (TOML) -> `RepoSpec`s, with errors that name the entry and the field to fix.

Format (see docs/repos.md): an optional `[defaults]` table whose keys apply to every entry, then one
`[[repo]]` table per repository whose keys are `RepoSpec` field names. `repos/default.toml` is the
bundled list used when no path is given.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

from repos.errors import RepoError, RepoNotFound
from repos.spec import SOURCES, RepoSpec

DEFAULT_LIST = Path(__file__).with_name("default.toml")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
REQUIRED = {"pypi": ("version",), "git": ("url", "commit"), "local": ("path",), "image": ("image",)}
_FIELDS = {f.name: f for f in dataclasses.fields(RepoSpec)}
_STR_FIELDS = {"name", "source", "version", "package", "url", "commit", "path", "image", "workdir",
               "test_command", "python"}
_LIST_FIELDS = {"install", "test_patterns"}


def load_repo_list(path: str | Path | None = None) -> list[RepoSpec]:
    """Every entry of the list at `path` (None: the bundled default), in file order."""
    file = Path(path).expanduser() if path is not None else DEFAULT_LIST
    try:
        text = file.read_text()
    except OSError as exc:
        raise RepoError(f"cannot read repo list {file}: {exc.strerror}; pass an existing TOML file") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RepoError(f"repo list {file} is not valid TOML: {exc}") from exc
    return parse_repo_list(data, origin=file)


def parse_repo_list(data: dict[str, Any], *, origin: Path) -> list[RepoSpec]:
    """Validate parsed TOML; relative `local` paths resolve against `origin`'s folder."""
    unknown = set(data) - {"defaults", "repo"}
    if unknown:
        raise RepoError(f"repo list {origin}: unknown top-level key(s) {sorted(unknown)}; "
                        "expected an optional [defaults] table and [[repo]] entries")
    defaults = data.get("defaults", {})
    entries = data.get("repo", [])
    if not isinstance(defaults, dict) or not isinstance(entries, list):
        raise RepoError(f"repo list {origin}: [defaults] must be a table and repos `[[repo]]` tables")
    if not entries:
        raise RepoError(f"repo list {origin} has no [[repo]] entries")
    specs: list[RepoSpec] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise RepoError(f"repo list {origin}: entry #{index} is not a table")
        spec = _parse_entry({**defaults, **entry}, f"entry #{index} ({entry.get('name', 'unnamed')!s})",
                            origin)
        if spec.name in seen:
            raise RepoError(f"repo list {origin}: {spec.name!r} appears twice (entry #{index}); "
                            "names must be unique")
        seen.add(spec.name)
        specs.append(spec)
    return specs


def get_repo(name: str, path: str | Path | None = None) -> RepoSpec:
    """The entry called `name`; RepoNotFound lists the valid names."""
    specs = load_repo_list(path)
    for spec in specs:
        if spec.name == name:
            return spec
    where = path or DEFAULT_LIST
    raise RepoNotFound(f"no repo named {name!r} in {where}; valid names: "
                       f"{', '.join(s.name for s in specs)}")


def _parse_entry(entry: dict[str, Any], label: str, origin: Path) -> RepoSpec:
    def bad(field: str, problem: str) -> RepoError:
        return RepoError(f"repo list {origin}, {label}: field {field!r} {problem}")

    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise bad(unknown[0], f"is not a known field; valid fields: {', '.join(_FIELDS)}")
    for field in ("name", "source"):
        if field not in entry:
            raise bad(field, "is missing")
    values: dict[str, Any] = {}
    for field, value in entry.items():
        if field in _STR_FIELDS:
            if not isinstance(value, str) or not value:
                raise bad(field, f"must be a non-empty string, got {value!r}")
        elif field in _LIST_FIELDS:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise bad(field, f"must be a list of non-empty strings, got {value!r}")
            value = tuple(value)
        elif field == "history":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise bad(field, f"must be a whole number >= 0, got {value!r}")
        elif field == "env":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise bad(field, f"must be a table of string values, got {value!r}")
            value = tuple(sorted(value.items()))
        values[field] = value
    if not NAME_RE.match(values["name"]):
        raise bad("name", f"{values['name']!r} must be lowercase letters, digits, '.', '_' or '-' "
                          "(it becomes part of a Docker image tag)")
    if values["source"] not in SOURCES:
        raise bad("source", f"is {values['source']!r}; valid sources: {', '.join(SOURCES)}")
    for field in REQUIRED[values["source"]]:
        if field not in values:
            raise bad(field, f"is required for source {values['source']!r}")
    if values.get("history") and values["source"] != "pypi":
        raise bad("history", "only applies to source 'pypi'")
    if not values.get("workdir", "/").startswith("/"):
        raise bad("workdir", "must be an absolute path inside the container")
    if values["source"] == "local" and not Path(values["path"]).expanduser().is_absolute():
        values["path"] = str((origin.parent / values["path"]).resolve())
    return RepoSpec(**values)
