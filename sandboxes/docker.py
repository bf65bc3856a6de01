"""`DockerSandbox`: a repository in a Docker container, driven through the engine API.

Design choices (measured in docs/benchmarks.md, section "Sandboxes"):
- PID 1 is a tiny bash loop that first tars the workdir to /var/lib/selfplay/pristine.tar; `reset()`
  kills every process, restores from that tarball only the entries that changed, appeared or vanished
  (ctime and sorted listings), and empties /tmp. That survives a deleted or replaced `.git` and is about
  3x faster than recreating the container. It does not undo changes outside the workdir and /tmp (e.g. a
  `pip install` into /opt/venv); `recreate()` does.
- Each exec carries a token in its environment and runs in its own session; a timeout kills the session's
  process group and every process with the token, from a second exec, falling back to a SIGUSR1 to PID 1
  (builtins only) when the pids limit leaves no room to start one.
- Output streams through an `OutputCap`; it never holds more than `max_output_bytes`.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sandboxes import archive, shell
from sandboxes.engine import docker_client
from sandboxes.errors import SandboxDead, SandboxError
from sandboxes.exec_stream import ExecStream
from sandboxes.output import OutputCap
from sandboxes.reaper import owner_labels, registry
from sandboxes.sandbox import ExecResult, PatchResult

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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
    venv_bin: str = "/opt/venv/bin"
    """Put first on PATH: repo images keep the repo's virtualenv there."""
    labels: dict[str, str] = field(default_factory=dict)
    """Extra container labels (the owner and run-id labels are always set)."""


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
        self._start()

    @classmethod
    def create(cls, image: str, *, workdir: str = "/testbed", config: DockerSandboxConfig | None = None,
               run_id: str | None = None, env: dict[str, str] | None = None) -> DockerSandbox:
        """Start a container from `image` (which must exist locally) and return its sandbox."""
        return cls(docker_client(), image, workdir, config or DockerSandboxConfig(), run_id, env)

    # -- lifecycle -------------------------------------------------------------------------------------

    def _start(self) -> None:
        import docker.errors

        cfg = self.config
        try:
            image_env = self._api.inspect_image(self.image)["Config"].get("Env") or []
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"image {self.image!r} is not in the engine; build it first "
                               "(`selfplay repos build NAME`, or `selfplay setup` for the base image)") from exc
        path = next((e[5:] for e in image_env if e.startswith("PATH=")), DEFAULT_PATH)
        if cfg.venv_bin and cfg.venv_bin not in path.split(":"):
            path = f"{cfg.venv_bin}:{path}"
        host_config = self._api.create_host_config(
            nano_cpus=int(cfg.cpus * 1e9), mem_limit=cfg.mem_limit, memswap_limit=cfg.mem_limit,
            pids_limit=cfg.pids_limit, network_mode=None if cfg.network else "none")
        container = self._api.create_container(
            self.image, command=["bash", "-c", shell.KEEPER, "selfplay-keeper", self.workdir],
            environment={"PATH": path, "LANG": "C.UTF-8", **self._env},
            labels={**owner_labels(self.run_id), **cfg.labels}, host_config=host_config,
            network_disabled=not cfg.network, stop_signal="SIGKILL")
        self.id = container["Id"]
        registry.register(self._client, self.id)  # before start: a signal now still removes it
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
             env: dict[str, str] | None = None, stdin: str | bytes | None = None) -> ExecResult:
        """Run `cmd` with non-login bash in `workdir` (default: the repo); stdout and stderr interleaved."""
        timeout = self.config.default_timeout if timeout is None else timeout
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        stdin_path = ""
        if stdin is not None:
            stdin_path = f"{shell.STATE}/in-{uuid.uuid4().hex[:12]}"
            self._put(stdin_path, stdin.encode() if isinstance(stdin, str) else stdin)
        argv = ["bash", "-c", shell.WRAPPER, "selfplay-exec", workdir or self.workdir, cmd, stdin_path]
        t0 = time.monotonic()
        code, out, _err, timed_out = self._run(argv, timeout, env, self.config.max_output_bytes)
        return ExecResult(exit_code=-1 if timed_out else code, output=out.text(), timed_out=timed_out,
                          duration=time.monotonic() - t0, dropped_bytes=out.dropped)

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

    def read_file(self, path: str) -> bytes:
        """Bytes of `path` (relative to the repo root, or absolute); follows symlinks."""
        p = self._abspath(path)
        try:
            return archive.get_file(self._api, self._require_id(), p)
        except FileNotFoundError:
            self._require_live()  # a 404 may mean the container is gone
            raise
        except (OSError, SandboxError):
            raise
        except Exception as exc:
            raise self._dead_or(exc, f"reading {p}") from exc

    def write_file(self, path: str, content: str | bytes) -> None:
        """Create or overwrite `path`, creating parent directories; an existing file keeps its mode."""
        p = self._abspath(path)
        try:
            st = archive.path_stat(self._api, self._require_id(), p)
        except SandboxError:
            raise
        except Exception as exc:
            raise self._dead_or(exc, f"writing {p}") from exc
        if st is None:
            self._require_live()  # a 404 may mean the container is gone
        mode = (st["mode"] & 0o777) if st else 0o644
        self._put(p, content.encode() if isinstance(content, str) else content, mode)

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
        """`git diff --binary` of the working tree (new files included) against tag selfplay-base
        (HEAD when the tag is missing), as raw bytes; the real index is not touched."""
        code, out, err, timed_out = self._run(["bash", "-c", shell.DIFF, "selfplay-diff", self.workdir],
                                              300, shell.GIT_SAFE, self.config.max_diff_bytes)
        if timed_out or code != 0:
            raise SandboxError(f"git diff failed in {self.workdir} (exit {code}): "
                               f"{err.text().strip() or out.text()[-2000:]}")
        if out.dropped:
            raise SandboxError(f"diff of {self.workdir} exceeds max_diff_bytes={self.config.max_diff_bytes}; "
                               "raise DockerSandboxConfig.max_diff_bytes")
        return out.raw()

    def diff(self) -> str:
        """`diff_bytes()` decoded as UTF-8 with replacement (binary files survive: they are base85)."""
        return self.diff_bytes().decode("utf-8", "replace")

    def reset(self) -> None:
        """Back to the pristine state: kill all processes, restore the workdir from the start-up snapshot,
        empty /tmp. Falls back to `recreate()` when the snapshot is missing or the restore fails.
        Files outside the workdir and /tmp (e.g. /opt/venv) are not restored; use `recreate()` for that."""
        for _attempt in range(2):
            try:
                code, out, _, timed_out = self._run(["bash", "-c", shell.RESET, "selfplay-reset", self.workdir],
                                                    300, None, 64 << 10)
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
        log.warning("sandbox %s: reset failed; recreating the container", (self.id or "?")[:12])
        self.recreate()

    def _kill_all(self) -> None:
        """SIGUSR1 to PID 1, whose trap kills every other process with builtins only."""
        try:
            self._api.kill(self._require_live(), signal="SIGUSR1")
        except SandboxDead:
            pass

    def _require_id(self) -> str:
        if self.id is None:
            raise SandboxDead(f"sandbox from {self.image!r} is closed; create a new one")
        return self.id

