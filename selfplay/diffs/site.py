"""`bug_site`: where a diff changes its files, in old-file line numbers, whatever text it writes there.

Two valid bugs with the same site that break the same tests are one bug written twice (`pass` -> `fail`
and `pass` -> `failed` in one line): the injector's reward counts the second as a duplicate, or a policy
farms the valid-bug reward by rewording a bug it already knows (docs/benchmarks.md, fifth attempt).
"""

from __future__ import annotations

import hashlib

from selfplay.diffs.patch import normalised_hash, parse_diff


def bug_site(diff: str) -> frozenset[tuple[str, str]]:
    """(path, position) of every changed line: "-N" for old line N removed, "+N" for text inserted before
    old line N. Context lines and the text written are left out. Raises DiffError for a malformed diff."""
    site: set[tuple[str, str]] = set()
    for patched in parse_diff(diff, name="bug diff"):
        for hunk in patched:
            old = hunk.source_start if hunk.source_length else hunk.source_start + 1
            for line in hunk:
                if line.is_removed:
                    site.add((patched.path, f"-{old}"))
                    old += 1
                elif line.is_added:
                    site.add((patched.path, f"+{old}"))
                elif line.is_context:
                    old += 1
    return frozenset(site)


def site_hash(diff: str) -> str:
    """sha256 of what a diff writes (`normalised_hash`) and where (`bug_site`): the store's identity of a
    buggy state. The same text on other lines is another bug (`d2 = factory()` -> `pass` in `assoc` and
    in `dissoc` break different tests), while context lines, hunk headers' text and file order still
    change nothing. Validation refuses a bug diff whose headers name lines git does not apply it at, so
    the site read from the headers is where the bug is. Raises DiffError for a malformed diff."""
    site = ",".join(f"{path}\0{at}" for path, at in sorted(bug_site(diff)))
    return hashlib.sha256(f"{normalised_hash(diff)}\1{site}".encode()).hexdigest()
