"""Fixtures of the Python suite: one private redis-server for the session on a free
loopback port ($CRD_REDIS_SERVER, else redis-server), clients, unique keys, and the
programs of the C side: the credisson CLI ($CRD_CLI_PATH) and crdt_worker ($CRDT_WORKER),
which ctest's "python" test points at the build (tests/bindings/CMakeLists.txt), with
CREDISSON_LIBRARY at the build's libcredisson.so.

Nothing here sleeps to synchronise: waits are on a condition with a deadline
(await_true), polling Redis state the way the C harness's crdt_await_* do."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, Iterator, List, Optional, Sequence

import pytest

import credisson
from resp import Resp

HERE = os.path.dirname(os.path.abspath(__file__))
SABOTAGE = os.environ.get("CRDT_SABOTAGE", "")

# The worker processes import the same package as the suite, from any directory.
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(credisson.__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
if os.environ.get("CREDISSON_LIBRARY"):
    os.environ["CREDISSON_LIBRARY"] = os.path.abspath(os.environ["CREDISSON_LIBRARY"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def await_true(pred: Callable[[], bool], timeout: float = 10.0, every: float = 0.002) -> bool:
    """Whether pred() became true before the deadline (checked every `every` seconds)."""
    end = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(every)


class Server:
    def __init__(self) -> None:
        program = os.environ.get("CRD_REDIS_SERVER", "redis-server")
        self.dir = tempfile.mkdtemp(prefix="credisson-py.")
        for _ in range(10):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [program, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", self.dir],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if await_true(self._up, 5.0, 0.01):
                return
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError(f"cannot start {program}")

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            return True  # exited (port taken): the caller sees it is not running
        try:
            with Resp(self.port, timeout=0.5) as r:
                return r("PING") == b"PONG"
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    if s.proc.poll() is not None:
        pytest.fail("redis-server did not start")
    yield s
    s.stop()


@pytest.fixture
def port(server: Server) -> int:
    return server.port


@pytest.fixture
def url(port: int) -> str:
    return f"redis://127.0.0.1:{port}"


@pytest.fixture
def client(url: str) -> Iterator[credisson.Client]:
    c = credisson.Client(url)
    yield c
    c.close()


@pytest.fixture
def redis(port: int) -> Iterator[Resp]:
    r = Resp(port)
    yield r
    r.close()


_seq = itertools.count(1)


@pytest.fixture
def key(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """key("x"): a name no other test uses."""
    base = f"py:{request.node.name}:{os.getpid()}"
    return lambda suffix: f"{base}.{next(_seq)}:{suffix}"


def _program(env: str) -> str:
    path = os.environ.get(env)
    if not path or not os.path.exists(path):
        pytest.skip(f"{env} does not name the program (ctest sets it)")
    return path


@pytest.fixture
def cli(url: str) -> Callable[..., subprocess.CompletedProcess]:
    """cli("unlock", "--force", name): runs the credisson CLI on the test server."""
    path = _program("CRD_CLI_PATH")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([path, "--url", url, *args], capture_output=True, text=True, timeout=30)

    run.path = path  # type: ignore[attr-defined]
    return run


@pytest.fixture
def c_worker() -> str:
    return _program("CRDT_WORKER")


def python_worker(port: int, kind: str, name: str, rounds: int, hold_us: int) -> List[str]:
    return [sys.executable, os.path.join(HERE, "worker.py"), str(port), kind, name, str(rounds), str(hold_us)]


def kill_all(procs: Sequence[subprocess.Popen]) -> None:
    """Kills what is still running (a test that failed before its wait_all)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_all(procs: Sequence[subprocess.Popen], timeout: float) -> List[Optional[int]]:
    """Exit codes by one deadline; stragglers are killed (None)."""
    end = time.monotonic() + timeout
    codes: List[Optional[int]] = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.0, end - time.monotonic())))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append(None)
    return codes
