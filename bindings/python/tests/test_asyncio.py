"""asyncio on the C library's event-loop API: tasks are owners, waits never block the loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import credisson
from conftest import SABOTAGE
from resp import numsub


def run(coro, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


class Heartbeat:
    """A task ticking every 10 ms; the largest gap between ticks says how long the loop
    was kept from running it."""

    def __init__(self) -> None:
        self.gaps = []
        self.stopped = False

    async def run(self) -> None:
        last = time.monotonic()
        while not self.stopped:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            self.gaps.append(now - last)
            last = now

    def __enter__(self) -> "Heartbeat":
        self.task = asyncio.get_running_loop().create_task(self.run())
        return self

    def __exit__(self, *exc) -> None:
        self.stopped = True

    @property
    def worst(self) -> float:
        return max(self.gaps) if self.gaps else 0.0


def test_200_tasks_contend_on_4_locks_while_a_heartbeat_keeps_ticking(url, key):
    """CRDT_SABOTAGE=nolock skips the lock (overlaps then fail the test); =block makes one
    task take a lock with the blocking API while another thread holds it for 200 ms (the
    heartbeat's gap then fails it)."""
    base = key("l")

    async def main():
        client = credisson.AsyncClient(url)
        locks = [client.lock(f"{base}:{i}") for i in range(4)]
        inside = [0] * 4
        stats = {"overlaps": 0, "done": 0}

        async def task(i: int) -> None:
            n = i % 4
            for _ in range(2):
                if SABOTAGE == "nolock":
                    holder = None
                else:
                    holder = locks[n]
                    await holder.__aenter__()
                inside[n] += 1
                if inside[n] > 1:
                    stats["overlaps"] += 1
                await asyncio.sleep(0.001)  # others run while this task holds the lock
                inside[n] -= 1
                if holder is not None:
                    await holder.__aexit__(None, None, None)
            stats["done"] += 1

        with Heartbeat() as hb:
            await asyncio.sleep(0.03)  # a few ticks before the rush
            t0 = time.monotonic()
            if SABOTAGE == "block":
                _block_the_loop(url, f"{base}:block")
            await asyncio.gather(*(task(i) for i in range(200)))
            elapsed = time.monotonic() - t0
        await hb.task
        m = _metrics(client)
        await client.aclose()
        return stats, hb, elapsed, m

    stats, hb, elapsed, m = run(main())
    print(
        f"200 tasks on 4 locks: {elapsed * 1000:.0f} ms, {stats['overlaps']} overlaps, {len(hb.gaps)} heartbeats, "
        f"longest gap {hb.worst * 1000:.1f} ms, {m['contended']} contended acquires"
    )
    assert stats["done"] == 200
    assert stats["overlaps"] == 0
    assert m["contended"] >= 200, "few waited: the test showed little"
    assert hb.worst <= 0.050, f"the loop was blocked: a heartbeat gap of {hb.worst * 1000:.1f} ms"


def _metrics(client: credisson.AsyncClient) -> dict:
    import ctypes

    from credisson import _native
    from credisson._native import lib

    m = _native.crd_metrics()
    lib.crd_client_metrics(client._core.h(), ctypes.byref(m), ctypes.sizeof(m))
    return {f: getattr(m, f) for f in _native.METRICS_FIELDS}


def _block_the_loop(url: str, name: str) -> None:
    """The sabotage: a blocking acquire on the loop's thread, of a lock held 200 ms."""
    held = threading.Event()
    other = credisson.Client(url)

    def hold():
        with other.lock(name):
            held.set()
            time.sleep(0.2)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(10)
    mine = credisson.Client(url)
    with mine.lock(name):
        pass
    t.join()
    mine.close()
    other.close()


def test_each_task_is_its_own_owner_and_holds_reentrantly(url, key):
    async def main():
        async with credisson.AsyncClient(url) as client:
            lock = client.lock(key("l"))
            got, release = asyncio.Event(), asyncio.Event()

            async def holder():
                async with lock:
                    assert await lock.acquire(wait=0)  # the same task again
                    assert await lock.hold_count() == 2
                    await lock.release()
                    got.set()
                    await release.wait()

            h = asyncio.ensure_future(holder())
            await got.wait()
            assert await lock.acquire(wait=0) is False  # this task is another owner
            assert await lock.hold_count() == 0
            with pytest.raises(credisson.NotOwnerError):
                await lock.release()
            with Heartbeat() as hb:
                t0 = time.monotonic()
                assert await lock.acquire(wait=0.3) is False
                waited = time.monotonic() - t0
            assert 0.29 <= waited < 3.0
            assert hb.worst <= 0.05  # the wait did not block the loop
            release.set()
            await h
            assert await lock.acquire(wait=5)
            assert lock.validity() > 0 and not lock.lost
            await lock.release()
            assert not await lock.locked()

    run(main())


def test_a_cancelled_wait_takes_nothing(url, key, redis):
    name = key("l")

    async def main():
        async with credisson.AsyncClient(url) as client:
            sync = credisson.Client(url)
            blocker = sync.lock(name)
            assert blocker.acquire(wait=0)
            lock = client.lock(name)
            waiter = asyncio.ensure_future(lock.acquire(wait=30))
            channel = f"redisson_lock__channel:{{{name}}}"
            for _ in range(2500):  # until the waiter sleeps on the lock's channel (5 s at most)
                if numsub(redis, channel) > 0:
                    break
                await asyncio.sleep(0.002)
            assert numsub(redis, channel) > 0, "the waiter never waited"
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            blocker.release()
            # Nobody holds it: the cancelled wait neither kept it nor took it later.
            other = client.lock(name)
            assert await other.acquire(wait=5)
            await other.release()
            sync.close()

    run(main())


def test_semaphores_latch_fenced_and_read_write_locks_are_awaited(url, key):
    async def main():
        async with credisson.AsyncClient(url) as client:
            sem = client.semaphore(key("sem"))
            assert await sem.try_set_permits(2)
            assert await sem.acquire()
            async with sem:
                assert await sem.available() == 0
                assert await sem.acquire(wait=0) is False
                waiter = asyncio.ensure_future(sem.acquire(wait=10))
                await sem.release()  # wakes it
                assert await waiter
            assert await sem.available() == 1  # the first acquire's permit and the waiter's are out,
            await sem.release(1)  # and one came back more than was taken inside: no owners
            assert await sem.available() == 2

            ps = client.permit_semaphore(key("ps"), lease=30)
            assert await ps.try_set_permits(1)
            async with ps as permit:
                assert len(permit.id) == 32
                assert await ps.acquire(wait=0) is None
            assert await ps.available() == 1

            latch = client.latch(key("latch"))
            assert await latch.try_set_count(2)
            waiting = asyncio.ensure_future(latch.wait(10))
            await latch.count_down()
            await latch.count_down()
            assert await waiting

            fenced = client.fenced_lock(key("f"))
            async with fenced as t1:
                pass
            t2 = await fenced.acquire_token()
            await fenced.release()
            assert t2 > t1 and await fenced.token() == t2

            rw = client.read_write_lock(key("rw"))
            async with rw.read_lock:

                async def other_reader():
                    async with rw.read_lock:
                        return True

                async def writer():
                    return await rw.write_lock.acquire(wait=0)

                assert await asyncio.ensure_future(other_reader())  # readers share it
                assert await asyncio.ensure_future(writer()) is False  # a writer waits
                with pytest.raises(credisson.DeadlockError):
                    await rw.write_lock.acquire(wait=1)

    run(main())


def test_errors_reach_awaiting_tasks(url, key, redis):
    name = key("string")
    redis("SET", name, "x")

    async def main():
        async with credisson.AsyncClient(url) as client:
            with pytest.raises(credisson.ServerError) as e:
                await client.lock(name).acquire()
            assert "WRONGTYPE" in e.value.detail
            with pytest.raises(credisson.InvalidArgumentError):
                await client.lock(key("l")).acquire(wait=-1)
            with pytest.raises(credisson.TimeoutError):
                sync = credisson.Client(url)
                held = sync.lock(key("held"))
                held.acquire()
                try:
                    async with client.lock(held.name, wait=0.05):
                        pass
                finally:
                    held.release()
                    sync.close()
        c = await credisson.AsyncClient.connect(url)
        lock = c.lock(key("l"))
        await c.aclose()
        with pytest.raises(credisson.ClosedError):
            await lock.acquire()

    run(main())
