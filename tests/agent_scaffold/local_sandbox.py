"""`LocalSandbox`: a documented test double of the `Sandbox` protocol over a temporary git repo on the host.

It lets the editor, action and loop tests run in milliseconds. It runs everything as the host user: the
`user=` and `max_bytes=` keywords are accepted (max_bytes is honoured) but there is no privilege split;
that is tested against real Docker sandboxes only. The same paths run for real against a
Docker sandbox of toolz in test_agent_docker.py (the scripted fix and the hf episode).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from sandboxes.sandbox import ExecResult, PatchResult


class LocalSandbox:
    def __init__(self, root: Path, files: dict[str, str]) -> None:
        self.workdir = str(root)
        for name, content in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(content)
        for cmd in ("git init -q", "git add -A", "git -c user.name=t -c user.email=t@t commit -qm base"):
            subprocess.run(cmd, shell=True, cwd=root, check=True)
        self.commands: list[str] = []

    def _path(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else Path(self.workdir) / p

    def exec(self, cmd, timeout=None, *, workdir=None, env=None, stdin=None, user="agent") -> ExecResult:
        self.commands.append(cmd)
        t0 = time.monotonic()
        try:
            p = subprocess.run(["bash", "-c", cmd], cwd=workdir or self.workdir, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            return ExecResult(-1, (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout or "",
                              True, time.monotonic() - t0)
        return ExecResult(p.returncode, p.stdout + p.stderr, False, time.monotonic() - t0)

    def read_file(self, path: str, *, max_bytes=None, user="agent") -> bytes:
        p = self._path(path)
        if max_bytes is not None and p.stat().st_size > max_bytes:
            from sandboxes.errors import FileTooLarge

            raise FileTooLarge(27, f"{p} is larger than the read cap of {max_bytes} bytes")
        return p.read_bytes()

    def write_file(self, path: str, content, *, user="agent") -> None:
        p = self._path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)

    def apply_patch(self, diff, *, reverse=False) -> PatchResult:
        raise NotImplementedError("not needed by the scaffold tests")

    def diff(self) -> str:
        subprocess.run("git add -A -N", shell=True, cwd=self.workdir, check=True)
        return subprocess.run(["git", "diff"], cwd=self.workdir, capture_output=True, text=True, check=True).stdout

    def rebase(self, message="initial commit") -> None:
        subprocess.run(f"rm -rf .git && git init -q && git add -A -f && git -c user.name=t -c user.email=t@t "
                       f"commit -qm {message!r} && git tag selfplay-base", shell=True, cwd=self.workdir, check=True)

    def reset(self) -> None:
        subprocess.run("git checkout -q . && git clean -qfd", shell=True, cwd=self.workdir, check=True)

    def close(self) -> None:
        pass
