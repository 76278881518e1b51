/*
 * credisson.h -- Redisson-compatible distributed locks for C.
 *
 * This header is the manual. Every function says what it returns, which errors it
 * reports, who owns what, and whether it may be called from several threads.
 *
 * WHAT IT IS
 *   A client library that stores locks in Redis exactly as Java's Redisson (3.24+)
 *   does, so that C threads and Java threads can lock the same names and respect each
 *   other. A lock named N is a Redis hash N whose fields are owners "<client-uuid>:<id>"
 *   with a hold count as value; every state change is one Lua script; an unlock
 *   publishes "0" on "redisson_lock__channel:{N}" and blocked waiters are woken by that
 *   message through one shared subscriber connection per client.
 *
 * GUARANTEES, AND WHAT IS NOT GUARANTEED
 *   - Mutual exclusion holds while the holder is inside its lease and Redis keeps the
 *     lock key: this is a single-primary lease lock. A holder paused (GC, SIGSTOP, swap)
 *     for longer than its lease, or a failover to a replica that had not yet received
 *     the acquire, can let a second owner in. crd_lock_validity_ms() tells how long the
 *     caller may still trust its hold, measured from when the acquire or the last
 *     renewal was *sent*.
 *   - A lock taken without an explicit lease (lease_ms = CRD_LEASE_WATCHDOG) is kept
 *     alive by the client's watchdog thread; if renewal fails for longer than the
 *     lease, the lock is reported lost (see crd_event_fn), never silently re-created.
 *   - No operation busy-waits: waiters sleep on a condition variable and are woken by
 *     the unlock message, or at the latest when the holder's TTL runs out.
 *
 * THREADS (three sentences, as curl says them)
 *   A crd_client may be shared by any number of threads. A crd_lock handle may be
 *   shared by any number of threads; each thread holds it under its own owner id, so
 *   reentrancy is per thread. Callbacks run on the client's internal threads, named
 *   next to each callback type, and must not call back into the same client. Those
 *   threads carry their names (as top -H, gdb and perf show them): crd-io (the
 *   connections), crd-pubsub (the subscriber), crd-watchdog (renewals, events, the
 *   identity record), crd-cluster, crd-sentinel (topology), crd-offload and
 *   crd-offload-go (the event-loop API's helpers), crd-interrupt.
 *
 * OWNERSHIP
 *   Inputs are copied unless documented otherwise. Returned strings belong to the
 *   library and stay valid until the next call into the library by the same thread (or
 *   until the handle is freed, where noted). Every _free function accepts NULL.
 *
 * ERRORS
 *   Every fallible call returns a crd_status. CRD_OK is 0. Outcomes (CRD_BUSY,
 *   CRD_TIMEOUT, CRD_NOT_OWNER, CRD_LOCK_LOST) are kept apart from failures (CRD_IO,
 *   CRD_SERVER, ...). crd_strerror() gives fixed text; crd_client_errmsg() gives the
 *   detail (the server's or the connection's words) of the calling thread's last
 *   failure on that client. The library never prints, never exits, never aborts on
 *   bad input.
 *
 * ABI POLICY
 *   The status enum and crd_options are append-only. Handles are opaque. A function
 *   whose signature must change gets a _v2 sibling; the old one stays.
 */
#ifndef CREDISSON_H
#define CREDISSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------- */
/* Export and version                                                                  */
/* ---------------------------------------------------------------------------------- */

#if defined(CREDISSON_STATIC)
#define CRD_API
#elif defined(__GNUC__)
#define CRD_API __attribute__((visibility("default")))
#else
#define CRD_API
#endif

/* One version everywhere (CMake, the .so, pkg-config, the man page, the Python package read
 * or are checked against these lines: ctest docs). Every user-visible change moves it and
 * gains a line in CHANGES.md; while the major is 0 the minor moves (an added call, option,
 * status or metric, a changed default). "Added in 0.N" notes below name the minor that
 * brought a thing. */
#define CRD_VERSION_MAJOR 0
#define CRD_VERSION_MINOR 8
#define CRD_VERSION_PATCH 0
#define CRD_VERSION_STRING "0.8.0"

/* The library's version string, e.g. "0.8.0". Static storage; thread-safe. */
CRD_API const char *crd_version(void);

/* ---------------------------------------------------------------------------------- */
/* Status codes (append-only)                                                          */
/* ---------------------------------------------------------------------------------- */

typedef enum crd_status {
    CRD_OK = 0,
    /* Outcomes: the call worked, the answer is "no". */
    CRD_BUSY = 1,      /* wait_ms was 0 and another owner holds the lock */
    CRD_TIMEOUT = 2,   /* the wait ran out before the lock could be taken */
    CRD_NOT_OWNER = 3, /* release/extend by an owner that does not hold the lock */
    CRD_LOCK_LOST = 4, /* the hold ended without a release (expired, force-unlocked) */
    /* Failures. */
    CRD_INVALID_ARGUMENT = 5, /* NULL handle, bad name, time out of range, bad URL */
    CRD_IO = 6,               /* connect, send, receive or timeout on the connection */
    CRD_PROTOCOL = 7,         /* Redis replied with something no script returns */
    CRD_SERVER = 8,           /* Redis replied with an error (WRONGTYPE, OOM, ...) */
    CRD_NO_MEMORY = 9,        /* an allocation failed; nothing was changed locally */
    CRD_CLOSED = 10,          /* the client is shutting down or failed to start */
    CRD_AUTH = 11,            /* AUTH or SELECT was refused; TLS: the server's certificate
                                 was not trusted, or the server refused ours */
    CRD_DEADLOCK = 12,        /* the request can never succeed for this owner */
    CRD_FORKED = 13,          /* a handle created before fork() was used in the child */
    /* Outcomes of crd_lock_run_policy() when Redis was unavailable (added in 0.2): */
    CRD_SKIPPED = 14,         /* the work did not run (policy CRD_UNAVAILABLE_SKIP) */
    CRD_DEGRADED = 15,        /* the work ran WITHOUT the lock (CRD_UNAVAILABLE_DEGRADE) */
    CRD_CANCELLED = 16,       /* an event-loop acquire was cancelled (crd_op_cancel) */
    /* Replica sync (added with Sentinel mode): */
    CRD_NOT_SYNCED = 17,      /* the primary ran the script but no replica acknowledged it
                                 within replica_sync_timeout_ms (see replica_sync) */
    /* Semaphores and latches (added with them): */
    CRD_OUTCOME_UNKNOWN = 18, /* a command that must not run twice (a release, an add, a
                                 count-down, an anonymous acquire) was sent but its reply
                                 was lost: it may or may not have run, and it was not
                                 resent. Read the state (available permits, the count)
                                 before deciding what to do */
    /* Deployments that refuse what was asked for (added in 0.7): */
    CRD_SYNC_UNAVAILABLE = 19, /* replica sync was asked for (replica_sync), the primary has
                                 replicas, and the server refuses WAIT (renamed away, denied
                                 by an ACL, unknown): an acquire could never be acknowledged
                                 by a replica, so it was NOT sent and nothing is held. Not
                                 CRD_NOT_SYNCED: that one says a script ran and no replica
                                 answered in time, and retrying may work; this one is the
                                 deployment's configuration, and only a change of it or of
                                 replica_sync (OFF, or IF_ALLOWED) makes the acquire work */
    /* Interruptible waits and Redisson 4.7's lock family (added in 0.7): */
    CRD_INTERRUPTED = 20       /* a blocking wait (an acquire of any lock kind, a semaphore
                                 or rate limiter acquire, a latch await) was ended by the
                                 interrupt token its thread bound (crd_interrupt_raise):
                                 nothing is held, a fair waiter left its queue */
} crd_status;

/* Fixed English text for a status ("lock not held by this owner", ...). Never NULL;
 * unknown values give "unknown status". Static storage; thread-safe. */
CRD_API const char *crd_strerror(crd_status status);

/* ---------------------------------------------------------------------------------- */
/* Limits and special values                                                           */
/* ---------------------------------------------------------------------------------- */

/* Longest accepted lock name, in bytes. Longer names give CRD_INVALID_ARGUMENT. */
#define CRD_NAME_MAX 65536
/* Largest accepted duration (wait, lease, timeouts): about 10 years, in ms. */
#define CRD_DURATION_MAX_MS INT64_C(315360000000)
/* wait_ms: wait as long as it takes (still woken by CRD_CLOSED on shutdown). */
#define CRD_WAIT_FOREVER INT64_C(-1)
/* lease_ms: hold until released; the watchdog renews the lease (watchdog_timeout_ms). */
#define CRD_LEASE_WATCHDOG INT64_C(-1)

/* ---------------------------------------------------------------------------------- */
/* Client options                                                                      */
/* ---------------------------------------------------------------------------------- */

typedef struct crd_client crd_client;
typedef struct crd_lock crd_lock;
typedef struct crd_semaphore crd_semaphore;
typedef struct crd_permit_semaphore crd_permit_semaphore;
typedef struct crd_latch crd_latch;
typedef struct crd_rate_limiter crd_rate_limiter;
typedef struct crd_interrupt crd_interrupt;

/* What a crd_event_fn is told about. */
typedef enum crd_event_kind {
    CRD_EVENT_RENEWAL_FAILING = 1, /* a renewal failed; the lock is still inside its lease */
    CRD_EVENT_RENEWAL_RECOVERED = 2, /* a renewal succeeded after failing */
    CRD_EVENT_LOCK_LOST = 3        /* the hold is gone (renewal got 0, or the lease ran out
                                      while renewals failed); it will not be renewed again */
} crd_event_kind;

/* One watchdog event. All pointers are valid only during the callback. */
typedef struct crd_event {
    crd_event_kind kind;
    const char *name;      /* lock name (not NUL-terminated for binary names: use name_len) */
    size_t name_len;
    uint64_t owner;        /* owner id whose hold this is */
    int64_t validity_ms;   /* how long the hold may still be trusted (0 when lost) */
    crd_status status;     /* why: CRD_IO, CRD_SERVER, CRD_LOCK_LOST, ... */
    const char *detail;    /* the server's or the connection's words, or "" */
} crd_event;

/* Watchdog callback. Runs on the client's watchdog thread. It must return quickly and
 * must not call any function of the same client (that would deadlock or delay every
 * renewal); record the event and act on it from your own thread. */
typedef void (*crd_event_fn)(void *user_data, const crd_event *event);

/* One command sent by the client, for tracing and tests. Pointers are valid only during
 * the callback. */
typedef struct crd_trace {
    int argc;
    const char *const *argv;   /* argv[i] has argvlen[i] bytes (not NUL-terminated) */
    const size_t *argvlen;
    const char *reply;         /* the reply rendered as text: "nil", "(integer) 5",
                                  "\"text\"", "(error) ...", "[a, b]", or "(io) ..." */
    bool subscriber;           /* sent on the subscriber connection */
} crd_trace;

/* Trace callback: called after each command's reply (or failure) on the thread that
 * sent it (a caller's thread, the watchdog thread or the subscriber thread). It must
 * not call into the same client. */
typedef void (*crd_trace_fn)(void *user_data, const crd_trace *trace);

/* Log levels of crd_log_fn. */
typedef enum crd_log_level {
    CRD_LOG_DEBUG = 0,
    CRD_LOG_INFO = 1, /* a connection was (re)opened, a subscription came back */
    CRD_LOG_WARN = 2, /* a connection failed, a renewal failed */
    CRD_LOG_ERROR = 3 /* a lock was lost */
} crd_log_level;

/* Log callback: the library never prints; it tells this function instead. Called on the
 * thread where the event happened (a caller's thread, the subscriber thread or the
 * watchdog thread) with a one-line message valid only during the call. It must return
 * quickly and must not call into the same client. */
typedef void (*crd_log_fn)(void *user_data, crd_log_level level, const char *message);

/* Where the servers are (crd_options.deployment; added in 0.3). */
typedef enum crd_deployment {
    CRD_DEPLOYMENT_STANDALONE = 0, /* one server: host and port, unix_path, or a redis:// url */
    CRD_DEPLOYMENT_CLUSTER = 1     /* a Redis Cluster found from seed nodes */
} crd_deployment;

/* Classic or sharded pub/sub for unlock messages (crd_options.sharded_pubsub; added in
 * 0.3), Redisson's shardedSubscriptionMode. Classic (PUBLISH/SUBSCRIBE) and sharded
 * (SPUBLISH/SSUBSCRIBE) channels never hear each other: every client locking the same
 * names, in any language, must use the same mode. */
typedef enum crd_sharded_mode {
    CRD_SHARDED_AUTO = 0, /* cluster: sharded when the servers support it (Redis 7.0+; the
                             probe is PUBSUB SHARDNUMSUB, as Java >= 3.22 does); standalone:
                             classic. Java's default. */
    CRD_SHARDED_ON = 1,   /* always SPUBLISH / SSUBSCRIBE (Redis 7.0+) */
    CRD_SHARDED_OFF = 2   /* always PUBLISH / SUBSCRIBE (fleets with Java < 3.22 or mode OFF) */
} crd_sharded_mode;

/* Client options. Fill with crd_options_init() and then change fields; new fields are
 * only ever appended. Strings are borrowed: crd_client_new() copies what it needs. */
