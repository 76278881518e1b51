"""The C library, loaded with ctypes: the prototypes of <credisson.h> that the package uses.

Nothing here decides anything: every function is the C one (see include/credisson.h, the
manual). ctypes releases the GIL for the length of every call into a CDLL, so a thread
blocked in an acquire lets the others run; callbacks from the library's threads take it
back for as long as they run.

Where the library is looked for, in order:
  1. $CREDISSON_LIBRARY, a path (the tests point it at the build's libcredisson.so); when it
     is set, nothing else is tried;
  2. the installed soname libcredisson.so.0, through the dynamic loader (LD_LIBRARY_PATH,
     the ld.so cache: run ldconfig after installing into a prefix);
  3. the usual install directories: /usr/local/lib, /usr/local/lib/<multiarch>,
     /usr/lib/<multiarch>, /usr/lib.
"""

from __future__ import annotations

import ctypes
import os
import sysconfig
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_int,
    c_int64,
    c_size_t,
    c_uint64,
    c_void_p,
)

SONAME = "libcredisson.so.0"
ENV_LIBRARY = "CREDISSON_LIBRARY"

# Room after the fields mirrored below: crd_options only ever grows at its end, and
# crd_options_init of a newer library fills the fields it has, which land here.
_OPTIONS_SPARE = 1024

crd_event_fn = CFUNCTYPE(None, c_void_p, c_void_p)
crd_trace_fn = CFUNCTYPE(None, c_void_p, c_void_p)
crd_log_fn = CFUNCTYPE(None, c_void_p, c_int, c_char_p)
crd_op_done_fn = CFUNCTYPE(None, c_void_p, c_void_p, c_int)


class crd_event(Structure):
    _fields_ = [
        ("kind", c_int),
        ("name", c_void_p),
        ("name_len", c_size_t),
        ("owner", c_uint64),
        ("validity_ms", c_int64),
        ("status", c_int),
        ("detail", c_char_p),
    ]


class crd_options(Structure):
    """struct crd_options, field by field, in the header's order."""

    _fields_ = [
        ("url", c_char_p),
        ("host", c_char_p),
        ("port", c_int),
        ("unix_path", c_char_p),
        ("username", c_char_p),
        ("password", c_char_p),
        ("db", c_int),
        ("connect_timeout_ms", c_int64),
        ("command_timeout_ms", c_int64),
        ("pool_size", c_int),
        ("watchdog_timeout_ms", c_int64),
        ("subscription_timeout_ms", c_int64),
        ("poll_interval_ms", c_int64),
        ("max_wait_slice_ms", c_int64),
        ("allow_unsafe_names", c_bool),
        ("release_on_close", c_bool),
        ("release_on_thread_exit", c_bool),
        ("on_event", crd_event_fn),
        ("event_user_data", c_void_p),
        ("on_trace", crd_trace_fn),
        ("trace_user_data", c_void_p),
        ("fair_wait_timeout_ms", c_int64),
        ("on_log", crd_log_fn),
        ("log_user_data", c_void_p),
        ("tls", c_bool),
        ("tls_ca_file", c_char_p),
        ("tls_ca_dir", c_char_p),
        ("tls_cert_file", c_char_p),
        ("tls_key_file", c_char_p),
        ("tls_server_name", c_char_p),
        ("tls_insecure_skip_verify", c_bool),
        ("events_on_loop", c_bool),
        ("deployment", c_int),
        ("seeds", c_char_p),
        ("sharded_pubsub", c_int),
        ("sentinel_addrs", c_char_p),
        ("sentinel_master", c_char_p),
        ("sentinel_username", c_char_p),
        ("sentinel_password", c_char_p),
        ("replica_sync", c_int),
        ("replica_sync_timeout_ms", c_int64),
        ("release_defer_ms", c_int64),
        ("local_fifo", c_bool),
        ("prompt_loss_detection", c_bool),
        ("sentinel_scan_interval_ms", c_int64),
        ("identity", c_bool),
        ("identity_cmdline", c_bool),
        ("identity_label", c_char_p),
        ("_spare", c_char * _OPTIONS_SPARE),
    ]


# struct crd_metrics: 64-bit counters and durations, in the header's order.
METRICS_FIELDS = (
    "acquisitions contended acquire_busy releases renewals renewal_failures locks_lost "
    "connects connection_failures subscribes holds_now wait_ms_p50 wait_ms_p99 wait_ms_max "
    "hold_ms_p50 hold_ms_p99 hold_ms_max watchdog_round_trips runs_skipped runs_degraded "
    "local_queued deferred late_holds_released outcomes_unknown permits_acquired "
    "permits_released permit_acquires_contended permit_acquire_busy latch_count_downs "
    "latch_awaits_woken latch_await_timeouts waiting_now eviction_warnings sync_refusals "
    "crossslot_rebatches"
).split()


class crd_metrics(Structure):
    _fields_ = [(f, c_int64 if f.startswith(("wait_ms", "hold_ms")) else c_uint64) for f in METRICS_FIELDS]


PERMIT_ID_SIZE = 33
PermitId = c_char * PERMIT_ID_SIZE

_h = c_void_p  # every handle is opaque
_st = c_int  # crd_status
_i64 = c_int64
_pi64 = POINTER(c_int64)
_pbool = POINTER(c_bool)
_pop = POINTER(c_void_p)

