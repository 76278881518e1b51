"""What the Python binding costs: an uncontended acquire + release pair through the
package against the same pair in C, on one private redis-server, and the hand-off of a
lock between two Python processes. Not part of make test; bench/README.md has figures.

usage (from the repository, after make build):
    /usr/bin/python3 bindings/python/bench.py [--build build] [--pairs 5000] [--rounds 5] [--handoffs 500]

Pairs: the C program (crdt_worker PORT pairs, tests/bindings/worker.c) and the Python loops
run in turn, round after round, each on its own client and lock name: C, Python through
the package (lock.acquire(); lock.release()), Python through ctypes alone (the same two C
calls without the package's checks), and the package's `with lock:`. Each figure is the
median over the rounds of the mean microseconds per pair of a round; the binding's
overhead is the Python figure minus the C one.

Hand-off: two Python processes take the lock in turn (a ping-pong); the holder waits
until the other says it waits and a client is subscribed to the lock's channel, holds
2 ms more (the waiter is then asleep on the channel), notes the time and releases; the
waiter notes the time it got the lock, and the releaser asks again once it has. Each hand-off is the time from the release to
the other process's acquire (CLOCK_MONOTONIC, one host); median, p90, p99 and max.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tests"))  # resp.py, conftest's server

PY_PAIRS = r"""
import sys, time
import credisson
from credisson._native import lib
port, name, n, mode = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
client = credisson.Client(f"redis://127.0.0.1:{port}")
lock = client.lock(name)
h = lock._handle
def run(count):
    if mode == "package":
        for _ in range(count):
            lock.acquire()
            lock.release()
    elif mode == "with":
        for _ in range(count):
            with lock:
                pass
    else:  # ctypes: the two C calls alone
        acquire, release = lib.crd_lock_acquire, lib.crd_lock_release
        for _ in range(count):
            if acquire(h, -1, -1) != 0 or release(h) != 0:
                raise SystemExit("pair failed")
run(200)
t0, cpu0 = time.perf_counter(), time.process_time()
run(n)
print("us_per_pair %.2f cpu_us_per_pair %.2f" % ((time.perf_counter() - t0) * 1e6 / n, (time.process_time() - cpu0) * 1e6 / n))
client.close()
"""

PY_HANDOFF = r"""
import sys, time
import credisson
from resp import Resp, numsub
port, name, n, me = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
r = Resp(port)
client = credisson.Client(f"redis://127.0.0.1:{port}")
lock = client.lock(name)
channel = "redisson_lock__channel:{%s}" % name
r("RPUSH", name + ":ready", me)
r("BLPOP", name + ":go:" + me, 30)
other = "b" if me == "a" else "a"
for _ in range(n):
    r("SET", name + ":waiting:" + me, 1)
    lock.acquire()
    got = time.monotonic_ns()
    r("RPUSH", name + ":acq", "%d %s" % (got, me))
    r("DEL", name + ":waiting:" + me)
    # Until the other process waits for the lock (it said so and a client is subscribed
    # to the lock's channel), or has finished; then a 2 ms hold, so that its wait is on
    # the channel when the release comes.
    while not (r.int("EXISTS", name + ":waiting:" + other) and numsub(r, channel) >= 1):
        if r.int("LLEN", name + ":done"):
            break
        time.sleep(0.0001)
    time.sleep(0.002)
    r("RPUSH", name + ":rel", "%d %s" % (time.monotonic_ns(), me))
    held = r.int("LLEN", name + ":acq")
    lock.release()
    # Ask again only once the other process has the lock (a ping-pong, not a race).
    while r.int("LLEN", name + ":acq") == held and not r.int("LLEN", name + ":done"):
        time.sleep(0.0001)