typedef struct crd_options {
    /* Where to connect. If url is non-NULL it is parsed and overrides host, port,
     * unix_path, username, password and db. Forms:
     *   redis://[[user]:password@]host[:port][/db]
     *   rediss://[[user]:password@]host[:port][/db]     (TLS: see tls below)
     *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]   (seed nodes;
     *       sets deployment to CRD_DEPLOYMENT_CLUSTER; a cluster has only db 0)
     *   rediss-cluster://...   (the same over TLS to every node: give the nodes' TLS
     *       ports; with tls-cluster the nodes announce those in CLUSTER SLOTS and MOVED)
     *   unix://[[user]:password@]/path/to.sock[?db=N]
     * Percent-escapes (%40 for '@') are decoded in user, password and the socket path.
     * In the unix form the credentials end at the first "@/": write an '@' of the
     * password as %40. */
    const char *url;
    const char *host;      /* default "127.0.0.1" */
    int port;              /* default 6379 */
    const char *unix_path; /* default NULL; if set, host and port are ignored */
    const char *username;  /* ACL user, default NULL (AUTH <password> only) */
    const char *password;  /* default NULL (no AUTH) */
    int db;                /* default 0 (no SELECT) */

    int64_t connect_timeout_ms; /* default 2000 */
    /* A connection that owes replies and has read nothing for command_timeout_ms is
     * given up (its callers get CRD_IO; with replica sync, the timeouts of the WAITs it
     * carries are added: a WAIT that blocks is not a dead server); each call is bounded
     * by its own deadline too: an acquire's wait_ms (a try with wait_ms 0, and each
     * attempt of an unbounded wait, get one command_timeout_ms, plus
     * replica_sync_timeout_ms with replica sync), every other call command_timeout_ms.
     * A replica-sync WAIT is shortened to end by the call's deadline. Default 3000. */
    int64_t command_timeout_ms;
    /* Command connections per server (per cluster node), shared by all threads and the
     * event loop and pipelined by the client's I/O thread. Default 2 (before 0.4: 8
     * connections that each carried one command at a time). Blocking calls' commands
     * are packed onto the busiest connection (up to 64 in flight, none behind a
     * replica-sync WAIT), the event loop's spread over the least busy; another
     * connection is opened when needed. A blocking call that finds nothing queued or in
     * flight and a connection idle runs its round trip on it itself (no thread hop);
     * that connection is then its own until the reply or the call's deadline. */
    int pool_size;

    /* Lease of locks taken with CRD_LEASE_WATCHDOG; renewed every third of it.
     * Default 30000, the same meaning as Redisson's lockWatchdogTimeout. */
    int64_t watchdog_timeout_ms;
    /* How long a waiter waits for its SUBSCRIBE to be confirmed before falling back to
     * bounded re-checks every poll_interval_ms. Default 7500 (Redisson's). */
    int64_t subscription_timeout_ms;
    /* Re-check interval while a lock hash has no TTL (foreign or corrupt state) or the
     * subscriber connection is down. Default 1000. */
    int64_t poll_interval_ms;
    /* Optional ceiling on one wait slice (0 = none, the default). Bounds how late a
     * waiter notices a release that published nothing (a Java spin lock). */
    int64_t max_wait_slice_ms;
    /* Accept names whose braces break Redis Cluster slot co-location (PROTOCOL.md 2.3
     * class C, e.g. "a}b", "{", "{}x"). Default false: such names are rejected. Ignored
     * in cluster mode, where such names are always rejected (CRD_INVALID_ARGUMENT from
     * the lock's _new function): the cluster would refuse their scripts (CROSSSLOT). */
    bool allow_unsafe_names;
    /* On crd_client_free(): release every hold still held (owner-checked unlocks) instead
     * of letting them expire. Default false. */
    bool release_on_close;
    /* On thread exit: release the exiting thread's holds (owner-checked) instead of only
     * stopping their renewal. Default false. */
    bool release_on_thread_exit;

    crd_event_fn on_event; /* watchdog events, default NULL */
    void *event_user_data;
    crd_trace_fn on_trace; /* every command, default NULL (costs nothing when NULL) */
    void *trace_user_data;

    /* Fair locks: how long a waiter at the head of the queue may keep the others waiting
     * before it is presumed dead and skipped (Redisson's fairLockWaitTimeout, default
     * 300000; it MUST match the Java fleet's setting). A fair acquire with wait_ms > 0
     * announces wait_ms instead, as Redisson's tryLock(wait) does. */
    int64_t fair_wait_timeout_ms;

    crd_log_fn on_log; /* reconnects, renewal failures, lost locks; default NULL */
    void *log_user_data;

    /* ---- TLS (added in 0.2) ---------------------------------------------------------
     * Every connection of the client (commands, subscriber, watchdog) uses TLS when url
     * is "rediss://..." or, without a url, when tls is true. OpenSSL does the TLS;
     * hiredis still parses the replies. crd_client_new() reads the files below once; a
     * file that cannot be read or a key that does not match its certificate gives
     * CRD_INVALID_ARGUMENT with the file's name in crd_client_errmsg() (never its
     * contents). The TCP connect and the handshake share connect_timeout_ms; reads and
     * writes have command_timeout_ms, as without TLS. TLS over a unix socket is refused
     * (CRD_INVALID_ARGUMENT): Redis serves its socket in plaintext.
     * A connection whose server certificate is not trusted, has expired or does not
     * match the name fails with CRD_AUTH and words such as "certificate verify failed:
     * certificate has expired"; so does one whose server refuses our certificate or
     * wants one we did not give ("certificate required"). A server that does not speak
     * TLS on the port gives CRD_IO ("the server does not speak TLS on this port"), and a
     * plaintext client on a TLS-only port gets CRD_IO whose message suggests rediss://. */
    bool tls;                    /* default false; rediss:// sets it */
    const char *tls_ca_file;     /* PEM file of trusted CAs; default NULL */
    const char *tls_ca_dir;      /* directory of hashed CA files (c_rehash); default NULL.
                                    Neither set: the system's CA store is used. */
    const char *tls_cert_file;   /* client certificate (PEM, may hold the chain) for
                                    mutual TLS; default NULL; needs tls_key_file */
    const char *tls_key_file;    /* its private key (PEM, unencrypted); default NULL */
    const char *tls_server_name; /* sent as SNI and matched against the server's
                                    certificate (DNS or IP subjectAltName); default NULL:
                                    the host of the URL or of host */
    /* FOR TESTS ONLY: accept any server certificate (no chain, expiry or name check).
     * Anyone on the path can then read and change the traffic, lock tokens included.
     * Default false. */
    bool tls_insecure_skip_verify;
    /* Deliver on_event callbacks on the event loop's thread, from crd_loop_dispatch()
     * (the event-loop API), instead of on the watchdog thread. A loop program that
     * reacts to CRD_EVENT_LOCK_LOST then needs no locking of its own. Default false.
     * (on_log lines stay on the thread that logs them.) */
    bool events_on_loop;
    /* ---- Added in 0.3: Redis Cluster ------------------------------------------------ */
    /* CRD_DEPLOYMENT_STANDALONE (default) or CRD_DEPLOYMENT_CLUSTER. In cluster mode the
     * client reads the slot map (CLUSTER SLOTS) from the first seed that answers, keeps
     * one connection pool of pool_size per primary, sends each lock's commands to the
     * primary serving its name's slot, follows MOVED (updating the map) and ASK (once,
     * with ASKING), retries TRYAGAIN, CLUSTERDOWN, LOADING and READONLY within
     * command_timeout_ms, and re-reads the map after a redirect, a failed connection,
     * and every 5 s. Names whose braces would split a lock's keys over slots (see
     * allow_unsafe_names) are always refused in this mode. A redis-cluster:// url sets
     * this field; a redis:// url or host/port with this field set is the one seed. */
    crd_deployment deployment;
    /* Cluster seed nodes, "host[:port][,host[:port]...]" (port 6379 by default,
     * "[v6-address]:port" allowed); default NULL: host and port are the one seed. One
     * reachable seed is enough. username and password apply to every node. Ignored when
     * url is set (the url names the seeds). */
    const char *seeds;
    /* Classic or sharded pub/sub; default CRD_SHARDED_AUTO (see crd_sharded_mode). In
     * sharded mode unlock scripts are given SPUBLISH, and the subscriber thread keeps one
     * connection per primary that has channels with waiters, SSUBSCRIBEs each channel at
     * the primary of its slot, and after a server-pushed SUNSUBSCRIBE (the slot moved) or
     * a lost connection resubscribes at the new owner and wakes every waiter of those
     * channels to re-check. */
    crd_sharded_mode sharded_pubsub;

    /* ---- Sentinel (added in 0.3) ------------------------------------------------
     * Sentinel mode: the client asks the sentinels where the primary of a monitored
     * master is and follows it through failovers. It is on when sentinel_master is set
     * (with sentinel_addrs) or when url is
     *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#MASTER
     *   rediss-sentinel://...                              (TLS: see below)
     * (the Lettuce form; a sentinel's port defaults to 26379). As in Lettuce, the URL's
     * user and password authenticate the data nodes, and the sentinels too unless
     * sentinel_username / sentinel_password are set (they apply to the sentinels only).
     * Without a URL, host, port and unix_path are ignored in sentinel mode; username,
     * password and db are the data nodes', sentinel_* the sentinels'. Write '#', '/',
     * '@' and ',' of a password as %23, %2F, %40, %2C.
     * How the primary is found: every sentinel is asked (SENTINEL MASTER; a sentinel
     * that refuses it, SENTINEL get-master-addr-by-name); the address named with the
     * newest configuration epoch is taken if that node says ROLE master, else the next
     * newest. The client re-resolves on a +switch-master message (a thread of the
     * client keeps every sentinel's connection subscribed to it), every
     * sentinel_scan_interval_ms, on a READONLY reply (the script did not run: it is sent
     * again to the new primary), and when a connection to the primary fails. A script
     * whose reply raced the switch (sent to the old primary, answered after the client
     * learned of the new one) is re-checked at the new primary: an acquire reads its
     * hold back there (and sends again if it is not there), a release is sent again
     * with the same request id, a renewal round is run again. Pooled, watchdog
     * and subscriber connections then reopen to the new primary; every waiter re-checks
     * once its subscription is back, so no wake-up is lost across a failover.
     * Failures: no sentinel reachable, a master name no sentinel knows, or a node that
     * answers as a replica give CRD_IO (retried within an acquire's wait, like any
     * connection failure) with words naming each sentinel asked and what it said; a
     * sentinel refusing the credentials gives CRD_AUTH. crd_client_new() resolves once
     * and fails (a failed client) when that fails.
     * TLS: rediss-sentinel:// (or tls with sentinel_master) makes the client use TLS,
     * with the same tls_* settings, for the data nodes AND the sentinels; the server
     * name checked is tls_server_name, or else the host of each connection (the
     * sentinels' addresses, and the address they announce for the primary). */
    const char *sentinel_addrs;    /* "host:port,host:port,..." (IPv6 as [addr]:port);
                                      default NULL */
    const char *sentinel_master;   /* the master name the sentinels monitor; default NULL
                                      (no sentinel mode) */
    const char *sentinel_username; /* ACL user for the sentinels; default NULL */
    const char *sentinel_password; /* AUTH password for the sentinels (also with a url);
                                      default NULL */

    /* ---- Replica sync (Redisson's checkLockSyncedSlaves) ----------------------------
     * After every acquire, release and renewal script the client sends, in the same
     * pipeline, WAIT <replicas> <replica_sync_timeout_ms>, where <replicas> is the number
     * of replicas the primary reported connected (ROLE, read when the primary is
     * resolved and again every 10 s; with none, the scripts go alone), as Redisson does.
     * What credisson does with the number that acknowledged:
     *   - at least one (all or some): the operation stands (Redisson's partial rule);
     *   - none, after an acquire that took the lock: the hold is undone at once with an
     *     owner-checked unlock and the acquire returns CRD_NOT_SYNCED (the caller does
     *     not hold the lock; Java raises NoSyncedSlavesException after the same undo);
     *   - none, after a release: the release stands (CRD_OK) and a CRD_LOG_WARN line
     *     says so; after a failover the old hold may reappear until its lease ends (the
     *     watchdog no longer renews it);
     *   - none, after a renewal: the lease was extended on the primary, but the hold's
     *     validity (crd_lock_validity_ms) is not moved: the renewal counts as failed
     *     (CRD_EVENT_RENEWAL_FAILING with CRD_NOT_SYNCED) and is retried sooner;
     *   - WAIT refused (renamed away, denied by an ACL: learned at start from WAIT 0 0):
     *     with replicas to wait for, an acquire is not sent and returns
     *     CRD_SYNC_UNAVAILABLE (or goes without WAIT with CRD_REPLICA_SYNC_IF_ALLOWED);
     *     a WAIT refused in the pipeline of an acquire that ran counts as none
     *     acknowledged (undone, CRD_NOT_SYNCED, the detail naming the refusal).
     * WAIT narrows the window in which a failover loses a lock; it does not close it:
     * Sentinel does not stop the old primary while it promotes a replica, so a write the
     * old primary accepted and one replica acknowledged can still be lost, and a replica
     * that acknowledged may not be the one promoted. See the README's Sentinel section
     * for the losses measured with and without it. */
    int replica_sync;              /* CRD_REPLICA_SYNC_AUTO (default: on in sentinel and
                                      cluster mode, off otherwise, as in Java), _ON,
                                      _IF_ALLOWED or
                                      _OFF (some providers forbid WAIT; it adds a round
                                      trip's latency to every lock operation). On a
                                      cluster WAIT goes to the node that ran the script,
                                      for that node's replicas; renewals there go
                                      without WAIT (a renewal only extends a hold that
                                      exists; right after a failover every WAIT would
                                      fail while the replicas resync). */
    int64_t replica_sync_timeout_ms; /* WAIT's timeout; default 1000 (Redisson's
                                        slavesSyncTimeout) */

    /* Fairness against waiters in other processes (the README's "Fairness"). When this
     * client's release of a reentrant, fenced or write lock reached waiters of other
     * clients (the unlock script counts the connections its message reached), this
     * client's next acquire of that lock waits up to release_defer_ms before trying, so
     * a waiter woken elsewhere takes the lock instead of the releaser taking it straight
     * back. Costs nothing without waiters elsewhere; with them, an acquire right after
     * one's own release waits up to this long. When the release reached four or more
     * (a herd: each would try on every release) a blocking acquire asking again within
     * that time instead lets each of them go first: it subscribes, lets one release
     * each pass, and tries with the last one's release (up to release_defer_ms between
     * two releases, then it tries at once), so one attempt goes out per hand-off
     * instead of one per waiter (0.8.0). Default 5; 0 turns it off. Nothing new is
     * sent: Java clients see Redisson's protocol. */
    int64_t release_defer_ms;
    /* Fairness inside this client: waiters of one reentrant, fenced or write lock are
     * served in arrival order. Only the longest waiter talks to Redis (tries, subscribes,
     * is woken by the unlock message); the others wait their turn without a command, and
     * an owner that releases and asks again queues behind them. Re-entry and
     * wait_ms 0 never queue. Default true. false gives Redisson's own behaviour: every
     * waiting thread tries when woken, and the releasing thread often wins again. */
    bool local_fifo;
    /* Prompt loss detection: while this client holds a lock under the watchdog, it keeps
     * that lock's channel subscribed (one shared subscription per held name, on the
     * subscriber connection), and any message on it (a force-unlock publishes one) makes
     * the watchdog check those holds at once: a hold removed by someone else is reported
     * (CRD_EVENT_LOCK_LOST, crd_lock_validity_ms 0) within a round trip instead of at
     * the next renewal. Holds with an explicit lease are not watched. Default false. */
    bool prompt_loss_detection;
    /* Sentinel mode: how often a thread of the client asks every sentinel where the
     * primary is (SENTINEL MASTER), besides listening for +switch-master on every
     * sentinel. When the sentinels disagree the one with the newest configuration epoch
     * is followed (a failover's leader raises the epoch; a sentinel that has not heard of
     * the failover yet still names the old primary). A primary the sentinels no longer
     * name takes no new command once that is known. Default 1000 (Redisson's
     * scanInterval); 0 turns the periodic check off (+switch-master messages, READONLY
     * replies and failed connections still move the client). Ignored outside sentinel
     * mode. */
    int64_t sentinel_scan_interval_ms;

    /* ---- Holder identity (added in 0.7) ---------------------------------------------
     * identity: the client keeps a small record of itself in Redis, so that whoever
     * reads a lock's state (crd_state_read, crd_scan_next, crd_watch_next, the CLI's
     * status, list and watch, the Prometheus exporter) can say which process holds or
     * waits, and since when: the host name (gethostname), the process id, the program
     * (see identity_cmdline), when the client started, the library version, the label
     * (identity_label, crd_client_set_label), and for each name this client holds or
     * waits for in a blocking acquire since at least 250 ms, since when (epoch ms) and
     * whether the hold keeps the lock's channel subscribed (prompt_loss_detection).
     * Where: the hash "{credisson}:client:<client uuid>", with the client's uuid in the
     * sorted set "{credisson}:clients" (score: when the record expires, epoch ms); both
     * in the slot of the hash tag "credisson", so on a cluster one node keeps every
     * client's record and a reader finds them all with one script call. Redisson never
     * reads these keys (it ignores keys it does not know), and nothing credisson sends
     * for a lock changes.
     * Cost: nothing on the acquire and release path. The client's watchdog thread
     * (started with the client when identity is on) writes the record with one script
     * call (lua/ident_write.lua) when the client starts, every third of
     * watchdog_timeout_ms (its TTL is watchdog_timeout_ms, renewed then, as a lock's
     * lease is), and at most every 250 ms when the holds and waits older than 250 ms
     * changed: holds and waits shorter than that are never written. crd_client_free()
     * deletes the record (one call; with a write still in flight, after it; at most
     * min(command_timeout_ms, 1000) ms in all, the TTL covering the rest); a process killed
     * with SIGKILL leaves it until its TTL ends. A forked child's copy of the client
     * keeps no record (the parent's stays the parent's). A write that fails (an ACL
     * without the rules of the README's "Least privilege", a server away) is retried
     * at the next tick and logged (CRD_LOG_WARN) once; the locks work the same.
     * Default true. */
    bool identity;
    /* Put the program's command line in the record: /proc/self/cmdline, its arguments
     * joined by spaces, at most 200 bytes (longer ones end in "..."). The environment is
     * never read. A command line can carry secrets (a password given as an argument):
     * false leaves the program out (the record then says only the executable's base
     * name, from /proc/self/comm). Default true. */
    bool identity_cmdline;
    /* An optional label the application declares (a service name, a deployment, a
     * trace id): at most 200 bytes, copied. Default NULL (none). crd_client_set_label()
     * changes it later. */
    const char *identity_label;
} crd_options;

/* Values of crd_options.replica_sync. */
#define CRD_REPLICA_SYNC_AUTO 0
#define CRD_REPLICA_SYNC_ON 1
#define CRD_REPLICA_SYNC_OFF 2
/* Added in 0.7: as CRD_REPLICA_SYNC_ON where the server allows WAIT; where it refuses
 * WAIT (a managed service that renames it, an ACL without +wait), every operation goes
 * without it instead of failing: the guarantee is then Redis's asynchronous replication
 * alone. Never silent: one CRD_LOG_WARN line per client the first time, and
 * crd_metrics.sync_refusals counts the operations that went without WAIT. With _ON (and
 * with _AUTO where it turns sync on) an acquire on such a server returns
 * CRD_SYNC_UNAVAILABLE instead, without sending anything; releases and renewals always go
 * without WAIT there (a hold must stay releasable and renewable), each said by the same
 * one WARN line. How the client learns it: WAIT 0 0 sent once at start (as Redisson does),
 * a WAIT refused in a pipeline, and again every 10 s while it is refused. */
#define CRD_REPLICA_SYNC_IF_ALLOWED 3

/* Fill *opts with the defaults documented above. Returns CRD_OK, or
 * CRD_INVALID_ARGUMENT if opts is NULL. Thread-safe. */
CRD_API crd_status crd_options_init(crd_options *opts);

