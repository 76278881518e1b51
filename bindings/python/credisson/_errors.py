"""The C statuses (crd_status) and the exceptions they become.

Each failing status raises its own class, all of them subclasses of credisson.Error,
carrying the status, the library's fixed text for it (crd_strerror) and the detail the
library gave for this call (crd_client_errmsg: Redis's own words, which argument was
wrong). Outcomes that are answers rather than failures -- a try that found the lock held, a
wait that ran out -- are return values (False, None) of acquire(), and become exceptions
only where a statement cannot return them: entering a `with` block.
"""

from __future__ import annotations

import builtins
import enum
from typing import Dict, NoReturn, Optional, Type

from ._native import lib


class Status(enum.IntEnum):
    """crd_status: the result of every C call (0 is OK)."""

    OK = 0
    BUSY = 1
    TIMEOUT = 2
    NOT_OWNER = 3
    LOCK_LOST = 4
    INVALID_ARGUMENT = 5
    IO = 6
    PROTOCOL = 7
    SERVER = 8
    NO_MEMORY = 9
    CLOSED = 10
    AUTH = 11
    DEADLOCK = 12
    FORKED = 13
    SKIPPED = 14
    DEGRADED = 15
    CANCELLED = 16
    NOT_SYNCED = 17
    OUTCOME_UNKNOWN = 18
    SYNC_UNAVAILABLE = 19
    INTERRUPTED = 20

    @property
    def text(self) -> str:
        """The library's fixed text for the status (crd_strerror)."""
        return strerror(self)


def strerror(status: int) -> str:
    """crd_strerror: the fixed English text of a status."""
    return lib.crd_strerror(int(status)).decode()


class Error(Exception):
    """Every failure of credisson: .status (Status), .detail (the library's words for this
    call, from crd_client_errmsg; may be empty) and .text (crd_strerror of the status)."""

    status: Status = Status.OK

    def __init__(self, status: int, detail: str = "") -> None:
        try:
            self.status = Status(status)
        except ValueError:  # a status of a newer library
            self.status = status  # type: ignore[assignment]
        self.detail = detail
        self.text = strerror(status)
        super().__init__(self.status, detail)

    def __str__(self) -> str:
        return f"{self.detail} ({self.text})" if self.detail else self.text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status!r}, {self.detail!r})"


class NotAcquiredError(Error):
    """The lock, permit or latch was not had: held elsewhere, or the wait ran out."""


class BusyError(NotAcquiredError):
    """CRD_BUSY: a try without wait found it held by another owner."""


class TimeoutError(NotAcquiredError, builtins.TimeoutError):
    """CRD_TIMEOUT: the wait ran out (also a builtins.TimeoutError)."""

    __str__ = Error.__str__


class NotOwnerError(Error):
    """CRD_NOT_OWNER: this owner (thread, task) holds nothing to release or extend."""


class LockLostError(Error):
    """CRD_LOCK_LOST: the hold ended without a release (its lease ran out, or it was
    force-unlocked): the critical section may have overlapped another holder's."""


class InvalidArgumentError(Error, ValueError):
    """CRD_INVALID_ARGUMENT: a bad URL, name, time or option (also a ValueError)."""


class ConnectionError(Error):
    """CRD_IO: Redis could not be reached, or a connection failed or timed out."""


class ProtocolError(Error):
    """CRD_PROTOCOL: Redis replied with something no script returns (a key holding
    something else than the object)."""


class ServerError(Error):
    """CRD_SERVER: Redis replied with an error (WRONGTYPE, OOM, ...); nothing was taken."""


class OutOfMemoryError(Error, MemoryError):
    """CRD_NO_MEMORY: an allocation failed."""


class ClosedError(Error):
    """CRD_CLOSED: the client is closed, or it never started."""


class AuthenticationError(Error):
    """CRD_AUTH: AUTH, SELECT or the TLS handshake's certificate check was refused."""


class DeadlockError(Error):
    """CRD_DEADLOCK: the request can never succeed for this owner (a reader asking for
    the write lock: there is no upgrade)."""


class ForkedError(Error):
    """CRD_FORKED: a handle made before fork() was used in the child."""


class CancelledError(Error):
    """CRD_CANCELLED: an operation of the event loop was cancelled."""


class NotSyncedError(Error):
    """CRD_NOT_SYNCED: no replica acknowledged the acquire (replica sync); not held."""


class OutcomeUnknownError(Error):
    """CRD_OUTCOME_UNKNOWN: a release, add or count-down was sent and its reply lost: it
    may or may not have run (it was not resent)."""


class SyncUnavailableError(Error):
    """CRD_SYNC_UNAVAILABLE: replica sync was asked for and the server refuses WAIT (a
    proxy or managed endpoint): the acquire was not sent; not held."""


class WaitInterruptedError(Error):
    """CRD_INTERRUPTED: a blocking wait was ended by the interrupt token its thread bound
    (crd_interrupt_raise): nothing is held, a fair waiter left its queue. Not Python's
    InterruptedError (an OSError for EINTR)."""


class SkippedError(Error):
    """CRD_SKIPPED."""


class DegradedError(Error):
    """CRD_DEGRADED."""


_BY_STATUS: Dict[int, Type[Error]] = {
    Status.BUSY: BusyError,
    Status.TIMEOUT: TimeoutError,
    Status.NOT_OWNER: NotOwnerError,
    Status.LOCK_LOST: LockLostError,
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.IO: ConnectionError,
    Status.PROTOCOL: ProtocolError,
    Status.SERVER: ServerError,
    Status.NO_MEMORY: OutOfMemoryError,
    Status.CLOSED: ClosedError,
    Status.AUTH: AuthenticationError,
    Status.DEADLOCK: DeadlockError,
    Status.FORKED: ForkedError,
    Status.SKIPPED: SkippedError,
    Status.DEGRADED: DegradedError,
    Status.CANCELLED: CancelledError,
    Status.NOT_SYNCED: NotSyncedError,
    Status.OUTCOME_UNKNOWN: OutcomeUnknownError,
    Status.SYNC_UNAVAILABLE: SyncUnavailableError,
    Status.INTERRUPTED: WaitInterruptedError,
}


def error_for(status: int, detail: str = "") -> Error:
    """The exception of a failed status."""
    return _BY_STATUS.get(status, Error)(status, detail)


def errmsg(client: Optional[int]) -> str:
    """crd_client_errmsg: the calling thread's last failure on the client."""
    msg = lib.crd_client_errmsg(client)
    return msg.decode(errors="replace") if msg else ""


def raise_for(status: int, client: Optional[int]) -> NoReturn:
    """Raise the exception of a failed status, with the client's detail for this thread
    (read at once, before any other call on the client)."""
    raise error_for(status, errmsg(client))


def check(status: int, client: Optional[int]) -> None:
    if status != 0:
        raise_for(status, client)
