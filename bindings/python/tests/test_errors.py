"""Bad input raises the exception of its C status with the library's own words."""

from __future__ import annotations

import pydoc

import pytest

import credisson
from conftest import free_port


def test_a_bad_url_raises_invalid_argument_with_the_librarys_message():
    with pytest.raises(credisson.InvalidArgumentError) as e:
        credisson.Client("redis://127.0.0.1:notaport")
    assert e.value.status == credisson.Status.INVALID_ARGUMENT
    assert "port" in e.value.detail  # the library's words, not ours
    assert isinstance(e.value, ValueError) and isinstance(e.value, credisson.Error)
    assert e.value.detail in str(e.value) and e.value.text in str(e.value)


def test_nobody_listening_raises_connection_error():
    with pytest.raises(credisson.ConnectionError) as e:
        credisson.Client(f"redis://127.0.0.1:{free_port()}", connect_timeout=2)
    assert e.value.detail


def test_a_wrongtype_key_raises_server_error_with_the_servers_words(client, key, redis):
    name = key("string")
    redis("SET", name, "not a lock")
    with pytest.raises(credisson.ServerError) as e:
        client.lock(name).acquire()
    assert "WRONGTYPE" in e.value.detail
    with pytest.raises(credisson.ServerError):
        with client.lock(name):
            pass
    with pytest.raises(credisson.ServerError):
        client.semaphore(name).acquire(wait=0)


def test_a_negative_wait_raises_invalid_argument_from_the_library(client, key):
    lock = client.lock(key("l"))
    for wait in (-1, -0.5, -0.0001):
        with pytest.raises(credisson.InvalidArgumentError) as e:
            lock.acquire(wait=wait)
        assert "wait_ms" in e.value.detail, e.value.detail
    with pytest.raises(credisson.InvalidArgumentError):
        lock.acquire(lease=-2)
    with pytest.raises(TypeError):
        lock.acquire(wait="10")
    assert not lock.locked()


def test_other_misuse(client, key, url):
    with pytest.raises(credisson.InvalidArgumentError):
        client.lock("")
    with pytest.raises(credisson.NotOwnerError):
        client.lock(key("free")).release()
    with pytest.raises(TypeError) as e:
        credisson.Client(url, no_such_option=1)
    assert "watchdog_timeout" in str(e.value)
    with pytest.raises(credisson.InvalidArgumentError):
        credisson.Client(url, deployment="nowhere")
    c = credisson.Client(url)
    lock = c.lock(key("l"))
    c.close()
    with pytest.raises(credisson.ClosedError):
        lock.acquire()
    c.close()  # twice is fine


def test_the_hierarchy_covers_every_status():
    # every status the C library has a text for is a Status member (a status added to
    # credisson.h and not here fails)
    unknown = credisson._native.lib.crd_strerror(1000)
    known = [s for s in range(64) if credisson._native.lib.crd_strerror(s) != unknown]
    assert known == [int(s) for s in credisson.Status]
    for status in credisson.Status:
        if status == credisson.Status.OK:
            continue
        err = credisson._errors.error_for(status, "detail")
        assert isinstance(err, credisson.Error) and err.status == status
        assert type(err) is not credisson.Error, status
    assert issubclass(credisson.TimeoutError, credisson.NotAcquiredError)
    assert issubclass(credisson.BusyError, credisson.NotAcquiredError)
    assert issubclass(credisson.TimeoutError, TimeoutError)


def test_help_reads_well():
    text = pydoc.render_doc(credisson, renderer=pydoc.plaintext)
    for word in ("Redisson", "AsyncClient", "with client.lock", "seconds", "LockLostError"):
        assert word in text
    assert "Reentrant" in pydoc.render_doc(credisson.Lock, renderer=pydoc.plaintext) or "reentrant" in pydoc.render_doc(
        credisson.Lock, renderer=pydoc.plaintext
    )
