"""`code_revision`: which code a build or a run came from, for its record.

A warm start's config key names what was asked for, not the code that built it: the scripted expert, the
seeding and the SFT change between commits, so a rebuild of one config at another commit can hold other
demonstrations (the recovery start's rebuild of 2026-12-07 in docs/benchmarks.md did). Its content key tells
the two apart; the revision says which commit to check out to rebuild the measured one.
"""

from __future__ import annotations

import functools
import importlib.metadata
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The project's checkout when installed editable (pyproject.toml beside the packages)."""
CODE = ("selfplay", "agent_scaffold", "sandboxes", "repos", "pyproject.toml")
"""What makes a checkout's code differ from its commit (docs and scripts do not)."""
DIST = "selfplay-swe"


@functools.cache
def code_revision() -> str:
    """`git:<commit>` of the project's checkout, with `+dirty` when its tracked code differs from that commit;
    `selfplay-swe <version>` when the package is installed from a wheel (no checkout of its own); "unknown"
    when neither can be read."""
    if (ROOT / "pyproject.toml").is_file():
        try:
            top = _git("rev-parse", "--show-toplevel")
            # a wheel installed in a venv inside some other repository must not take that repository's commit
            if top is not None and Path(top).resolve() == ROOT:
                head = _git("rev-parse", "HEAD")
                dirty = _git("status", "--porcelain", "--untracked-files=no", "--", *CODE)
                if head:
                    return f"git:{head}" + ("+dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):  # no git on the machine, or it hung
            pass
    try:
        return f"{DIST} {importlib.metadata.version(DIST)}"
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _git(*args: str) -> str | None:
    res = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10, check=False)
    return res.stdout.strip() if res.returncode == 0 else None
