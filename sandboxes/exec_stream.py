"""`ExecStream`: one started Docker exec whose output a thread reads into capped buffers.

The SDK's own streaming reads with the client's socket timeout and has no way to stop early; here the
caller waits on an event with its own deadline, and can cut the socket if a killed command's output
never closes.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from sandboxes.output import OutputCap


class ExecStream:
    """Starts exec `eid` (created without a tty) and reads stdout/stderr frames until they close.

    Raises the engine's error (docker.errors.APIError) when the exec cannot start.
    """

    def __init__(self, api: Any, eid: str, limit: int, stderr_limit: int = 64 << 10) -> None:
        from docker.utils.socket import frames_iter

        self._api, self.eid = api, eid
        # exec_start(socket=True) would drop the HTTP response we must close afterwards; same calls.
        self._res = api._post_json(api._url("/exec/{0}/start", eid),
                                   headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                                   data={"Tty": False, "Detach": False}, stream=True)
        api._raise_for_status(self._res)
        self._sock = api._get_raw_response_socket(self._res)
        api._disable_socket_timeout(self._sock)
        self.out, self.err = OutputCap(limit), OutputCap(stderr_limit)
        self._done = threading.Event()

        def read() -> None:
            try:
                for stream, data in frames_iter(self._sock, tty=False):
                    (self.err if stream == 2 else self.out).feed(data)
            except (OSError, ValueError):
                pass  # socket cut after a timeout, or closed under us
            finally:
                self._done.set()

        threading.Thread(target=read, name=f"exec-{eid[:8]}", daemon=True).start()

    def wait(self, timeout: float) -> bool:
        """True when the output closed within `timeout` seconds."""
        return self._done.wait(timeout)

    def cut(self) -> None:
        """Shut the socket so the reader stops, even if processes in the container keep the pipe open."""
        raw = getattr(self._sock, "_sock", self._sock)
        try:
            raw.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._done.wait(5)

    def close(self) -> None:
        self._res.close()

    def exit_code(self) -> int | None:
        """The exec's exit code; None if the engine still reports it running after ~1 s."""
        for _ in range(200):  # the stream can close a moment before the engine records the exit
            info = self._api.exec_inspect(self.eid)
            if not info.get("Running"):
                return info.get("ExitCode")
            time.sleep(0.005)
        return None