/* ---------------------------------------------------------------------------------- */
/* Client                                                                              */
/* ---------------------------------------------------------------------------------- */

/* Create a client: validate opts (NULL means the crd_options_init() defaults), generate the
 * client's random v4 UUID, open one command connection (AUTH, SELECT) to prove the server
 * is reachable, and start the subscriber and watchdog threads. In cluster mode it first
 * reads the slot map from a seed, then PINGs a primary, then decides classic or sharded
 * pub/sub.
 * What it checks of the deployment at start (added in 0.7; one round trip each, a
 * refusal of either is ignored): INFO memory, and when maxmemory-policy can evict lock
 * keys (allkeys-*, volatile-*: volatile-* picks keys with a TTL, which every held lock
 * has) one CRD_LOG_WARN line naming the policy and crd_metrics.eviction_warnings = 1 (an
 * evicted lock is free for anyone while its holder still believes it holds it); and,
 * when replica sync is on, WAIT 0 0 (see CRD_REPLICA_SYNC_IF_ALLOWED). A server that
 * checks key slots although the URL is redis:// (a proxy in front of a cluster, a
 * cluster node) is learned from its first CROSSSLOT answer: the watchdog then batches
 * renewals one slot per script call (crd_metrics.crossslot_rebatches) and renews the
 * holds of that round at once, so no hold is lost to it.
 *
 * Returns CRD_OK and sets *out. On failure (CRD_INVALID_ARGUMENT, CRD_IO, CRD_AUTH,
 * CRD_SERVER) *out is still set, to a failed client whose crd_client_errmsg() says
 * why; every other call on it returns CRD_CLOSED; free it with crd_client_free(). Only
 * CRD_NO_MEMORY (or a NULL out) leaves *out NULL.
 * Ownership: the caller owns *out and frees it with crd_client_free().
 * Thread safety: any thread; the returned client may be shared by all threads. */
CRD_API crd_status crd_client_new(const crd_options *opts, crd_client **out);
/* Cluster errors of crd_client_new(): CRD_IO "no cluster node gave its slot map: ..."
 * naming every seed tried and why when none answers; CRD_INVALID_ARGUMENT when a seed
 * answers but is not in cluster mode ("... is not a cluster node") or the seed list is
 * malformed; CRD_SERVER when sharded_pubsub is CRD_SHARDED_ON and the servers do not
 * support it. */

/* Shut the client down and free it. Blocked waiters return CRD_CLOSED first, and so do
 * pending event-loop operations, their callbacks run on this thread (an operation such a
 * callback starts is refused with CRD_CLOSED); renewal stops; held locks expire after
 * their lease (or are released with owner-checked unlocks when release_on_close was set).
 * Lock handles of the client must not be used afterwards but must still be freed with
 * crd_lock_free(). Accepts NULL.
 * Thread safety: call once, when no other thread is inside a call that is not a
 * blocked acquire (blocked acquires are woken and return CRD_CLOSED). */
CRD_API void crd_client_free(crd_client *client);

/* The detail message of the calling thread's most recent failed call on this client
 * (the server's words, the connection error, which argument was wrong), or "" if that
 * thread's last call on it succeeded. Library-owned, valid until the same thread's next
 * call into the library. Never NULL (NULL client gives the message of a NULL-client
 * call). Thread-safe: each thread sees its own. */
CRD_API const char *crd_client_errmsg(const crd_client *client);

/* The client's UUID: 36 lowercase characters, "8-4-4-4-12". Library-owned, valid until
 * crd_client_free(). In a child after fork() the client gets a new UUID. */
CRD_API const char *crd_client_id(const crd_client *client);

/* A snapshot of the client's counters since crd_client_new(). Durations are summarised
 * from histograms with power-of-two millisecond buckets, so p50 and p99 are the upper
 * bound of the bucket they fall in (within a factor of 2); max is exact. */
typedef struct crd_metrics {
    uint64_t acquisitions;       /* acquires that succeeded (re-entries included) */
    uint64_t contended;          /* of those, acquires that had to wait */
    uint64_t acquire_busy;       /* acquires that returned CRD_BUSY or CRD_TIMEOUT */
    uint64_t releases;           /* releases that returned CRD_OK */
    uint64_t renewals;           /* holds renewed by the watchdog (one per hold per period) */
    uint64_t renewal_failures;   /* holds whose renewal got no definite answer */
    uint64_t locks_lost;         /* holds reported lost (event or release status) */
    uint64_t connects;           /* connections opened (pool, subscriber, watchdog) */
    uint64_t connection_failures;/* connection attempts that failed, and broken connections */
    uint64_t subscribes;         /* SUBSCRIBE commands confirmed */
    uint64_t holds_now;          /* holds this client records right now */
    int64_t wait_ms_p50, wait_ms_p99, wait_ms_max; /* wait of contended acquires */
    int64_t hold_ms_p50, hold_ms_p99, hold_ms_max; /* first acquire to final release */
    /* Added in 0.2 (callers built against 0.1 pass a smaller size, without these): */
    uint64_t watchdog_round_trips; /* renewal pipelines sent (up to 64 script calls each) */
    uint64_t runs_skipped;  /* crd_lock_run_policy calls that skipped the work */
    uint64_t runs_degraded; /* crd_lock_run_policy calls that ran the work without the lock */
    /* Added in 0.3: */
    uint64_t local_queued;  /* acquires that queued behind local waiters (local_fifo) */
    uint64_t deferred;      /* attempts deferred after this client's own release
                               (release_defer_ms) */
    /* Added in 0.4: */
    uint64_t late_holds_released; /* acquires whose reply came after their caller was told
                                     they failed, and that had taken the lock: given back */
    uint64_t outcomes_unknown;    /* such acquires whose connection died first: their field
                                     was read back (and a hold given back when it ran) */
    /* Added in 0.5 (the synchronizers; none of them moves a counter above): */
    uint64_t permits_acquired;  /* permits taken by crd_semaphore_acquire and
                                   crd_permit_semaphore_acquire(_n) calls that returned
                                   CRD_OK (an acquire of 3 permits adds 3) */
    uint64_t permits_released;  /* permits given back by crd_semaphore_release and
                                   crd_permit_semaphore_release(_n): all of a CRD_OK, the
                                   ids still out of a partial CRD_LOCK_LOST (add_permits,
                                   set and drain count in neither) */
    uint64_t permit_acquires_contended; /* of the acquires counted in permits_acquired, the
                                   calls that had to wait (the first try found too few) */
    uint64_t permit_acquire_busy; /* semaphore and permit-semaphore acquires that returned
                                   CRD_BUSY (no wait) or CRD_TIMEOUT (the wait ran out) */
    uint64_t latch_count_downs; /* crd_latch_count_down calls that returned CRD_OK */
    uint64_t latch_awaits_woken; /* crd_latch_await calls that found the count above zero,
                                   waited, and returned CRD_OK (count down to zero, or the
                                   latch deleted) */
    uint64_t latch_await_timeouts; /* crd_latch_await calls that returned CRD_BUSY (no
                                   wait) or CRD_TIMEOUT */
    /* Added in 0.6: */
    uint64_t waiting_now; /* threads asleep right now in a blocking acquire (locks,
                             semaphores) or latch await: on the name's channel, queued
                             behind this client's own waiters (local_fifo) or deferring
                             (release_defer_ms). A thread in a round trip is not asleep;
                             event-loop operations are never counted (they sleep nowhere) */
    /* Added in 0.7 (deployments as users run them; README "Running on managed Redis"): */
    uint64_t eviction_warnings;   /* 1 when the server's maxmemory-policy, read at start
                                     (INFO memory), can evict lock keys (allkeys-* or
                                     volatile-*): a CRD_LOG_WARN line said so; else 0 */
    uint64_t sync_refusals;       /* operations that asked for replica sync on a server
                                     refusing WAIT: acquires refused with
                                     CRD_SYNC_UNAVAILABLE, and operations sent without WAIT
                                     (releases, renewals; everything with IF_ALLOWED) */
    uint64_t crossslot_rebatches; /* renewal rounds sent again one slot per script call
                                     because the server answered CROSSSLOT (a proxy or a
                                     cluster node that checks key slots); from then on the
                                     client batches by slot: normally 0 or 1 */
} crd_metrics;

/* Fill *out with a snapshot of the client's counters. Pass sizeof(crd_metrics): fields
 * added by later versions are left out for callers built against an older header (only
 * the first size bytes are written).
 * Returns CRD_OK, or CRD_INVALID_ARGUMENT for a NULL client or out, or a size smaller
 * than the first version of the struct (up to hold_ms_max). Thread-safe; no Redis traffic. */
CRD_API crd_status crd_client_metrics(crd_client *client, crd_metrics *out, size_t size);

/* Write the client's metrics into buf in the Prometheus text exposition format (version
 * 0.0.4, served as "text/plain; version=0.0.4"), ready to be the body of a /metrics
 * response: snprintf-style, so a call with size 0 measures.
 *
 * What it writes, each metric with its "# HELP" and "# TYPE" lines, names in Prometheus'
 * conventions (prefix credisson_, base units, _total on counters), no labels but le:
 *   counters   credisson_<field>_total for every counter of crd_metrics (acquisitions,
 *              acquisitions_contended, acquire_busy, releases, renewals,
 *              renewal_failures, locks_lost, connects, connection_failures, subscribes,
 *              watchdog_round_trips, runs_skipped, runs_degraded, local_queued, deferred,
 *              late_holds_released, outcomes_unknown, permits_acquired, permits_released,
 *              permit_acquires_contended, permit_acquire_busy, latch_count_downs,
 *              latch_awaits_woken, latch_await_timeouts, eviction_warnings, sync_refusals,
 *              crossslot_rebatches)
 *   gauges     credisson_holds (crd_metrics.holds_now), credisson_waiting
 *              (crd_metrics.waiting_now)
 *   histograms credisson_acquire_wait_seconds (acquires that had to wait) and
 *              credisson_lock_hold_seconds (first acquire to final release), each as
 *              _bucket{le="0.001"} ... {le="4194.304"} (powers of two milliseconds,
 *              cumulative, always the same 23 bounds) and {le="+Inf"}, then _sum (whole
 *              milliseconds added up, in seconds) and _count (equal to the +Inf bucket).
 * Numbers are written without printf's %f, so the locale never changes them. Several
 * clients in one process write the same names: serve each on its own path or let the
 * scrape configuration add a label.
 *
 * Returns the length of the whole text, not counting the terminating NUL, whatever size
 * is; when size > 0, writes at most size bytes, the last of them a NUL (the text is cut
 * short when the return value is >= size: call again with a larger buffer). The length
 * can change between two calls as counters grow (a 0-size call to measure, then a
 * second to write, should allow some headroom, or loop); about 5.5 KiB is typical.
 * Errors: returns 0 (a real text is never empty) for a NULL client, or a NULL buf with a
 * size > 0; crd_client_errmsg() then says which (CRD_INVALID_ARGUMENT). A closed or failed
 * client still reports what it counted.
 * Ownership: buf is the caller's; nothing is kept.
 * Thread safety: any thread, concurrently with every other call; no Redis traffic, no
 * lock but the one crd_client_metrics() takes. Counters are read one by one, so a line may
 * already include an operation another line does not; within one histogram the buckets
 * and _count come from one reading (cumulative, _count equal to +Inf), _sum from a read
 * just after. */
CRD_API size_t crd_client_metrics_openmetrics(crd_client *client, char *buf, size_t size);

/* ---------------------------------------------------------------------------------- */
/* Owner ids                                                                           */
/* ---------------------------------------------------------------------------------- */

/* Owner id of the calling thread: assigned on first use from a process-wide 64-bit
 * counter that never repeats (never pthread_t or gettid, which the OS recycles), then
 * kept for the thread's life. The owner field in Redis is "<client-uuid>:<id>".
 * Thread-safe. Never 0. */
CRD_API uint64_t crd_owner_current(void);

/* A fresh owner id from the same counter, for the explicit-owner functions (event
 * loops, a lock taken on one thread and released on another). Never 0, never equal to
 * any thread's id or any earlier crd_owner_new() result in this process. Thread-safe. */
CRD_API uint64_t crd_owner_new(void);

/* ---------------------------------------------------------------------------------- */
/* Interrupting a blocking wait                                                        */
/* ---------------------------------------------------------------------------------- */

/* Signals: the library's threads (I/O, subscriber, watchdog, helpers) start with every
 * signal blocked, so a signal sent to the process runs its handler on one of the
 * application's threads (0.8.0). A handler that ends a wait raises a token: */

/* An interrupt token: what lets another thread, or a signal handler, end a blocking wait
 * of this library (Java's Thread.interrupt() for lockInterruptibly and friends). A thread
 * binds a token (crd_interrupt_bind); from then on every blocking wait that thread makes
 * on any client -- crd_lock_acquire* on every lock kind (and crd_lock_run,
 * crd_multilock_acquire), crd_semaphore_acquire, crd_permit_semaphore_acquire(_n),
 * crd_latch_await, crd_rate_limiter_acquire -- returns CRD_INTERRUPTED once the token is
 * raised, within a few milliseconds (measured: tests/test_interrupt.c), and leaves
 * nothing held: an attempt whose answer had not come is given back when it comes (as
 * after a deadline), and a fair waiter leaves the queue with the same script a timed-out
 * waiter sends, so the waiters behind it move up at once. A wait that starts while its
 * token is raised returns CRD_INTERRUPTED without sending anything.
 * What is and is not cut short: every sleep (on a channel, in the local queue, a
 * back-off, a rate limiter's delay, a read-back's turn) ends at once; a lock attempt
 * whose reply is on its way is abandoned at once too (the engine gives the hold back if
 * the reply says it was taken), except a fair lock's, whose reply is awaited (at most
 * command_timeout_ms): abandoned, it could queue the waiter again after it left. A
 * semaphore's, latch's or rate limiter's attempt (not idempotent, no owner to give back
 * from) is always awaited, so the permits it took are never lost: an acquire whose
 * attempt took the permits returns CRD_OK. A successful acquire is never undone: when the
 * lock was taken the call returns CRD_OK, and the token stays raised for the caller to
 * see. Releases, renewals and every call that does not wait are never interrupted.
 * A raised token stays raised (every later wait of a thread bound to it returns
 * CRD_INTERRUPTED at once) until crd_interrupt_clear(). One token may be bound by many
 * threads (a process-wide shutdown token); a thread binds at most one.
 * Cost: a thread with a token bound sends its lock attempts through the client's I/O
 * thread rather than on a connection it borrows (a few microseconds per attempt); a
 * token has a thread of its own, asleep until it is raised. The event-loop API is not
 * affected (crd_op_cancel ends a loop operation).
 *
 * Create a token. Returns CRD_OK; CRD_INVALID_ARGUMENT (out NULL); CRD_NO_MEMORY; CRD_IO
 * (no eventfd). Ownership: free with crd_interrupt_free(). Thread safety: any thread.
 * After fork() a token made before it does not work in the child (its thread is not
 * there): make a new one there. */
CRD_API crd_status crd_interrupt_new(crd_interrupt **out);

/* Raise the token: every wait of a thread bound to it ends with CRD_INTERRUPTED.
 * Async-signal-safe (one atomic exchange and, the first time, one write(2) to an
 * eventfd; errno is preserved), so a SIGINT handler may call it; any thread. NULL is
 * ignored. */
CRD_API void crd_interrupt_raise(crd_interrupt *intr);

/* Whether the token is raised (false for NULL). Async-signal-safe; any thread. */
CRD_API bool crd_interrupt_raised(const crd_interrupt *intr);

/* Lower the token again: later waits sleep as usual. Any thread. NULL is ignored. */
CRD_API void crd_interrupt_clear(crd_interrupt *intr);

/* Bind intr to the calling thread (NULL unbinds): the thread's blocking waits obey it
 * from now on. Returns the token bound before (or NULL). Thread safety: affects the
 * calling thread only. */
CRD_API crd_interrupt *crd_interrupt_bind(crd_interrupt *intr);

/* Free the token. No thread may be waiting with it bound, and none may bind it later;
 * the calling thread's own binding is dropped. Accepts NULL. */
CRD_API void crd_interrupt_free(crd_interrupt *intr);

/* ---------------------------------------------------------------------------------- */
/* Reentrant lock (Redisson RLock)                                                     */
/* ---------------------------------------------------------------------------------- */

/* Create a handle for the lock named name (a NUL-terminated string). No Redis traffic.
 * Returns CRD_OK; CRD_INVALID_ARGUMENT for a NULL client, name or out, an empty name, a
 * name over CRD_NAME_MAX bytes, or an unsafe brace pattern (see allow_unsafe_names);
 * CRD_CLOSED for a failed or closed client; CRD_NO_MEMORY.
 * Ownership: the caller frees *out with crd_lock_free() before freeing the client.
 * Thread safety: any thread; the handle may be shared by threads. */
