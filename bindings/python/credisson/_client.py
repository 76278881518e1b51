"""The client and its objects for threads: every call is the C call of the same name, made
on the calling thread, which is the owner of the holds it takes (as in C).
"""

from __future__ import annotations

import atexit
import ctypes
import enum
import math
import sys
import threading
import traceback
import weakref
from ctypes import byref, c_bool, c_char_p, c_int64, c_void_p
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import _native
from ._errors import (
    ClosedError,
    InvalidArgumentError,
    Status,
    check,
    error_for,
    errmsg,
    raise_for,
)
from ._native import lib

Name = Union[str, bytes]
Seconds = Optional[float]

_INT64_MAX = (1 << 63) - 1


class _Default:
    """The marker of an argument left out: the object's own default is used."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()


# ---- seconds <-> the library's milliseconds ------------------------------------------


def _ms(seconds: Union[int, float], what: str) -> int:
    """Seconds as whole milliseconds: a positive time is rounded up (a wait is never
    shortened into a try), 0 stays 0, and a negative one is given to the library, which
    refuses it with its own message -- never as -1, the library's "for ever"."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(seconds).__name__}")
    if seconds != seconds:
        raise InvalidArgumentError(Status.INVALID_ARGUMENT, f"{what} is NaN")
    if seconds >= 0:
        if math.isinf(seconds):
            return _INT64_MAX
        return min(math.ceil(seconds * 1000), _INT64_MAX)
    ms = math.floor(seconds * 1000) if not math.isinf(seconds) else -_INT64_MAX
    return ms if ms < -1 else -2


def wait_ms(wait: Seconds) -> int:
    """A wait in seconds as crd_lock_acquire's wait_ms: None (or +inf) waits as long as
    it takes (-1), 0 tries once."""
    if wait is None or (isinstance(wait, float) and math.isinf(wait) and wait > 0):
        return -1
    return _ms(wait, "wait")


def lease_ms(lease: Seconds) -> int:
    """A lease in seconds as lease_ms: None holds until released, renewed by the watchdog
    (-1); a positive lease expires unless released or extended."""
    if lease is None:
        return -1
    return _ms(lease, "lease")


def _seconds(ms: int) -> float:
    return ms / 1000.0


def _name_bytes(name: Name) -> bytes:
    if isinstance(name, str):
        return name.encode("utf-8", "surrogateescape")
    if isinstance(name, (bytes, bytearray, memoryview)):
        return bytes(name)
    raise TypeError(f"a name is str or bytes, not {type(name).__name__}")


