"""Bash scripts that `DockerSandbox` runs inside its container.

They use only bash builtins and coreutils/util-linux/git, which every repo image has. Builtins matter in
the killers: a fork bomb can exhaust the pids limit, and a killer that needs to fork would then fail.

State lives in STATE (outside the workdir, so the agent's `git clean` or `rm -rf .` cannot touch it):
`pristine.tar` (the workdir as it was at container start), `ready` (its timestamp) and scratch files.
"""

from __future__ import annotations

STATE = "/var/lib/selfplay"
TOKEN_VAR = "SELFPLAY_EXEC"
"""Every exec carries `SELFPLAY_EXEC=<token>` in its environment; the killer finds its processes by it."""

_WAIT_READY = f'while [ ! -e {STATE}/ready ]; do sleep 0.02; done\n'

KEEPER = f"""
S={STATE}; W="$1"
mkdir -p "$S" "$W"
# A tarball: several times faster to write and to restore than `cp -a` of the tree on overlayfs.
# Sorted listings of the tree (all entries; directories) let reset restore only what changed.
if [ ! -e "$S/pristine.tar" ]; then
  {{ tar -C "$W" -cf "$S/pristine.tmp" . &&
    (cd "$W" && find . -print0 | LC_ALL=C sort -z > "$S/pristine.list" &&
     find . -type d -print0 | LC_ALL=C sort -z > "$S/pristine.dirs") &&
    mv "$S/pristine.tmp" "$S/pristine.tar"; }} || echo "snapshot failed" > "$S/error"
fi
mkfifo "$S/fifo" 2>/dev/null; exec 3<>"$S/fifo"
touch "$S/ready"
# SIGUSR1 from the engine API: kill everything but PID 1, with builtins only (works under a fork bomb).
trap 'for i in 1 2 3 4 5 6 7 8 9 10; do kill -9 -1 2>/dev/null || break; done' USR1
trap 'exit 0' TERM
# PID 1 must reap orphans: bash's SIGCHLD handler does, without a child of its own. The loop must not
# fork: under a fork bomb a failed fork makes a non-interactive bash exit, and the container with it.
while :; do read -t 1 -u 3; done
"""
"""Container command (PID 1): snapshot the workdir, then reap orphans forever. Args: workdir."""

WRAPPER = _WAIT_READY + """
cd -- "$1" || exit 126
exec 2>&1
if [ -n "$3" ]; then exec <"$3"; rm -f -- "$3"; fi
# Own session and process group, so the killer can take the whole tree with one kill. runc already
# makes each exec a session leader; then setsid would only cost a fork (which a full pids limit denies).
read -r st < /proc/$$/stat; f=(${st##*) })
[ "${f[3]}" = $$ ] && exec bash -c "$2"
exec setsid -w bash -c "$2"
"""
"""Runs a user command (non-login bash, so the image's PATH holds). Args: workdir, cmd, stdin file."""

KILLER = f"""
t="{TOKEN_VAR}=$1"
for round in 1 2 3 4 5 6 7 8 9 10; do
  found=
  for d in /proc/[0-9]*; do
    p=${{d#/proc/}}
    if [ "$p" = 1 ] || [ "$p" = $$ ]; then continue; fi
    mapfile -d '' -t e < "$d/environ" 2>/dev/null || continue
    for v in "${{e[@]}}"; do
      [ "$v" = "$t" ] || continue
      found=1
      read -r st < "$d/stat" 2>/dev/null
      f=(${{st##*) }})
      g=${{f[2]}}
      if [ -n "$g" ] && [ "$g" -gt 1 ] && [ "$g" != $$ ]; then kill -9 -- "-$g" 2>/dev/null; fi
      kill -9 "$p" 2>/dev/null
      break
    done
  done
  [ -z "$found" ] && {{ echo selfplay-killed; exit 0; }}
  read -t 0.05 <>"{STATE}/fifo" 2>/dev/null
done
echo selfplay-killed
"""
"""Kills every process of one exec: those carrying its token, and their process groups. Args: token."""

GIT_SAFE = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
            "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "LC_ALL": "C.UTF-8"}
"""Git environment for our own git calls: images may be owned by another uid; never page; stable text."""