# name: (restype, argtypes)
_PROTOTYPES = {
    "crd_version": (c_char_p, []),
    "crd_strerror": (c_char_p, [_st]),
    "crd_options_init": (_st, [POINTER(crd_options)]),
    "crd_client_new": (_st, [POINTER(crd_options), _pop]),
    "crd_client_errmsg": (c_char_p, [_h]),
    "crd_client_id": (c_char_p, [_h]),
    "crd_client_metrics": (_st, [_h, POINTER(crd_metrics), c_size_t]),
    "crd_owner_current": (c_uint64, []),
    "crd_owner_new": (c_uint64, []),
    # locks
    "crd_lock_acquire": (_st, [_h, _i64, _i64]),
    "crd_lock_release": (_st, [_h]),
    "crd_lock_force_unlock": (_st, [_h, _pbool]),
    "crd_lock_is_locked": (_st, [_h, _pbool]),
    "crd_lock_is_held": (_st, [_h, _pbool]),
    "crd_lock_hold_count": (_st, [_h, _pi64]),
    "crd_lock_remaining_ttl": (_st, [_h, _pi64]),
    "crd_lock_validity_ms": (_st, [_h, _pi64]),
    "crd_lock_extend": (_st, [_h, _i64]),
    "crd_lock_acquire_token": (_st, [_h, _i64, _i64, _pi64]),
    "crd_lock_token": (_st, [_h, _pi64]),
    "crd_rwlock_read": (_h, [_h]),
    "crd_rwlock_write": (_h, [_h]),
    # event loop
    "crd_loop_fd": (c_int, [_h]),
    "crd_loop_timeout_ms": (_i64, [_h]),
    "crd_loop_dispatch": (c_int, [_h]),
    "crd_lock_acquire_async": (_st, [_h, c_uint64, _i64, _i64, crd_op_done_fn, c_void_p, _pop]),
    "crd_lock_release_async": (_st, [_h, c_uint64, crd_op_done_fn, c_void_p, _pop]),
    "crd_lock_extend_async": (_st, [_h, c_uint64, _i64, crd_op_done_fn, c_void_p, _pop]),
    "crd_op_cancel": (_st, [_h]),
    "crd_op_token": (_i64, [_h]),
    # semaphore
    "crd_semaphore_try_set_permits": (_st, [_h, _i64, _i64, _pbool]),
    "crd_semaphore_acquire": (_st, [_h, _i64, _i64]),
    "crd_semaphore_acquire_async": (_st, [_h, _i64, _i64, crd_op_done_fn, c_void_p, _pop]),
    "crd_semaphore_release": (_st, [_h, _i64]),
    "crd_semaphore_add_permits": (_st, [_h, _i64]),
    "crd_semaphore_available": (_st, [_h, _pi64]),
    "crd_semaphore_drain": (_st, [_h, _pi64]),
    # permit-expirable semaphore
    "crd_permit_semaphore_try_set_permits": (_st, [_h, _i64, _pbool]),
    "crd_permit_semaphore_set_permits": (_st, [_h, _i64]),
    "crd_permit_semaphore_add_permits": (_st, [_h, _i64]),
    "crd_permit_semaphore_acquire_n": (_st, [_h, _i64, _i64, _i64, c_void_p]),
    "crd_permit_semaphore_acquire_async": (_st, [_h, _i64, _i64, _i64, c_void_p, crd_op_done_fn, c_void_p, _pop]),
    "crd_permit_semaphore_release_n": (_st, [_h, POINTER(c_char_p), c_size_t]),
    "crd_permit_semaphore_update_lease": (_st, [_h, c_char_p, _i64]),
    "crd_permit_semaphore_lease_left": (_st, [_h, c_char_p, _pi64]),
    "crd_permit_semaphore_available": (_st, [_h, _pi64]),
    "crd_permit_semaphore_permits": (_st, [_h, _pi64]),
    "crd_permit_semaphore_acquired": (_st, [_h, _pi64]),
    # latch
    "crd_latch_try_set_count": (_st, [_h, _i64, _pbool]),
    "crd_latch_count_down": (_st, [_h]),
    "crd_latch_await": (_st, [_h, _i64]),
    "crd_latch_await_async": (_st, [_h, _i64, crd_op_done_fn, c_void_p, _pop]),
    "crd_latch_count": (_st, [_h, _pi64]),
    "crd_latch_delete": (_st, [_h, _pbool]),
}
# Each kind of object is made from a name (client, the name's bytes, their length, the new
# handle) and freed by its kind's crd_<kind>_free; the fair and fenced locks are locks.
for _kind in ("lock", "fair_lock", "fenced_lock", "rwlock", "semaphore", "permit_semaphore", "latch"):
    _PROTOTYPES[f"crd_{_kind}_new_n"] = (_st, [_h, c_char_p, c_size_t, _pop])
for _kind in ("client", "lock", "rwlock", "semaphore", "permit_semaphore", "latch"):
    _PROTOTYPES[f"crd_{_kind}_free"] = (None, [_h])
# A lock call's _owner form takes the owner (a uint64) after the lock.
for _call in ("acquire", "release", "is_held", "hold_count", "validity_ms", "extend", "acquire_token"):
    _restype, _argtypes = _PROTOTYPES[f"crd_lock_{_call}"]
    _PROTOTYPES[f"crd_lock_{_call}_owner"] = (_restype, [_h, c_uint64] + _argtypes[1:])


def _candidates() -> list[str]:
    forced = os.environ.get(ENV_LIBRARY)
    if forced:
        return [forced]
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = ["/usr/local/lib"]
    if arch:
        dirs += [f"/usr/local/lib/{arch}", f"/usr/lib/{arch}"]
    dirs.append("/usr/lib")
    return [SONAME] + [os.path.join(d, SONAME) for d in dirs]


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append(str(e))
    else:
        raise ImportError(
            "credisson: cannot load the C library libcredisson.so.0 (install credisson, e.g. "
            "`sudo cmake --install build && sudo ldconfig`, or set CREDISSON_LIBRARY to the "
            "library's path); tried: " + "; ".join(tried)
        )
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = _load()
path = lib._name
version: str = lib.crd_version().decode()