CRD_API crd_status crd_lock_new(crd_client *client, const char *name, crd_lock **out);

/* Same as crd_lock_new() for a binary name of name_len bytes (may contain NUL). */
CRD_API crd_status crd_lock_new_n(crd_client *client, const char *name, size_t name_len,
                                  crd_lock **out);

/* Free a handle. Holds taken through it stay held (and renewed) until released through
 * another handle of the same name and client, or until they expire. Accepts NULL; does
 * nothing for the read and write locks of a crd_rwlock. An event-loop operation started
 * on the handle (crd_lock_acquire_async and the like) refers to it until its callback
 * has run: free the handle only when none is pending (each one's callback has run, e.g.
 * after crd_op_cancel() and the crd_loop_dispatch() that reports it). */
CRD_API void crd_lock_free(crd_lock *lock);

/* The lock's name and length. Library-owned, valid until crd_lock_free(). */
CRD_API const char *crd_lock_name(const crd_lock *lock, size_t *len);

/* Acquire the lock for the calling thread's owner id (crd_owner_current()).
 *   wait_ms  CRD_WAIT_FOREVER (-1): wait until acquired; 0: try once; > 0: wait at most
 *            this long. Waiting sleeps until the holder's unlock message or until the
 *            holder's TTL runs out; it never polls.
 *   lease_ms CRD_LEASE_WATCHDOG (-1) or 0: hold until released, renewed by the watchdog;
 *            > 0: the lock expires after lease_ms unless released or extended before.
 * Reentrant: an owner that holds the lock acquires it again (count + 1, the TTL set to
 * the new lease).
 * Returns CRD_OK (acquired); CRD_BUSY (wait_ms 0 and held by another owner);
 * CRD_TIMEOUT (the wait ran out); CRD_INVALID_ARGUMENT (NULL lock, times out of range);
 * CRD_SERVER (e.g. WRONGTYPE: the name holds a non-hash value; never reported as
 * acquired); CRD_IO (the server could not be reached, or a try got no answer within
 * command_timeout_ms; if the connection broke after the acquire was sent, the library
 * reads its own field back instead of resending, so a hold is never counted twice);
 * a wait that runs out before Redis answers, or before the attempt could be sent while
 * a connection was still being set up, is CRD_TIMEOUT; whenever the answer comes
 * after the caller was told the acquire failed, a hold it took is given back at once
 * (when the connection died first, the owner's field is read back once the node
 * answers, and a blocking acquire of the same owner and lock waits for that read-back);
 * a read-back that cannot finish by the call's deadline goes on after it returns
 * (CRD_TIMEOUT for a wait on a node that is slow, CRD_IO for a try or a node that
 * cannot be reached);
 * CRD_SYNC_UNAVAILABLE (replica sync asked for, replicas to wait for, and the server
 * refuses WAIT: nothing was sent; see CRD_REPLICA_SYNC_IF_ALLOWED);
 * CRD_CLOSED (client shutting down).
 * A server that refuses for now (LOADING after a restart, BUSY behind a long script,
 * MASTERDOWN, TRYAGAIN, CLUSTERDOWN) is asked again within the attempt's deadline (added
 * in 0.7 for standalone and Sentinel clients; a cluster client always did); when it still
 * refuses, CRD_SERVER with its words and what they mean (nothing ran, nothing is held).
 * A read-only replica (READONLY) and a full server (OOM with noeviction) are CRD_SERVER
 * the same way, at once.
 * Deadline: the call returns by wait_ms plus a few milliseconds even when the server or
 * the network stalls (measured: 1-7 ms over; tests/test_engine.c); a try with wait_ms 0,
 * and each attempt of an unbounded wait, get command_timeout_ms for the answer (plus
 * replica_sync_timeout_ms with replica sync). With replica sync the WAIT is shortened
 * to end by the deadline (Redis times it out up to 100 ms late, in its cron).
 * Thread safety: any thread; blocks only the calling thread. */
CRD_API crd_status crd_lock_acquire(crd_lock *lock, int64_t wait_ms, int64_t lease_ms);

/* As crd_lock_acquire() for an explicit owner id (from crd_owner_new()). */
CRD_API crd_status crd_lock_acquire_owner(crd_lock *lock, uint64_t owner, int64_t wait_ms,
                                          int64_t lease_ms);

/* Release one hold of the calling thread's owner.
 * Returns CRD_OK (the count went down; the lock is freed and waiters are woken when it
 * reaches 0); CRD_NOT_OWNER (this owner holds nothing here: nothing changed);
 * CRD_LOCK_LOST (this owner held it, but the hold expired or was force-unlocked: nothing
 * changed in Redis, renewal has stopped); CRD_IO (after one retry with the same request
 * id the outcome is unknown; renewal goes on, call again to retry); CRD_SERVER;
 * CRD_INVALID_ARGUMENT; CRD_CLOSED.
 * A retried release never releases twice (Redisson's unlock latch). */
CRD_API crd_status crd_lock_release(crd_lock *lock);

/* As crd_lock_release() for an explicit owner id. */
CRD_API crd_status crd_lock_release_owner(crd_lock *lock, uint64_t owner);

/* Delete the lock whoever holds it and wake a waiter (Redisson forceUnlock). Sets
 * *was_locked (may be NULL) to whether a lock was deleted. The holders find out through
 * CRD_LOCK_LOST.
 * Where credisson differs: Redisson deletes whatever is at the name; credisson deletes
 * only a lock. A key of another type (string, list, set, ...), or a hash with a field
 * that is not a lock owner's ("<uuid>:<id>", "...:write", "mode") or with over 64
 * fields, is left untouched and the call returns CRD_INVALID_ARGUMENT, with a message
 * saying what the key holds ("holds a string value, not a lock; nothing was
 * deleted"); *was_locked is false. The check runs inside the force-unlock script, so
 * nothing can change the key between the check and the delete. (A read or write lock
 * deletes its hash only when it is held in its mode, as Redisson does.)
 * Returns CRD_OK, CRD_IO, CRD_SERVER, CRD_INVALID_ARGUMENT (also a NULL lock), CRD_CLOSED. */
CRD_API crd_status crd_lock_force_unlock(crd_lock *lock, bool *was_locked);

/* Whether any owner, of any client or language, holds the lock (EXISTS). */
CRD_API crd_status crd_lock_is_locked(crd_lock *lock, bool *locked);

/* Whether the calling thread's owner / the given owner holds the lock (HEXISTS). */
CRD_API crd_status crd_lock_is_held(crd_lock *lock, bool *held);
CRD_API crd_status crd_lock_is_held_owner(crd_lock *lock, uint64_t owner, bool *held);

/* Hold count of the calling thread's owner / the given owner (HGET; 0 if none). */
CRD_API crd_status crd_lock_hold_count(crd_lock *lock, int64_t *count);
CRD_API crd_status crd_lock_hold_count_owner(crd_lock *lock, uint64_t owner, int64_t *count);

/* Remaining TTL of the lock key in ms (PTTL): -2 when not locked, -1 when the hash has
 * no TTL (foreign or corrupt state), else > 0. */
CRD_API crd_status crd_lock_remaining_ttl(crd_lock *lock, int64_t *ttl_ms);

/* How long the calling thread's owner / the given owner may still trust its hold, from
 * local bookkeeping only (no Redis traffic): the time the last acquire or renewal was
 * sent plus the lease, minus now, on the monotonic clock. Sets *validity_ms to 0 and
 * returns CRD_LOCK_LOST when the hold is known lost; CRD_NOT_OWNER when this client
 * records no hold for that owner. */
CRD_API crd_status crd_lock_validity_ms(crd_lock *lock, int64_t *validity_ms);
CRD_API crd_status crd_lock_validity_ms_owner(crd_lock *lock, uint64_t owner,
                                              int64_t *validity_ms);

/* Set the TTL of a hold taken with an explicit lease to lease_ms from now (owner-
 * checked; holds under the watchdog are renewed for you and may also be extended).
 * Returns CRD_OK, CRD_NOT_OWNER (no local hold), CRD_LOCK_LOST (the field is gone),
 * CRD_INVALID_ARGUMENT, CRD_IO, CRD_SERVER, CRD_CLOSED. */
CRD_API crd_status crd_lock_extend(crd_lock *lock, int64_t lease_ms);
CRD_API crd_status crd_lock_extend_owner(crd_lock *lock, uint64_t owner, int64_t lease_ms);

/* Run fn(arg) while holding the lock: acquire (as crd_lock_acquire), call fn, release.
 * fn's return value is stored in *fn_result (may be NULL) when fn ran.
 * Returns the acquire's status if it failed (fn did not run), else the release's status
 * (CRD_OK, or CRD_LOCK_LOST when the hold was lost while fn ran). */
CRD_API crd_status crd_lock_run(crd_lock *lock, int64_t wait_ms, int64_t lease_ms,
                                int (*fn)(void *arg), void *arg, int *fn_result);

/* What crd_lock_run_policy() does when Redis is unavailable: the acquire failed with
 * CRD_IO (unreachable, timed out, restarting past the wait), CRD_AUTH (credentials or
 * database refused), or the client never started (crd_client_new failed; CRD_CLOSED).
 * Any other status (a WRONGTYPE name, a lock held past the wait) is never "unavailable". */
typedef enum crd_unavailable_policy {
    CRD_UNAVAILABLE_FAIL = 0,   /* return the acquire's status; the work does not run */
    CRD_UNAVAILABLE_SKIP = 1,   /* return CRD_SKIPPED; the work does not run (Java's
                                   ignoreFail) */
    CRD_UNAVAILABLE_DEGRADE = 2 /* run the work WITHOUT the lock and return CRD_DEGRADED:
                                   other processes may run it at the same time. Only for
                                   work whose business accepts that (availability over
                                   exclusion); never silent: a CRD_LOG_WARN line, the
                                   status, and crd_metrics.runs_degraded */
} crd_unavailable_policy;

/* crd_lock_run() with a policy for an unavailable Redis (see crd_unavailable_policy).
 * Returns what crd_lock_run() returns when the acquire worked or failed for another
 * reason; CRD_SKIPPED or CRD_DEGRADED as the policy says (*fn_result set when fn ran);
 * CRD_INVALID_ARGUMENT for a NULL lock or fn or an unknown policy. With a failed
 * client (crd_client_new failed) the lock handle cannot be created: pass lock NULL and
 * the failed client as client. Thread safety as crd_lock_run(). */
CRD_API crd_status crd_lock_run_policy(crd_client *client, crd_lock *lock, int64_t wait_ms,
                                       int64_t lease_ms, crd_unavailable_policy policy,
                                       int (*fn)(void *arg), void *arg, int *fn_result);

/* ---------------------------------------------------------------------------------- */
/* Multi-lock (Redisson RedissonMultiLock)                                             */
/* ---------------------------------------------------------------------------------- */

typedef struct crd_multilock crd_multilock;

/* A set of locks taken all or nothing: any kinds (reentrant, fair, read, write, fenced),
 * possibly of different clients and servers. The handles are borrowed (they must outlive
 * the multi-lock); the set is copied and put in one order (name bytes, then a write lock
 * before the read lock of its name), so two multi-locks over overlapping names never
 * wait for each other in a circle. A set naming one lock twice is refused.
 * Returns CRD_OK, CRD_INVALID_ARGUMENT (NULL, n 0, a NULL handle, a duplicate),
 * CRD_NO_MEMORY. Free with crd_multilock_free(). */
CRD_API crd_status crd_multilock_new(crd_lock *const *locks, size_t n, crd_multilock **out);

/* Acquire every lock for one owner (the calling thread's / the given one) within one
 * wait budget shared by all of them, in the multi-lock's order, each with lease_ms (a
 * watchdog hold per lock when CRD_LEASE_WATCHDOG). If one cannot be taken before the
 * budget runs out, the ones already taken are released (in reverse order) before the
 * call returns: none is left held. Java RedissonMultiLock over the same names excludes
 * it and is excluded by it.
 * Returns CRD_OK (all held); CRD_BUSY (wait_ms 0) or CRD_TIMEOUT; otherwise the failing
 * lock's status, whose detail is in crd_client_errmsg() of that lock's client
 * (crd_multilock_failed() names it). */
CRD_API crd_status crd_multilock_acquire(crd_multilock *m, int64_t wait_ms, int64_t lease_ms);
CRD_API crd_status crd_multilock_acquire_owner(crd_multilock *m, uint64_t owner,
                                               int64_t wait_ms, int64_t lease_ms);

/* Release every lock of the set (reverse order), each once. Returns CRD_OK, or the first
 * failing release's status (the others are released all the same). */
CRD_API crd_status crd_multilock_release(crd_multilock *m);
CRD_API crd_status crd_multilock_release_owner(crd_multilock *m, uint64_t owner);

/* The lock whose acquire made the last crd_multilock_acquire fail, or NULL. */
CRD_API crd_lock *crd_multilock_failed(const crd_multilock *m);

/* Free the multi-lock (not its locks; holds stay held). Accepts NULL. */
CRD_API void crd_multilock_free(crd_multilock *m);

/* ---------------------------------------------------------------------------------- */
/* Fair lock (Redisson RFairLock)                                                      */
/* ---------------------------------------------------------------------------------- */

/* Create a handle for the fair lock named name: waiters, in any process or language,
 * get it in the order they asked (Redisson's queue redisson_lock_queue:{N} and
 * deadlines redisson_lock_timeout:{N}), and each waiter is woken alone, by a message on
 * its own channel redisson_lock__channel:{N}:<owner field>. Every crd_lock_* function
 * works on the handle, with these differences:
 *   - crd_lock_acquire with wait_ms 0 never joins the queue; with wait_ms > 0 the wait is
 *     announced to the queue (so a dead waiter holds the others up at most that long),
 *     otherwise fair_wait_timeout_ms is. A waiter that gives up (timeout, CRD_CLOSED, an
 *     error) removes itself from the queue and moves everyone behind it up.
 *   - Queue deadlines are epoch milliseconds from this host's wall clock (the only place
 *     credisson reads it): hosts whose clocks disagree by d ms shift each other's
 *     deadlines by d ms, so fleets sharing fair locks need NTP.
 *   - A release after the lock was force-unlocked returns CRD_LOCK_LOST (Redisson
 *     returns normally there).
 * Errors, ownership and thread safety as crd_lock_new(). Free with crd_lock_free(). */
CRD_API crd_status crd_fair_lock_new(crd_client *client, const char *name, crd_lock **out);
CRD_API crd_status crd_fair_lock_new_n(crd_client *client, const char *name, size_t name_len,
                                       crd_lock **out);

/* ---------------------------------------------------------------------------------- */
/* Read-write lock (Redisson RReadWriteLock)                                           */
/* ---------------------------------------------------------------------------------- */

typedef struct crd_rwlock crd_rwlock;

/* Create a read-write lock handle: many readers or one writer, on the same keys as
 * Redisson's getReadWriteLock(name) (hash N with field "mode", per-hold timeout keys
 * {N}:<owner field>:rwlock_timeout:<i>, channel redisson_rwlock:{N}). No Redis traffic.
 * Errors, ownership and thread safety as crd_lock_new(). Free with crd_rwlock_free(). */
CRD_API crd_status crd_rwlock_new(crd_client *client, const char *name, crd_rwlock **out);
CRD_API crd_status crd_rwlock_new_n(crd_client *client, const char *name, size_t name_len,
                                    crd_rwlock **out);

/* The read and the write lock of rw, for every crd_lock_* function. They belong to rw:
 * valid until crd_rwlock_free(rw); crd_lock_free() on them does nothing. NULL for NULL.
 * Rules (Redisson's):
 *   - the owner of the write lock may also take the read lock (downgrade: release the
 *     write lock afterwards and keep reading); readers blocked by the write lock are
 *     then woken (Redisson wakes nobody there);
 *   - an owner holding only the read lock cannot take the write lock (no upgrade):
 *     crd_lock_acquire returns CRD_DEADLOCK at once instead of waiting forever;
 *   - every read hold has its own timeout key whose TTL is that hold's lease; the
 *     watchdog renews all of an owner's read holds together with the hash.
 *   - crd_lock_is_locked on the read lock is true when the mode is "read", or "write"
 *     with some read hold besides (Redisson 3.24+); on the write lock, mode "write". */
CRD_API crd_lock *crd_rwlock_read(crd_rwlock *rw);
CRD_API crd_lock *crd_rwlock_write(crd_rwlock *rw);

/* Free the handle (holds stay held, as with crd_lock_free). Accepts NULL. */
CRD_API void crd_rwlock_free(crd_rwlock *rw);

