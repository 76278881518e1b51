"""The package's own contracts: its ctypes mirror of the C structs matches the header,
and the library it loaded is the one asked for."""

from __future__ import annotations

import ctypes
import os
import subprocess

import credisson
from credisson import _native


def test_the_ctypes_structs_match_the_header(c_worker):
    out = subprocess.run([c_worker, "layout"], capture_output=True, text=True, check=True).stdout
    mirrors = {"crd_options": _native.crd_options, "crd_event": _native.crd_event, "crd_metrics": _native.crd_metrics}
    checked = 0
    for line in out.splitlines():
        struct, field, offset, size = line.split()
        mirror = mirrors[struct]
        if field == "sizeof":
            if struct == "crd_options":  # the mirror keeps spare room after the known fields
                assert _native.crd_options._spare.offset == int(offset)
            else:
                assert ctypes.sizeof(mirror) == int(offset), struct
            continue
        f = getattr(mirror, field)
        assert (f.offset, f.size) == (int(offset), int(size)), f"{struct}.{field}"
        checked += 1
    assert checked > 50


def test_the_library_is_the_one_asked_for():
    forced = os.environ.get("CREDISSON_LIBRARY")
    if forced:
        assert credisson.library_path == forced
    assert credisson.library_version.count(".") == 2


def _run_example(cmd, url):
    out = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_the_python_examples_run(url):
    import sys

    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    out = _run_example([sys.executable, os.path.join(here, "nightly_report.py")], url)
    assert "step 2" in out
    out = _run_example([sys.executable, os.path.join(here, "asyncio_workers.py")], url)
    assert out.count("done on shard") == 20


def test_the_cpp_example_runs(url):
    path = os.environ.get("CRDT_CPP_EXAMPLE")
    if not path:
        import pytest

        pytest.skip("CRDT_CPP_EXAMPLE does not name examples/cpp's program (ctest sets it)")
    out = _run_example([path], url)
    assert "step 2" in out and "released: ok" in out
