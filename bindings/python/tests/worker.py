"""The Python worker of the cross-language tests: the rounds of tests/bindings/worker.c
(crdt_worker), through the credisson package, on the same keys.

usage: worker.py PORT lock|semaphore NAME ROUNDS HOLD_US
CRDT_SABOTAGE=nolock skips the acquire and the release (the tests must then fail)."""

import os
import sys
import time

import credisson
from resp import Resp

INSIDE = (
    "local v = redis.call('INCR', KEYS[1]) "
    "if v > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], v) end "
    "return v"
)


def main() -> int:
    port, kind, name, rounds, hold_us = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    nolock = os.environ.get("CRDT_SABOTAGE") == "nolock"
    r = Resp(port)
    client = credisson.Client(f"redis://127.0.0.1:{port}")
    obj = client.lock(name) if kind == "lock" else client.semaphore(name)
    if r("BLPOP", f"{name}:go", 30) is None:
        print("worker.py: no start signal within 30 s", file=sys.stderr)
        return 5
    for _ in range(rounds):
        if not nolock:
            obj.acquire()
        r("EVAL", INSIDE, 2, f"{name}:inside", f"{name}:max")
        v = r.int("GET", f"{name}:counter")
        if hold_us:
            time.sleep(hold_us / 1e6)  # widen the race a broken exclusion would lose
        r("SET", f"{name}:counter", v + 1)
        r("DECR", f"{name}:inside")
        if not nolock:
            obj.release()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
