"""A minimal Redis client for the tests and their workers (RESP2 over a socket): the
package has no Redis client of its own, and the tests read and write keys around it."""

from __future__ import annotations

import contextlib
import socket
from typing import Any, List, Optional


class RespError(Exception):
    """An error reply."""


class Resp(contextlib.AbstractContextManager):
    """One connection; ``with Resp(port) as r:`` closes it at the end (the base class's
    ``__enter__`` gives the Resp itself)."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __call__(self, *args: Any) -> Any:
        """Send one command, return its reply: int, bytes, None, a list, or RespError."""
        parts: List[bytes] = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(parts))
        reply = self._read()
        if isinstance(reply, RespError):
            raise reply
        return reply

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def _read(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            return RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ConnectionError(f"bad reply {line!r}")

    def int(self, *args: Any) -> int:
        v = self(*args)
        return 0 if v is None else int(v)


def numsub(r: Resp, channel: str) -> int:
    reply: Optional[list] = r("PUBSUB", "NUMSUB", channel)
    return int(reply[1]) if reply else 0
