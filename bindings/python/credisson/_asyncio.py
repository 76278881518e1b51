"""asyncio: the same objects, awaited, on the C library's event-loop API.

One AsyncClient serves one event loop. The first awaited call registers the client's
descriptor (crd_loop_fd) with the running loop (loop.add_reader) and calls
crd_loop_dispatch whenever it is readable or crd_loop_timeout_ms has passed
(loop.call_later); acquires, lock releases and extends are the C library's _async calls,
whose callbacks (run inside that dispatch, on the loop's thread) complete futures. Nothing
waits on the loop's thread: a wait is a pending operation in the library, woken by the
subscriber thread through the descriptor.

Owners: each asyncio Task is its own owner (an id from crd_owner_new, kept as long as the
task lives), as each thread is for the blocking API: tasks exclude each other, a task that
acquires twice holds twice, and only the task that acquired can release.

Where the C library has no _async form -- introspection (locked, is_held, ...), a
semaphore's or a permit's release, a latch's count-down, setting counts -- the call is one
round trip run on the loop's default executor (loop.run_in_executor), so the loop does not
block on it either.
"""

from __future__ import annotations

import asyncio
import ctypes
import itertools
import threading
import weakref
from ctypes import byref, c_bool, c_char_p, c_int64, c_void_p
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _native
from ._client import (
    DEFAULT,
    Name,
    Seconds,
    _ClientBase,
    _Core,
    _Named,
    _Owned,
    _ms,
    _name_str,
    _new_handle,
    _seconds,
    lease_ms,
    wait_ms,
)
from ._errors import Status, error_for, errmsg, raise_for
from ._native import lib

# ---- owners ----------------------------------------------------------------------------

_task_owners: "weakref.WeakKeyDictionary[asyncio.Task[Any], int]" = weakref.WeakKeyDictionary()


