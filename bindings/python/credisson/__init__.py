"""credisson: Redisson's distributed locks for Python, on the credisson C library.

The locks, semaphores and latches live in Redis exactly as Java's Redisson stores them,
so a Python process, a C process and a Java process lock the same names and exclude each
other. The C library decides everything (waits, leases, renewal, wake-ups, lost holds);
this package only translates: times in seconds, names as str, statuses as exceptions.

Threads::

    import credisson

    client = credisson.Client("redis://127.0.0.1:6379")
    with client.lock("nightly-report", wait=10):      # Java: getLock("nightly-report")
        ...                                          # at most one holder, in any language

asyncio::

    async with credisson.AsyncClient("redis://127.0.0.1:6379") as client:
        async with client.lock("nightly-report"):
            ...

Objects (each from a Client or an AsyncClient): ``lock`` (Redisson RLock), ``fair_lock``
(RFairLock), ``read_write_lock`` (RReadWriteLock: ``.read_lock``, ``.write_lock``),
``fenced_lock`` (RFencedLock: ``with lock as token``), ``semaphore`` (RSemaphore),
``permit_semaphore`` (RPermitExpirableSemaphore: ``with sem as permit``), ``latch``
(RCountDownLatch).

Owners: a thread is the owner of what it takes with a Client (as in C), an asyncio task
of what it takes with an AsyncClient. Reentrant: an owner that takes a lock twice holds it
twice.

Times: ``wait`` and ``lease`` are seconds (floats). ``wait=None`` waits as long as it
takes, ``wait=0`` tries once; ``lease=None`` holds until released while the watchdog
renews the lease. A negative time raises InvalidArgumentError.

Errors: every failure raises a subclass of ``credisson.Error`` with ``.status``,
``.detail`` (the library's words: Redis's error, which argument was wrong) and ``.text``;
``acquire()`` returns False for a lock held elsewhere or a wait that ran out, ``with``
raises ``BusyError`` / ``TimeoutError`` there. A lost hold (lease ran out, force-unlocked)
is reported to ``on_event`` (``EventKind.LOCK_LOST``), shown by ``lock.lost``, and raised
by the release (``LockLostError``).

The C library is found as $CREDISSON_LIBRARY, else the installed libcredisson.so.0.
"""

from ._native import path as library_path, version as library_version
from ._errors import (
    AuthenticationError,
    BusyError,
    CancelledError,
    ClosedError,
    ConnectionError,
    DeadlockError,
    DegradedError,
    Error,
    ForkedError,
    InvalidArgumentError,
    LockLostError,
    NotAcquiredError,
    NotOwnerError,
    NotSyncedError,
    OutcomeUnknownError,
    SyncUnavailableError,
    WaitInterruptedError,
    OutOfMemoryError,
    ProtocolError,
    ServerError,
    SkippedError,
    Status,
    TimeoutError,
    strerror,
)
from ._client import (
    OPTION_NAMES,
    Client,
    EventKind,
    FairLock,
    FencedLock,
    Latch,
    Lock,
    LockEvent,
    LogLevel,
    Permit,
    PermitSemaphore,
    ReadWriteLock,
    Semaphore,
)
from ._asyncio import (
    AsyncClient,
    AsyncFencedLock,
    AsyncLatch,
    AsyncLock,
    AsyncPermit,
    AsyncPermitSemaphore,
    AsyncReadWriteLock,
    AsyncSemaphore,
)

__version__ = "0.8.0"

__all__ = [
    "Client",
    "AsyncClient",
    "Lock",
    "FairLock",
    "FencedLock",
    "ReadWriteLock",
    "Semaphore",
    "PermitSemaphore",
    "Permit",
    "Latch",
    "AsyncLock",
    "AsyncFencedLock",
    "AsyncReadWriteLock",
    "AsyncSemaphore",
    "AsyncPermitSemaphore",
    "AsyncPermit",
    "AsyncLatch",
    "LockEvent",
    "EventKind",
    "LogLevel",
    "Status",
    "strerror",
    "OPTION_NAMES",
    "library_path",
    "library_version",
    "Error",
    "NotAcquiredError",
    "BusyError",
    "TimeoutError",
    "NotOwnerError",
    "LockLostError",
    "InvalidArgumentError",
    "ConnectionError",
    "ProtocolError",
    "ServerError",
    "OutOfMemoryError",
    "ClosedError",
    "AuthenticationError",
    "DeadlockError",
    "ForkedError",
    "CancelledError",
    "NotSyncedError",
    "OutcomeUnknownError",
    "SyncUnavailableError",
    "WaitInterruptedError",
    "SkippedError",
    "DegradedError",
]
