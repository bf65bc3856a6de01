"""No leakage: before the agent starts, the repo's history holds nothing after `base_commit`.

Agents are known to lift fixes from git history (`git log --all`, tags, the reflog, remote refs, unreachable
objects via `git cat-file --batch-all-objects`) and from the network. `strip_history` leaves one branch at
base_commit plus the `selfplay-base` tag on base_commit itself (the baseline of the agent's diff), deletes
every other ref, every remote, the reflog and stash, and prunes every unreachable object. The eval sandbox
runs with network mode `none` (DockerSandboxConfig.network=False). `history_leaks` is the check.

This is the agent's `.git` in the workdir. The sandbox's own grader-owned copy (taken at container start,
root-only, used for the prediction diff against base_commit) keeps the full history out of the agent's reach.
"""

from __future__ import annotations

import shlex

from sandboxes.sandbox import BASE_TAG, ExecResult, Sandbox
from selfplay.eval.errors import EvalError

STRIP = f"tag={BASE_TAG}\n" + r"""
set -euo pipefail
export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
git config --global --add safe.directory '*' 2>/dev/null || true
base=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "base commit $1 is not in the repo" >&2; exit 3; }
git checkout -q --detach "$base"
git for-each-ref --format='%(refname)' | while read -r ref; do git update-ref -d "$ref"; done
for r in $(git remote); do git remote remove "$r"; done
rm -rf .git/refs/original .git/logs .git/FETCH_HEAD .git/ORIG_HEAD .git/packed-refs.lock .git/shallow.lock
git checkout -q -B main "$base"
git tag -f "$tag" "$base" >/dev/null
git reflog expire --expire=now --expire-unreachable=now --all
git -c gc.auto=0 repack -a -d -q
git prune --expire=now
rm -rf .git/logs
# root rewrote .git: hand it back to the workdir's owner (the agent uid), so the agent's git still works
chown -R "$(stat -c %u:%g .)" .git
"""

CHECK = r"""
set -uo pipefail
base=$(git rev-parse --verify "$1^{commit}")
echo "refs: $(git for-each-ref --format='%(refname)=%(objectname)' | tr '\n' ' ')"
echo "remotes: $(git remote | tr '\n' ' ')"
echo "reflog: $(git reflog --all 2>/dev/null | wc -l)"
echo "reachable: $(git rev-list --all | sort | tr '\n' ' ')"
echo "allowed: $(git rev-list "$base" | sort | tr '\n' ' ')"
echo "objects: $(git cat-file --batch-all-objects --batch-check='%(objecttype) %(objectname)' | awk '$1=="commit"{print $2}' | sort | tr '\n' ' ')"
echo "base: $base"
"""


def as_root(sb: Sandbox, cmd: str, timeout: float, **kw: object) -> ExecResult:
    """Grader-side bookkeeping (history surgery, staging the eval script) runs as root."""
    return sb.exec(cmd, timeout, user="root", **kw)  # type: ignore[arg-type]


def strip_history(sb: Sandbox, base_commit: str, *, timeout: float = 900.0) -> None:
    """Leave nothing after `base_commit` in the repo's history (see the module docstring)."""
    res = as_root(sb, f"bash -c {shlex.quote(STRIP)} strip {shlex.quote(base_commit)}", timeout)
    if not res.ok:
        raise EvalError(f"could not strip the repo history down to {base_commit} "
                        f"(exit {res.exit_code}): {res.output[-1500:]}")
    leaks = history_leaks(sb, base_commit)
    if leaks:
        raise EvalError(f"history still leaks after stripping to {base_commit}: {'; '.join(leaks)}")


def history_leaks(sb: Sandbox, base_commit: str) -> list[str]:
    """What in the repo's history could reveal the future; [] when nothing does."""
    res = as_root(sb, f"bash -c {shlex.quote(CHECK)} check {shlex.quote(base_commit)}", 300)
    if not res.ok:
        return [f"history check failed (exit {res.exit_code}): {res.output[-500:]}"]
    info = dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "")
                for line in res.output.splitlines() if line and not line.startswith("+"))
    base = info.get("base", "").strip()
    leaks = []
    for ref in info.get("refs", "").split():
        name, _, sha = ref.partition("=")
        if sha != base or name not in ("refs/heads/main", f"refs/tags/{BASE_TAG}"):
            leaks.append(f"ref {name} -> {sha[:12]}")
    if info.get("remotes", "").strip():
        leaks.append(f"remotes {info['remotes'].strip()}")
    if info.get("reflog", "0").strip() not in ("", "0"):
        leaks.append(f"{info['reflog'].strip()} reflog entries")
    allowed = set(info.get("allowed", "").split())
    extra = (set(info.get("reachable", "").split()) | set(info.get("objects", "").split())) - allowed
    if extra:
        leaks.append(f"{len(extra)} commit(s) not in the ancestry of base_commit, e.g. {sorted(extra)[0][:12]}")
    return leaks
