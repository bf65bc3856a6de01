"""Unified diffs as git reads them: file sections, touched paths, a normalised hash, reversal, and the
infrastructure filter that drops a prediction's edits to test files and configuration.

| Module | Defines |
|---|---|
| `patch` | `FileDiff`, `split_diff`, `touched_files`, `normalised_hash`, `reverse_diff`, `drop_infrastructure` (the names below) |
| `headers` | `split_sections`: git's own rules (apply.c) for file sections and their paths, pure |
| `git_view` | `git_view`: the paths `git apply --numstat` itself reads, which `patch` cross-checks |
| `site` | `bug_site`: the old-file lines a diff changes, whatever it writes there (near-duplicate bugs); `site_hash`: what it writes and where (the store's task identity) |
"""

from selfplay.diffs.patch import (
    STARTUP_HOOK_FILES,
    TEST_CONFIG_FILES,
    FileDiff,
    FilteredDiff,
    drop_infrastructure,
    has_binary,
    infrastructure_reason,
    is_git_metadata,
    join_diff,
    matches_any,
    normalised_hash,
    parse_diff,
    reverse_diff,
    split_diff,
    touched_files,
)
from selfplay.diffs.site import bug_site, site_hash

__all__ = [
    "STARTUP_HOOK_FILES",
    "TEST_CONFIG_FILES",
    "FileDiff",
    "FilteredDiff",
    "bug_site",
    "drop_infrastructure",
    "has_binary",
    "infrastructure_reason",
    "is_git_metadata",
    "join_diff",
    "matches_any",
    "normalised_hash",
    "parse_diff",
    "reverse_diff",
    "site_hash",
    "split_diff",
    "touched_files",
]