def _name_str(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


# ---- events -------------------------------------------------------------------------


class EventKind(enum.IntEnum):
    """crd_event_kind: what the watchdog tells on_event."""

    RENEWAL_FAILING = 1
    RENEWAL_RECOVERED = 2
    LOCK_LOST = 3


class LogLevel(enum.IntEnum):
    """crd_log_level of the on_log callback."""

    DEBUG = 0
    INFO = 1
    WARN = 2
    ERROR = 3


@dataclass(frozen=True)
class LockEvent:
    """One watchdog event (crd_event)."""

    kind: EventKind
    name: str  # the lock's name (bytes that are not UTF-8 kept by surrogateescape)
    owner: int  # the owner id whose hold it is (a thread's or a task's)
    validity: float  # seconds the hold may still be trusted (0 when lost)
    status: Status  # why: Status.IO, Status.LOCK_LOST, ...
    detail: str  # the server's or the connection's words


def _report_callback_error(what: str) -> None:
    print(f"credisson: exception in the {what} callback (ignored):", file=sys.stderr)
    traceback.print_exc()


# ---- options ------------------------------------------------------------------------

# Python keyword: crd_options field. Times are seconds (floats) here, milliseconds there.
_SECONDS_OPTIONS = {
    "connect_timeout": "connect_timeout_ms",
    "command_timeout": "command_timeout_ms",
    "watchdog_timeout": "watchdog_timeout_ms",
    "subscription_timeout": "subscription_timeout_ms",
    "poll_interval": "poll_interval_ms",
    "max_wait_slice": "max_wait_slice_ms",
    "fair_wait_timeout": "fair_wait_timeout_ms",
    "replica_sync_timeout": "replica_sync_timeout_ms",
    "release_defer": "release_defer_ms",
    "sentinel_scan_interval": "sentinel_scan_interval_ms",
}
_STRING_OPTIONS = (
    "host unix_path username password tls_ca_file tls_ca_dir tls_cert_file tls_key_file "
    "tls_server_name seeds sentinel_addrs sentinel_master sentinel_username sentinel_password"
).split()
_INT_OPTIONS = ("port", "db", "pool_size")
_BOOL_OPTIONS = (
    "allow_unsafe_names release_on_close release_on_thread_exit tls tls_insecure_skip_verify "
    "events_on_loop local_fifo prompt_loss_detection"
).split()
_ENUM_OPTIONS = {
    "deployment": {"standalone": 0, "cluster": 1},
    "sharded_pubsub": {"auto": 0, "on": 1, "off": 2},
    "replica_sync": {"auto": 0, "on": 1, "off": 2},
}
OPTION_NAMES: Tuple[str, ...] = tuple(
    sorted([*_SECONDS_OPTIONS, *_STRING_OPTIONS, *_INT_OPTIONS, *_BOOL_OPTIONS, *_ENUM_OPTIONS])
)


def _fill_options(o: _native.crd_options, options: Dict[str, Any], keep: List[bytes]) -> None:
    for key, value in options.items():
        if value is None:
            continue
        if key in _SECONDS_OPTIONS:
            setattr(o, _SECONDS_OPTIONS[key], _ms(value, key))
        elif key in _STRING_OPTIONS:
            b = value.encode() if isinstance(value, str) else bytes(value)
            keep.append(b)
            setattr(o, key, b)
        elif key in _INT_OPTIONS:
            setattr(o, key, int(value))
        elif key in _BOOL_OPTIONS:
            setattr(o, key, bool(value))
        elif key in _ENUM_OPTIONS:
            table = _ENUM_OPTIONS[key]
            if value not in table:
                raise InvalidArgumentError(Status.INVALID_ARGUMENT, f"{key} must be one of {', '.join(table)}")
            setattr(o, key, table[value])
        else:
            raise TypeError(f"unknown credisson option {key!r}; the options are: {', '.join(OPTION_NAMES)}")


_open_clients: "weakref.WeakSet[_Core]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    # The library's threads call back into Python (events, logs); stop them while the
    # interpreter can still take the calls.
    for core in list(_open_clients):
        core.close()


class _Core:
    """The crd_client and the callbacks it was given (kept alive as long as it)."""

    def __init__(
        self,
        url: Optional[str],
        on_event: Optional[Callable[[LockEvent], None]],
        on_log: Optional[Callable[[LogLevel, str], None]],
        options: Dict[str, Any],
    ) -> None:
        self.handle: Optional[int] = None
        o = _native.crd_options()
        lib.crd_options_init(byref(o))
        keep: List[bytes] = []
        if url is not None:
            b = url.encode() if isinstance(url, str) else bytes(url)
            keep.append(b)
            o.url = b
        _fill_options(o, options, keep)
        self._callbacks: List[Any] = []
        if on_event is not None:
            o.on_event = self._event_trampoline(on_event)
        if on_log is not None:
            o.on_log = self._log_trampoline(on_log)
        h = c_void_p()
        st = lib.crd_client_new(byref(o), byref(h))
        if st != 0:
            detail = errmsg(h.value)
            lib.crd_client_free(h.value)
            raise error_for(st, detail)
        self.handle = h.value
        self.lock = threading.Lock()
        _open_clients.add(self)

    def _event_trampoline(self, fn: Callable[[LockEvent], None]) -> Any:
        def on_event(_user: int, evp: int) -> None:
            try:
                ev = _native.crd_event.from_address(evp)
                raw = ctypes.string_at(ev.name, ev.name_len) if ev.name else b""
                try:
                    status = Status(ev.status)
                except ValueError:
                    status = ev.status
                fn(
                    LockEvent(
                        kind=EventKind(ev.kind),
                        name=_name_str(raw),
                        owner=ev.owner,
                        validity=_seconds(ev.validity_ms),
                        status=status,
                        detail=(ev.detail or b"").decode(errors="replace"),
                    )
                )
            except BaseException:
                _report_callback_error("on_event")

        cb = _native.crd_event_fn(on_event)
        self._callbacks.append(cb)
        return cb

    def _log_trampoline(self, fn: Callable[[LogLevel, str], None]) -> Any:
        def on_log(_user: int, level: int, message: bytes) -> None:
            try:
                fn(LogLevel(level), (message or b"").decode(errors="replace"))
            except BaseException:
                _report_callback_error("on_log")

        cb = _native.crd_log_fn(on_log)
        self._callbacks.append(cb)
        return cb

    def h(self) -> int:
        """The handle, or ClosedError once the client is closed."""
        h = self.handle
        if h is None:
            raise ClosedError(Status.CLOSED, "the client is closed")
        return h

    def close(self, _free: Any = lib.crd_client_free) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            _open_clients.discard(self)
            _free(h)

    def __del__(self) -> None:
        if getattr(self, "handle", None) is not None:
            self.close()


def _new_handle(core: _Core, fn: Any, name: Name) -> Tuple[int, bytes]:
    raw = _name_bytes(name)
    out = c_void_p()
    h = core.h()
    check(fn(h, raw, len(raw), byref(out)), h)
    return out.value, raw


class _ClientBase:
    """What Client and AsyncClient share: the C client (``_core``), its id, whether it is
    closed, how it prints."""

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        on_event: Optional[Callable[[LockEvent], None]] = None,
        on_log: Optional[Callable[[LogLevel, str], None]] = None,
        **options: Any,
    ) -> None:
        self._core = _Core(url, on_event, on_log, options)

    @property
    def id(self) -> str:
        """The client's UUID, the first part of the owner fields it writes in Redis."""
        return lib.crd_client_id(self._core.h()).decode()

    @property
    def closed(self) -> bool:
        return self._core.handle is None

    def __repr__(self) -> str:
        return f"<credisson.{type(self).__name__} {'closed' if self.closed else self.id}>"


