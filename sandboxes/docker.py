"""`DockerSandbox`: a repository in a Docker container, driven through the engine API.

Design choices (measured in docs/benchmarks.md, section "Sandboxes"; the threat model is docs/security.md):
- Privileges: root in the container is the grader's. Model-controlled commands, reads and writes run as
  `sandboxes.users.AGENT_UID` (setpriv: no capabilities, no_new_privs), which owns the workdir and can
  write only it and the private tmpfs dirs (/tmp, /var/tmp, /dev/shm, /run/lock). The container runs
  with no-new-privileges and only the capabilities root's bookkeeping needs (ROOT_CAPS). Grader state
  (snapshot, grader-owned git dir, staged files) lives in /var/lib/selfplay, 0700.
- Disk-write limit: the backing filesystem is ext4 under overlay2, where docker's `storage_opt size`
  does not work, and RLIMIT_FSIZE caps one file, not the total. So every place the agent uid can write
  is a size-limited tmpfs: images built by `sandboxes.images` carry the workdir's snapshot (label
  `selfplay.snapshot`), and their sandboxes mount a tmpfs at the workdir that the keeper fills from it
  (DockerSandboxConfig.workdir_size; tmpfs pages count against mem_limit, so sizes derive from it).
  Writing past a limit fails with ENOSPC; the container lives on. Cost, measured with
  scripts/bench_sandboxes.py on toolz (2 cores under load; medians over 6 paired runs, each as a ratio to
  its in-run baseline, since the load varied 10x): start to first exec 1.02 x `docker run` (the keeper
  extracts a 0.6 MB snapshot into the tmpfs); exec("true") 0.90 x `docker exec` (setpriv costs one
  execve); reset of a dirtied repo 0.35 x recreate (wipe and extract on tmpfs beats an incremental
  restore on overlayfs); reset of a clean repo 0.30 x recreate (it restores even when nothing changed, so
  it trusts no ctime).
- Images without a snapshot (not built by us) keep the workdir on overlayfs: the keeper hands it to the
  agent uid and snapshots it at start; the scratch dirs are still tmpfs, the workdir has no size limit.
- `reset()` kills every process and proves none is left, then restores the workdir: on tmpfs by wiping
  and re-extracting the snapshot (correct by construction), on overlayfs incrementally (ctime and sorted
  listings; a whiteout per lower-layer file makes a full re-extraction slow there) and then verifies it
  against the snapshot (`tar --compare` plus listing equality), falling back to a full restore. It empties
  and checks the scratch dirs and System V IPC; a reset that does not verify recreates the container.
- Grader-side git (diff, apply_patch, rebase) runs with `shell.GIT_SAFE`: the grader-owned git dir, no
  system/global configuration, hooks and fsmonitor off, fixed diff options. The model's `.git` is never
  read by them.
- Each exec carries a token in its environment and runs in its own session; a timeout kills the session's
  process group and every process with the token, from a second exec, and waits until PID 1 has reaped
  them (a zombie holds its pid); it falls back to a SIGUSR1 to PID 1 (builtins only, waited for) when the
  pids limit leaves no room to start one.
- Output streams through an `OutputCap`; it never holds more than `max_output_bytes`.
"""

from __future__ import annotations

import errno
import logging
import posixpath
import shlex
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sandboxes import archive, shell
from sandboxes.engine import docker_client
from sandboxes.errors import DiffTooLarge, FileTooLarge, SandboxDead, SandboxError
from sandboxes.exec_stream import ExecStream
from sandboxes.output import OutputCap
from sandboxes.reaper import owner_labels, registry
from sandboxes.sandbox import BASE_MESSAGE, WORKDIR, ExecResult, PatchResult
from sandboxes.users import AGENT_UID, USERS

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ROOT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "SETPCAP", "KILL", "SYS_PTRACE")
"""The only capabilities root keeps in a sandbox (bookkeeping: restore owners and modes, read and remove
anything, drop to the model uids with setpriv, which needs SETPCAP for the bounding set, kill them, and
read their /proc/PID/environ, where the killer finds an exec's token: that needs SYS_PTRACE for another
uid's process). The model uids have none."""
_TORN_READ_TRIES = 50
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(size: str | int) -> int:
    """Bytes of a docker-style size ('512m', '4g', '1048576')."""
    if isinstance(size, int):
        return size
    text = size.strip().lower()
    unit = text[-1] if text and text[-1] in _UNITS else ""
    try:
        return int(float(text[: len(text) - len(unit)]) * _UNITS[unit])
    except ValueError:
        raise ValueError(f"size {size!r} is not a docker size such as '512m' or '4g'") from None


