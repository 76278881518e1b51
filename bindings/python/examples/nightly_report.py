"""One report at a time across a fleet, from Python threads. The same lock as

    credisson run nightly-report -- ./report.sh        (the CLI, or C's crd_lock_run)
    redisson.getLock("nightly-report").lock()          (Java)

Usage: python3 nightly_report.py [redis://host:port]"""

import sys
import threading
import time

import credisson

lost = threading.Event()


def on_event(event: credisson.LockEvent) -> None:
    # Runs on the library's watchdog thread: record it, never call the client from here.
    if event.kind == credisson.EventKind.LOCK_LOST:
        lost.set()


def main() -> int:
    url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379"
    with credisson.Client(url, prompt_loss_detection=True, on_event=on_event) as client:
        try:
            with client.lock("nightly-report", wait=10) as lock:
                for step in range(3):
                    if lost.is_set() or lock.lost:
                        break  # someone took it away: stop before the next side effect
                    print(f"step {step}, the lock is good for another {lock.validity():.1f} s")
                    time.sleep(0.1)  # the work
        except credisson.TimeoutError:
            print("another host is writing the report")
        except credisson.LockLostError as e:
            print(f"the lock was lost while the report ran: {e}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
