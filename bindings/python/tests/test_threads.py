"""The blocking API: a thread is an owner, times are seconds, `with` takes and releases."""

from __future__ import annotations

import threading
import time

import pytest

import credisson
from conftest import await_true


def in_thread(fn):
    """Runs fn on a new thread; returns its result (or raises what it raised)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # handed to the test's thread
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the thread did not finish in 30 s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_with_takes_and_releases_the_lock(client, key):
    lock = client.lock(key("l"))
    with lock as held:
        assert held is lock
        assert lock.is_held() and lock.locked()
        assert 0 < lock.validity() <= 30.0
        assert 0 < lock.remaining_ttl() <= 30.0
    assert not lock.locked()
    assert lock.remaining_ttl() is None


def test_a_thread_is_an_owner_and_holds_reentrantly(client, key):
    lock = client.lock(key("l"))
    assert lock.acquire()
    assert lock.acquire(wait=0)  # the same thread again
    assert lock.hold_count() == 2
    assert in_thread(lambda: lock.acquire(wait=0)) is False  # another thread: another owner
    assert in_thread(lock.hold_count) == 0
    with pytest.raises(credisson.NotOwnerError):
        in_thread(lock.release)
    lock.release()
    lock.release()
    assert not lock.locked()


def test_a_wait_in_seconds_runs_out_on_a_held_lock_and_succeeds_after_release(client, key, url):
    name = key("l")
    lock = client.lock(name)
    held, release = threading.Event(), threading.Event()

    def holder():
        with client.lock(name):
            held.set()
            assert release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(10)
    t0 = time.monotonic()
    assert lock.acquire(wait=0.2) is False
    waited = time.monotonic() - t0
    assert 0.19 <= waited < 3.0, waited
    assert lock.acquire(wait=0) is False
    with pytest.raises(credisson.TimeoutError) as e:
        with client.lock(name, wait=0.05):
            pass
    assert isinstance(e.value, TimeoutError) and "still held" in e.value.detail
    with pytest.raises(credisson.BusyError):
        with client.lock(name, wait=0):
            pass
    release.set()
    assert lock.acquire(wait=10.0)  # woken by the release
    t.join(10)
    lock.release()


def test_threads_exclude_each_other(client, key):
    lock = client.lock(key("l"))
    inside, most, total = [0], [0], [0]
    guard = threading.Lock()

    def work():
        for _ in range(20):
            with lock:
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0)  # let the others run while this thread is inside
                with guard:
                    inside[0] -= 1
                    total[0] += 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert total[0] == 80 and most[0] == 1


def test_a_lease_in_seconds_expires_the_hold(client, key, redis):
    lock = client.lock(key("l"), lease=0.3)
    with pytest.raises(credisson.LockLostError):
        with lock:
            assert 0 < redis.int("PTTL", lock.name) <= 300
            assert await_true(lambda: redis.int("EXISTS", lock.name) == 0, 5)
    lock.acquire(lease=5)
    lock.extend(20)
    assert redis.int("PTTL", lock.name) > 5000
    lock.release()


def test_the_fair_lock_and_the_fenced_lock(client, key):
    with client.fair_lock(key("fair"), wait=1) as fl:
        assert fl.is_held()
    fenced = client.fenced_lock(key("fenced"))
    with fenced as t1:
        pass
    t2 = fenced.acquire_token()
    fenced.release()
    assert t2 > t1 and fenced.token() == t2


def test_read_locks_share_and_the_write_lock_excludes(client, key):
    rw = client.read_write_lock(key("rw"))
    with rw.read_lock:
        assert in_thread(lambda: rw.read_lock.acquire(wait=0))  # another reader
        assert in_thread(lambda: rw.write_lock.acquire(wait=0)) is False
        with pytest.raises(credisson.DeadlockError):  # no upgrade
            rw.write_lock.acquire(wait=5)
    assert rw.read_lock.force_unlock()  # the other thread's read hold
    with rw.write_lock:
        assert in_thread(lambda: rw.read_lock.acquire(wait=0)) is False
        with rw.read_lock:  # a writer may read (downgrade)
            pass


def test_semaphore_permit_semaphore_and_latch_across_threads(client, key):
    sem = client.semaphore(key("sem"))
    assert sem.try_set_permits(2) and not sem.try_set_permits(3)
    assert sem.acquire(permits=2)
    assert sem.acquire(wait=0) is False
    in_thread(sem.release)  # permits have no owner
    with sem:
        assert sem.available() == 0
    assert sem.available() == 1

    ps = client.permit_semaphore(key("ps"), lease=30)
    assert ps.try_set_permits(1)
    with ps as permit:
        assert len(permit.id) == 32 and 0 < permit.lease_left() <= 30
        assert ps.acquire(wait=0) is None
    assert ps.available() == 1
    p = ps.acquire(lease=None)
    assert p.lease_left() == float("inf")
    p.release()

    latch = client.latch(key("latch"))
    assert latch.try_set_count(2)
    assert latch.wait(0) is False
    done = threading.Event()
    t = threading.Thread(target=lambda: latch.wait() and done.set())
    t.start()
    latch.count_down()
    assert not done.wait(0.1)
    latch.count_down()
    assert done.wait(10)
    t.join(10)
    assert latch.count() == 0


def test_metrics_and_ids(client, key):
    with client.lock(key("l")):
        pass
    m = client.metrics()
    assert m["acquisitions"] >= 1 and m["releases"] >= 1
    assert len(client.id) == 36
    assert client.owner_field().startswith(client.id + ":")