class Client(_ClientBase):
    """A client of one Redis deployment (crd_client): a pool of connections, a subscriber
    thread that wakes waiters, a watchdog thread that renews holds.

    ``url`` is a Redis URL: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://``
    (TLS), ``redis-cluster://host:port,...``, ``redis-sentinel://host:port,...#master``,
    ``unix:///path.sock?db=N``. The keyword options are crd_options' fields
    (include/credisson.h documents each), with every time in seconds instead of
    milliseconds and without its ``_ms``: ``watchdog_timeout=30.0``, ``connect_timeout``,
    ``command_timeout``, ``prompt_loss_detection=True``, ``pool_size``, ``tls_ca_file``,
    ``deployment="cluster"``, ``replica_sync="off"``, ... (``credisson.OPTION_NAMES``).

    ``on_event(event: LockEvent)`` is told of lost holds (``EventKind.LOCK_LOST``) and
    failing renewals; ``on_log(level: LogLevel, line: str)`` gets the library's log lines.
    Both run on the library's threads (the watchdog's, the subscriber's), must return
    quickly and must not call into this client: set a flag or put the event on a queue.

    A client is shared by every thread of the process. Each thread is its own owner: a
    lock taken by a thread is held by that thread (twice if it takes it twice) and only
    that thread releases it. Connecting fails with an Error subclass carrying the
    library's reason (``InvalidArgumentError`` for a bad URL, ``ConnectionError`` when
    nobody answers, ``AuthenticationError``).

    ``close()`` (or leaving ``with Client(...) as client:``) frees the client: threads
    blocked in an acquire return with ``ClosedError``; held locks expire after their lease
    (or are released first with ``release_on_close=True``). Call it when no other thread
    is inside another call on it, as in C.
    """

    # -- the objects --------------------------------------------------------------

    def lock(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "Lock":
        """The reentrant lock ``name`` (Redisson ``getLock(name)``). ``wait`` and ``lease``
        (seconds) are what ``with`` and ``acquire()`` use when not given: by default wait as
        long as it takes, and hold until released (the watchdog renews it)."""
        return Lock(self._core, name, wait, lease, lib.crd_lock_new_n)

    def fair_lock(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "FairLock":
        """The fair lock ``name`` (Redisson ``getFairLock``): first come, first served across
        processes and languages."""
        return FairLock(self._core, name, wait, lease, lib.crd_fair_lock_new_n)

    def fenced_lock(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "FencedLock":
        """The fenced lock ``name`` (Redisson ``getFencedLock``): every acquire draws a token
        larger than any before it (``with lock as token:``)."""
        return FencedLock(self._core, name, wait, lease, lib.crd_fenced_lock_new_n)

    def read_write_lock(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "ReadWriteLock":
        """The read-write lock ``name`` (Redisson ``getReadWriteLock``): ``.read_lock`` and
        ``.write_lock``."""
        return ReadWriteLock(self._core, name, wait, lease)

    def semaphore(self, name: Name, *, wait: Seconds = None) -> "Semaphore":
        """The semaphore ``name`` (Redisson ``getSemaphore``)."""
        return Semaphore(self._core, name, wait)

    def permit_semaphore(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "PermitSemaphore":
        """The permit-expirable semaphore ``name`` (Redisson
        ``getPermitExpirableSemaphore``); ``lease`` None: permits that never expire."""
        return PermitSemaphore(self._core, name, wait, lease)

    def latch(self, name: Name) -> "Latch":
        """The count-down latch ``name`` (Redisson ``getCountDownLatch``)."""
        return Latch(self._core, name)

    # -- the client ---------------------------------------------------------------

    def owner_field(self, owner: Optional[int] = None) -> str:
        """``<client id>:<owner>``, the field of a lock hash held by ``owner`` (by default the
        calling thread)."""
        return f"{self.id}:{owner if owner is not None else lib.crd_owner_current()}"

    def metrics(self) -> Dict[str, int]:
        """crd_client_metrics: the client's counters, by field name."""
        m = _native.crd_metrics()
        h = self._core.h()
        check(lib.crd_client_metrics(h, byref(m), ctypes.sizeof(m)), h)
        return {f: getattr(m, f) for f in _native.METRICS_FIELDS}

    def close(self) -> None:
        """Free the client (crd_client_free). Safe to call twice."""
        self._core.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---- locks ----------------------------------------------------------------------------


def _ask(obj: Any, fn: Any, kind: Any, *args: Any) -> Any:
    """fn(handle, *args, &out) for obj's handle, its status checked: out's value (``kind``
    is the ctypes type of out: c_bool or c_int64)."""
    h, c = obj._h()
    v = kind()
    check(fn(h, *args, byref(v)), c)
    return v.value


class _Named:
    """What every handle-owning object prints as: ``<credisson.Kind 'name'>``."""

    name: str

    def __repr__(self) -> str:
        return f"<credisson.{type(self).__name__} {self.name!r}>"


class _LockBase(_Named):
    """The operations of one lock for the calling thread."""

    _handle: Optional[int]

    def __init__(self, core: _Core, raw: bytes, wait: Seconds, lease: Seconds) -> None:
        self._core = core
        self._raw = raw
        self.wait = wait
        self.lease = lease
        self.name = _name_str(raw)

    def _h(self) -> Tuple[int, int]:
        c = self._core.h()  # ClosedError once the client is closed
        return self._handle, c  # type: ignore[return-value]

    def _status(self, wait: Any, lease: Any) -> int:
        w = wait_ms(self.wait if wait is DEFAULT else wait)
        l = lease_ms(self.lease if lease is DEFAULT else lease)
        h, c = self._h()
        st = lib.crd_lock_acquire(h, w, l)
        if st not in (Status.OK, Status.BUSY, Status.TIMEOUT):
            raise_for(st, c)
        return st

    def acquire(self, wait: Seconds = DEFAULT, lease: Seconds = DEFAULT) -> bool:
        """Take the lock for the calling thread (crd_lock_acquire): True once held, False
        when it stayed held elsewhere (``wait`` 0: tried once) or the wait ran out.

        ``wait``: seconds (a float), 0 to try once, None to wait as long as it takes;
        ``lease``: None holds until released (the watchdog renews it), seconds > 0 expire
        unless released or extended. Both default to what the object was made with. A
        negative time raises ``InvalidArgumentError``; a failure raises its Error."""
        return self._status(wait, lease) == Status.OK

    def release(self) -> None:
        """Release one hold of the calling thread (crd_lock_release). Raises
        ``NotOwnerError`` when this thread holds nothing, ``LockLostError`` when its hold
        had ended without a release (expired, force-unlocked)."""
        h, c = self._h()
        check(lib.crd_lock_release(h), c)

    def locked(self) -> bool:
        """Whether anyone, of any client or language, holds it (crd_lock_is_locked)."""
        return bool(_ask(self, lib.crd_lock_is_locked, c_bool))

    def is_held(self) -> bool:
        """Whether the calling thread holds it (crd_lock_is_held, asked of Redis)."""
        return bool(_ask(self, lib.crd_lock_is_held, c_bool))

    def hold_count(self) -> int:
        """The calling thread's hold count (0: none)."""
        return int(_ask(self, lib.crd_lock_hold_count, c_int64))

    def remaining_ttl(self) -> Optional[float]:
        """The lock key's time to live in seconds: None when nobody holds it, inf when it
        has no TTL (foreign or corrupt state)."""
        v = _ask(self, lib.crd_lock_remaining_ttl, c_int64)
        return None if v == -2 else math.inf if v == -1 else _seconds(v)

    def validity(self) -> float:
        """Seconds the calling thread may still trust its hold, from local bookkeeping only
        (crd_lock_validity_ms): 0.0 when it holds nothing here or the hold is lost."""
        h, _ = self._h()
        v = c_int64()
        return _seconds(v.value) if lib.crd_lock_validity_ms(h, byref(v)) == 0 else 0.0

    @property
    def lost(self) -> bool:
        """Whether the calling thread's hold is known lost (its lease ran out, or it was
        removed by someone else) while this client still records it: check it before a
        side effect that must not overlap another holder's."""
        h, _ = self._h()
        v = c_int64()
        return lib.crd_lock_validity_ms(h, byref(v)) == Status.LOCK_LOST

    def extend(self, lease: float) -> None:
        """Set the hold's lease to ``lease`` seconds from now (crd_lock_extend)."""
        l = lease_ms(lease)
        h, c = self._h()
        check(lib.crd_lock_extend(h, l), c)

    def force_unlock(self) -> bool:
        """Delete the lock whoever holds it (crd_lock_force_unlock); whether one was."""
        return bool(_ask(self, lib.crd_lock_force_unlock, c_bool))

    def __enter__(self) -> Any:
        st = self._status(DEFAULT, DEFAULT)
        if st != Status.OK:
            h, c = self._h()
            raise error_for(st, errmsg(c))
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class Lock(_LockBase):
    """A reentrant lock (Redisson ``RLock``), held by the thread that takes it.

    ``with client.lock("name", wait=10):`` takes it (waiting up to 10 s, else
    ``credisson.TimeoutError``) and releases it at the end of the block (raising
    ``LockLostError`` if the hold had ended meanwhile). ``acquire()`` / ``release()`` do the
    same by hand, ``acquire`` returning False instead of raising when it was not had."""

    def __init__(self, core: _Core, name: Name, wait: Seconds, lease: Seconds, new: Any) -> None:
        self._handle = None
        handle, raw = _new_handle(core, new, name)
        self._handle = handle
        super().__init__(core, raw, wait, lease)

    def __del__(self, _free: Any = lib.crd_lock_free) -> None:
        h, self._handle = getattr(self, "_handle", None), None
        if h is not None:
            _free(h)  # holds stay held (renewed) until released or expired


class FairLock(Lock):
    """A fair lock (Redisson ``RFairLock``): waiters of every process and language get it
    in the order they asked. Everything else as Lock."""


class FencedLock(Lock):
    """A fenced lock (Redisson ``RFencedLock``): every acquire draws a fencing token, a
    number larger than any earlier acquire's; ``with lock as token:`` gives it."""

    def acquire_token(self, wait: Seconds = DEFAULT, lease: Seconds = DEFAULT) -> Optional[int]:
        """Acquire as ``acquire`` does and return this acquire's token, or None when the
        lock was not had (crd_lock_acquire_token)."""
        w = wait_ms(self.wait if wait is DEFAULT else wait)
        l = lease_ms(self.lease if lease is DEFAULT else lease)
        h, c = self._h()
        t = c_int64()
        st = lib.crd_lock_acquire_token(h, w, l, byref(t))
        if st in (Status.BUSY, Status.TIMEOUT):
            return None
        check(st, c)
        return t.value

    def token(self) -> int:
        """The newest token of anyone (crd_lock_token; 0 before the first acquire)."""
        return int(_ask(self, lib.crd_lock_token, c_int64))

    def __enter__(self) -> int:  # type: ignore[override]
        w = wait_ms(self.wait)
        l = lease_ms(self.lease)
        h, c = self._h()
        t = c_int64()
        check(lib.crd_lock_acquire_token(h, w, l, byref(t)), c)
        return t.value


class _RwPart(_LockBase):
    """The read or the write lock of a ReadWriteLock (its handle belongs to it)."""

    def __init__(self, rw: "ReadWriteLock", handle: int, kind: str) -> None:
        self._rw = rw  # keeps the crd_rwlock alive
        self._handle = handle
        self.kind = kind
        super().__init__(rw._core, rw._raw, rw.wait, rw.lease)

    def __repr__(self) -> str:
        return f"<credisson.ReadWriteLock {self.name!r} {self.kind} lock>"


class ReadWriteLock:
    """A read-write lock (Redisson ``RReadWriteLock``): ``with rw.read_lock:`` shares it
    with other readers, ``with rw.write_lock:`` excludes everyone. A thread holding the
    write lock may also read (downgrade); a reader asking for the write lock gets
    ``DeadlockError`` at once (no upgrade, as in Redisson)."""

    def __init__(self, core: _Core, name: Name, wait: Seconds, lease: Seconds) -> None:
        self._handle = None
        self._handle, self._raw = _new_handle(core, lib.crd_rwlock_new_n, name)
        self._core = core
        self.wait, self.lease = wait, lease
        self.name = _name_str(self._raw)
        self.read_lock = _RwPart(self, lib.crd_rwlock_read(self._handle), "read")
        self.write_lock = _RwPart(self, lib.crd_rwlock_write(self._handle), "write")

    def __del__(self, _free: Any = lib.crd_rwlock_free) -> None:
        h, self._handle = getattr(self, "_handle", None), None
        if h is not None:
            _free(h)

    def __repr__(self) -> str:
        return f"<credisson.ReadWriteLock {self.name!r}>"


# ---- semaphores and the latch ---------------------------------------------------------


class _Owned(_Named):
    """A handle of a kind whose class names its free function (``_free``)."""

    _free: Any = None
    _handle: Optional[int]

    def __del__(self) -> None:
        h, self._handle = getattr(self, "_handle", None), None
        if h is not None:
            type(self)._free(h)


class _Handle(_Owned):

    def __init__(self, core: _Core, name: Name, new: Any) -> None:
        self._handle = None
        self._handle, raw = _new_handle(core, new, name)
        self._core = core
        self.name = _name_str(raw)

    def _h(self) -> Tuple[int, int]:
        return self._handle, self._core.h()  # type: ignore[return-value]

    def _int(self, fn: Any) -> int:
        return int(_ask(self, fn, c_int64))


class Semaphore(_Handle):
    """A counting semaphore (Redisson ``RSemaphore``): the available permits live in Redis,
    shared by every process and language. Permits have no owner: anyone may release what
    another acquired. Set the count once with ``try_set_permits`` (only the first call
    sets it). ``with sem:`` takes one permit and gives it back."""

    _free = lib.crd_semaphore_free

    def __init__(self, core: _Core, name: Name, wait: Seconds) -> None:
        super().__init__(core, name, lib.crd_semaphore_new_n)
        self.wait = wait

    def acquire(self, wait: Seconds = DEFAULT, permits: int = 1) -> bool:
        """Take ``permits`` at once (crd_semaphore_acquire): True when taken, False when
        not enough were available (``wait`` 0) or the wait ran out."""
        w = wait_ms(self.wait if wait is DEFAULT else wait)
        h, c = self._h()
        st = lib.crd_semaphore_acquire(h, int(permits), w)
        if st in (Status.BUSY, Status.TIMEOUT):
            return False
        check(st, c)
        return True

    def release(self, permits: int = 1) -> None:
        """Give ``permits`` back (crd_semaphore_release). ``OutcomeUnknownError``: sent,
        reply lost, not resent."""
        h, c = self._h()
        check(lib.crd_semaphore_release(h, int(permits)), c)

    def try_set_permits(self, permits: int, ttl: Seconds = None) -> bool:
        """Set the permits if the semaphore does not exist yet: whether this call did."""
        ttl_ms = 0 if ttl is None else _ms(ttl, "ttl")
        return bool(_ask(self, lib.crd_semaphore_try_set_permits, c_bool, int(permits), ttl_ms))

    def available(self) -> int:
        """The available permits (may be negative)."""
        return self._int(lib.crd_semaphore_available)

    def add_permits(self, delta: int) -> None:
        """Add (a negative delta: remove) permits."""
        h, c = self._h()
        check(lib.crd_semaphore_add_permits(h, int(delta)), c)

    def drain(self) -> int:
        """Take every available permit; how many."""
        return self._int(lib.crd_semaphore_drain)

    def __enter__(self) -> "Semaphore":
        w = wait_ms(self.wait)
        h, c = self._h()
        check(lib.crd_semaphore_acquire(h, 1, w), c)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class Permit:
    """One permit of a PermitSemaphore: its ``id`` (32 hex characters, as Java prints it).
    ``with permit:`` releases it at the end; ``release()`` does it by hand."""

    def __init__(self, sem: "PermitSemaphore", permit_id: str) -> None:
        self.semaphore = sem
        self.id = permit_id
        self.released = False

    def release(self) -> None:
        """Give the permit back. ``LockLostError``: released, but its lease had already run
        out; ``NotOwnerError``: it is not out (already released, or reclaimed)."""
        self.released = True
        self.semaphore.release(self.id)

    def update_lease(self, lease: Seconds) -> None:
        """Set its lease to ``lease`` seconds from now (None: never expires)."""
        self.semaphore.update_lease(self.id, lease)

    def lease_left(self) -> float:
        """Seconds left on its lease (inf without a lease)."""
        return self.semaphore.lease_left(self.id)

    def __enter__(self) -> "Permit":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.released:
            self.release()

    def __repr__(self) -> str:
        return f"<credisson.Permit {self.id} of {self.semaphore.name!r}>"


class PermitSemaphore(_Handle):
    """A semaphore whose permits have ids and leases (Redisson
    ``RPermitExpirableSemaphore``): a holder that dies frees its permit when the lease ends.
    ``with sem as permit:`` takes one (with the object's wait and lease) and releases it."""

    _free = lib.crd_permit_semaphore_free

    def __init__(self, core: _Core, name: Name, wait: Seconds, lease: Seconds) -> None:
        super().__init__(core, name, lib.crd_permit_semaphore_new_n)
        self.wait, self.lease = wait, lease
        self._local = threading.local()

    def _acquire(self, permits: int, wait: Any, lease: Any) -> Tuple[int, List[str]]:
        w = wait_ms(self.wait if wait is DEFAULT else wait)
        lease = self.lease if lease is DEFAULT else lease
        l = -1 if lease is None else _ms(lease, "lease")
        ids = (_native.PermitId * max(int(permits), 1))()
        h, c = self._h()
        st = lib.crd_permit_semaphore_acquire_n(h, int(permits), w, l, ctypes.addressof(ids))
        if st in (Status.BUSY, Status.TIMEOUT):
            return st, []
        check(st, c)
        return st, [ids[i].value.decode() for i in range(int(permits))]

    def acquire(self, wait: Seconds = DEFAULT, lease: Seconds = DEFAULT) -> Optional[Permit]:
        """Take one permit (crd_permit_semaphore_acquire): the Permit, or None when none was
        had (``wait`` 0, or the wait ran out). ``lease``: seconds, or None for a permit that
        never expires."""
        st, ids = self._acquire(1, wait, lease)
        return Permit(self, ids[0]) if ids else None

    def acquire_many(self, permits: int, wait: Seconds = DEFAULT, lease: Seconds = DEFAULT) -> Optional[List[Permit]]:
        """Take ``permits`` permits at once, all or none (crd_permit_semaphore_acquire_n)."""
        st, ids = self._acquire(permits, wait, lease)
        return [Permit(self, i) for i in ids] if ids else None

    def release(self, *permits: Union[Permit, str]) -> None:
        """Give permits back by Permit or id, all or nothing (crd_permit_semaphore_release_n)."""
        ids = [p.id if isinstance(p, Permit) else p for p in permits]
        raw = [i.encode() for i in ids]
        arr = (c_char_p * len(raw))(*raw)
        h, c = self._h()
        check(lib.crd_permit_semaphore_release_n(h, arr, len(raw)), c)

    def update_lease(self, permit_id: str, lease: Seconds) -> None:
        h, c = self._h()
        check(lib.crd_permit_semaphore_update_lease(h, permit_id.encode(), -1 if lease is None else _ms(lease, "lease")), c)

    def lease_left(self, permit_id: str) -> float:
        v = _ask(self, lib.crd_permit_semaphore_lease_left, c_int64, permit_id.encode())
        return math.inf if v == -1 else _seconds(v)

    def try_set_permits(self, permits: int) -> bool:
        """Set the permits if the semaphore does not exist yet: whether this call did."""
        return bool(_ask(self, lib.crd_permit_semaphore_try_set_permits, c_bool, int(permits)))

    def set_permits(self, permits: int) -> None:
        h, c = self._h()
        check(lib.crd_permit_semaphore_set_permits(h, int(permits)), c)

    def add_permits(self, delta: int) -> None:
        h, c = self._h()
        check(lib.crd_permit_semaphore_add_permits(h, int(delta)), c)

    def available(self) -> int:
        """Available permits (after reclaiming expired ones)."""
        return self._int(lib.crd_permit_semaphore_available)

    def permits(self) -> int:
        """All permits: available plus out."""
        return self._int(lib.crd_permit_semaphore_permits)

    def acquired(self) -> int:
        """Permits out."""
        return self._int(lib.crd_permit_semaphore_acquired)

    def __enter__(self) -> Permit:
        st, ids = self._acquire(1, DEFAULT, DEFAULT)
        if not ids:
            _, c = self._h()
            raise error_for(st, errmsg(c))
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        p = Permit(self, ids[0])
        stack.append(p)
        return p

    def __exit__(self, *exc: Any) -> None:
        p = self._local.stack.pop()
        if not p.released:
            p.release()


class Latch(_Handle):
    """A count-down latch (Redisson ``RCountDownLatch``): ``try_set_count(n)`` once, then
    ``count_down()`` n times, from anywhere; ``wait()`` returns once the count is zero."""

    _free = lib.crd_latch_free

    def __init__(self, core: _Core, name: Name) -> None:
        super().__init__(core, name, lib.crd_latch_new_n)

    def try_set_count(self, count: int) -> bool:
        """Set the count (>= 1) if the latch does not exist (is at zero): whether it did."""
        return bool(_ask(self, lib.crd_latch_try_set_count, c_bool, int(count)))

    def count_down(self) -> None:
        """Lower the count by one; at zero every waiter, of any language, is woken."""
        h, c = self._h()
        check(lib.crd_latch_count_down(h), c)

    def wait(self, timeout: Seconds = None) -> bool:
        """Wait until the count is zero (crd_latch_await): True then, False when
        ``timeout`` seconds ran out first (0: check once; None: as long as it takes)."""
        w = wait_ms(timeout)
        h, c = self._h()
        st = lib.crd_latch_await(h, w)
        if st in (Status.BUSY, Status.TIMEOUT):
            return False
        check(st, c)
        return True

    def count(self) -> int:
        """The count (0 when the latch does not exist)."""
        return self._int(lib.crd_latch_count)

    def delete(self) -> bool:
        """Delete the latch whatever its count, waking its waiters: whether there was one."""
        return bool(_ask(self, lib.crd_latch_delete, c_bool))


def owner_of_this_thread() -> int:
    """The calling thread's owner id (crd_owner_current)."""
    return lib.crd_owner_current()
