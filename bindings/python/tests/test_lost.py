"""A lost lock reaches the application: the on_event callback, lock.lost, the release."""

from __future__ import annotations

import queue

import pytest

import credisson
from conftest import await_true
from resp import numsub


def test_a_lock_force_unlocked_from_the_cli_reaches_the_python_callback(url, key, redis, cli):
    events: "queue.Queue[credisson.LockEvent]" = queue.Queue()
    client = credisson.Client(url, prompt_loss_detection=True, on_event=events.put)
    name = key("l")
    lock = client.lock(name)
    try:
        lock.acquire()
        # The hold watches its channel once the subscription is confirmed.
        assert await_true(lambda: numsub(redis, f"redisson_lock__channel:{{{name}}}") > 0, 5)
        assert not lock.lost
        out = cli("unlock", "--force", name)
        assert out.returncode == 0, out.stderr
        ev = events.get(timeout=5)
        assert ev.kind == credisson.EventKind.LOCK_LOST
        assert ev.name == name and ev.validity == 0.0
        assert ev.owner == int(client.owner_field().rsplit(":", 1)[1])
        assert lock.lost and lock.validity() == 0.0
        with pytest.raises(credisson.LockLostError) as e:
            lock.release()
        assert e.value.detail
    finally:
        client.close()


def test_a_with_block_whose_lock_was_lost_raises_at_its_end(url, key, redis, cli):
    client = credisson.Client(url, prompt_loss_detection=True)
    name = key("l")
    try:
        with pytest.raises(credisson.LockLostError):
            with client.lock(name) as lock:
                assert await_true(lambda: numsub(redis, f"redisson_lock__channel:{{{name}}}") > 0, 5)
                assert cli("unlock", "--force", name).returncode == 0
                assert await_true(lambda: lock.lost, 5)
    finally:
        client.close()