/* ---------------------------------------------------------------------------------- */
/* Fenced lock (Redisson RFencedLock)                                                  */
/* ---------------------------------------------------------------------------------- */

/* Create a handle for the fenced lock named name: a reentrant lock (same hash, owner
 * field, channel, unlock and renewal as crd_lock_new) whose every successful acquire,
 * re-entry included, also raises a counter redisson_lock_token:{N} (a STRING without
 * TTL) and so draws a fencing token: a number larger than any earlier acquire's. A
 * storage layer that remembers the largest token it has seen and refuses writes with a
 * smaller one rejects a holder that was paused past its lease while another took the
 * lock (the pause problem a lease alone cannot solve; examples/fenced.c).
 * Every crd_lock_* function works on the handle; crd_lock_acquire draws a token without
 * returning it (Java's lock()), crd_lock_acquire_token returns it. Differences from
 * Redisson: renewal also checks the counter, so a hold whose counter vanished (Java's
 * RFencedLock.delete() deletes it and tokens start again at 1: never call it on a live
 * fleet) is reported lost (CRD_EVENT_LOCK_LOST).
 * Errors, ownership and thread safety as crd_lock_new(). Free with crd_lock_free(). */
CRD_API crd_status crd_fenced_lock_new(crd_client *client, const char *name, crd_lock **out);
CRD_API crd_status crd_fenced_lock_new_n(crd_client *client, const char *name,
                                         size_t name_len, crd_lock **out);

/* Acquire a fenced lock as crd_lock_acquire() does and store the token this acquire
 * drew in *token (Java's lockAndGetToken / tryLockAndGetToken). Tokens of one name
 * strictly increase across clients, processes and languages.
 * Returns as crd_lock_acquire(); *token is set only with CRD_OK. CRD_INVALID_ARGUMENT
 * also for a NULL token or a lock that is not fenced. When the acquire's reply was lost
 * and reading the owner's field back proved it ran, the token is read from the counter
 * (no other owner can have raised it while this one holds the lock). */
CRD_API crd_status crd_lock_acquire_token(crd_lock *lock, int64_t wait_ms, int64_t lease_ms,
                                          int64_t *token);
CRD_API crd_status crd_lock_acquire_token_owner(crd_lock *lock, uint64_t owner,
                                                int64_t wait_ms, int64_t lease_ms,
                                                int64_t *token);

/* The current value of a fenced lock's counter (GET; 0 when it does not exist, as Java's
 * getToken()): the token of the most recent acquire by anyone.
 * Returns CRD_OK, CRD_INVALID_ARGUMENT (NULL argument, not a fenced lock), CRD_IO,
 * CRD_SERVER, CRD_PROTOCOL, CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_lock_token(crd_lock *lock, int64_t *token);

/* ---------------------------------------------------------------------------------- */
/* Non-reentrant locks (Redisson 4.4+ RNonReentrantLock, RNonReentrantFairLock)         */
/* ---------------------------------------------------------------------------------- */

/* Create a handle for the non-reentrant lock named name: the reentrant lock's hash,
 * owner field, channel, unlock, force-unlock and renewal (crd_lock_new), whose acquire
 * refuses a second acquire by the owner that holds it instead of counting up -- for
 * coroutines, fibers and callback pools that share one owner id and must not walk into
 * each other's critical sections (Redisson #4468, #4956). Java's getNonReentrantLock(N),
 * getLock(N) and C's crd_lock_new(N) exclude each other on one name.
 * Every crd_lock_* function works on the handle. crd_lock_acquire by the owner that
 * holds the lock returns CRD_DEADLOCK at once, whatever wait_ms says: one round trip (the
 * script decides, as Redisson's does: it answers the error reply "NON_REENTRANT_REACQUIRE",
 * told apart from every other server error by its exact text), nothing changed in Redis
 * (the hold count stays 1, the TTL is not refreshed) and no wait. Every other status as
 * crd_lock_acquire's. Errors, ownership and thread safety as crd_lock_new(). */
CRD_API crd_status crd_nonreentrant_lock_new(crd_client *client, const char *name,
                                             crd_lock **out);
CRD_API crd_status crd_nonreentrant_lock_new_n(crd_client *client, const char *name,
                                               size_t name_len, crd_lock **out);

/* The same for the fair lock (crd_fair_lock_new's queue, deadlines, per-waiter channel,
 * unlock and give-up): waiters of the non-reentrant and the reentrant fair lock of one
 * name, in any language, share one FIFO queue. A refused reentry writes nothing, not
 * even a queue entry. */
CRD_API crd_status crd_nonreentrant_fair_lock_new(crd_client *client, const char *name,
                                                  crd_lock **out);
CRD_API crd_status crd_nonreentrant_fair_lock_new_n(crd_client *client, const char *name,
                                                    size_t name_len, crd_lock **out);

/* ---------------------------------------------------------------------------------- */
/* Spin lock (Redisson RSpinLock)                                                      */
/* ---------------------------------------------------------------------------------- */

/* How a spin lock's waiter spaces its attempts (Redisson's LockOptions back-off). */
typedef enum crd_backoff_kind {
    CRD_BACKOFF_EXPONENTIAL = 0, /* initial_delay_ms, then times multiplier plus a jitter in
                                    [0, failures) ms, at most max_delay_ms (Redisson's
                                    default: 1, 2, 4+j, ... 128 ms) */
    CRD_BACKOFF_CONSTANT = 1     /* delay_ms every time */
} crd_backoff_kind;

typedef struct crd_spin_options {
    crd_backoff_kind backoff; /* default CRD_BACKOFF_EXPONENTIAL */
    int64_t initial_delay_ms; /* exponential: default 1 */
    int64_t max_delay_ms;     /* exponential: default 128 */
    int multiplier;           /* exponential: default 2 */
    int64_t delay_ms;         /* constant: default 64 */
} crd_spin_options;

/* Fill *opts with the defaults above (Redisson's). CRD_OK, or CRD_INVALID_ARGUMENT for
 * NULL. Thread-safe. */
CRD_API crd_status crd_spin_options_init(crd_spin_options *opts);

/* Create a handle for the spin lock named name: the reentrant lock's hash, owner field,
 * acquire script and renewal, whose release publishes nothing and whose waiters never
 * subscribe: a waiter tries again after each step of its back-off (exponential by
 * default: 1, 2, 4.., at most 128 ms apart), and sooner when the holder's TTL ends first.
 * The kind for very many short locks where a subscription per waiting name costs more
 * than the polls; a release is noticed at the waiter's next attempt, at most one back-off
 * step (max_delay_ms) later. Every wait ends by its deadline (the last sleep is cut to
 * it). Java's getSpinLock(N) and getLock(N) exclude it on one name (a reentrant-lock or
 * Java RLock waiter behind a spin holder is woken by the holder's TTL only, or by
 * max_wait_slice_ms).
 * Every crd_lock_* function works on the handle; crd_lock_force_unlock deletes only a
 * lock (as for crd_lock_new), and publishes nothing.
 * opts: NULL for Redisson's defaults. Returns as crd_lock_new(), and
 * CRD_INVALID_ARGUMENT for an unknown back-off or delays out of range. */
CRD_API crd_status crd_spin_lock_new(crd_client *client, const char *name, crd_lock **out);
CRD_API crd_status crd_spin_lock_new_n(crd_client *client, const char *name, size_t name_len,
                                       const crd_spin_options *opts, crd_lock **out);

/* ---------------------------------------------------------------------------------- */
/* Grouped multi-lock (Redisson getMultiLock(group, values), RedissonFasterMultiLock)  */
/* ---------------------------------------------------------------------------------- */

/* Create a handle that locks n values of one group at once, on the keys of Redisson's
 * getMultiLock(group, values): one hash named group (as given, no braces added) with, for
 * each value held, a field naming the holder and two of the holder's own (its clock's
 * expiry, its count), the channel redisson_lock__channel:{group} (message "0"). A value's
 * field is Redisson's HighwayHash-128 of the value's codec bytes, so a group shared with
 * Java needs the Java side to use StringCodec (Config.setCodec(StringCodec.INSTANCE) or
 * getMultiLock with a StringCodec'd client): the values here are those bytes (UTF-8 text
 * for Java Strings). Redisson's default Kryo5Codec writes other bytes, so its fields --
 * and its locks -- are not these.
 * Every crd_lock_* function works on the handle: an acquire takes every value in one
 * script, all or none (a try with wait_ms 0 sends Redisson's try-once script), and waits on
 * the group's channel, woken by a release of any value of the group or when the blocking
 * holder's entry lapses; the watchdog renews the whole hold with one call per period; a
 * release gives back every value at once; reentry counts per value set. Two handles on
 * one group with the same values (in any order, repeats ignored) are one hold; handles
 * with other values are other holds, excluded value by value (by Java's too, both ways).
 * crd_lock_name() is the group's name. On a cluster every key is the group's: a group
 * named with braces that would split it is refused as a lock name is.
 * Where Redisson's grouped lock misbehaves, credisson answers correctly and writes
 * nothing Java would read differently: crd_lock_is_held checks every value (Redisson skips
 * the first); crd_lock_force_unlock sets *was_locked when it freed any value (Redisson's
 * returns false for more than one, and fails on a value nobody holds); a value taken
 * over an expired holder's entry drops that holder's stale fields; a release never frees
 * a value another owner took over (docs/KINDS-R47.md lists every difference).
 * crd_lock_remaining_ttl is the group hash's TTL; crd_lock_hold_count reads the first
 * value's count (0 when its entry lapsed).
 * Returns CRD_OK; CRD_INVALID_ARGUMENT (a NULL client, group, values or out, n 0, a NULL
 * value, more than 100000 values, a value over CRD_NAME_MAX bytes, a group name refused
 * as crd_lock_new refuses names); CRD_CLOSED; CRD_NO_MEMORY. No Redis traffic.
 * Ownership: the values are copied (hashed); free with crd_lock_free(). Thread safety as
 * crd_lock_new(). */
CRD_API crd_status crd_group_lock_new(crd_client *client, const char *group,
                                      const char *const *values, size_t n, crd_lock **out);
/* The same for a group name and values of given lengths (binary-safe: the bytes are the
 * codec's bytes). */
CRD_API crd_status crd_group_lock_new_n(crd_client *client, const char *group, size_t group_len,
                                        const void *const *values, const size_t *value_lens,
                                        size_t n, crd_lock **out);

/* ---------------------------------------------------------------------------------- */
/* Event-loop API                                                                      */
/* ---------------------------------------------------------------------------------- */

/* For servers built on an event loop (libuv, libevent, epoll): acquire, release and
 * extend without blocking a thread while waiting. No thread is made per operation: a
 * pending acquire is a small record stepped by crd_loop_dispatch(); waiting is on the
 * subscriber thread's pub/sub messages, which make crd_loop_fd() readable (no polling,
 * the same wake-ups, lost-reply read-back and watchdog as the blocking calls).
 *
 * The loop thread: every crd_loop_* call, every *_async call and crd_op_cancel for one
 * client must come from one thread at a time (the loop's); callbacks run on that thread,
 * inside crd_loop_dispatch(). The blocking API may be used on the same client from other
 * threads meanwhile. A dispatch never waits on the network: an acquire's attempt, a
 * release and an extend go out when the dispatch's pass ends, together (written by the
 * dispatch itself, one non-blocking send per plaintext connection, while the client's
 * I/O thread is idle; otherwise handed to that thread), the I/O thread reads their
 * replies, and their completion makes crd_loop_fd() readable. On a cluster, with Sentinel,
 * with replica sync on, or when a lost reply must be read back, a step is more than one
 * command (redirects, the primary's address, WAIT, the read-back): it runs on one of the
 * client's helper threads (started on first need, at most 16, until the client is freed),
 * bounded by its deadline (the operation's wait_ms, or command_timeout_ms), and its end
 * makes crd_loop_fd() readable too. A fair waiter that gives up leaves the queue from a
 * helper. crd_client_free() waits for a step in progress on a helper (at most its deadline)
 * before it ends the operation.
 *
 * Deadlines: an acquire with a wait that gets no answer from Redis by its deadline ends
 * with CRD_TIMEOUT (the wait ran out; the detail says Redis did not answer); a try
 * (wait_ms 0) that gets none within command_timeout_ms ends with CRD_IO. If Redis ran
 * that acquire after all, the client gives the hold back
 * (crd_metrics.late_holds_released).
 *
 * Driving it: <credisson/libuv.h> and <credisson/libevent.h> attach a client to a loop in
 * one call (header-only adapters installed with the library; examples/loop_uv.c and
 * examples/loop_event.c use them). Otherwise: watch crd_loop_fd() for reading, and call
 * crd_loop_dispatch() when it is readable and after crd_loop_timeout_ms() has passed. */

typedef struct crd_op crd_op;

/* An operation finished: status as the blocking call returns it (CRD_OK, CRD_TIMEOUT,
 * CRD_BUSY, CRD_LOCK_LOST, CRD_CANCELLED, ...). op is valid until the callback returns;
 * the callback may start and cancel operations, but must not free the client. */
typedef void (*crd_op_done_fn)(void *user_data, crd_op *op, crd_status status);

/* The descriptor to watch for reading (an eventfd, library-owned: never close it).
 * Returns -1 (detail in crd_client_errmsg) for a NULL, failed, closed or forked client. */
CRD_API int crd_loop_fd(crd_client *client);

/* Milliseconds until crd_loop_dispatch() must run even if the fd stays quiet (the
 * earliest slice end or deadline of the pending acquires): 0 = now (also after a
 * dispatch that stopped at its budget with work left), -1 = no operation. */
CRD_API int64_t crd_loop_timeout_ms(crd_client *client);

/* Steps the operations that can progress and completes the finished ones, calling
 * their callbacks on this thread, within a budget: at most 128 completions, and no
 * further step once about 1 ms has passed since the call began (callbacks' time
 * included; the commands the steps made are written after them), so that a loop with
 * thousands of ready operations still interleaves its own events. When it stops with
 * operations left unstepped, those go first in the next call, crd_loop_timeout_ms()
 * returns 0 and crd_loop_fd() is readable again: call it again from the loop as for any
 * other readiness. Returns the number of operations still pending (0 for a NULL
 * client). */
CRD_API int crd_loop_dispatch(crd_client *client);

/* Start an acquire (as crd_lock_acquire_owner: wait_ms, lease_ms, reentrancy, every
 * lock kind) for an explicit owner (crd_owner_new()). done is called from a later
 * crd_loop_dispatch(), never from this call. *op (op may be NULL) identifies it for
 * crd_op_cancel until done returns. A fenced lock's token is crd_op_token(op).
 * Returns CRD_OK (started), or CRD_INVALID_ARGUMENT (NULL lock or done, owner 0, times
 * out of range), CRD_CLOSED, CRD_FORKED, CRD_NO_MEMORY, CRD_DEADLOCK without starting
 * (done is then never called). */
CRD_API crd_status crd_lock_acquire_async(crd_lock *lock, uint64_t owner, int64_t wait_ms,
                                          int64_t lease_ms, crd_op_done_fn done,
                                          void *user_data, crd_op **op);

/* Start a release (as crd_lock_release_owner) or an extend (crd_lock_extend_owner); they
 * run in the next crd_loop_dispatch() and cannot be cancelled. Returns as above. */
CRD_API crd_status crd_lock_release_async(crd_lock *lock, uint64_t owner, crd_op_done_fn done,
                                          void *user_data, crd_op **op);
CRD_API crd_status crd_lock_extend_async(crd_lock *lock, uint64_t owner, int64_t lease_ms,
                                         crd_op_done_fn done, void *user_data, crd_op **op);

/* Cancel a pending acquire (of a lock, or a semaphore's acquire or a latch's await
 * started on the loop): it leaves its subscription (and a fair lock's queue) and its
 * callback reports CRD_CANCELLED from the next dispatch. A cancel that comes after the
 * acquire has succeeded has no effect: the callback reports CRD_OK and the caller owns
 * the hold. Returns CRD_OK, or CRD_INVALID_ARGUMENT for NULL or an operation that is not
 * an acquire. Loop thread only. */
CRD_API crd_status crd_op_cancel(crd_op *op);

/* The lock, owner and (fenced locks, after CRD_OK) token of an operation. */
CRD_API crd_lock *crd_op_lock(const crd_op *op);
CRD_API uint64_t crd_op_owner(const crd_op *op);
CRD_API int64_t crd_op_token(const crd_op *op);

/* ---------------------------------------------------------------------------------- */
/* Semaphore (Redisson RSemaphore)                                                     */
/* ---------------------------------------------------------------------------------- */

