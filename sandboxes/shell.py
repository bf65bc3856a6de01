"""Bash scripts that `DockerSandbox` runs inside its container, and the git environment of our own git calls.

They use only bash builtins and coreutils/util-linux/git, which every repo image has. Builtins matter in
the killers: a fork bomb can exhaust the pids limit, and a killer that needs to fork would then fail.

Every script here runs as root (the grader). Model-controlled commands are started by WRAPPER, which drops
to `sandboxes.users.AGENT_UID` before running them. A command's text travels in CMD_VAR, not in argv.

State lives in STATE (0700, root only; outside the workdir, so neither the agent's `git clean` nor its uid
can reach it): `pristine.tar` (the workdir at its base state), `pristine.list`/`pristine.dirs` (sorted
listings, for the incremental restore of an overlay workdir), `git` (the grader-owned git dir: a copy of
the base `.git` that our git calls use instead of the model's), `ready` (the snapshot's timestamp) and
scratch files. Images built by `sandboxes.images` carry all of it; the keeper makes it at start for others.
"""

from __future__ import annotations

from sandboxes.sandbox import BASE_DATE, BASE_TAG
from sandboxes.users import (
    AGENT_UID,
    PARSER_UID,
    RUNNER_UID,
    group_lines,
    passwd_lines,
    setpriv,
    shell_environment,
)

STATE = "/var/lib/selfplay"
KILLED_ALL = f"{STATE}/killed-all"
"""How many SIGUSR1 kill-alls PID 1 has finished (written with builtins only)."""
TOKEN_VAR = "SELFPLAY_EXEC"
"""Every exec carries `SELFPLAY_EXEC=<token>` in its environment; the killer finds its processes by it."""
GRADER_GIT_DIR = f"{STATE}/git"
"""The grader-owned git dir: the base commit, tag selfplay-base, an index and info/exclude; root only."""
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm", "/dev/mqueue")
"""World-writable places model code can write besides the workdir (private tmpfs mounts); emptied and
checked empty by every reset."""
KEEP_STATE = ("pristine.tar", "pristine.list", "pristine.dirs", "git", "fifo", "ready", "error", "reset.err",
              "mode")
"""Entries of STATE a reset keeps; anything else there (staged grading files, stdin files) is removed."""

GIT_SAFE = {
    "GIT_DIR": GRADER_GIT_DIR,
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1", "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_COUNT": "8",
    "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
    "GIT_CONFIG_KEY_1": "core.hooksPath", "GIT_CONFIG_VALUE_1": "/dev/null",
    "GIT_CONFIG_KEY_2": "core.fsmonitor", "GIT_CONFIG_VALUE_2": "false",
    "GIT_CONFIG_KEY_3": "diff.mnemonicPrefix", "GIT_CONFIG_VALUE_3": "false",
    "GIT_CONFIG_KEY_4": "diff.noprefix", "GIT_CONFIG_VALUE_4": "false",
    "GIT_CONFIG_KEY_5": "core.attributesFile", "GIT_CONFIG_VALUE_5": "/dev/null",
    "GIT_CONFIG_KEY_6": "core.excludesFile", "GIT_CONFIG_VALUE_6": "/dev/null",
    "GIT_CONFIG_KEY_7": "core.untrackedCache", "GIT_CONFIG_VALUE_7": "false",
    "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "LC_ALL": "C.UTF-8",
}
"""Environment of every grader-side git call (root). Git uses the grader-owned git dir (GIT_DIR; the work
tree is the current directory, which must be the workdir, or GIT_WORK_TREE: see `git_env`) instead of the
model's `.git`, reads no system or global configuration, and command-scope settings (which beat any file)
turn hooks, fsmonitor, mnemonic/no prefixes, attribute and exclude files off. The model can still write a
`.gitattributes`/`.gitignore` into the tree (git reads those from the work tree); no filter, diff or merge
driver it names exists in our configuration, and predictions are produced with --no-ext-diff
--no-textconv. Safe directory `*`: the tree belongs to the agent uid."""

