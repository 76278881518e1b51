"""asyncio: 20 tasks share 2 locks and a semaphore of 3 permits, on one event loop that
keeps serving (the waits are the C library's, woken through a file descriptor on the
loop: no thread per wait, no polling). Each task is its own owner.

Usage: python3 asyncio_workers.py [redis://host:port]"""

import asyncio
import sys

import credisson


async def worker(client: credisson.AsyncClient, i: int, sem: credisson.AsyncSemaphore) -> str:
    async with sem:  # at most 3 tasks (of any process or language) past this point
        async with client.lock(f"example:shard:{i % 2}", wait=10):
            await asyncio.sleep(0.01)  # the work under the lock; the loop runs on
            return f"task {i} done on shard {i % 2}"


async def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379"
    async with await credisson.AsyncClient.connect(url) as client:
        sem = client.semaphore("example:workers")
        await sem.try_set_permits(3)  # only the first caller anywhere sets it
        for line in await asyncio.gather(*(worker(client, i, sem) for i in range(20))):
            print(line)


if __name__ == "__main__":
    asyncio.run(main())