/* A counting semaphore on the same key as Redisson's getSemaphore(name): a string N
 * holding the available permits (it may go below zero, see add_permits), and the channel
 * redisson_sc:{N} (redisson_sc:N when the name has a '{') on which every release, add
 * and successful try-set publishes the new count (try-set: the permits set). Permits
 * have no owner: any thread, process or language may release what another acquired,
 * and a holder that dies without releasing keeps its permits out for ever (use the
 * permit-expirable semaphore when that matters).
 * Waiting: an acquire that must wait subscribes to the channel (one subscription per
 * client and name, shared by its waiting threads), tries again, then sleeps until a
 * message: a new count k > 0 lets up to k local waiters re-try, a count of 0 or below
 * none. Every wait ends at its deadline, and a waiter whose subscription is not live
 * re-tries every poll_interval_ms (Redisson's acquire() trusts a message that may never
 * come). Nothing polls while the subscription is live.
 * Create a handle: no Redis traffic. Name rules and errors as crd_lock_new(); in cluster
 * mode the name's key and channel must share a slot (CRD_INVALID_ARGUMENT otherwise).
 * Ownership: free with crd_semaphore_free() before the client. Thread safety: any
 * thread; one handle may be shared by threads. */
CRD_API crd_status crd_semaphore_new(crd_client *client, const char *name, crd_semaphore **out);
CRD_API crd_status crd_semaphore_new_n(crd_client *client, const char *name, size_t name_len,
                                       crd_semaphore **out);
/* Free a handle (permits acquired through it stay acquired). Accepts NULL. */
CRD_API void crd_semaphore_free(crd_semaphore *sem);
/* The name and its length. Library-owned, valid until crd_semaphore_free(). */
CRD_API const char *crd_semaphore_name(const crd_semaphore *sem, size_t *len);

/* Set the permits if the semaphore does not exist yet (Redisson's trySetPermits; with
 * ttl_ms > 0, trySetPermits(permits, ttl): the key then expires after ttl_ms, and
 * acquires and releases keep that TTL). *set (may be NULL) says whether it was set.
 * Returns CRD_OK (set or not); CRD_INVALID_ARGUMENT (NULL handle, permits < 0, ttl_ms < 0
 * or over CRD_DURATION_MAX_MS); CRD_SERVER (e.g. WRONGTYPE: nothing changed); CRD_IO
 * (the semaphore may have been set: read it); CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_semaphore_try_set_permits(crd_semaphore *sem, int64_t permits,
                                                 int64_t ttl_ms, bool *set);

/* Take permits (>= 1) at once: all of them or none.
 *   wait_ms  CRD_WAIT_FOREVER (-1): wait until they can be taken; 0: try once; > 0:
 *            wait at most this long (see the waiting rules above).
 * Returns CRD_OK (taken); CRD_BUSY (wait_ms 0 and not enough available); CRD_TIMEOUT;
 * CRD_INVALID_ARGUMENT (NULL handle, permits < 1, wait_ms out of range); CRD_SERVER
 * (WRONGTYPE, or N holds text that is not a number: nothing taken); CRD_OUTCOME_UNKNOWN
 * (the acquire was sent and its reply lost: this caller may now hold the permits, and
 * nobody can tell: the permits have no owner); CRD_IO (nothing was sent, the wait ran
 * out retrying); CRD_CLOSED (client shutting down). Thread-safe; blocks only the
 * calling thread. */
CRD_API crd_status crd_semaphore_acquire(crd_semaphore *sem, int64_t permits, int64_t wait_ms);

/* Start crd_semaphore_acquire() on the event loop (see "Event-loop API"): done(user_data,
 * op, status) is called from a later crd_loop_dispatch(), never from this call, with the
 * status crd_semaphore_acquire() would return, or CRD_CANCELLED after crd_op_cancel(op).
 * The wait blocks no thread: it is on the channel's subscription (the fd turns readable
 * on a message) and on crd_loop_timeout_ms(). Each attempt, one script call, goes to the
 * client's I/O thread and its answer makes the fd readable, so no dispatch waits for
 * Redis; on a cluster, with Sentinel or with replica sync on it runs on one of the
 * client's helper threads instead, bounded by command_timeout_ms (as a lock's steps do
 * there), and its end makes the fd readable.
 * Returns CRD_OK (started; *op, when op is not NULL, identifies it until done returns),
 * or without starting (done is never called): CRD_INVALID_ARGUMENT (NULL handle or done,
 * permits < 1, wait_ms out of range), CRD_CLOSED, CRD_FORKED, CRD_NO_MEMORY.
 * Ownership: the handle must outlive the operation. crd_op_lock(op) is NULL.
 * Thread safety: the loop thread only, as every *_async call. */
CRD_API crd_status crd_semaphore_acquire_async(crd_semaphore *sem, int64_t permits,
                                               int64_t wait_ms, crd_op_done_fn done,
                                               void *user_data, crd_op **op);

/* Give permits (>= 1) back: the count rises (the key is created when missing, as in
 * Redisson) and the new count is published. No owner check: Redisson has none.
 * Returns CRD_OK; CRD_INVALID_ARGUMENT; CRD_SERVER; CRD_OUTCOME_UNKNOWN (sent, reply
 * lost: never resent, since a second release would add permits twice); CRD_IO (not
 * sent); CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_semaphore_release(crd_semaphore *sem, int64_t permits);

/* Give permits back only if the semaphore exists (Redisson 4's releaseIfExists): on a
 * missing semaphore nothing is written or published and *released (may be NULL) is
 * false; otherwise as crd_semaphore_release() (the new count is published, waiters wake)
 * and *released is true. permits 0 sends nothing and answers false, as Java.
 * Returns CRD_OK; CRD_INVALID_ARGUMENT (NULL handle, permits < 0); CRD_SERVER (WRONGTYPE:
 * nothing changed); CRD_OUTCOME_UNKNOWN (sent, reply lost: never resent); CRD_IO (not
 * sent); CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_semaphore_release_if_exists(crd_semaphore *sem, int64_t permits,
                                                   bool *released);

/* Add delta permits; a negative delta removes them and may leave the count below zero
 * (acquires then wait until enough are added or released). The new count is published,
 * also when it is 0 or negative (Redisson's own waiters throw on a negative one;
 * credisson's ignore it). Returns as crd_semaphore_release(). */
CRD_API crd_status crd_semaphore_add_permits(crd_semaphore *sem, int64_t delta);

/* The available permits (GET; 0 when the semaphore does not exist; may be negative).
 * Returns CRD_OK, CRD_INVALID_ARGUMENT, CRD_SERVER, CRD_PROTOCOL (N holds something
 * else than a number), CRD_IO, CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_semaphore_available(crd_semaphore *sem, int64_t *available);

/* Take every available permit: *drained (may be NULL) gets how many (0 when none or
 * the semaphore does not exist; nothing is created then). Nothing is published.
 * Returns as crd_semaphore_acquire() without the waiting statuses; a lost reply is
 * CRD_OUTCOME_UNKNOWN. */
CRD_API crd_status crd_semaphore_drain(crd_semaphore *sem, int64_t *drained);

/* ---------------------------------------------------------------------------------- */
/* Permit-expirable semaphore (Redisson RPermitExpirableSemaphore)                     */
/* ---------------------------------------------------------------------------------- */

/* Size of a permit id buffer: 32 lowercase hex characters (16 random bytes from the
 * OS, as Java prints them) and a NUL. */
#define CRD_PERMIT_ID_SIZE 33
/* lease_ms of a permit that never expires (Redisson's leaseTime -1). */
#define CRD_PERMIT_NO_LEASE INT64_C(-1)

/* A semaphore whose permits have ids and leases, on the same keys as Redisson's
 * getPermitExpirableSemaphore(name): the string N (available count), the sorted set
 * {N}:timeout (N:timeout when the name has a '{') with one member per permit out, its
 * 16-byte id, scored by its deadline, and the channel redisson_sc:{N}.
 * Expiry is lazy, as in Redisson: a permit whose lease has run out stays out until an
 * acquire or a count (available, permits, acquired, update_lease, lease_left) runs;
 * that call reclaims it and publishes the new count. Deadlines are the caller's
 * wall clock (CLOCK_REALTIME, epoch ms) plus the lease, and "now" in every script is
 * the caller's wall clock: hosts whose clocks disagree by d ms shorten or lengthen each
 * other's leases by d ms, so hosts sharing such a semaphore need NTP (like the fair
 * lock's queue).
 * Waiting is the semaphore's (above), and a waiter also re-tries, still subscribed, at
 * the earliest deadline of the permits out, when it can reclaim one: a holder that died
 * frees its permit at the end of its lease without any message.
 * Create: no Redis traffic; rules, errors, ownership and thread safety as
 * crd_semaphore_new(). Free with crd_permit_semaphore_free(). */
CRD_API crd_status crd_permit_semaphore_new(crd_client *client, const char *name,
                                            crd_permit_semaphore **out);
CRD_API crd_status crd_permit_semaphore_new_n(crd_client *client, const char *name,
                                              size_t name_len, crd_permit_semaphore **out);
/* Free a handle (its permits stay out until released or expired). Accepts NULL. */
CRD_API void crd_permit_semaphore_free(crd_permit_semaphore *ps);
/* The name and its length. Library-owned, valid until crd_permit_semaphore_free(). */
CRD_API const char *crd_permit_semaphore_name(const crd_permit_semaphore *ps, size_t *len);

/* Set the available permits if the semaphore does not exist (trySetPermits). *set (may
 * be NULL) says whether it was set. Returns as crd_semaphore_try_set_permits(). */
CRD_API crd_status crd_permit_semaphore_try_set_permits(crd_permit_semaphore *ps,
                                                        int64_t permits, bool *set);
/* Make the total (available + out) equal permits (>= 0), creating the semaphore when
 * missing (setPermits): the available count moves by the difference, possibly below
 * zero while permits are out. permits is published when anything changed.
 * Returns CRD_OK, CRD_INVALID_ARGUMENT, CRD_SERVER, CRD_OUTCOME_UNKNOWN, CRD_IO,
 * CRD_CLOSED. */
CRD_API crd_status crd_permit_semaphore_set_permits(crd_permit_semaphore *ps, int64_t permits);
/* Add delta available permits (negative: remove; the count may go below zero). A
 * positive delta is published (the amount, as Redisson does). Returns as
 * crd_permit_semaphore_set_permits(). */
CRD_API crd_status crd_permit_semaphore_add_permits(crd_permit_semaphore *ps, int64_t delta);

/* Take one permit and write its id into id (CRD_PERMIT_ID_SIZE bytes, NUL-terminated).
 *   wait_ms  -1 forever, 0 try once, > 0 at most this long.
 *   lease_ms > 0: the permit expires lease_ms after the call (the caller's wall clock)
 *            unless released or its lease updated; CRD_PERMIT_NO_LEASE: never.
 * Returns CRD_OK (id set); CRD_BUSY (wait_ms 0); CRD_TIMEOUT; CRD_INVALID_ARGUMENT
 * (NULL argument, lease_ms 0 or out of range); CRD_SERVER (WRONGTYPE: nothing taken);
 * CRD_IO (nothing was sent, or a lost reply whose read-back failed as well: if the
 * ids went in they expire at their lease); CRD_CLOSED. A lost reply is resolved by
 * reading back whether the ids sent are permits (they are random: nobody else has
 * them), never by sending the acquire again. Thread-safe. */
CRD_API crd_status crd_permit_semaphore_acquire(crd_permit_semaphore *ps, int64_t wait_ms,
                                                int64_t lease_ms, char id[CRD_PERMIT_ID_SIZE]);
/* The same for permits (>= 1, at most 1024) permits at once, all or none: ids[i] gets
 * the i-th id. A waiter for several permits is woken whenever a release makes enough
 * available (Redisson #6664/#6687). */
CRD_API crd_status crd_permit_semaphore_acquire_n(crd_permit_semaphore *ps, int64_t permits,
                                                  int64_t wait_ms, int64_t lease_ms,
                                                  char (*ids)[CRD_PERMIT_ID_SIZE]);

/* Start crd_permit_semaphore_acquire_n() on the event loop: done is called from a later
 * crd_loop_dispatch() with the status it would return (CRD_CANCELLED after
 * crd_op_cancel(op)); ids[0..permits-1] are written before that callback (on a helper
 * thread when the attempt ran there) and hold the permits only when it is CRD_OK: read
 * them in the callback, not before. The wait blocks no thread; each attempt (one script
 * call) goes to the I/O thread as crd_semaphore_acquire_async()'s do, and the read-back
 * of a lost reply (a ZSCORE per id) runs on a helper thread, bounded by
 * command_timeout_ms, as every step does on a cluster, with Sentinel or with replica
 * sync on.
 * Returns CRD_OK (started), or without starting (done never called) as
 * crd_permit_semaphore_acquire_n() refuses arguments, or CRD_CLOSED, CRD_FORKED,
 * CRD_NO_MEMORY.
 * Ownership: ids is the caller's and, like the handle, must stay valid until done runs.
 * Thread safety: the loop thread only. */
CRD_API crd_status crd_permit_semaphore_acquire_async(crd_permit_semaphore *ps, int64_t permits,
                                                      int64_t wait_ms, int64_t lease_ms,
                                                      char (*ids)[CRD_PERMIT_ID_SIZE],
                                                      crd_op_done_fn done, void *user_data,
                                                      crd_op **op);

/* Give back the permit id (32 hex characters, either case).
 * Returns CRD_OK (released, its count published); CRD_LOCK_LOST (released by this call
 * all the same, but its lease had already run out: no other holder had it, yet the
 * caller worked past its lease; Redisson's release throws there); CRD_NOT_OWNER (not a
 * permit out: never issued, already released, or reclaimed after its lease: nothing
 * changed); CRD_INVALID_ARGUMENT (NULL, not 32 hex characters); CRD_SERVER;
 * CRD_OUTCOME_UNKNOWN (sent, reply lost); CRD_IO (not sent); CRD_CLOSED. */
CRD_API crd_status crd_permit_semaphore_release(crd_permit_semaphore *ps, const char *id);
/* Give back n (1..1024, all different) permits, all or nothing (Redisson 3.44+): if any
 * id is not a permit out, nothing changes.
 * Returns CRD_OK (all released, n published); CRD_NOT_OWNER (nothing changed);
 * CRD_LOCK_LOST (some had expired: those were reclaimed, the others released);
 * CRD_INVALID_ARGUMENT (NULL, n 0 or over 1024, a malformed or repeated id), and the
 * failures of crd_permit_semaphore_release(). */
CRD_API crd_status crd_permit_semaphore_release_n(crd_permit_semaphore *ps,
                                                  const char *const *ids, size_t n);

/* Set the lease of permit id to lease_ms from now (or CRD_PERMIT_NO_LEASE): what a
 * holder calls to keep its permit while it works (the CLI's run does, every third of
 * the lease). Returns CRD_OK; CRD_NOT_OWNER (not a permit out, e.g. it expired and was
 * reclaimed: the holder lost it); CRD_INVALID_ARGUMENT; CRD_SERVER; CRD_IO; CRD_CLOSED.
 * Idempotent: a lost reply is retried once. */
CRD_API crd_status crd_permit_semaphore_update_lease(crd_permit_semaphore *ps, const char *id,
                                                     int64_t lease_ms);
/* How long permit id has left: *left_ms > 0, or -1 for a permit without lease.
 * Returns CRD_OK; CRD_NOT_OWNER (not a permit out; *left_ms 0); and the failures above. */
CRD_API crd_status crd_permit_semaphore_lease_left(crd_permit_semaphore *ps, const char *id,
                                                   int64_t *left_ms);

/* Counts, each after reclaiming expired permits (which publishes): the available
 * permits (0 when the semaphore does not exist), the total (available + out), and the
 * permits out. Returns CRD_OK, CRD_INVALID_ARGUMENT, CRD_SERVER, CRD_PROTOCOL, CRD_IO,
 * CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_permit_semaphore_available(crd_permit_semaphore *ps, int64_t *available);
CRD_API crd_status crd_permit_semaphore_permits(crd_permit_semaphore *ps, int64_t *total);
CRD_API crd_status crd_permit_semaphore_acquired(crd_permit_semaphore *ps, int64_t *acquired);

/* ---------------------------------------------------------------------------------- */
/* Count-down latch (Redisson RCountDownLatch)                                         */
/* ---------------------------------------------------------------------------------- */