GIT_DIFF_OPTS = "--binary --no-color --no-ext-diff --no-textconv --no-renames --src-prefix=a/ --dst-prefix=b/"
"""Fixed options of every prediction diff: its shape never depends on configuration."""


def git_env(workdir: str) -> dict[str, str]:
    """GIT_SAFE plus GIT_WORK_TREE=workdir (for git calls whose current directory is not the workdir)."""
    return {**GIT_SAFE, "GIT_WORK_TREE": workdir}


_WAIT_READY = f'while [ ! -e {STATE}/ready ]; do sleep 0.02; done\n'
OWN_TREE = (f'find . \\( ! -user {AGENT_UID} -o ! -group {AGENT_UID} \\) '
            f'-execdir chown -h {AGENT_UID}:{AGENT_UID} {{}} +')
"""Hands entries root created in the workdir (current directory) to the agent uid; stats only the rest.
-execdir and -h: chown acts on a name inside a directory find has already entered, so a directory
swapped for a symlink meanwhile cannot redirect it outside the tree."""
_SNAPSHOT = """
snapshot() {  # the workdir (cwd) -> $S/pristine.tar and its sorted listings, replacing the old ones
  tar -cf "$S/pristine.tmp" . &&
  find . -print0 | LC_ALL=C sort -z > "$S/pristine.list" &&
  find . -type d -print0 | LC_ALL=C sort -z > "$S/pristine.dirs" &&
  mv "$S/pristine.tmp" "$S/pristine.tar"
}
"""

KEEPER = f"""
S={STATE}; W="$1"; M="$2"
umask 022
mkdir -p "$S" && chmod 0700 "$S" && echo "$M" > "$S/mode"
grep -q '^selfplay-agent:' /etc/passwd 2>/dev/null || {{ printf '{passwd_lines()}' >> /etc/passwd;
  printf '{group_lines()}' >> /etc/group; }}
{_SNAPSHOT}
if [ "$M" = tmpfs ]; then
  # The workdir is an empty tmpfs (the disk-write limit): fill it from the image's snapshot.
  tar -C "$W" -xpf "$S/pristine.tar" || echo "restoring $W from $S/pristine.tar failed" > "$S/error"
elif [ ! -e "$S/pristine.tar" ]; then
  # An image not built by us: hand the tree to the agent uid, then snapshot it (a tarball: several times
  # faster to write and restore than `cp -a` on overlayfs).
  {{ mkdir -p "$W" && cd "$W" && {OWN_TREE} && snapshot; }} || echo "snapshot failed" > "$S/error"
  cd /
fi
if [ ! -d "$S/git" ] && [ -d "$W/.git" ]; then
  {{ cp -a "$W/.git" "$S/git.tmp" && chown -R 0:0 "$S/git.tmp" && mv "$S/git.tmp" "$S/git"; }} ||
    echo "copying $W/.git to $S/git failed" >> "$S/error"
fi
mkfifo "$S/fifo" 2>/dev/null; exec 3<>"$S/fifo"
touch "$S/ready"
# SIGUSR1 from the engine API: kill everything but PID 1, with builtins only (works under a fork bomb).
# Each run is counted in KILLED_ALL: the sender waits for it, or a later exec could start inside the loop
# and be killed at its start ("OCI runtime exec failed: ... read init-p: connection reset by peer").
# The count is written once the killed processes are reaped: their zombies hold pids, and under a full
# pids limit the sender's next exec would find none free.
K=0
kill_all() {{
  for i in 1 2 3 4 5 6 7 8 9 10; do kill -9 -1 2>/dev/null || break; done
  for ((i = 0; i < 100; i++)); do
    z=
    for d in /proc/[0-9]*; do
      [ "${{d#/proc/}}" = 1 ] || {{ z=1; break; }}
    done
    [ -z "$z" ] && break
    read -t 0.02 -u 3
  done
  # Written in place, never truncated (`1<>`): the count only grows, so a reader that stats the file and
  # then reads it never finds it shorter than its stat said.
  K=$((K + 1)); echo "$K" 1<> "{KILLED_ALL}"
}}
# The traps only set flags; the loop acts on them. bash blocks SIGCHLD inside `read -t`, so it reaps only
# between reads: a kill-all run inside the trap could wait for no reaping. And outside posix mode a trap
# that interrupts `read -t` resumes the read without its timeout: PID 1 then sleeps on the fifo and reaps
# nothing again (the pids limit fills with zombies for good). In posix mode the interrupted read returns.
U=; T=
trap 'U=1' USR1
trap 'T=1' TERM
set -o posix
# PID 1 must reap orphans: bash's SIGCHLD handler does, without a child of its own. The loop must not
# fork: under a fork bomb a failed fork makes a non-interactive bash exit, and the container with it.
while [ -z "$T" ]; do
  read -t 1 -u 3
  [ -n "$U" ] && {{ U=; kill_all; }}
done
exit 0
"""
"""Container command (PID 1): fill or snapshot the workdir, then reap orphans forever.
Args: workdir, mode ("tmpfs": the workdir is a tmpfs filled from the image's snapshot; "overlay")."""