@dataclass(frozen=True)
class DockerSandboxConfig:
    """Limits and behaviour of one sandbox container."""

    cpus: float = 2.0
    """CPU quota (cores) of the container."""
    mem_limit: str = "4g"
    """Memory limit (docker syntax: '512m', '4g'); swap is not added on top."""
    pids_limit: int = 512
    """Most processes/threads alive at once in the container; holds fork bombs."""
    network: bool = False
    """False: network_mode none (no egress). True: the engine's default bridge."""
    default_timeout: float = 300.0
    """Seconds an `exec` may run when the caller passes no timeout."""
    max_output_bytes: int = 1 << 20
    """Output kept per exec (head and tail halves); the rest is dropped and counted."""
    max_diff_bytes: int = 64 << 20
    """Largest `diff()` accepted; a bigger one raises instead of being truncated."""
    kill_grace: float = 10.0
    """Seconds to wait for a killed command's output stream to close before cutting the socket."""
    max_read_bytes: int = 16 << 20
    """Largest file `read_file` returns; a bigger one raises `FileTooLarge` before any byte moves."""
    workdir_size: str | None = None
    """Size of the tmpfs holding the repo (docker syntax), i.e. the disk-write limit of the workdir, used
    when the image carries a snapshot (images built by `sandboxes.images` do). None: a quarter of
    mem_limit. tmpfs pages count against the memory limit, which is why the sizes derive from it."""
    tmp_size: str | None = None
    """Size of the private tmpfs at /tmp (/var/tmp and /dev/shm get half of it). None: an eighth of
    mem_limit."""
    venv_bin: str = "/opt/venv/bin"
    """Put first on PATH: repo images keep the repo's virtualenv there."""
    labels: dict[str, str] = field(default_factory=dict)
    """Extra container labels (the owner and run-id labels are always set)."""
    checkout_timeout: float = 1800.0
    """Seconds a `SandboxPool` checkout waits for free sandboxes when the caller passes no timeout; then
    it raises, naming the pool, instead of hanging. Longer than an episode holds one sandbox."""