/* A count-down latch on the same key as Redisson's getCountDownLatch(name): a string N
 * holding the count, deleted when it reaches zero (so a latch at zero and a missing
 * latch are the same), and the channel redisson_countdownlatch__channel__{N} (braces
 * always added). A count-down to exactly zero publishes "0"; a try-set and a delete
 * publish "1".
 * Waiting: crd_latch_await() reads the count (GET), subscribes, reads it again, and
 * sleeps until a message. Every message makes this client's waiters read the count
 * again, so a delete while they wait ends their wait at once (Redisson's waiters ignore
 * the "1" of a delete and sleep on: its untimed await() hangs there).
 * Cluster: the channel's hash tag is the whole name, so a name with its own "{...}" tag
 * puts channel and key in different slots; Redis Cluster refuses such a latch's
 * scripts (CROSSSLOT, and so does Redisson). crd_latch_new refuses such a name in
 * cluster mode with CRD_INVALID_ARGUMENT and a message saying so.
 * Create: no Redis traffic; otherwise as crd_semaphore_new(). */
CRD_API crd_status crd_latch_new(crd_client *client, const char *name, crd_latch **out);
CRD_API crd_status crd_latch_new_n(crd_client *client, const char *name, size_t name_len,
                                   crd_latch **out);
/* Free a handle. Accepts NULL. */
CRD_API void crd_latch_free(crd_latch *latch);
/* The name and its length. Library-owned, valid until crd_latch_free(). */
CRD_API const char *crd_latch_name(const crd_latch *latch, size_t *len);

/* Set the count (>= 1) if the latch does not exist, i.e. is at zero (trySetCount).
 * *set (may be NULL) says whether it was set; an existing latch is left alone.
 * Returns CRD_OK; CRD_INVALID_ARGUMENT (NULL handle, count < 1); CRD_SERVER; CRD_IO (the
 * count may have been set: read it); CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_latch_try_set_count(crd_latch *latch, int64_t count, bool *set);

/* Lower the count by one; at zero the latch is deleted and every waiter, of any client
 * and language, is woken. On a missing latch nothing happens.
 * Returns CRD_OK; CRD_INVALID_ARGUMENT; CRD_SERVER (WRONGTYPE or a value that is not a
 * number: nothing changed); CRD_OUTCOME_UNKNOWN (sent, reply lost: it may have counted;
 * never resent); CRD_IO (not sent); CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_latch_count_down(crd_latch *latch);

/* Wait until the count is zero (or the latch deleted).
 *   wait_ms  -1 forever, 0 check once, > 0 at most this long (the count is read once
 *            more when it runs out, as Redisson does).
 * Returns CRD_OK (zero); CRD_BUSY (wait_ms 0, not zero); CRD_TIMEOUT; CRD_INVALID_ARGUMENT;
 * CRD_SERVER; CRD_PROTOCOL; CRD_IO (the wait ran out while Redis could not be reached);
 * CRD_CLOSED. Thread-safe; blocks only the calling thread. */
CRD_API crd_status crd_latch_await(crd_latch *latch, int64_t wait_ms);

/* Start crd_latch_await() on the event loop: done is called from a later
 * crd_loop_dispatch() with the status crd_latch_await() would return, or CRD_CANCELLED
 * after crd_op_cancel(op). The wait blocks no thread; each check of the count (a GET)
 * goes to the I/O thread as crd_semaphore_acquire_async()'s attempts do (inside a
 * dispatch on a cluster, with Sentinel or with replica sync on).
 * Returns CRD_OK (started), or without starting: CRD_INVALID_ARGUMENT (NULL handle or
 * done, wait_ms out of range), CRD_CLOSED, CRD_FORKED, CRD_NO_MEMORY.
 * Ownership: the handle must outlive the operation. crd_op_lock(op) is NULL.
 * Thread safety: the loop thread only. */
CRD_API crd_status crd_latch_await_async(crd_latch *latch, int64_t wait_ms, crd_op_done_fn done,
                                         void *user_data, crd_op **op);

/* The count (GET; 0 when the latch does not exist). Returns CRD_OK, CRD_INVALID_ARGUMENT,
 * CRD_SERVER, CRD_PROTOCOL, CRD_IO, CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_latch_count(crd_latch *latch, int64_t *count);

/* Delete the latch whatever its count, and publish "1" (its waiters here re-check and
 * return CRD_OK). *deleted (may be NULL) says whether there was one. Returns as
 * crd_latch_count(). Idempotent. */
CRD_API crd_status crd_latch_delete(crd_latch *latch, bool *deleted);

/* ---------------------------------------------------------------------------------- */
/* Rate limiter (Redisson RRateLimiter)                                                */
/* ---------------------------------------------------------------------------------- */

/* Whose budget a rate limiter's permits come from. */
typedef enum crd_rate_mode {
    CRD_RATE_OVERALL = 0,   /* one budget shared by every client (Redisson's OVERALL) */
    CRD_RATE_PER_CLIENT = 1 /* one budget per client (PER_CLIENT: keyed by crd_client_id) */
} crd_rate_mode;

/* A rate: rate permits per interval_ms, for the whole fleet or per client. keep_alive_ms
 * > 0 (at least interval_ms, as Java requires): the limiter and its state expire when
 * nobody acquires for that long (Redisson 4.x's keepAliveTime); 0: they stay. */
typedef struct crd_rate_config {
    crd_rate_mode mode;
    int64_t rate;          /* >= 1 */
    int64_t interval_ms;   /* >= 1 */
    int64_t keep_alive_ms; /* 0, or >= interval_ms */
} crd_rate_config;

/* A rate limiter on the same keys as Redisson's getRateLimiter(name): the configuration
 * hash N (fields rate, interval, type, keepAliveTime), the permits left {N}:value and the
 * permits given in the last interval, one record each, in the sorted set {N}:permits
 * ({N}:value:<client id> and {N}:permits:<client id> in PER_CLIENT mode); every key
 * shares N's cluster slot. No channel: a waiting acquire sleeps as long as the server
 * says (the time until enough permits are given back), then tries again. Permits are
 * given back by time, not by a release: an acquire takes them for one interval.
 * Where Redisson's limiter has bugs (permits that never refill after a lost value key,
 * an acquire above the rate that waits for ever, a rate set before every acquire that
 * never limits, release counted twice), credisson's scripts behave correctly and Java
 * reads the same keys the same way (interop/README.md, "Rate limiter").
 * Create: no Redis traffic; name rules as crd_lock_new() (in cluster mode a name whose
 * braces split its keys is refused). Ownership: free with crd_rate_limiter_free() before
 * the client. Thread safety: any thread; one handle may be shared by threads. */
CRD_API crd_status crd_rate_limiter_new(crd_client *client, const char *name,
                                        crd_rate_limiter **out);
CRD_API crd_status crd_rate_limiter_new_n(crd_client *client, const char *name,
                                          size_t name_len, crd_rate_limiter **out);
/* Free a handle (the limiter stays in Redis). Accepts NULL. */
CRD_API void crd_rate_limiter_free(crd_rate_limiter *rl);
/* The name and its length. Library-owned, valid until crd_rate_limiter_free(). */
CRD_API const char *crd_rate_limiter_name(const crd_rate_limiter *rl, size_t *len);

/* Set the rate if the limiter has none (trySetRate). *set (may be NULL) says whether it
 * was set; an existing rate is left alone.
 * Returns CRD_OK; CRD_INVALID_ARGUMENT (NULL handle or cfg, an unknown mode, a rate or
 * interval below 1, a keep-alive below the interval: nothing sent); CRD_SERVER (WRONGTYPE:
 * N is not a hash; nothing changed); CRD_IO (the rate may have been set: read it);
 * CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_rate_limiter_try_set_rate(crd_rate_limiter *rl, const crd_rate_config *cfg,
                                                 bool *set);
/* Set the rate, creating the limiter when missing (setRate(RateLimiterArgs)).
 * keep_state: the permits given in the last interval still count against the new rate
 * (permits left = rate - those, at least 0); false starts afresh (the state is deleted). A
 * change of mode deletes the old mode's state either way. Never Redisson's deprecated
 * setRate form (#5487: a rate set before every acquire then never limits).
 * Returns as crd_rate_limiter_try_set_rate(). */
CRD_API crd_status crd_rate_limiter_set_rate(crd_rate_limiter *rl, const crd_rate_config *cfg,
                                             bool keep_state);
/* The same only if the limiter has a rate (updateRate): *updated (may be NULL) says
 * whether it had one (nothing is written otherwise). */
CRD_API crd_status crd_rate_limiter_update_rate(crd_rate_limiter *rl, const crd_rate_config *cfg,
                                                bool keep_state, bool *updated);
/* The rate (getConfig, HGETALL N): *exists (may be NULL) is false and *cfg zeroed when the
 * limiter has none. Returns CRD_OK, CRD_INVALID_ARGUMENT, CRD_SERVER (WRONGTYPE),
 * CRD_PROTOCOL (N is a hash that is not a rate's), CRD_IO, CRD_CLOSED. */
CRD_API crd_status crd_rate_limiter_get_rate(crd_rate_limiter *rl, crd_rate_config *cfg,
                                             bool *exists);

/* Take permits (>= 1) at once: all or none.
 *   wait_ms  CRD_WAIT_FOREVER (-1): wait until they are given; 0: try once; > 0: wait at
 *            most this long. The wait is the server's: each refused attempt answers how
 *            long until enough permits come back, and the caller sleeps exactly that long
 *            (nothing is sent meanwhile, no subscription), then tries again; when that time
 *            ends after the wait's deadline the call returns CRD_TIMEOUT at once (nothing
 *            could be given sooner), so it never sleeps past its deadline.
 * Returns CRD_OK (taken); CRD_BUSY (wait_ms 0, not enough now); CRD_TIMEOUT;
 * CRD_INVALID_ARGUMENT (NULL handle, permits < 1 or more than the rate -- they could never
 * be given at once --, wait_ms out of range, or a limiter without a rate: never set,
 * deleted, or its keep-alive ran out; the message says which); CRD_SERVER (WRONGTYPE);
 * CRD_OUTCOME_UNKNOWN (the attempt's reply was lost and reading its record back failed
 * too: the permits may have been taken); CRD_IO (Redis unreachable until the wait ran
 * out); CRD_INTERRUPTED (crd_interrupt_bind); CRD_CLOSED. A lost reply is read back (the
 * attempt's record, by its random bytes), never resent blindly. Thread-safe; blocks only
 * the calling thread. */
CRD_API crd_status crd_rate_limiter_acquire(crd_rate_limiter *rl, int64_t permits,
                                            int64_t wait_ms);
/* Start crd_rate_limiter_acquire() on the event loop: done is called from a later
 * crd_loop_dispatch() with the status it would return (CRD_CANCELLED after
 * crd_op_cancel(op)). The waits are the loop's timeouts (crd_loop_timeout_ms), no thread
 * sleeps; each attempt goes to the I/O thread as crd_semaphore_acquire_async()'s do.
 * Returns CRD_OK (started), or without starting (done never called) as
 * crd_rate_limiter_acquire() refuses arguments, CRD_CLOSED, CRD_FORKED, CRD_NO_MEMORY.
 * Ownership: the handle must outlive the operation. Thread safety: the loop thread. */
CRD_API crd_status crd_rate_limiter_acquire_async(crd_rate_limiter *rl, int64_t permits,
                                                  int64_t wait_ms, crd_op_done_fn done,
                                                  void *user_data, crd_op **op);
/* The permits that could be taken now (availablePermits; the expired records are given
 * back first). Returns CRD_OK; CRD_INVALID_ARGUMENT (NULL argument, no rate set);
 * CRD_SERVER; CRD_PROTOCOL; CRD_IO; CRD_CLOSED. */
CRD_API crd_status crd_rate_limiter_available(crd_rate_limiter *rl, int64_t *available);
/* Give permits (>= 1) back before their interval ends (release): the permits left rise,
 * at most to the rate. Not idempotent: a lost reply is CRD_OUTCOME_UNKNOWN. */
CRD_API crd_status crd_rate_limiter_release(crd_rate_limiter *rl, int64_t permits);
/* Delete the limiter: its rate and this client's state (delete(): other clients'
 * PER_CLIENT state stays, as in Java). *deleted (may be NULL): whether anything was
 * there. Returns CRD_OK, CRD_INVALID_ARGUMENT, CRD_IO, CRD_CLOSED. */
CRD_API crd_status crd_rate_limiter_delete(crd_rate_limiter *rl, bool *deleted);

/* ---------------------------------------------------------------------------------- */
/* Introspection: who holds a name, since when, and who waits (added in 0.7)            */
/* ---------------------------------------------------------------------------------- */

/* What a name holds, as far as Redisson's keys tell (append-only; a kind Redisson adds
 * later gets the next number).
 * How each is told: a hash whose fields are owner fields ("<uuid>:<id>", "...:write")
 * with hold counts is a lock: with a "mode" field a read-write lock; with a waiter in
 * redisson_lock_queue:{N} a fair lock (a fair lock nobody waits for is stored exactly as
 * a reentrant lock and reads as one; so do Redisson's spin lock and a non-reentrant lock
 * until their keys differ); with the counter redisson_lock_token:{N} a fenced lock (also
 * when it is not held: the counter has no TTL). A string holding a number is a
 * semaphore: with permits out in {N}:timeout an expirable one; with a count >= 1, a
 * subscriber of redisson_countdownlatch__channel__{N} and none of redisson_sc:{N}, a
 * latch (the keys alone cannot tell a latch nobody awaits from a semaphore:
 * crd_state.maybe_latch says so). A hash with the fields rate, interval and type is a
 * rate limiter; a hash of 22-character value fields naming owners (with their
 * F:<owner>:expire_time and lock_count) a grouped multi-lock. Anything else is
 * CRD_KIND_OTHER; a missing name CRD_KIND_NONE. */
typedef enum crd_object_kind {
    CRD_KIND_NONE = 0,             /* the name does not exist */
    CRD_KIND_OTHER = 1,            /* it exists but is no Redisson object credisson knows */
    CRD_KIND_LOCK = 2,             /* RLock (getLock) */
    CRD_KIND_FAIR_LOCK = 3,        /* RFairLock with waiters queued */
    CRD_KIND_READ_WRITE_LOCK = 4,  /* RReadWriteLock */
    CRD_KIND_FENCED_LOCK = 5,      /* RFencedLock */
    CRD_KIND_SEMAPHORE = 6,        /* RSemaphore */
    CRD_KIND_PERMIT_SEMAPHORE = 7, /* RPermitExpirableSemaphore with permits out */
    CRD_KIND_LATCH = 8,            /* RCountDownLatch with a count and a waiter */
    CRD_KIND_RATE_LIMITER = 9,     /* RRateLimiter's configuration hash (rate, interval,
                                      type): no holders, no waiters counted (its waiters
                                      sleep without subscribing); its state keys {N}:value
                                      and {N}:permits are parts, skipped by a scan */
    CRD_KIND_GROUP_LOCK = 10       /* a grouped multi-lock's hash (getMultiLock(group,
                                      values)): holders are the owners, each with the
                                      number of values it holds as count */
} crd_object_kind;

/* The kind's short name, as the CLI prints it: "none", "other", "rlock", "fair",
 * "rwlock", "fenced", "semaphore", "permit_semaphore", "latch", "rate_limiter", "group";
 * "unknown" for a value
 * this version does not know. Static storage; thread-safe. */
CRD_API const char *crd_object_kind_name(crd_object_kind kind);

/* Who is behind an owner: what the owner's client declared in its identity record (see
 * crd_options.identity), or, for a client that keeps none (Java's Redisson, a credisson
 * client with identity off, a process gone since), what can be known. Every string is
 * NUL-terminated, never NULL ("" when unknown). */
typedef struct crd_identity {
    const char *client_id; /* the owner's client uuid (the part before ':<id>') */
    uint64_t thread;       /* the id after it: a thread id for Java, an owner id here */
    bool known;            /* a credisson identity record of client_id was found */
    const char *host;      /* known: gethostname() of the process */
    int64_t pid;           /* known: its process id (0 when not known) */
    const char *program;   /* known: its command line (bounded), or its executable's
                              name when the client leaves the command line out */
    const char *label;     /* known: the label the application set, or "" */
    const char *version;   /* known: the credisson version of the client */
    int64_t started_ms;    /* known: when the client started (epoch ms; 0 unknown) */
    /* Not known (a Java client): the server's connections that may be that client's,
     * from CLIENT LIST on the node asked (only when the ACL allows CLIENT LIST, and only
     * connections that set a name, as Redisson's clientName does: credisson sets none):
     * their names and addresses, "name@addr" separated by ", ", at most 10; "" when
     * none or not allowed. CLIENT LIST cannot say which of them holds. */
    const char *connections;
} crd_identity;