CMD_VAR = "SELFPLAY_CMD"
"""The command text travels in this variable of the exec's environment, not in argv: /proc/PID/cmdline is
readable by every uid, /proc/PID/environ only by the process's own uid and root."""

WRAPPER = _WAIT_READY + f"""
cd -- "$1" || exit 126
exec 2>&1
if [ -n "$3" ]; then exec <"$3"; rm -f -- "$3"; fi
__sp_cmd=${CMD_VAR}; unset {CMD_VAR}
# Own session and process group, so the killer can take the whole tree with one kill. runc already
# makes each exec a session leader; then setsid would only cost a fork (which a full pids limit denies).
read -r __sp_st < /proc/$$/stat; __sp_f=(${{__sp_st##*) }})
if [ "$4" = root ]; then
  # Grader commands run in this shell: their text (job scripts, canaries) is in no process's argv, where
  # model code running meanwhile as another uid could read it.
  if [ "${{__sp_f[3]}}" = $$ ]; then set --; unset __sp_st __sp_f; eval "$__sp_cmd"; exit; fi
  {CMD_VAR}=$__sp_cmd exec setsid -w bash -c 'c=${CMD_VAR}; unset {CMD_VAR}; eval "$c"'
fi
{shell_environment(AGENT_UID)}  # drop_privileges' environment, without its `env` process
[ "${{__sp_f[3]}}" = $$ ] && exec {setpriv(AGENT_UID)} bash -c "$__sp_cmd"
exec setsid -w {setpriv(AGENT_UID)} bash -c "$__sp_cmd"
"""
"""Runs a command (non-login bash, so the image's PATH holds) as the agent uid, or as root for grader
bookkeeping. The stdin file (root-only) is opened before the privileges drop. Args: workdir, (unused),
stdin file, user ("agent" or "root"); the command is in CMD_VAR."""

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
  [ -z "$found" ] && break
  read -t 0.05 <>"{STATE}/fifo" 2>/dev/null
