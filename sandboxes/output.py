"""Capping command output: keep the head and the tail, count what was dropped from the middle.

Output arrives in chunks from the exec stream; `OutputCap` holds at most `limit` bytes however much flows
through it, so a 50 MB flood costs 50 MB of socket reads but never 50 MB of memory.
"""

from __future__ import annotations

from collections import deque

MARKER = "\n[... {dropped} bytes of output dropped by the sandbox output cap ...]\n"


class OutputCap:
    """Accumulates a byte stream, keeping the first `limit // 2` and the last `limit - limit // 2` bytes."""

    def __init__(self, limit: int) -> None:
        if limit < 2:
            raise ValueError(f"max_output_bytes must be at least 2, got {limit}")
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self.total = 0
        """Bytes seen so far."""

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.total += len(chunk)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
            if not chunk:
                return
        if len(chunk) >= self._tail_limit:
            self._tail.clear()
            self._tail.append(bytes(chunk[-self._tail_limit:]))
            self._tail_len = self._tail_limit
            return
        self._tail.append(bytes(chunk))
        self._tail_len += len(chunk)
        # Drop whole chunks from the left while the rest still covers the tail; trim the last one.
        while self._tail_len - len(self._tail[0]) >= self._tail_limit:
            self._tail_len -= len(self._tail.popleft())
        excess = self._tail_len - self._tail_limit
        if excess > 0:
            self._tail[0] = self._tail[0][excess:]
            self._tail_len -= excess

    @property
    def dropped(self) -> int:
        return self.total - len(self._head) - self._tail_len

    def raw(self) -> bytes:
        """Head and tail joined with no marker (only equals the stream when nothing was dropped)."""
        return bytes(self._head) + b"".join(self._tail)

    def text(self) -> str:
        """Head, a marker stating the dropped byte count (when any), tail; decoded with replacement."""
        head = decode(bytes(self._head))
        tail = decode(b"".join(self._tail))
        if self.dropped == 0:
            return head + tail
        return head + MARKER.format(dropped=self.dropped) + tail


def decode(data: bytes) -> str:
    """UTF-8 with U+FFFD for invalid bytes; a cut multi-byte character at an edge becomes U+FFFD too."""
    return data.decode("utf-8", errors="replace")


def cap_text(data: bytes, limit: int) -> tuple[str, int]:
    """Cap a whole byte string at once; returns (text, dropped byte count)."""
    cap = OutputCap(limit)
    cap.feed(data)
    return cap.text(), cap.dropped