/* One holder of a lock. */
typedef struct crd_holder {
    const char *owner;  /* the owner field as stored, without ":write" ("<uuid>:<id>") */
    int64_t count;      /* its hold count (read-write lock: the read holds, or the write
                           holds for the writer) */
    bool writer;        /* read-write lock: the write holder (field "<owner>:write") */
    int64_t ttl_ms;     /* how long the hold has left: the key's PTTL (-1: no TTL); a
                           reader: its longest read-hold timeout key's PTTL */
    int64_t since_ms;   /* when it was first acquired (epoch ms, the holder's clock), from
                           its identity record: -1 when not known (no record, or a hold
                           younger than 250 ms not written yet) */
    int64_t held_ms;    /* read_at_ms - since_ms, or -1 */
    bool watching;      /* its client keeps the lock's channel subscribed while it holds
                           (prompt_loss_detection): one of the channel's subscribers */
    crd_identity who;
} crd_holder;

/* One read hold of a read-write lock: its own timeout key
 * "{N}:<owner>:rwlock_timeout:<index>" and that key's PTTL (-2: gone). */
typedef struct crd_read_hold {
    const char *owner;
    int64_t index;
    int64_t ttl_ms;
} crd_read_hold;

/* One waiter: a fair lock's queue entry, or a credisson client that declared it waits
 * (its identity record, for kinds with no queue). */
typedef struct crd_waiter {
    const char *owner;     /* the owner field queued, or the declaring owner's */
    int64_t deadline_ms;   /* fair queue: the entry's deadline (epoch ms, the waiter's
                              clock), -1 when it has none; others -1 */
    int64_t remaining_ms;  /* deadline_ms - read_at_ms, or -1 */
    int64_t since_ms;      /* when it began to wait (epoch ms), from its identity record;
                              -1 when not known */
    int64_t waited_ms;     /* read_at_ms - since_ms, or -1 */
    crd_identity who;
} crd_waiter;

/* One permit out of an expirable semaphore. */
typedef struct crd_permit {
    char id[CRD_PERMIT_ID_SIZE]; /* 32 hex characters */
    int64_t deadline_ms;         /* epoch ms; -1: no lease (never expires) */
    int64_t remaining_ms;        /* deadline_ms - read_at_ms (negative: expired, not yet
                                    reclaimed), -1 without a lease */
} crd_permit;

/* The state of one name, read by crd_state_read() or crd_scan_next(). The caller's:
 * free it with crd_state_free() (every pointer inside lives as long as it). Fields are
 * only ever appended. */
typedef struct crd_state {
    const char *name;        /* the name (NUL-terminated copy; binary names: name_len) */
    size_t name_len;
    crd_object_kind kind;
    const char *kind_name;   /* crd_object_kind_name(kind) */
    const char *type;        /* the Redis type of the key: "hash", "string", "none", ... */
    int64_t ttl_ms;          /* PTTL of the key: -2 absent, -1 no TTL */
    int64_t read_at_ms;      /* when it was read (epoch ms, this host's clock) */
    const char *mode;        /* read-write lock: "read" or "write"; else "" */
    bool held;               /* a lock with at least one holder */
    size_t nholders;
    crd_holder *holders;     /* the writer first, then readers, in the hash's order */
    size_t nread_holds;
    crd_read_hold *read_holds;
    size_t nqueue;           /* fair lock: waiters queued (all of them, also past the
                                1000 listed) */
    size_t nqueue_listed;
    crd_waiter *queue;       /* head first */
    /* Waiters of kinds with no queue (a lock, a read-write lock, a semaphore, a latch):
     * subscribers is what PUBSUB NUMSUB (plus SHARDNUMSUB, on Redis 7) says of the
     * name's channel on the node serving the name: every connection subscribed to it,
     * Java's waiters and credisson's alike (a client counts once however many of its
     * threads wait). It also counts connections that are subscribed without waiting:
     * a credisson holder's prompt-loss subscription (crd_holder.watching: subtracted
     * below) and a crd_watch (its client declares it: subtracted), and it cannot count
     * waiters that do not subscribe (Redisson's spin lock, an event-loop waiter between
     * attempts) nor, on a cluster in classic pub/sub mode, subscribers connected to
     * other nodes. waiters = subscribers - those declared non-waiting, at least 0 (for
     * a fair lock: nqueue). */
    int64_t subscribers;
    int64_t waiters;
    size_t nknown_waiters;
    crd_waiter *known_waiters; /* credisson clients that declared they wait for this name
                                  (blocking acquires waiting 250 ms or more), longest
                                  waiting first; only with CRD_STATE_WAITERS */
    int64_t token;           /* fenced lock: the newest token; -1 when there is none */
    int64_t available;       /* semaphores: the available permits (may be < 0) */
    bool maybe_latch;        /* a semaphore whose value could be a latch nobody awaits */
    size_t npermits;         /* permit semaphore: permits out (all of them) */
    size_t npermits_listed;
    crd_permit *permits;     /* the first 1000 by deadline */
    int64_t count;           /* latch: the count */
    bool identity_read;      /* the identity records could be read (false: an ACL without
                                the identity rules, or CRD_STATE_NO_IDENTITY) */
} crd_state;

/* Flags of crd_state_read() and crd_scan_new(). */
#define CRD_STATE_NO_IDENTITY 1u /* do not read identity records (no join) */
#define CRD_STATE_WAITERS 2u     /* also list the credisson waiters of kinds without a
                                    queue (reads every client's record: one more script
                                    call, on the node of "{credisson}") */
#define CRD_STATE_CLIENTS 4u     /* for holders without a record, look at CLIENT LIST
                                    (crd_identity.connections) */

/* Read the state of name (name_len bytes, binary-safe) in one snapshot: one script
 * call (lua/inspect_read.lua: TYPE, HGETALL, PTTL, the fair queue and its deadlines, the
 * token, GET, the permits, the read holds' timeout keys, PUBSUB NUMSUB/SHARDNUMSUB of the
 * kind's channels; atomic, on the node serving the name), then the holders' and queued
 * waiters' identity records (one more script call for all of them), then, as flags say,
 * every record (CRD_STATE_WAITERS) and CLIENT LIST (CRD_STATE_CLIENTS). Nothing is
 * written. A state of any kind reads the same way: the name need not be a lock.
 * Returns CRD_OK with *out; CRD_INVALID_ARGUMENT (NULL client, name or out, empty name,
 * name over CRD_NAME_MAX, unknown flag bits); CRD_IO; CRD_SERVER (e.g. NOPERM: the ACL
 * lacks the status rules); CRD_CLOSED; CRD_NO_MEMORY. Identity records that cannot be
 * read (NOPERM) leave identity_read false and the state is still CRD_OK.
 * Ownership: *out is the caller's, one block, freed with crd_state_free().
 * Thread safety: any thread, concurrently with anything; blocks the calling thread for
 * at most a few round trips, each bounded by command_timeout_ms. */
CRD_API crd_status crd_state_read(crd_client *client, const char *name, size_t name_len,
                                  unsigned flags, crd_state **out);
/* Free a state. Accepts NULL. */
CRD_API void crd_state_free(crd_state *state);

/* "web-3 pid 4711 ./report.sh" (a known identity, with " [label]" when it has one), or
 * "client 77cbcfad-... (no identity record)" plus " connections: ..." when any are
 * listed: snprintf-style into buf (the length it needed is returned). Thread-safe. */
CRD_API size_t crd_identity_describe(const crd_identity *who, char *buf, size_t size);

/* Change the label of this client's identity record (NULL or "": none; at most 200
 * bytes, copied). Written at the watchdog thread's next tick (within 250 ms).
 * Returns CRD_OK; CRD_INVALID_ARGUMENT (NULL client, a label over 200 bytes);
 * CRD_CLOSED; CRD_NO_MEMORY. Thread-safe. */
CRD_API crd_status crd_client_set_label(crd_client *client, const char *label);

/* ---- scanning every Redisson object matching a pattern ---------------------------- */

typedef struct crd_scan crd_scan;

/* Start a scan of the names matching pattern (a SCAN glob; NULL: "*"), on every primary
 * of a cluster in turn. It goes SCAN step by SCAN step (COUNT count keys each, 1000 when
 * count is 0) as crd_scan_next() asks, so it can be stopped at any point, and a key
 * changed during the scan may be seen twice or not at all (SCAN's own guarantee: a name
 * that exists from start to end is seen). Keys that are parts of another object
 * (redisson_lock_queue:..., the fair deadlines, tokens, unlock latches, read-hold timeout
 * keys, {N}:timeout, credisson's identity records) are not objects of their own and are
 * skipped; so are names that are no Redisson object (CRD_KIND_OTHER), a fenced lock's
 * counter alone, and a semaphore or latch string unless flags has CRD_SCAN_SYNCS.
 * flags: CRD_STATE_* (as crd_state_read; identity records are read once per record and
 * kept for the scan's life) and the CRD_SCAN_* bits below.
 * Returns CRD_OK with *out; CRD_INVALID_ARGUMENT (NULL client or out, count over 100000,
 * unknown flags); CRD_CLOSED; CRD_NO_MEMORY. No Redis traffic until crd_scan_next().
 * Ownership: free with crd_scan_free(). Thread safety: one thread at a time per scan;
 * scans of one client may run on several threads. */
CRD_API crd_status crd_scan_new(crd_client *client, const char *pattern, size_t count,
                                unsigned flags, crd_scan **out);
#define CRD_SCAN_HELD_ONLY 256u /* only locks with a holder and permit semaphores with
                                   permits out (what `credisson list` shows) */
#define CRD_SCAN_SYNCS 512u     /* also semaphores and latches (strings holding a number) */

/* The next object: CRD_OK with *out set (the caller frees it with crd_state_free), or
 * CRD_OK with *out NULL when the scan is complete. Runs SCAN steps until it finds one,
 * or until timeout_ms milliseconds have passed (0: no bound; every call does at least one
 * step, however short its bound): then CRD_TIMEOUT and *out NULL, and a later call goes
 * on where this one stopped. CRD_INVALID_ARGUMENT for a NULL scan or out, a timeout out
 * of range.
 * Returns also CRD_IO, CRD_SERVER, CRD_CLOSED, CRD_NO_MEMORY (the scan may go on after
 * them: the step is tried again). */
CRD_API crd_status crd_scan_next(crd_scan *scan, int64_t timeout_ms, crd_state **out);
/* Keys SCAN returned so far, and whether every node's keyspace was seen (the scan
 * ended). Either pointer may be NULL. */
CRD_API void crd_scan_progress(const crd_scan *scan, uint64_t *scanned, bool *complete);
/* Free a scan (at any point). Accepts NULL. */
CRD_API void crd_scan_free(crd_scan *scan);

/* ---- watching a name's events ------------------------------------------------------ */

typedef struct crd_watch crd_watch;

/* What crd_watch_next() reports. */
typedef enum crd_watch_kind {
    CRD_WATCH_HELD = 1,     /* a holder found when the watch started */
    CRD_WATCH_ACQUIRE = 2,  /* a new holder */
    CRD_WATCH_COUNT = 3,    /* a holder's hold count changed (re-entry, partial release) */
    CRD_WATCH_RELEASE = 4,  /* a holder is gone (cause: "unlock", "expired", "removed") */
    CRD_WATCH_FOUND = 5,    /* at start, the name holds a number: a semaphore or latch */
    CRD_WATCH_PERMITS = 6,  /* a semaphore's available permits changed */
    CRD_WATCH_LATCH = 7,    /* a latch's count changed (0: opened or deleted) */
    CRD_WATCH_NOTICE = 8    /* not an event of the name: a warning or a reconnection
                               (detail says what; e.g. "this server offers neither client
                               tracking nor keyspace notifications ...") */
} crd_watch_kind;

/* One event. Strings are library-owned, valid until the next crd_watch_next() or
 * crd_watch_free() of the same watch. */
typedef struct crd_watch_event {
    crd_watch_kind kind;
    int64_t time_ms;          /* when it was seen (epoch ms, this host's clock) */
    const char *name;
    size_t name_len;
    const char *owner;        /* lock events: the owner field ("...:write" for a writer) */
    int64_t count;            /* lock events but release: the hold count; latch: the count */
    int64_t ttl_ms;           /* lock events but release: the key's PTTL */
    const char *mode;         /* read-write lock: "read" or "write", else "" */
    const char *cause;        /* release: "unlock" (a message was published), "expired"
                                 (its TTL ran out) or "removed" (deleted without one) */
    crd_object_kind object;   /* found: CRD_KIND_SEMAPHORE, _PERMIT_SEMAPHORE or _LATCH */
    int64_t available;        /* found (semaphores), permits: the available permits */
    const char *detail;       /* notice: the words; else "" */
    crd_identity who;         /* lock events: the process behind the owner (its identity
                                 record, read once per client and kept; one not written
                                 yet (a client started a moment before) or in part (an
                                 expired record being rewritten) is read again at a
                                 later event, at most every 250 ms);
                                 who.client_id "" for the other events */
} crd_watch_event;

/* Watch name (name_len bytes): hold and release events of a lock of any kind, and the
 * changes of a semaphore's permits or a latch's count, as they happen. Two connections
 * of its own to the node serving the name (the primary the sentinels name; the slot's
 * primary on a cluster): one subscribed to every channel an object of that name publishes
 * on (redisson_lock__channel:{N}, redisson_rwlock:{N}, the fair waiters'
 * redisson_lock__channel:{N}:* pattern, redisson_sc:{N},
 * redisson_countdownlatch__channel__{N}, sharded too on a cluster in sharded mode,
 * __keyspace@DB__:N, and client tracking's invalidations: CLIENT TRACKING on REDIRECT
 * BCAST PREFIX N, Redis >= 6), the other reads the name on every message, when its TTL
 * runs out and at least every interval_ms (>= 10; 0: 250). A release that publishes is
 * reported within milliseconds; an acquire (which publishes nothing) at once through
 * tracking or keyspace notifications, else at the next read (a CRD_WATCH_NOTICE at the
 * start says so). The watch declares itself in its client's identity record, so the
 * state calls do not count its subscription as a waiter. With Sentinel a lost
 * connection is followed to the new primary (a notice says so). Nothing is written.
 * Returns CRD_OK with *out; CRD_INVALID_ARGUMENT (NULL, empty name, interval out of
 * range); CRD_IO, CRD_AUTH, CRD_SERVER (connecting or subscribing failed); CRD_CLOSED;
 * CRD_NO_MEMORY. The first events (held, found, notices) come from crd_watch_next().
 * Ownership: free with crd_watch_free() before the client.
 * Thread safety: one thread at a time per watch; its two connections are its own, and
 * the owners' identity records are read through the client (any thread may use the
 * client meanwhile). */
CRD_API crd_status crd_watch_new(crd_client *client, const char *name, size_t name_len,
                                 int64_t interval_ms, crd_watch **out);
/* The next event, waiting up to timeout_ms (-1: as long as it takes; 0: only what has
 * arrived). Returns CRD_OK with *ev (library-owned, see crd_watch_event); CRD_TIMEOUT
 * when nothing happened in time; CRD_IO when the connection was lost and could not be
 * re-established (Sentinel: within timeout_ms, or 60 s when waiting forever); CRD_CLOSED;
 * CRD_INVALID_ARGUMENT. */
CRD_API crd_status crd_watch_next(crd_watch *watch, int64_t timeout_ms,
                                  const crd_watch_event **ev);
/* Free a watch (its connections are closed). Accepts NULL. */
CRD_API void crd_watch_free(crd_watch *watch);

/* ---- small helpers for tools --------------------------------------------------------- */

/* Check a URL as crd_client_new() would parse it (every form of crd_options.url),
 * without connecting. Returns CRD_OK; CRD_INVALID_ARGUMENT with the reason in err
 * (never the password); CRD_NO_MEMORY. err may be NULL when errlen is 0. Thread-safe. */
CRD_API crd_status crd_url_check(const char *url, char *err, size_t errlen);

/* Delete name (name_len bytes) whatever it holds, without a message (a plain DEL: what
 * `credisson unlock --force --delete-non-lock` does to a key that is not a lock).
 * *deleted (may be NULL) says whether there was a key. Returns CRD_OK,
 * CRD_INVALID_ARGUMENT, CRD_IO, CRD_SERVER, CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_object_delete(crd_client *client, const char *name, size_t name_len,
                                     bool *deleted);

/* With prompt_loss_detection, wait until this client's subscription to lock's channel
 * (the one kept while it holds the lock) is confirmed, at most timeout_ms: a force-unlock
 * from then on is heard at once (credisson run waits so before it starts CMD).
 * Returns CRD_OK (live), CRD_TIMEOUT, CRD_INVALID_ARGUMENT (NULL lock, timeout out of
 * range), CRD_CLOSED. Thread-safe. */
CRD_API crd_status crd_lock_await_watch(crd_lock *lock, int64_t timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* CREDISSON_H */