class DockerSandbox:
    """A container running `image`, with the repository at `workdir`. Create with `DockerSandbox.create`."""

    def __init__(self, client: docker.DockerClient, image: str, workdir: str, config: DockerSandboxConfig,
                 run_id: str | None, env: dict[str, str] | None) -> None:
        self._client = client
        self._api = client.api
        self.image = image
        self.workdir = workdir
        self.config = config
        self.run_id = run_id
        self._env = dict(env or {})
        self.id: str | None = None
        self.mode = "overlay"
        """"tmpfs" when the workdir is a size-limited tmpfs filled from the image's snapshot."""
        self.rebased = False
        """True after `rebase`: `reset` then returns to the rebased tree, not the image's, until `recreate`."""
        self._start()

    @classmethod
    def create(cls, image: str, *, workdir: str = WORKDIR, config: DockerSandboxConfig | None = None,
               run_id: str | None = None, env: dict[str, str] | None = None) -> DockerSandbox:
        """Start a container from `image` (which must exist locally) and return its sandbox."""
        return cls(docker_client(), image, workdir, config or DockerSandboxConfig(), run_id, env)

    # -- lifecycle -------------------------------------------------------------------------------------

    def _start(self) -> None:
        import docker.errors

        cfg = self.config
        try:
            image_config = self._api.inspect_image(self.image)["Config"]
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"image {self.image!r} is not in the engine; build it first "
                               "(`selfplay repos build NAME`, or `selfplay setup` for the base image)") from exc
        image_env, labels = image_config.get("Env") or [], image_config.get("Labels") or {}
        path = next((e[5:] for e in image_env if e.startswith("PATH=")), DEFAULT_PATH)
        if cfg.venv_bin and cfg.venv_bin not in path.split(":"):
            path = f"{cfg.venv_bin}:{path}"
        # An image carrying its snapshot gets its workdir on a size-limited tmpfs, filled by the keeper.
        self.mode = "tmpfs" if labels.get(shell.SNAPSHOT_LABEL) else "overlay"
        mem = parse_size(cfg.mem_limit)
        tmp = parse_size(cfg.tmp_size) if cfg.tmp_size else mem // 8
        scratch = "rw,exec,nosuid,nodev,mode=1777,size={}"
        tmpfs = {"/tmp": scratch.format(tmp), "/var/tmp": scratch.format(tmp // 2),
                 "/run/lock": scratch.format(1 << 20)}
        if self.mode == "tmpfs":
            size = parse_size(cfg.workdir_size) if cfg.workdir_size else mem // 4
            tmpfs[self.workdir] = f"rw,exec,nosuid,nodev,mode=0755,uid={AGENT_UID},gid={AGENT_UID},size={size}"
        host_config = self._api.create_host_config(
            nano_cpus=int(cfg.cpus * 1e9), mem_limit=cfg.mem_limit, memswap_limit=cfg.mem_limit,
            pids_limit=cfg.pids_limit, network_mode=None if cfg.network else "none",
            tmpfs=tmpfs, shm_size=tmp // 2, security_opt=["no-new-privileges"],
            cap_drop=["ALL"], cap_add=list(ROOT_CAPS))
        with registry.creating():
            container = self._api.create_container(
                self.image, command=["bash", "-c", shell.KEEPER, "selfplay-keeper", self.workdir, self.mode],
                environment={"PATH": path, "LANG": "C.UTF-8", **self._env},
                labels={**owner_labels(self.run_id), **cfg.labels}, host_config=host_config,
                network_disabled=not cfg.network, stop_signal="SIGKILL")
            registry.register(self._client, container["Id"])  # before start: a signal now still removes it
        self.id = container["Id"]
        self.rebased = False
        try:
            self._api.start(self.id)
        except Exception:
            self.close()
            raise
        log.debug("sandbox %s started from %s", self.id[:12], self.image)

    def close(self) -> None:
        """Remove the container. Idempotent."""
        cid, self.id = self.id, None
        if cid is None:
            return
        registry.forget(cid)
        try:
            self._api.remove_container(cid, force=True, v=True)
        except Exception as exc:  # already gone is fine; anything else is logged, not raised on cleanup
            if getattr(exc, "status_code", None) != 404:
                log.warning("removing sandbox %s failed: %s", cid[:12], exc)

    def recreate(self) -> None:
        """Replace the container with a fresh one from the image (the slow, total reset)."""
        self.close()
        self._start()

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DockerSandbox({self.image!r}, id={(self.id or 'closed')[:12]})"

    # -- commands --------------------------------------------------------------------------------------

    def exec(self, cmd: str, timeout: float | None = None, *, workdir: str | None = None,
             env: dict[str, str] | None = None, stdin: str | bytes | None = None,
             user: str = "agent") -> ExecResult:
        """Run `cmd` with non-login bash in `workdir` (default: the repo); stdout and stderr interleaved.
        `user`: "agent" (the unprivileged AGENT_UID; for anything a model wrote) or "root" (grader
        bookkeeping only)."""
        timeout = self.config.default_timeout if timeout is None else timeout
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        t0 = time.monotonic()
        code, out, _err, timed_out = self._run(self._wrap(workdir, stdin, user), timeout,
                                               {**(env or {}), shell.CMD_VAR: cmd}, self.config.max_output_bytes)
        return ExecResult(exit_code=-1 if timed_out else code, output=out.text(), timed_out=timed_out,
                          duration=time.monotonic() - t0, dropped_bytes=out.dropped)

    def _wrap(self, workdir: str | None, stdin: str | bytes | None, user: str) -> list[str]:
        """argv of WRAPPER running, as `user`, the command in the exec's CMD_VAR, with `stdin` staged in
        the root-only state dir."""
        if user not in USERS:
            raise ValueError(f"user must be one of {sorted(USERS)}, got {user!r}")
        stdin_path = ""
        if stdin is not None:
            stdin_path = f"{shell.STATE}/in-{uuid.uuid4().hex[:12]}"
            self._put(stdin_path, stdin.encode() if isinstance(stdin, str) else stdin, 0o600)
        return ["bash", "-c", shell.WRAPPER, "selfplay-exec", workdir or self.workdir, "", stdin_path, user]

    def _run(self, argv: list[str], timeout: float, env: dict[str, str] | None,
             limit: int) -> tuple[int, OutputCap, OutputCap, bool]:
        """Run argv in the container; returns (exit code, stdout cap, stderr cap, timed out)."""
        cid = self._require_id()
        token = uuid.uuid4().hex
        try:
            eid = self._api.exec_create(cid, argv, environment={**(env or {}), shell.TOKEN_VAR: token})["Id"]
            stream = ExecStream(self._api, eid, limit)
        except Exception as exc:
            raise self._dead_or(exc, "starting a command") from exc
        try:
            timed_out = not stream.wait(timeout)
            if timed_out:
                self._kill(token)
                if not stream.wait(self.config.kill_grace):
                    log.warning("sandbox %s: output of a killed command stayed open; cutting it", cid[:12])
                    stream.cut()
        finally:
            stream.close()
        code = stream.exit_code()
        if code is None or code in (126, 137, 255):
            self._confirm_alive()  # a dying container explains odd codes; raise SandboxDead if so
        return (-1 if code is None else code), stream.out, stream.err, timed_out

    def _kill(self, token: str) -> None:
        """Kill every process of one exec; SIGUSR1 to PID 1 (kill-all, builtins only) if that fails."""
        try:
            _, out, _, _ = self._run(["bash", "-c", shell.KILLER, "selfplay-killer", token], 30, None, 4096)
            if b"selfplay-killed" in out.raw():
                return
        except SandboxError as exc:  # pids limit reached: the killer itself could not start
            log.debug("killer exec failed (%s); signalling PID 1", exc)
        self._kill_all()

    def _confirm_alive(self) -> None:
        """Raise SandboxDead unless a probe command runs. The engine reports a SIGKILLed container as
        running for a moment after its execs died, so its state alone is not enough."""
        for _ in range(20):
            cid = self._require_live()
            try:
                eid = self._api.exec_create(cid, ["true"])["Id"]
                self._api.exec_start(eid)
                if self._api.exec_inspect(eid).get("ExitCode") == 0:
                    return
            except Exception as exc:
                if getattr(exc, "status_code", None) in (404, 409):
                    raise self._dead_or(exc, "probing the container") from exc
                log.debug("probe failed (%s); retrying", exc)  # e.g. no pid free for it yet
            time.sleep(0.1)
        self._require_live()

    def _require_live(self) -> str:
        if self.id is None:
            raise SandboxDead(f"sandbox from {self.image!r} is closed; create a new one")
        try:
            state = self._api.inspect_container(self.id)["State"]
        except Exception as exc:
            raise self._dead_or(exc, "inspecting the container") from exc
        if not state.get("Running"):
            raise SandboxDead(f"sandbox container {self.id[:12]} ({self.image}) is {state.get('Status')} "
                              f"(exit code {state.get('ExitCode')}, OOM killed: {state.get('OOMKilled')}); "
                              "close it and create a new one")
        return self.id

    def _dead_or(self, exc: Exception, doing: str) -> Exception:
        status = getattr(exc, "status_code", None)
        if status in (404, 409):
            return SandboxDead(f"sandbox container {(self.id or '?')[:12]} ({self.image}) is gone or not "
                               f"running while {doing}: {exc}; close it and create a new one")
        return SandboxError(f"docker engine error while {doing} in {(self.id or '?')[:12]}: {exc}")

    # -- files and git ---------------------------------------------------------------------------------

    def _abspath(self, path: str) -> str:
        return path if path.startswith("/") else f"{self.workdir.rstrip('/')}/{path}"

    def _put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        try:
            archive.put_file(self._api, self._require_id(), path, data, mode)
        except Exception as exc:
            raise self._dead_or(exc, f"writing {path}") from exc

    def read_file(self, path: str, *, max_bytes: int | None = None, user: str = "agent") -> bytes:
        """Bytes of `path` (relative to the repo root, or absolute); follows symlinks. Raises
        FileTooLarge past `max_bytes` (default: config.max_read_bytes) before transferring anything.
        user="agent" reads with the agent uid's permissions (root-only files raise PermissionError);
        "root" reads anything, through the engine's archive API where it can (no exec: works under a full
        pids limit), through an exec on tmpfs mounts."""
        p = self._abspath(path)
        limit = self.config.max_read_bytes if max_bytes is None else max_bytes
        if user not in USERS:
            raise ValueError(f"user must be one of {sorted(USERS)}, got {user!r}")
        if user == "agent" or self._on_tmpfs(p):
            return self._read_by_exec(p, limit, user)
        try:
            return archive.get_file(self._api, self._require_id(), p, limit)
        except FileNotFoundError:
            self._require_live()  # a 404 may mean the container is gone
            raise
        except (OSError, SandboxError):
            raise
        except Exception as exc:
            raise self._dead_or(exc, f"reading {p}") from exc

    def _in_workdir(self, p: str) -> bool:
        p, w = posixpath.normpath(p), self.workdir.rstrip("/")
        return p == w or p.startswith(w + "/")

    def _on_tmpfs(self, p: str) -> bool:
        """True when `p` lies on a tmpfs mount, which the engine's archive API does not see (it works on
        the container's root filesystem): such paths are read and written through an exec."""
        mounts = ((self.workdir,) if self.mode == "tmpfs" else ()) + shell.SCRATCH_DIRS
        p = posixpath.normpath(p)
        return any(p == m or p.startswith(m.rstrip("/") + "/") for m in mounts)

    def _read_by_exec(self, p: str, limit: int, user: str) -> bytes:
        q = shlex.quote(p)
        # Exit codes say why; nothing but the file's bytes reaches stdout. A regular file only: a FIFO
        # would block and /dev/zero never ends. /proc files report size 0, so head caps them too.
        cmd = (f"[ -e {q} ] || exit 44; [ -d {q} ] && exit 45; [ -r {q} ] || exit 46; [ -f {q} ] || exit 47; "
               f"s=$(stat -Lc %s -- {q}) || exit 46; [ \"$s\" -le {limit} ] || exit 48; "
               f"exec head -c {limit + 1} -- {q} 2>/dev/null")
        code, out, _, timed_out = self._run(self._wrap("/", None, user), 120, {shell.CMD_VAR: cmd}, limit + 2)
        if code == 0 and not timed_out and not out.dropped and out.total <= limit:
            return out.raw()
        if code in (0, 48) or out.total > limit:
            raise FileTooLarge(errno.EFBIG, f"{p} is larger than the read cap of {limit} bytes; read a part "
                               "of it with a command (head, sed -n, grep) instead")
        errors = {44: (FileNotFoundError, errno.ENOENT, "does not exist"),
                  45: (IsADirectoryError, errno.EISDIR, "is a directory"),
                  46: (PermissionError, errno.EACCES, f"is not readable by the {user} user"),
                  47: (OSError, errno.EINVAL, "is not a regular file")}
        cls, num, why = errors.get(code, (OSError, errno.EIO, f"could not be read (exit {code})"))
        raise cls(num, f"{p} {why}", p)

    def write_file(self, path: str, content: str | bytes, *, user: str = "agent") -> None:
        """Create or overwrite `path`, creating parent directories; an existing file keeps its mode.
        user="agent" writes with the agent uid's permissions (PermissionError outside what it may write,
        OSError when a disk limit is hit); "root" writes anything (grader-side: staged files), through the
        engine's archive API outside the repo and the tmpfs mounts; what it creates in the repo is handed
        to the agent uid."""
        p = self._abspath(path)
        data = content.encode() if isinstance(content, str) else content
        if user not in USERS:
            raise ValueError(f"user must be one of {sorted(USERS)}, got {user!r}")
        if user == "agent" or self._on_tmpfs(p) or self._in_workdir(p):
            q = shlex.quote(p)
            cmd = (f"[ -d {q} ] && exit 45; mkdir -p -- \"$(dirname -- {q})\" 2>&1 || exit 46; "
                   f"cat > {q} 2>&1 || exit 46")
            if user == "root" and self._in_workdir(p):  # what root creates in the repo goes to the agent uid
                cmd += f"; cd {shlex.quote(self.workdir)} && {shell.OWN_TREE}"
            res = self.exec(cmd, 120, workdir="/", stdin=data, user=user)
            if res.ok:
                return
            if res.exit_code == 45:
                raise IsADirectoryError(errno.EISDIR, f"{p} is a directory", p)
            message = res.output.strip()[-500:] or f"exit {res.exit_code}"
            if "Permission denied" in message or "Read-only" in message:
                raise PermissionError(errno.EACCES, f"{p} is not writable by the {user} user: {message}", p)
            raise OSError(errno.EIO, f"writing {p} failed: {message}", p)
        try:
            st = archive.path_stat(self._api, self._require_id(), p)
        except SandboxError:
            raise
        except Exception as exc:
            raise self._dead_or(exc, f"writing {p}") from exc
        if st is None:
            self._require_live()  # a 404 may mean the container is gone
        mode = (st["mode"] & 0o777) if st else 0o644
        self._put(p, data, mode)

    def apply_patch(self, diff: str | bytes, *, reverse: bool = False) -> PatchResult:
        """All-or-nothing `git apply` at the repo root; git's message on failure, tree unchanged."""
        data = diff.encode("utf-8", "surrogateescape") if isinstance(diff, str) else diff
        if not data.strip():
            return PatchResult(applied=False, error="empty diff: nothing to apply")
        binary = b"GIT binary patch" in data
        path = f"{shell.STATE}/patch-{uuid.uuid4().hex[:12]}.diff"
        self._put(path, data if data.endswith(b"\n") else data + b"\n")
        code, out, err, timed_out = self._run(
            ["bash", "-c", shell.APPLY, "selfplay-apply", self.workdir, path, "1" if reverse else "0"],
            120, shell.GIT_SAFE, 4 << 20)
        text = out.raw()
        if timed_out or code != 0:
            message = (text + err.raw()).decode("utf-8", "replace").strip() or f"git apply exited {code}"
            return PatchResult(applied=False, error=message, binary=binary)
        files, binary = shell.parse_numstat(text, binary)
        return PatchResult(applied=True, files=files, binary=binary, details={"strategy": "git apply"})

    def diff_bytes(self) -> bytes:
        """`git diff --binary` of the working tree (new files included) against tag selfplay-base of the
        grader-owned git dir, as raw bytes; no index is touched. Raises DiffTooLarge (not a SandboxError:
        the tree's content is at fault) when one file or the whole diff is over max_diff_bytes."""
        cap = self.config.max_diff_bytes
        code, out, err, timed_out = self._run(["bash", "-c", shell.DIFF, "selfplay-diff", self.workdir, str(cap)],
                                              300, shell.GIT_SAFE, cap)
        if code == 5 and not timed_out:
            raise DiffTooLarge(f"{out.text()[:500]} in {self.workdir} is larger than max_diff_bytes={cap}; "
                               "the diff of this tree cannot be taken (delete the file)")
        if timed_out or code != 0:
            raise SandboxError(f"git diff failed in {self.workdir} (exit {code}): "
                               f"{err.text().strip() or out.text()[-2000:]}")
        if out.dropped:
            raise DiffTooLarge(f"diff of {self.workdir} exceeds max_diff_bytes={cap}; the tree holds too many "
                               "changes (or raise DockerSandboxConfig.max_diff_bytes)")
        return out.raw()

    def diff(self) -> str:
        """`diff_bytes()` decoded as UTF-8 with replacement (binary files survive: they are base85)."""
        return self.diff_bytes().decode("utf-8", "replace")

    def reset(self) -> None:
        """Back to the base state, verified (see shell.RESET): kill every process and prove none is left,
        restore the workdir, empty the scratch tmpfs dirs and System V IPC, drop staged files. A sandbox
        whose reset does not verify is recreated. The model uids cannot write anywhere else (the
        interpreter and the image are root's), so nothing else needs restoring."""
        for _attempt in range(2):
            try:
                code, out, _, timed_out = self._run(
                    ["bash", "-c", shell.RESET, "selfplay-reset", self.workdir, self.mode], 300, None, 64 << 10)
            except SandboxDead:
                break
            except SandboxError as exc:  # e.g. a full pids limit left no room to start the reset
                code, out, timed_out = None, OutputCap(2), False
                log.debug("reset could not start (%s)", exc)
            if code == 0 and not timed_out:
                return
            log.debug("reset failed (%s); killing every process via PID 1 and retrying",
                      out.text().strip() or f"exit {code}")
            self._kill_all()
            time.sleep(0.2)
        log.warning("sandbox %s: reset failed or did not verify; recreating the container", (self.id or "?")[:12])
        self.recreate()

    def rebase(self, message: str = BASE_MESSAGE, *, history: bool = False) -> None:
        """Make the current tree the new base (grader-side, root): `.git` becomes one fresh commit tagged
        selfplay-base owned by the agent uid, the grader-owned git dir likewise, and the reset snapshot is
        replaced by the current tree (the old one is deleted). Afterwards `reset()` returns here, and
        nothing the agent uid can read holds the previous tree: its bytecode caches and git objects are
        gone, and the image's copy lies under the workdir's tmpfs mount (or the overlay's upper layer).
        Kills every process first. Raises SandboxError when it fails (the sandbox is then unusable).

        history=True keeps `.git` as it is (a history the caller already cut down, e.g.
        `selfplay.eval.guard.strip_history`, with tag selfplay-base on the base commit) and makes it the
        grader's base: its copy becomes the grader-owned git dir and the tree the reset snapshot. That
        trusts `.git`, so call it before any model code ran in the sandbox."""
        code, out, err, timed_out = self._run(
            ["bash", "-c", shell.REBASE, "selfplay-rebase", self.workdir, self.mode, message,
             "keep" if history else ""], 300, shell.GIT_SAFE, 64 << 10)
        self.rebased = True  # also when it failed: the tree and snapshot may be half replaced
        if timed_out or code != 0:
            raise SandboxError(f"rebasing {self.workdir} in {(self.id or '?')[:12]} failed (exit {code}): "
                               f"{(out.text() + err.text()).strip()[-2000:]}; close this sandbox")

    def _kill_all(self) -> None:
        """SIGUSR1 to PID 1, whose trap kills every other process with builtins only. Returns once the
        trap has run (it counts its runs in shell.KILLED_ALL): an exec started while it loops would be
        killed as it starts, and fail with the engine's "OCI runtime exec failed"."""
        try:
            cid = self._require_live()
            before = self._kills_done(cid)
            self._api.kill(cid, signal="SIGUSR1")
            deadline = time.monotonic() + self.config.kill_grace + 5
            while time.monotonic() < deadline:
                if self._kills_done(cid) != before:
                    return
                time.sleep(0.02)
        except SandboxDead:
            return  # the caller's next command reports the death
        log.warning("sandbox %s: PID 1 did not report its kill-all within %.0f s", cid[:12],
                    self.config.kill_grace + 5)

    def _kills_done(self, cid: str) -> bytes:
        """Content of shell.KILLED_ALL, read through the engine's archive API: no exec, so no pid needed.
        A torn read (the engine's tar is shorter than its header: PID 1 rewrote the file during the
        transfer) is read again."""
        for _ in range(_TORN_READ_TRIES):
            try:
                return archive.get_file(self._api, cid, shell.KILLED_ALL, max_bytes=64)
            except FileNotFoundError:
                return b""
            except tarfile.TarError:
                time.sleep(0.01)
            except Exception as exc:
                raise self._dead_or(exc, f"reading {shell.KILLED_ALL}") from exc
        raise SandboxError(f"{shell.KILLED_ALL} in {cid[:12]} read torn {_TORN_READ_TRIES} times in a row; "
                           "close this sandbox")

    def _require_id(self) -> str:
        if self.id is None:
            raise SandboxDead(f"sandbox from {self.image!r} is closed; create a new one")
        return self.id

