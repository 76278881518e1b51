"""Python and C processes on the same locks and semaphores (the same wire: the C library
underneath both, and Redisson's keys). Every exclusion test here fails when the workers
skip their acquire (CRDT_SABOTAGE=nolock), which is how each was shown able to fail."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import await_true, kill_all, python_worker, wait_all
from resp import Resp


def _start(port: int, name: str, commands, redis: Resp):
    procs = [subprocess.Popen(cmd) for cmd in commands]
    redis("RPUSH", f"{name}:go", *(["1"] * len(procs)))  # every worker starts at once
    return procs


def _run_pairs(port: int, redis: Resp, c_worker: str, kind: str, name: str, pairs: int, rounds: int, hold_ms: int) -> int:
    """pairs Python and pairs C workers of kind on name, started at once, rounds each,
    holding hold_ms: all must exit 0. Returns the most that were inside at once."""
    commands = []
    for _ in range(pairs):
        commands.append(python_worker(port, kind, name, rounds, hold_ms))
        commands.append([c_worker, str(port), kind, name, str(rounds), str(hold_ms)])
    procs = _start(port, name, commands, redis)
    try:
        codes = wait_all(procs, 120)
    finally:
        kill_all(procs)
    assert codes == [0] * (2 * pairs), f"worker exit codes (Python, C, Python, ...): {codes}"
    return redis.int("GET", f"{name}:max")


def test_8_python_and_8_c_processes_increment_one_counter_with_no_update_lost(port, redis, key, c_worker):
    name, rounds = key("counter"), 25
    most_inside = _run_pairs(port, redis, c_worker, "lock", name, 8, rounds, 200)
    counter = redis.int("GET", f"{name}:counter")
    total = 16 * rounds
    print(f"16 processes (8 Python, 8 C) x {rounds}: counter {counter} of {total}, most inside at once {most_inside}")
    assert counter == total, f"{total - counter} updates lost"
    assert most_inside == 1


def test_a_semaphore_of_2_shared_by_python_and_c_never_has_more_than_2_holders(port, redis, key, client, c_worker):
    name, rounds = key("sem"), 12
    assert client.semaphore(name).try_set_permits(2)
    most_inside = _run_pairs(port, redis, c_worker, "semaphore", name, 3, rounds, 3000)
    print(f"6 processes (3 Python, 3 C) x {rounds} on a semaphore of 2: most inside at once {most_inside}")
    assert most_inside <= 2, f"{most_inside} holders of a semaphore of 2"
    assert most_inside == 2, "the holders never overlapped: the test showed nothing"
    assert client.semaphore(name).available() == 2


def test_the_fair_lock_serves_python_and_c_processes_in_the_order_they_asked(port, redis, key, client, cli, url):
    """Four waiters queue one after another, C (credisson run --fair), Python, C, Python,
    behind a holder; released, they get the lock in that order (Redisson's queue)."""
    name = key("fair")
    order = f"{name}:order"
    queue = f"redisson_lock_queue:{{{name}}}"
    holder = client.fair_lock(name)
    assert holder.acquire(wait=0)
    redis_cli = os.environ.get("CRD_REDIS_CLI", "redis-cli")
    py = (
        "import sys, credisson; from resp import Resp; "
        "c = credisson.Client(sys.argv[1]); r = Resp(int(sys.argv[2])); "
        "l = c.fair_lock(sys.argv[3])\n"
        "with l:\n    r('RPUSH', sys.argv[4], sys.argv[5])\n"
        "c.close()"
    )
    procs = []
    try:
        for i, who in enumerate(["c1", "py2", "c3", "py4"], start=1):
            if who.startswith("c"):
                cmd = [cli.path, "--url", url, "run", "--fair", name, "--", redis_cli, "-p", str(port), "RPUSH", order, who]
            else:
                cmd = [sys.executable, "-c", py, url, str(port), name, order, who]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL))
            assert await_true(lambda: redis.int("LLEN", queue) == i, 15), f"waiter {who} never queued"
        holder.release()
        codes = wait_all(procs, 60)
    finally:
        kill_all(procs)
    assert codes == [0, 0, 0, 0], f"exit codes: {codes}"
    got = [b.decode() for b in redis("LRANGE", order, 0, -1)]
    print(f"queued c1 py2 c3 py4, served {' '.join(got)}")
    assert got == ["c1", "py2", "c3", "py4"]