def task_owner() -> int:
    """The owner id of the running task (crd_owner_new, once per task)."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("credisson: an awaited lock call must run inside an asyncio task")
    owner = _task_owners.get(task)
    if owner is None:
        owner = _task_owners[task] = lib.crd_owner_new()
    return owner


# ---- operations and their completions ----------------------------------------------------


class _Op:
    """One pending C operation: its future, and what to do when it ends."""

    __slots__ = ("driver", "fut", "extract", "give_back", "keep", "op")

    def __init__(
        self,
        driver: "_Driver",
        fut: Optional["asyncio.Future[Tuple[int, Any, str]]"],
        extract: Optional[Callable[[int], Any]],
        give_back: Optional[Callable[[Any], None]],
        keep: Tuple[Any, ...],
    ) -> None:
        self.driver = driver
        self.fut = fut
        self.extract = extract
        self.give_back = give_back
        self.keep = keep  # what the C side refers to until done runs (handles, buffers)
        self.op: Optional[int] = None

    def finish(self, op: int, status: int) -> None:
        value = self.extract(op) if (self.extract is not None and status == 0) else None
        detail = errmsg(self.driver.core.handle) if status != 0 else ""
        if threading.get_ident() == self.driver.thread:
            self.deliver(status, value, detail)
        else:  # the client was freed from another thread: its end reaches us here
            try:
                self.driver.loop.call_soon_threadsafe(self.deliver, status, value, detail)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    def deliver(self, status: int, value: Any, detail: str) -> None:
        fut = self.fut
        if fut is not None and not fut.done():
            fut.set_result((status, value, detail))
        elif status == 0 and self.give_back is not None:
            # Taken after its task stopped waiting (cancelled): nobody holds it, give it back.
            self.give_back(value)


_pending: Dict[int, _Op] = {}
_ids = itertools.count(1)


def _on_done(user: Optional[int], op: int, status: int) -> None:
    rec = _pending.pop(user or 0, None)
    if rec is None:
        return
    try:
        rec.finish(op, status)
    except BaseException:  # never into C
        import traceback

        traceback.print_exc()


_on_done_c = _native.crd_op_done_fn(_on_done)


class _Driver:
    """One client attached to one running loop: the reader on crd_loop_fd and the timer
    of crd_loop_timeout_ms, both calling crd_loop_dispatch."""

    def __init__(self, core: _Core, loop: asyncio.AbstractEventLoop) -> None:
        self.core = core
        self.loop = loop
        self.thread = threading.get_ident()
        self.timer: Optional[asyncio.TimerHandle] = None
        h = core.h()
        self.fd = lib.crd_loop_fd(h)
        if self.fd < 0:
            raise error_for(Status.CLOSED, errmsg(h))
        loop.add_reader(self.fd, self.dispatch)

    def dispatch(self) -> None:
        h = self.core.handle
        if h is None:
            return
        lib.crd_loop_dispatch(h)
        self.arm()

    def arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        h = self.core.handle
        if h is None:
            return
        ms = lib.crd_loop_timeout_ms(h)
        if ms >= 0:
            self.timer = self.loop.call_later(ms / 1000.0, self.dispatch)

    def start(
        self,
        begin: Callable[[int, Any], int],
        fut: Optional["asyncio.Future[Tuple[int, Any, str]]"],
        extract: Optional[Callable[[int], Any]] = None,
        give_back: Optional[Callable[[Any], None]] = None,
        keep: Tuple[Any, ...] = (),
    ) -> Tuple[int, _Op]:
        """Start a C operation: begin(user_data, op_out) is the _async call."""
        rec = _Op(self, fut, extract, give_back, keep)
        uid = next(_ids)
        _pending[uid] = rec
        out = c_void_p()
        st = begin(uid, byref(out))
        if st != 0:
            _pending.pop(uid, None)
            raise_for(st, self.core.handle)
        rec.op = out.value
        self.arm()
        return uid, rec

    def cancel(self, uid: int) -> None:
        rec = _pending.get(uid)
        if rec is not None and rec.op is not None and self.core.handle is not None:
            lib.crd_op_cancel(rec.op)
            self.arm()

    def detach(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.loop.is_closed():
            self.loop.remove_reader(self.fd)


async def _await_op(driver: _Driver, uid: int, rec: _Op) -> Tuple[int, Any, str]:
    """Wait for a started operation; if the waiting task is cancelled, the operation is
    cancelled in C (crd_op_cancel), and what it took meanwhile is given back."""
    fut = rec.fut
    assert fut is not None
    try:
        return await fut
    except asyncio.CancelledError:
        if fut.cancelled():
            driver.cancel(uid)  # its callback gives back a hold that came too late
        elif fut.result()[0] == 0 and rec.give_back is not None:
            rec.give_back(fut.result()[1])  # done, but the task was cancelled first
        raise


# ---- the client --------------------------------------------------------------------------


class AsyncClient(_ClientBase):
    """The client for asyncio: ``async with client.lock("x"):``, ``await sem.acquire()``.

    The same URL, options and callbacks as Client (see its documentation). Making it
    connects (one round trip, blocking): make it at start-up, or use
    ``await AsyncClient.connect(url, ...)``, which connects on the default executor. It
    serves the event loop it is first awaited on; each task is its own owner.
    ``await client.aclose()`` (or leaving ``async with``) frees it: pending acquires end
    with ``ClosedError``."""

    # The loop's driver, made when the client is first awaited (_ClientBase's __init__
    # makes the client itself).
    _drv: Optional[_Driver] = None

    @classmethod
    async def connect(cls, url: Optional[str] = None, **kwargs: Any) -> "AsyncClient":
        """Make a client without blocking the loop (the connect runs on the executor)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: cls(url, **kwargs))

    def _driver(self) -> _Driver:
        loop = asyncio.get_running_loop()
        drv = self._drv
        if drv is None:
            drv = self._drv = _Driver(self._core, loop)
        elif drv.loop is not loop:
            raise RuntimeError("credisson: an AsyncClient serves the one event loop it was first used on")
        return drv

    def lock(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "AsyncLock":
        """The reentrant lock ``name`` (see Client.lock)."""
        return AsyncLock(self, name, wait, lease, lib.crd_lock_new_n)

    def fair_lock(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "AsyncLock":
        """The fair lock ``name``."""
        return AsyncLock(self, name, wait, lease, lib.crd_fair_lock_new_n)

    def fenced_lock(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "AsyncFencedLock":
        """The fenced lock ``name``: ``async with lock as token:``."""
        return AsyncFencedLock(self, name, wait, lease, lib.crd_fenced_lock_new_n)

    def read_write_lock(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "AsyncReadWriteLock":
        """The read-write lock ``name``: ``.read_lock`` and ``.write_lock``."""
        return AsyncReadWriteLock(self, name, wait, lease)

    def semaphore(self, name: Name, *, wait: Seconds = None) -> "AsyncSemaphore":
        """The semaphore ``name``."""
        return AsyncSemaphore(self, name, wait)

    def permit_semaphore(self, name: Name, *, wait: Seconds = None, lease: Seconds = None) -> "AsyncPermitSemaphore":
        """The permit-expirable semaphore ``name``."""
        return AsyncPermitSemaphore(self, name, wait, lease)

    def latch(self, name: Name) -> "AsyncLatch":
        """The count-down latch ``name``."""
        return AsyncLatch(self, name)

    def close(self) -> None:
        """Free the client now (crd_client_free): pending operations end (ClosedError)."""
        drv, self._drv = self._drv, None
        if drv is not None:
            drv.detach()
        self._core.close()

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


async def _in_thread(core: _Core, fn: Callable[..., int], *args: Any) -> None:
    """A blocking C call on the default executor; raises its Error."""

    def run() -> Tuple[int, str]:
        h = core.h()
        st = fn(*args)
        return st, (errmsg(h) if st != 0 else "")

    st, detail = await asyncio.get_running_loop().run_in_executor(None, run)
    if st != 0:
        raise error_for(st, detail)


def _outcome(st: int, detail: str) -> bool:
    if st == 0:
        return True
    if st in (Status.BUSY, Status.TIMEOUT):
        return False
    raise error_for(st, detail)


# ---- locks ------------------------------------------------------------------------------


async def _ask(obj: Any, fn: Any, kind: Any, *args: Any) -> Any:
    """fn(handle, *args, &out) for obj's handle on the executor, its status checked: out's
    value (``kind``: c_bool or c_int64)."""
    v = kind()
    await _in_thread(obj._core, fn, obj._h(), *args, byref(v))
    return v.value


class _AsyncLockBase(_Named):
    _handle: Optional[int]

    def __init__(self, client: AsyncClient, raw: bytes, wait: Seconds, lease: Seconds) -> None:
        self._client = client
        self._core = client._core
        self.wait, self.lease = wait, lease
        self.name = _name_str(raw)

    def _h(self) -> int:
        self._core.h()
        return self._handle  # type: ignore[return-value]

    async def _acquire(self, wait: Any, lease: Any, token: bool = False) -> Tuple[int, Any, str]:
        w = wait_ms(self.wait if wait is DEFAULT else wait)
        l = lease_ms(self.lease if lease is DEFAULT else lease)
        drv = self._client._driver()
        owner = task_owner()
        h = self._h()
        fut = drv.loop.create_future()
        uid, rec = drv.start(
            lambda ud, out: lib.crd_lock_acquire_async(h, owner, w, l, _on_done_c, ud, out),
            fut,
            extract=lib.crd_op_token if token else None,
            give_back=lambda _v: self._give_back(drv, owner),
            keep=(self,),
        )
        return await _await_op(drv, uid, rec)

    def _give_back(self, drv: _Driver, owner: int) -> None:
        h = self._handle
        if h is not None and self._core.handle is not None:
            drv.start(lambda ud, out: lib.crd_lock_release_async(h, owner, _on_done_c, ud, out), None, keep=(self,))

    async def acquire(self, wait: Seconds = DEFAULT, lease: Seconds = DEFAULT) -> bool:
        """Take the lock for the running task (crd_lock_acquire_async): True once held,
        False when it stayed held elsewhere (``wait`` 0) or the wait ran out. Times in
        seconds, as Lock.acquire. Cancelling the task cancels the wait."""
        st, _, detail = await self._acquire(wait, lease)
        return _outcome(st, detail)

    async def release(self) -> None:
        """Release one hold of the running task (crd_lock_release_async); raises
        NotOwnerError or LockLostError as Lock.release."""
        drv = self._client._driver()
        owner = task_owner()
        h = self._h()
        fut = drv.loop.create_future()
        drv.start(lambda ud, out: lib.crd_lock_release_async(h, owner, _on_done_c, ud, out), fut, keep=(self,))
        st, _, detail = await asyncio.shield(fut)  # a release cannot be taken back
        if st != 0:
            raise error_for(st, detail)

    async def extend(self, lease: float) -> None:
        """Set the running task's hold's lease to ``lease`` seconds from now."""
        l = lease_ms(lease)
        drv = self._client._driver()
        owner = task_owner()
        h = self._h()
        fut = drv.loop.create_future()
        drv.start(lambda ud, out: lib.crd_lock_extend_async(h, owner, l, _on_done_c, ud, out), fut, keep=(self,))
        st, _, detail = await asyncio.shield(fut)
        if st != 0:
            raise error_for(st, detail)

    async def locked(self) -> bool:
        """Whether anyone holds it (a round trip on the executor)."""
        return bool(await _ask(self, lib.crd_lock_is_locked, c_bool))

    async def is_held(self) -> bool:
        """Whether the running task holds it (asked of Redis, on the executor)."""
        return bool(await _ask(self, lib.crd_lock_is_held_owner, c_bool, task_owner()))

    async def hold_count(self) -> int:
        """The running task's hold count."""
        return int(await _ask(self, lib.crd_lock_hold_count_owner, c_int64, task_owner()))

    async def force_unlock(self) -> bool:
        """Delete the lock whoever holds it; whether one was."""
        return bool(await _ask(self, lib.crd_lock_force_unlock, c_bool))

    def validity(self) -> float:
        """Seconds the running task may still trust its hold (local bookkeeping only, no
        round trip): 0.0 when it holds nothing here or the hold is lost."""
        v = c_int64()
        return _seconds(v.value) if lib.crd_lock_validity_ms_owner(self._h(), task_owner(), byref(v)) == 0 else 0.0

    @property
    def lost(self) -> bool:
        """Whether the running task's hold is known lost (see Lock.lost)."""
        v = c_int64()
        return lib.crd_lock_validity_ms_owner(self._h(), task_owner(), byref(v)) == Status.LOCK_LOST

    async def __aenter__(self) -> Any:
        st, _, detail = await self._acquire(DEFAULT, DEFAULT)
        if st != 0:
            raise error_for(st, detail)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


class AsyncLock(_AsyncLockBase):
    """A reentrant or fair lock for asyncio: ``async with client.lock("x", wait=10):``.
    Each task is its own owner."""

    def __init__(self, client: AsyncClient, name: Name, wait: Seconds, lease: Seconds, new: Any) -> None:
        self._handle = None
        self._handle, raw = _new_handle(client._core, new, name)
        super().__init__(client, raw, wait, lease)

    def __del__(self, _free: Any = lib.crd_lock_free) -> None:
        # Pending operations keep the object alive (_Op.keep), so none refers to it now.
        h, self._handle = getattr(self, "_handle", None), None
        if h is not None:
            _free(h)


class AsyncFencedLock(AsyncLock):
    """A fenced lock for asyncio: ``async with lock as token:``."""

    async def acquire_token(self, wait: Seconds = DEFAULT, lease: Seconds = DEFAULT) -> Optional[int]:
        """The token of this acquire, or None when the lock was not had."""
        st, token, detail = await self._acquire(wait, lease, token=True)
        return token if _outcome(st, detail) else None

    async def token(self) -> int:
        """The newest token of anyone."""
        v = c_int64()
        await _in_thread(self._core, lib.crd_lock_token, self._h(), byref(v))
        return v.value

    async def __aenter__(self) -> int:  # type: ignore[override]
        st, token, detail = await self._acquire(DEFAULT, DEFAULT, token=True)
        if st != 0:
            raise error_for(st, detail)
        return token


class _AsyncRwPart(_AsyncLockBase):
    def __init__(self, rw: "AsyncReadWriteLock", handle: int, raw: bytes, kind: str) -> None:
        self._rw = rw
        self._handle = handle
        self.kind = kind
        super().__init__(rw._client, raw, rw.wait, rw.lease)


class AsyncReadWriteLock:
    """A read-write lock for asyncio: ``async with rw.read_lock:``, ``async with
    rw.write_lock:``."""

    def __init__(self, client: AsyncClient, name: Name, wait: Seconds, lease: Seconds) -> None:
        self._handle = None
        self._handle, raw = _new_handle(client._core, lib.crd_rwlock_new_n, name)
        self._client = client
        self.wait, self.lease = wait, lease
        self.name = _name_str(raw)
        self.read_lock = _AsyncRwPart(self, lib.crd_rwlock_read(self._handle), raw, "read")
        self.write_lock = _AsyncRwPart(self, lib.crd_rwlock_write(self._handle), raw, "write")

    def __del__(self, _free: Any = lib.crd_rwlock_free) -> None:
        h, self._handle = getattr(self, "_handle", None), None
        if h is not None:
            _free(h)


# ---- semaphores and the latch -----------------------------------------------------------


class _AsyncHandle(_Owned):

    def __init__(self, client: AsyncClient, name: Name, new: Any) -> None:
        self._handle = None
        self._handle, raw = _new_handle(client._core, new, name)
        self._client = client
        self._core = client._core
        self.name = _name_str(raw)

    def _h(self) -> int:
        self._core.h()
        return self._handle  # type: ignore[return-value]

    async def _int(self, fn: Any) -> int:
        return int(await _ask(self, fn, c_int64))


class AsyncSemaphore(_AsyncHandle):
    """A semaphore for asyncio: ``await sem.acquire()``, ``async with sem:``."""

    _free = lib.crd_semaphore_free

    def __init__(self, client: AsyncClient, name: Name, wait: Seconds) -> None:
        super().__init__(client, name, lib.crd_semaphore_new_n)
        self.wait = wait

    async def _acquire(self, wait: Any, permits: int) -> Tuple[int, Any, str]:
        w = wait_ms(self.wait if wait is DEFAULT else wait)
        n = int(permits)
        drv = self._client._driver()
        h = self._h()
        fut = drv.loop.create_future()

        def give_back(_v: Any) -> None:  # taken after its task stopped waiting
            drv.loop.run_in_executor(None, lib.crd_semaphore_release, h, n)

        uid, rec = drv.start(
            lambda ud, out: lib.crd_semaphore_acquire_async(h, n, w, _on_done_c, ud, out),
            fut,
            give_back=give_back,
            keep=(self,),
        )
        return await _await_op(drv, uid, rec)

    async def acquire(self, wait: Seconds = DEFAULT, permits: int = 1) -> bool:
        """Take ``permits`` at once (crd_semaphore_acquire_async): True, or False when the
        wait ran out (``wait`` 0: tried once)."""
        st, _, detail = await self._acquire(wait, permits)
        return _outcome(st, detail)

    async def release(self, permits: int = 1) -> None:
        """Give permits back (a round trip on the executor: the C library has no _async
        release for semaphores)."""
        await _in_thread(self._core, lib.crd_semaphore_release, self._h(), int(permits))

    async def try_set_permits(self, permits: int, ttl: Seconds = None) -> bool:
        ttl_ms = 0 if ttl is None else _ms(ttl, "ttl")
        return bool(await _ask(self, lib.crd_semaphore_try_set_permits, c_bool, int(permits), ttl_ms))

    async def available(self) -> int:
        return await self._int(lib.crd_semaphore_available)

    async def add_permits(self, delta: int) -> None:
        await _in_thread(self._core, lib.crd_semaphore_add_permits, self._h(), int(delta))

    async def drain(self) -> int:
        return await self._int(lib.crd_semaphore_drain)

    async def __aenter__(self) -> "AsyncSemaphore":
        st, _, detail = await self._acquire(DEFAULT, 1)
        if st != 0:
            raise error_for(st, detail)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


class AsyncPermit:
    """One permit of an AsyncPermitSemaphore: ``id``; ``await permit.release()``."""

    def __init__(self, sem: "AsyncPermitSemaphore", permit_id: str) -> None:
        self.semaphore = sem
        self.id = permit_id
        self.released = False

    async def release(self) -> None:
        self.released = True
        await self.semaphore.release(self.id)

    async def __aenter__(self) -> "AsyncPermit":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if not self.released:
            await self.release()

    def __repr__(self) -> str:
        return f"<credisson.AsyncPermit {self.id} of {self.semaphore.name!r}>"


class AsyncPermitSemaphore(_AsyncHandle):
    """A permit-expirable semaphore for asyncio: ``async with sem as permit:``."""

    _free = lib.crd_permit_semaphore_free

    def __init__(self, client: AsyncClient, name: Name, wait: Seconds, lease: Seconds) -> None:
        super().__init__(client, name, lib.crd_permit_semaphore_new_n)
        self.wait, self.lease = wait, lease
        self._stacks: "weakref.WeakKeyDictionary[asyncio.Task[Any], List[AsyncPermit]]" = weakref.WeakKeyDictionary()

    async def _acquire(self, permits: int, wait: Any, lease: Any) -> Tuple[int, List[str], str]:
        w = wait_ms(self.wait if wait is DEFAULT else wait)
        lease = self.lease if lease is DEFAULT else lease
        l = -1 if lease is None else _ms(lease, "lease")
        n = int(permits)
        ids = (_native.PermitId * max(n, 1))()
        drv = self._client._driver()
        h = self._h()
        fut = drv.loop.create_future()

        def extract(_op: int) -> List[str]:  # inside the callback, when ids hold permits
            return [ids[i].value.decode() for i in range(n)]

        def give_back(got: List[str]) -> None:
            raw = [i.encode() for i in got]
            arr = (c_char_p * len(raw))(*raw)
            drv.loop.run_in_executor(None, lib.crd_permit_semaphore_release_n, h, arr, len(raw))

        uid, rec = drv.start(
            lambda ud, out: lib.crd_permit_semaphore_acquire_async(h, n, w, l, ctypes.addressof(ids), _on_done_c, ud, out),
            fut,
            extract=extract,
            give_back=give_back,
            keep=(self, ids),
        )
        st, got, detail = await _await_op(drv, uid, rec)
        return st, got or [], detail

    async def acquire(self, wait: Seconds = DEFAULT, lease: Seconds = DEFAULT) -> Optional[AsyncPermit]:
        """Take one permit: the AsyncPermit, or None when the wait ran out."""
        st, ids, detail = await self._acquire(1, wait, lease)
        return AsyncPermit(self, ids[0]) if _outcome(st, detail) else None

    async def acquire_many(self, permits: int, wait: Seconds = DEFAULT, lease: Seconds = DEFAULT) -> Optional[List[AsyncPermit]]:
        st, ids, detail = await self._acquire(permits, wait, lease)
        return [AsyncPermit(self, i) for i in ids] if _outcome(st, detail) else None

    async def release(self, *permits: Any) -> None:
        """Give permits back by AsyncPermit or id (on the executor)."""
        raw = [(p.id if isinstance(p, AsyncPermit) else p).encode() for p in permits]
        arr = (c_char_p * len(raw))(*raw)
        await _in_thread(self._core, lib.crd_permit_semaphore_release_n, self._h(), arr, len(raw))

    async def try_set_permits(self, permits: int) -> bool:
        return bool(await _ask(self, lib.crd_permit_semaphore_try_set_permits, c_bool, int(permits)))

    async def available(self) -> int:
        return await self._int(lib.crd_permit_semaphore_available)

    async def acquired(self) -> int:
        return await self._int(lib.crd_permit_semaphore_acquired)

    async def __aenter__(self) -> AsyncPermit:
        st, ids, detail = await self._acquire(1, DEFAULT, DEFAULT)
        if st != 0:
            raise error_for(st, detail)
        p = AsyncPermit(self, ids[0])
        task = asyncio.current_task()
        assert task is not None
        self._stacks.setdefault(task, []).append(p)
        return p

    async def __aexit__(self, *exc: Any) -> None:
        task = asyncio.current_task()
        assert task is not None
        p = self._stacks[task].pop()
        if not p.released:
            await p.release()


class AsyncLatch(_AsyncHandle):
    """A count-down latch for asyncio: ``await latch.wait()``."""

    _free = lib.crd_latch_free

    def __init__(self, client: AsyncClient, name: Name) -> None:
        super().__init__(client, name, lib.crd_latch_new_n)

    async def wait(self, timeout: Seconds = None) -> bool:
        """Wait until the count is zero (crd_latch_await_async): True, or False when the
        timeout ran out."""
        w = wait_ms(timeout)
        drv = self._client._driver()
        h = self._h()
        fut = drv.loop.create_future()
        uid, rec = drv.start(lambda ud, out: lib.crd_latch_await_async(h, w, _on_done_c, ud, out), fut, keep=(self,))
        st, _, detail = await _await_op(drv, uid, rec)
        return _outcome(st, detail)

    async def count_down(self) -> None:
        """Lower the count by one (on the executor)."""
        await _in_thread(self._core, lib.crd_latch_count_down, self._h())

    async def try_set_count(self, count: int) -> bool:
        return bool(await _ask(self, lib.crd_latch_try_set_count, c_bool, int(count)))

    async def count(self) -> int:
        return await self._int(lib.crd_latch_count)

    async def delete(self) -> bool:
        return bool(await _ask(self, lib.crd_latch_delete, c_bool))