RESET = _WAIT_READY + f"""
S={STATE}; W="$1"
for i in 1 2 3 4 5 6 7 8 9 10; do kill -9 -1 2>/dev/null || break; done
[ -f "$S/pristine.tar" ] || {{ echo "no pristine snapshot at $S/pristine.tar"; exit 3; }}
export LC_ALL=C
incremental() {{
  # Entries changed since the snapshot (ctime cannot be faked), new ones, and missing ones. On overlayfs
  # this beats deleting and re-extracting the whole tree, which writes a whiteout per lower-layer file.
  cd "$W" || return 1
  find . -print0 | sort -z > "$S/now.list" || return 1
  comm -z -13 "$S/pristine.list" "$S/now.list" > "$S/extra"
  comm -z -23 "$S/pristine.list" "$S/now.list" > "$S/missing"
  # Changed entries that existed at the snapshot, except directories that still are directories.
  find . -cnewer "$S/ready" ! -type d -print0 | sort -z > "$S/changed" || return 1
  find . -cnewer "$S/ready" -type d -print0 | sort -z | comm -z -23 - "$S/pristine.dirs" >> "$S/changed"
  sort -z "$S/changed" | comm -z -12 "$S/pristine.list" - > "$S/restore"
  xargs -0 -r rm -rf -- < "$S/extra" || return 1
  xargs -0 -r rm -rf -- < "$S/restore" || return 1
  sort -z "$S/missing" "$S/restore" | tar -xpf "$S/pristine.tar" --null --no-recursion -T - || return 1
}}
cd /
if [ ! -d "$W" ]; then
  mkdir -p "$W" && tar -C "$W" -xpf "$S/pristine.tar" || {{ echo "restoring $W failed"; exit 4; }}
elif [ -n "$(find "$W" -cnewer "$S/ready" -print -quit 2>/dev/null)" ]; then
  if ! incremental 2>"$S/reset.err"; then
    echo "incremental restore failed; restoring the whole tree" >> "$S/reset.err"
    cd / && rm -rf -- "$W" && mkdir -p "$W" && tar -C "$W" -xpf "$S/pristine.tar" ||
      {{ echo "restoring $W failed"; exit 4; }}
  fi
fi
touch "$S/ready"
find /tmp -mindepth 1 -delete 2>/dev/null
rm -f "$S"/in-* "$S"/patch-* "$S/now.list" "$S/extra" "$S/missing" "$S/changed" "$S/restore"
exit 0
"""
"""Back to the pristine state: kill every process, restore the workdir, empty /tmp. Args: workdir."""

DIFF_EXCLUDES = ("*__pycache__*", "*.pyc", ".pytest_cache", "*.egg-info")
_EXCLUDE_ARGS = " ".join(f"':(exclude){p}'" for p in DIFF_EXCLUDES)

DIFF = _WAIT_READY + f"""
cd -- "$1" || exit 126
base=selfplay-base
git rev-parse -q --verify "$base^{{commit}}" >/dev/null || base=HEAD
git rev-parse -q --verify "$base^{{commit}}" >/dev/null || {{ echo "no base commit: neither tag selfplay-base nor HEAD exists in $1" >&2; exit 3; }}
idx=$(mktemp "{STATE}/index.XXXXXX")
# A private index: `git add -A` sees new files without touching the real index.
cp .git/index "$idx" 2>/dev/null || rm -f "$idx"
export GIT_INDEX_FILE="$idx"
git add -A -- . {_EXCLUDE_ARGS} >&2 || {{ rm -f "$idx"; exit 4; }}
git diff --cached --binary --no-color --no-ext-diff --no-renames "$base" -- . {_EXCLUDE_ARGS}
rc=$?; rm -f "$idx"; exit $rc
"""
"""Prints `git diff` of the workdir (new files included, binary-safe) against the base commit.
Args: workdir. Diagnostics go to stderr, which this script's caller keeps apart."""

APPLY = _WAIT_READY + """
cd -- "$1" || exit 126
R=; [ "$3" = 1 ] && R=-R
git apply $R --numstat -z -- "$2" > "$2.stat" 2>&1 || { cat "$2.stat"; rm -f "$2.stat"; exit 2; }
git apply $R --whitespace=nowarn -- "$2" 2>&1; rc=$?
[ $rc = 0 ] && cat "$2.stat"
rm -f "$2.stat" "$2"; exit $rc
"""
"""All-or-nothing `git apply` (git apply is atomic without --reject). Args: workdir, patch file, reverse.
Prints the NUL-separated numstat on success, git's message on failure."""


def parse_numstat(text: bytes, binary: bool) -> tuple[tuple[str, ...], bool]:
    """Paths from `git apply --numstat -z` output; '-' counts mark binary files."""
    files: list[str] = []
    parts = text.split(b"\0")
    i = 0
    while i < len(parts):
        head = parts[i]
        i += 1
        if not head.strip():
            continue
        cols = head.split(b"\t")
        if len(cols) < 3:
            continue
        binary = binary or cols[0] == b"-"
        if cols[2]:
            files.append(cols[2].decode("utf-8", "replace"))
        else:  # a rename: the old and new paths follow as their own fields
            files.extend(p.decode("utf-8", "replace") for p in parts[i:i + 2])
            i += 2
    return tuple(dict.fromkeys(files)), binary
