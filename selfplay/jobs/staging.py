"""Staging an artifact's files in a sandbox's root-only scratch folder, and restoring original files."""

from __future__ import annotations

import base64
import io
import tarfile

from sandboxes.sandbox import BASE_TAG, Sandbox
from sandboxes.shell import STATE
from selfplay.artifact import BugArtifact
from selfplay.errors import ValidationInfraError
from selfplay.jobs.job import SCRATCH, git_env_line, restore_cmd


def check(result, what: str) -> None:
    """Raise ValidationInfraError when a bookkeeping command (not the artifact's) failed."""
    if not result.ok:
        raise ValidationInfraError(f"{what} failed in the sandbox (exit {result.exit_code}): "
                                   f"{result.output[-500:]}")


UNPACK = f"install -d -m 700 {STATE} {SCRATCH} && base64 -d | tar -x --no-same-owner -C {SCRATCH}"
"""Shell line that unpacks a `tarball` from stdin into the scratch folder."""


def tarball(files: dict[str, str]) -> str:
    """`files` (name -> text) as a base64 tar archive, the stdin of `UNPACK`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in files.items():
            data = text.encode("utf-8", "surrogateescape")
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def stage(sb: Sandbox, files: dict[str, str]) -> None:
    """Write `files` (name -> text) into the root-only scratch folder with one exec (a tarball on stdin)."""
    check(sb.exec(UNPACK, timeout=60, stdin=tarball(files), user="root"), "staging the artifact files")


def staged_files(artifact: BugArtifact, **extra: str) -> dict[str, str]:
    """The files a run needs in the scratch folder: script and diffs (plus `extra`); never the parser."""
    return {"test_script.sh": artifact.test_script, "bug_inject.diff": artifact.bug_inject,
            "test_weaken.diff": artifact.test_weaken, **extra}


def prepare(sb: Sandbox, artifact: BugArtifact, **extra: str) -> None:
    """Stage the artifact's script and diffs (plus `extra` files) in the scratch folder."""
    stage(sb, staged_files(artifact, **extra))


def restore_paths(sb: Sandbox, paths: tuple[str, ...] | list[str]) -> None:
    """Put `paths` back to their original version; a path absent from the original is deleted."""
    if paths:
        check(sb.exec(f"{git_env_line()}; {restore_cmd(paths)}", timeout=60, user="root"),
              f"restoring {len(paths)} file(s) from {BASE_TAG}")


