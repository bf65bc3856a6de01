"""The parser container: where test_parser.py runs, seeing nothing but the test output (docs/security.md, class 2).

test_parser.py is model-written. Run beside the tests it could read the prediction, the layer diffs,
the repo and its own earlier outputs, and key its verdict on them (an injector's parser reported
all-passed whenever the prediction's hash was divisible by 8). Here it runs:
- in a separate container of the base image (no repo, no network, no grading files), one of a small
  process-wide set (`ParserBoxes`), never in a repo sandbox;
- as `sandboxes.users.PARSER_UID` (no capabilities, no_new_privs), `python3 -I`, with an environment
  of PATH/HOME/LANG only, in a fresh empty directory, with the output on stdin and its stdout and
  stderr through capped pipes into root-only files;
- after each call every PARSER_UID process is killed (bash builtins: works under a fork bomb), and its
  writable places (the run directory, /tmp, /var/tmp, /run/lock, /dev/shm, /dev/mqueue, System V IPC)
  are emptied, so it keeps no memory from one call to the next.
Validation and grading both call `parse_output`, so the two are indistinguishable from inside.

Speed: one exec per call (the parser and the output travel as a tarball on stdin); parse-twice is two
runs inside that one exec. The boxes start once per process (~1 s) and are reused.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import io
import logging
import queue
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sandboxes.base_image import ensure_base_image
from sandboxes.docker import DockerSandbox, DockerSandboxConfig
from sandboxes.reaper import registry
from sandboxes.users import PARSER_UID, drop_privileges

log = logging.getLogger(__name__)

BOX_STATE = "/var/lib/selfplay/parse"
"""Root-only folder in the box holding the staged parser input and the captured outputs."""
PARSER_DIR = "/opt/selfplay-parser"
"""Root-owned, world-readable folder holding test_parser.py during a call (the parser cannot change it)."""
RUN_DIR = "/tmp/selfplay-parse"
"""The parser's working directory: created empty for each run, owned by PARSER_UID, then deleted."""
WIPED = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm", "/dev/mqueue")
"""Places PARSER_UID can write; emptied after every run."""
STDERR_CAP = 4096
"""Bytes of the parser's stderr kept (diagnostics only)."""
MEMORY_KIB = 768 << 10
"""Address-space limit of the parser (and of the rest of the job): below the box's 1 GiB."""


@dataclass(frozen=True)
class ParseRun:
    """One run of test_parser.py on one output."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    flooded: bool = False
    """The parser printed more than the cap on stdout."""


def kill_uid_shell(uid: int, name: str = "killuid") -> str:
    """A bash function `name` (default `killuid`) that SIGKILLs every process of `uid` with builtins only (no fork, so it
    works when a fork bomb holds the pids limit), round after round until two rounds in a row find none
    (zombies aside): a child whose parent was killed mid-fork can appear after a round that saw nothing.
    Returns 1 when processes survive 100 rounds."""
    return f"""{name}() {{
  local n d k v s any e=0
  for ((n = 0; n < 100; n++)); do
    any=
    for d in /proc/[0-9]*; do
      k=; s=
      while read -r k v _; do
        [ "$k" = State: ] && s=$v
        [ "$k" = Uid: ] && break
      done 2>/dev/null < "$d/status"
      [ "$k" = Uid: ] && [ "$v" = {uid} ] && [ "$s" != Z ] || continue
      kill -9 "${{d#/proc/}}" 2>/dev/null; any=1
    done
    if [ -z "$any" ]; then ((++e >= 2)) && return 0; else e=0; fi
    read -t 0.01 <>/var/lib/selfplay/fifo 2>/dev/null
  done
  return 1
}}"""


def box_command(marker: str, *, runs: int, timeout: float, cap: int) -> str:
    """The root job run in a box: unpack the tarball on stdin, run the parser `runs` times on output.log,
    print each run's exit code and base64 stdout/stderr after `marker` lines."""
    m, d, p, w = marker, BOX_STATE, PARSER_DIR, RUN_DIR
    drop = drop_privileges(PARSER_UID)
    wipe = " ".join(WIPED)
    lines = [
        kill_uid_shell(PARSER_UID),
        f"rm -rf {d} && mkdir -m 700 {d} && tar -x -C {d} || exit 90",
        f"rm -rf {p} && mkdir -m 755 {p} && cp {d}/test_parser.py {p}/ && chmod 644 {p}/test_parser.py || exit 90",
        # a parser that exhausts memory must fail alone, not get the box OOM-killed (that would read as
        # an infrastructure failure)
        f"ulimit -v {MEMORY_KIB}",
    ]
    for i in range(runs):
        lines += [
            f"rm -rf {w} && mkdir -m 700 {w} && chown {PARSER_UID}:{PARSER_UID} {w} && cd {w} || exit 90",
            f"exec 4> >(exec head -c {cap + 1} > {d}/out{i}); o=$!",
            f"exec 5> >(exec head -c {STDERR_CAP} > {d}/err{i}); e=$!",
            # env -i: the parser gets no variable of ours (not even the exec token)
            f"timeout -k 2 {timeout:g} {drop} env -i PATH=/usr/bin:/bin HOME={w} LANG=C.UTF-8 "
            f"python3 -I {p}/test_parser.py < {d}/output.log >&4 2>&5 4>&- 5>&-; rc=$?",
            "exec 4>&- 5>&-",
            f"killuid || echo \"{m} UNKILLABLE\"",
            "wait $o $e",
            f"cd / && rm -rf {w}; find {wipe} -mindepth 1 -delete 2>/dev/null",
            f"setpriv --reuid={PARSER_UID} --regid={PARSER_UID} --clear-groups ipcrm -a 2>/dev/null",
            f"echo \"{m} RUN {i} $rc\"; base64 -w0 {d}/out{i}; echo; base64 -w0 {d}/err{i}; echo",
        ]
    lines += [f"rm -rf {d} {p}", f"echo \"{m} END\""]
    return "\n".join(lines)