r("RPUSH", name + ":done", me)
client.close()
"""


def median(values):
    return statistics.median(values)


def run_pairs(build: str, port: int, pairs: int, rounds: int) -> dict:
    worker = os.path.join(build, "tests", "bindings", "crdt_worker")
    results = {"C": [], "Python (package)": [], "Python (ctypes only)": [], "Python (with lock:)": []}
    cpu = {k: [] for k in results}
    env = dict(os.environ)
    for r in range(rounds):
        out = subprocess.run([worker, str(port), "pairs", f"bench:c:{r}", str(pairs)], capture_output=True, text=True, env=env, check=True)
        results["C"].append(float(out.stdout.split()[1]))
        cpu["C"].append(float(out.stdout.split()[3]))
        for label, mode in (("Python (package)", "package"), ("Python (ctypes only)", "ctypes"), ("Python (with lock:)", "with")):
            out = subprocess.run(
                [sys.executable, "-c", PY_PAIRS, str(port), f"bench:py:{mode}:{r}", str(pairs), mode],
                capture_output=True, text=True, env=env, check=True,
            )
            results[label].append(float(out.stdout.split()[1]))
            cpu[label].append(float(out.stdout.split()[3]))
    return results, cpu


def run_handoff(port: int, handoffs: int) -> list:
    from resp import Resp

    name = f"bench:handoff:{os.getpid()}"
    r = Resp(port)
    per = handoffs // 2 + 1
    procs = [
        subprocess.Popen([sys.executable, "-c", PY_HANDOFF, str(port), name, str(per), me], cwd=os.path.join(HERE, "tests"))
        for me in ("a", "b")
    ]
    while r.int("LLEN", name + ":ready") < 2:
        time.sleep(0.01)  # both processes connected
    r("RPUSH", name + ":go:a", 1)
    while r.int("LLEN", name + ":acq") < 1:
        time.sleep(0.001)  # a holds it first
    r("RPUSH", name + ":go:b", 1)
    for p in procs:
        p.wait(300)
    parse = lambda key: sorted((int(t), who) for t, who in (x.split() for x in r("LRANGE", key, 0, -1)))
    acq, rel = parse(name + ":acq"), parse(name + ":rel")
    # One holder at a time: the k-th release is followed by the (k+1)-th acquire; it is a
    # hand-off when that acquire is the other process's (not once one has finished).
    return [(acq[k + 1][0] - rel[k][0]) / 1e3 for k in range(min(len(rel), len(acq) - 1)) if acq[k + 1][1] != rel[k][1]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--pairs", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--handoffs", type=int, default=500)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ.setdefault("CREDISSON_LIBRARY", os.path.join(build, "libcredisson.so"))
    os.environ["PYTHONPATH"] = os.pathsep.join([HERE, os.path.join(HERE, "tests"), os.environ.get("PYTHONPATH", "")])
    sys.path.insert(0, HERE)
    from conftest import Server

    import credisson

    server = Server()
    try:
        print(f"credisson {credisson.library_version} ({os.environ['CREDISSON_LIBRARY']}), Python {sys.version.split()[0]}, "
              f"redis-server on 127.0.0.1:{server.port}; {args.rounds} rounds of {args.pairs} pairs")
        res, cpu = run_pairs(build, server.port, args.pairs, args.rounds)
        c, c_cpu = median(res["C"]), median(cpu["C"])
        for label in res:
            m, m_cpu = median(res[label]), median(cpu[label])
            print(f"  uncontended pair, {label:22s} wall median {m:7.2f} us (rounds {' '.join('%.1f' % v for v in res[label])}), "
                  f"CPU median {m_cpu:6.2f} us (rounds {' '.join('%.1f' % v for v in cpu[label])})")
            if label != "C":
                print(f"      binding overhead: wall {m - c:+.2f} us per pair, CPU {m_cpu - c_cpu:+.2f} us per pair "
                      f"({(m_cpu - c_cpu) / 2:+.2f} us per call)")
        hand = sorted(run_handoff(server.port, args.handoffs))
        q = lambda p: hand[min(len(hand) - 1, int(p * len(hand)))]
        print(f"  hand-off between two Python processes, {len(hand)} hand-offs: median {median(hand):.0f} us, "
              f"p90 {q(0.9):.0f} us, p99 {q(0.99):.0f} us, max {hand[-1]:.0f} us")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