done
# The killed processes are zombies until PID 1 reaps them, and they hold their pids: under a full pids
# limit the next exec could not start. Wait (at most ~2 s) until PID 1 has none left.
for ((i = 0; i < 100; i++)); do
  z=
  for d in /proc/[0-9]*; do
    read -r st < "$d/stat" 2>/dev/null || continue
    f=(${{st##*) }})
    [ "${{f[0]}}" = Z ] && [ "${{f[1]}}" = 1 ] && {{ z=1; break; }}
  done
  [ -z "$z" ] && break
  kill -CHLD 1 2>/dev/null
  read -t 0.02 <>"{STATE}/fifo" 2>/dev/null
done
echo selfplay-killed
"""
"""Kills every process of one exec: those carrying its token, and their process groups, and waits until
PID 1 has reaped them. Args: token."""

_KILL_ALL = """
for i in 1 2 3 4 5 6 7 8 9 10; do kill -9 -1 2>/dev/null || break; done
# Prove that nothing but PID 1 and this script is left: a survivor could rewrite the tree after the restore.
for ((i = 0; i < 100; i++)); do
  left=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = 1 ] || [ "$p" = $$ ] && continue
    read -r st < "$d/stat" 2>/dev/null || continue
    f=(${st##*) })
    [ "${f[0]}" = Z ] || { left=$p; break; }
  done
  [ -z "$left" ] && break
  kill -9 -1 2>/dev/null
  read -t 0.02 <>"$S/fifo" 2>/dev/null
done
[ -z "$left" ] || { echo "process $left survived kill -9"; exit 5; }
"""

RESET = _WAIT_READY + f"""
S={STATE}; W="$1"; M="$2"
export LC_ALL=C
{_KILL_ALL}
[ -f "$S/pristine.tar" ] || {{ echo "no pristine snapshot at $S/pristine.tar"; exit 3; }}
shopt -s nullglob dotglob
full() {{
  cd / && rm -rf -- "$W"/* && mkdir -p "$W" && tar -C "$W" -xpf "$S/pristine.tar"
}}
incremental() {{
  # Entries changed since the snapshot (ctime: the model cannot set it; `touch -d` sets it to now), new
  # ones, and missing ones. On overlayfs this beats deleting and re-extracting the whole tree, which
  # writes a whiteout per lower-layer file.
  cd "$W" || return 1
  find . -print0 | sort -z > "$S/now.list" || return 1
  comm -z -13 "$S/pristine.list" "$S/now.list" > "$S/extra"
  comm -z -23 "$S/pristine.list" "$S/now.list" > "$S/missing"
  find . -cnewer "$S/ready" ! -type d -print0 | sort -z > "$S/changed" || return 1
  find . -cnewer "$S/ready" -type d -print0 | sort -z > "$S/cdirs" || return 1
  comm -z -23 "$S/cdirs" "$S/pristine.dirs" >> "$S/changed"
  sort -z "$S/changed" | comm -z -12 "$S/pristine.list" - > "$S/restore"
  xargs -0 -r rm -rf -- < "$S/extra" || return 1
  xargs -0 -r rm -rf -- < "$S/restore" || return 1
  # Every directory's metadata too: removing and re-creating entries changed their parents' mtimes.
  sort -zu "$S/missing" "$S/restore" "$S/pristine.dirs" | tar -xpf "$S/pristine.tar" --null --no-recursion -T - || return 1
}}
verify() {{
  # Trust nothing the model touched: same listing, and every entry equal to the snapshot's (contents,
  # type, mode, owner, mtime, link target).
  cd "$W" && find . -print0 | sort -z | cmp -s - "$S/pristine.list" && tar -df "$S/pristine.tar" >&2
}}
if [ "$M" = tmpfs ]; then
  # A memory-backed workdir: wiping and re-extracting is cheap and correct by construction.
  full 2>"$S/reset.err" || {{ echo "restoring $W failed: $(head -c 2000 "$S/reset.err")"; exit 4; }}
  : > "$S/reset.err"
else
  if ! {{ incremental && verify; }} 2>"$S/reset.err"; then
    echo "incremental restore failed or did not verify; restoring the whole tree" >> "$S/reset.err"
    {{ full && verify; }} 2>>"$S/reset.err" || {{ echo "restoring $W failed: $(tail -c 2000 "$S/reset.err")"; exit 4; }}
  fi
fi
cd /
touch "$S/ready"
for d in {" ".join(SCRATCH_DIRS)}; do
  x=("$d"/*); [ ${{#x[@]}} = 0 ] || rm -rf -- "${{x[@]}}" 2>/dev/null
  x=("$d"/*); [ ${{#x[@]}} = 0 ] || {{ echo "could not empty $d: ${{x[0]}} is left"; exit 6; }}
done
# System V IPC objects outlive their processes: remove them as their owners (root may not without
# CAP_SYS_ADMIN), then check none is left.
for k in shm msg sem; do
  mapfile -t x < /proc/sysvipc/$k 2>/dev/null
  [ ${{#x[@]}} -le 1 ] && continue
  ipcrm -a 2>/dev/null
  for u in {" ".join(str(u) for u in (AGENT_UID, RUNNER_UID, PARSER_UID))}; do
    setpriv --reuid="$u" --regid="$u" --clear-groups ipcrm -a 2>/dev/null
  done
  mapfile -t x < /proc/sysvipc/$k
  [ ${{#x[@]}} -le 1 ] || {{ echo "System V $k objects are left after ipcrm"; exit 6; }}
done
for f in "$S"/*; do
  case "${{f##*/}}" in {"|".join(KEEP_STATE)}) ;; *) rm -rf -- "$f" ;; esac
done
exit 0
"""
"""Back to the base state, verified: kill every process and prove none is left, restore the workdir (and
check it against the snapshot when it was restored incrementally), empty and check the scratch dirs and
System V IPC, drop staged files. Args: workdir, mode. Exit 0 only when all of it holds."""

# Wildcards, not literal names: git 2.39 fails `add -A` when a literal pathspec names an ignored path
# (a gitignored .pytest_cache after the agent ran pytest), which made every such episode an infra failure.
DIFF_EXCLUDES = ("*__pycache__*", "*.pyc", "*.pytest_cache*", "*.egg-info")
_EXCLUDE_ARGS = " ".join(f"':(exclude){p}'" for p in DIFF_EXCLUDES)

DIFF = _WAIT_READY + f"""
cd -- "$1" || exit 126
export GIT_WORK_TREE="$1"
base={BASE_TAG}
git rev-parse -q --verify "$base^{{commit}}" >/dev/null || base=HEAD
git rev-parse -q --verify "$base^{{commit}}" >/dev/null || {{ echo "no base commit: neither tag {BASE_TAG} nor HEAD exists in $GIT_DIR" >&2; exit 3; }}
# A file over the diff cap is refused before git reads it: hashing a 40 GB sparse file takes minutes.
big=$(find . -path ./.git -prune -o -name __pycache__ -prune -o -name .pytest_cache -prune -o \
      -name '*.egg-info' -prune -o -type f -size +"$2"c -print -quit)
[ -z "$big" ] || {{ printf '%s' "${{big#./}}"; exit 5; }}
idx=$(mktemp "{STATE}/index.XXXXXX")
# A private copy of the grader's index: `git add -A` sees new files and touches no real index. -p keeps
# the index's mtime, which is git's racy-entry guard: with a fresh mtime, a same-size edit made in the
# second the entry was last stat'ed matches the cached stat and is left out of the diff.
cp -p "$GIT_DIR/index" "$idx" 2>/dev/null || rm -f "$idx"
export GIT_INDEX_FILE="$idx"
git add -A -- . {_EXCLUDE_ARGS} >&2 || {{ rm -f "$idx"; exit 4; }}
git diff --cached {GIT_DIFF_OPTS} "$base" -- . {_EXCLUDE_ARGS}
rc=$?; rm -f "$idx"; exit $rc
"""
"""Prints `git diff` of the workdir (new files included, binary-safe) against the base commit of the
grader-owned git dir. Run with GIT_SAFE. Args: workdir, largest file size in bytes (exit 5 and the
path on stdout past it). Diagnostics go to stderr, kept apart."""

APPLY = _WAIT_READY + f"""
cd -- "$1" || exit 126
export GIT_WORK_TREE="$1"
R=; [ "$3" = 1 ] && R=-R
git apply $R --numstat -z -- "$2" > "$2.stat" 2>&1 || {{ cat "$2.stat"; rm -f "$2.stat"; exit 2; }}
git apply $R --whitespace=nowarn -- "$2" 2>&1; rc=$?
[ $rc = 0 ] && cat "$2.stat" && {{ {OWN_TREE} 2>&1 || rc=7; }}
rm -f "$2.stat" "$2"; exit $rc
"""
"""All-or-nothing `git apply` (atomic without --reject), run with GIT_SAFE; what it creates is handed to
the agent uid. Args: workdir, patch file, reverse. Prints the NUL-separated numstat on success, git's
message on failure."""

FRESH_GIT = f"""fresh_git() {{  # $1: the exclude file to keep (none: empty), $2: the commit message (cwd: the workdir, as root)
  rm -rf .git && ( unset GIT_DIR GIT_WORK_TREE
    git init -q -b main && {{ cp "$1" .git/info/exclude 2>/dev/null || : > .git/info/exclude; }} && git add -A -f &&
    GIT_AUTHOR_DATE={BASE_DATE} GIT_COMMITTER_DATE={BASE_DATE} \\
      git -c user.name=selfplay -c user.email=selfplay@localhost commit -q --no-verify -m "$2" &&
    git tag {BASE_TAG} )
}}"""
"""Shell function making the workdir's `.git` one fresh commit of its tree, tagged selfplay-base: the
history `REBASE` gives the solver's sandbox, and the one every suite job gives its run
(`selfplay.jobs.job`), so code under test sees the same repository in validation, in the episode and when
graded: the same commit, since its date is fixed (`BASE_DATE`). Run with GIT_SAFE exported (no system or
global configuration, no hooks)."""


REBASE = _WAIT_READY + f"""
S={STATE}; W="$1"; M="$2"; MSG="$3"
export LC_ALL=C
{_KILL_ALL}
{_SNAPSHOT}
{FRESH_GIT}
cd -- "$W" || exit 126
# No copy of the old tree may survive: bytecode caches (which hold its constants) and its git objects.
find . -name __pycache__ -prune -exec rm -rf {{}} + && find . -name '*.py[co]' -delete || exit 4
if [ "$4" = keep ]; then
  # Keep the repo's own history (already cut down by the caller); it must carry the base tag.
  ( unset GIT_DIR GIT_WORK_TREE; git rev-parse -q --verify "{BASE_TAG}^{{commit}}" >/dev/null ) ||
    {{ echo "history=True needs a tag {BASE_TAG} in $W/.git" >&2; exit 3; }}
  rm -rf "$S/git" "$S/git.tmp" || exit 4
else
  cp "$S/git/info/exclude" "$S/exclude.keep" 2>/dev/null || : > "$S/exclude.keep"
  rm -rf "$S/git" "$S/git.tmp" || exit 4
  fresh_git "$S/exclude.keep" "$MSG" >&2 || exit 4
  rm -f "$S/exclude.keep"
fi
cp -a .git "$S/git.tmp" && chown -R 0:0 "$S/git.tmp" && mv "$S/git.tmp" "$S/git" && {OWN_TREE} && snapshot || exit 4
touch "$S/ready"
"""
"""Makes the current tree the new base: kill every process, drop bytecode caches, re-create `.git` as
one fresh commit tagged selfplay-base (owned by the agent uid), the grader-owned git dir likewise, and
replace the snapshot (the old one is deleted). Run with GIT_SAFE. Args: workdir, mode, commit message,
"keep" to keep `.git` as it is (its history and tag) and only copy it to the grader-owned git dir."""


IMAGE_SNAPSHOT = f"""
set -e
S={STATE}; W="$1"
install -d -m 0700 "$S"
cd "$W"
{OWN_TREE}
{_SNAPSHOT}
snapshot
rm -rf "$S/git"
if [ -d .git ]; then cp -a .git "$S/git" && chown -R 0:0 "$S/git"; fi
"""
"""Image build step (root): hand the workdir to the agent uid, then store its snapshot and the
grader-owned git dir in STATE, so a container starts without making them. Images with this step carry
the label SNAPSHOT_LABEL, and their sandboxes get a tmpfs workdir filled from the snapshot. Args: workdir."""
SNAPSHOT_LABEL = "selfplay.snapshot"


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