def parse_box_output(output: str, marker: str, runs: int, cap: int) -> list[ParseRun] | None:
    """The runs printed by `box_command`, or None when the job did not finish (no END line)."""
    found: list[ParseRun] = []
    lines = output.splitlines()
    if f"{marker} END" not in lines:
        return None
    for k, line in enumerate(lines):
        if not line.startswith(f"{marker} RUN "):
            continue
        try:
            rc = int(line.split(" ")[3])
            out = base64.b64decode(lines[k + 1], validate=True)
            err = base64.b64decode(lines[k + 2], validate=True)
        except (IndexError, ValueError, binascii.Error):
            return None
        found.append(ParseRun(rc, out[:cap], err, flooded=len(out) > cap))
    return found if len(found) == runs else None


class ParserBoxes:
    """Up to `size` parser containers of the base image, created on first use and reused; thread-safe."""

    def __init__(self, size: int = 2, *, image: str | None = None) -> None:
        self.size, self.image = size, image
        self._free: queue.Queue = queue.Queue()
        self._made = 0
        self._all: list = []
        self._lock = threading.Lock()
        self._atexit = False

    def _new(self):
        config = DockerSandboxConfig(cpus=1.0, mem_limit="1g", pids_limit=256, max_output_bytes=64 << 20,
                                     labels={"selfplay.role": "parser"})
        box = DockerSandbox.create(self.image or ensure_base_image(), workdir="/work", config=config)
        with self._lock:
            self._all.append(box)
            if not self._atexit:  # registered after the sandbox reaper's, so it runs before it
                atexit.register(self.close)
                self._atexit = True
        return box

    @contextmanager
    def checkout(self) -> Iterator:
        with self._lock:
            grow = self._free.empty() and self._made < self.size
            self._made += grow
        try:
            box = self._new() if grow else self._free.get()
        except Exception:
            with self._lock:
                self._made -= grow
            raise
        ok = False
        try:
            yield box
            ok = True
        finally:
            if ok:
                self._free.put(box)
            else:  # a box that failed mid-call is not trusted again
                with self._lock:
                    self._made -= 1
                    self._all.remove(box)
                box.close()

    def close(self) -> None:
        with self._lock:
            boxes, self._all, self._made = self._all, [], 0
        for box in boxes:
            box.close()


_default: ParserBoxes | None = None
_default_lock = threading.Lock()


def default_boxes() -> ParserBoxes:
    """The process-wide parser boxes (containers are removed at exit by the sandbox reaper)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ParserBoxes()
        return _default


def parse_output(parser: str, output: bytes, *, runs: int = 1, timeout: float = 30.0, cap: int = 8 << 20,
                 boxes: ParserBoxes | None = None) -> list[ParseRun] | None:
    """Run `parser` (test_parser.py's text) `runs` times on `output` in a parser box, in one call.

    Returns one ParseRun per run, or None when the box itself failed twice (infrastructure)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("test_parser.py", parser.encode("utf-8", "surrogateescape")), ("output.log", output)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    payload = buf.getvalue()
    started = time.monotonic()
    for attempt in range(2):
        marker = f"__sp{uuid.uuid4().hex}__"
        cmd = box_command(marker, runs=runs, timeout=timeout, cap=cap)
        try:
            with (boxes or default_boxes()).checkout() as box:
                res = box.exec(cmd, timeout=runs * (timeout + 10) + 60, stdin=payload, user="root")
                found = parse_box_output(res.output, marker, runs, cap)
                if found is None:
                    raise RuntimeError(f"the parser box job did not finish (exit {res.exit_code}, timed out "
                                       f"{res.timed_out}): {res.output[-300:]!r}")
                return found
        except Exception as exc:  # the box is dropped by checkout(); one retry on a fresh one
            if registry.signalled_since(started):
                return None  # it died of the signal that is ending this process: no retry, no warning
            log.warning("parser box failed (attempt %d): %s", attempt + 1, exc)
    return None
