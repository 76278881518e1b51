/*
 * base.h -- the bottom layer of src/ (src/base/): what every unit shares (status and detail
 * strings, clocks, owner ids, URLs and endpoints, key slots, metrics and the log) and the
 * client itself, whose layers hang off it as opaque pointers and hooks. Nothing here talks
 * to Redis. Nothing is public.
 *
 * The layers, lowest first, one folder of src/ each; a layer's files see only the headers
 * of their own and the lower layers (CMake compiles each folder so, docs/ARCHITECTURE.md):
 *   base/base.h            status.c clock.c owner.c url.c slot.c metrics.c interrupt.c grow.c
 *                          thread.c
 *   transport/transport.h  tls.c conn.c reply.c link.c engine.c engine_pass.c engine_call.c
 *   topology/topology.h    sentinel.c cluster.c route.c cmd.c script.c deploy.c
 *   wait/wait.h            wait.c pubsub.c pubsub_wait.c offload.c loop.c
 *   locks/locks.h          names.c kinds.c kinds_ext.c fieldhash.c undo.c holds.c
 *                          watchdog.c gate.c acquire.c acquire_loop.c release.c lock.c
 *                          multilock.c ident.c
 *   sync/sync.h            sync.c semaphore.c permits.c latch.c ratelimiter.c
 *   client/client.h        client.c lifecycle.c state.c inspect.c scan.c whois.c watch.c
 * A lower layer reaches a higher one only through a hook the higher one installs
 * (crd_client's primary_at, primary_gen, wake_loop, on_watched_message, on_primary_moved,
 * on_loop_dispatch, on_ident_news; crd__cmd's late). internal.h includes them all, for the CLI, the
 * fuzzers and the unit tests.
 *
 * Units and their locks:
 *   interrupt.c (intr->mu) an interrupt token's registered waits (taken by a waiter with
 *                         no other mutex held; its thread takes a wait's mutex under it)
 *   lifecycle.c (registry_mu) the client registry, fork and thread-exit handling
 *   pubsub.c  (ps->mu)    subscriber thread, channel entries, waiter wake-ups (it reads
 *                         the cluster's slot map, cl->mu, while holding it); each
 *                         subscriber connection's wmu (its writes and close; taken with
 *                         no other mutex held)
 *   cluster.c (cl->mu)    a cluster's slot map and nodes
 *   engine.c  (e->mu)     the I/O thread's peers, links and requests
 *   holds.c   (holds->mu) what this client believes it holds: count, lease, validity
 *   gate.c    (gates->mu) local waiter queues and release deferrals (a leaf)
 *   watchdog.c (wd->mu)   renewal thread's schedule; wd->ev_mu (a leaf) its loop events
 *   ident.c   (id->mu)    the identity record's holds, waits and label (a leaf, taken
 *                         after holds->mu, nothing taken under it)
 *   sentinel.c (topo->mu) where the primary is (a leaf; never during I/O)
 *   offload.c (off->mu)   the loop's helper threads' queue (a leaf)
 * Lock order: registry_mu -> ps->mu -> cl->mu -> e->mu -> holds->mu -> gates->mu ->
 * wd->mu -> topo->mu. holds->mu and ps->mu are never held together outside the fork
 * handler; no Redis traffic happens under any of them. An interrupt token's intr->mu (not
 * a client's) comes before all of them: its thread takes a wait's mutex under it, and a
 * waiter takes it with no other mutex held.
 */
#ifndef CRD_BASE_H
#define CRD_BASE_H

#include "credisson.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>


#define CRD__PRINTF(a, b) __attribute__((format(printf, a, b)))

/* OpenSSL's own type names (the same typedefs as <openssl/types.h>), so that this header
 * needs no OpenSSL header. */
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

/* Appends node to the singly linked list head ... tail through node's member next. */
#define CRD__APPEND(head, tail, node, next)                                                  \
    do {                                                                                     \
        (node)->next = NULL;                                                                 \
        if ((tail) != NULL)                                                                  \
            (tail)->next = (node);                                                           \
        else                                                                                 \
            (head) = (node);                                                                 \
        (tail) = (node);                                                                     \
    } while (0)

/* Pushes node in front of the doubly linked list head through its members prev and next. */
#define CRD__DLIST_PUSH(head, node)                                                          \
    do {                                                                                     \
        (node)->prev = NULL;                                                                 \
        (node)->next = (head);                                                               \
        if ((head) != NULL)                                                                  \
            (head)->prev = (node);                                                           \
        (head) = (node);                                                                     \
    } while (0)
/* Takes node out of the doubly linked list head (where CRD__DLIST_PUSH put it); its prev
 * and next are NULL after. */
#define CRD__DLIST_UNLINK(head, node)                                                        \
    do {                                                                                     \
        if ((node)->prev != NULL)                                                            \
            (node)->prev->next = (node)->next;                                               \
        else if ((head) == (node))                                                           \
            (head) = (node)->next;                                                           \
        if ((node)->next != NULL)                                                            \
            (node)->next->prev = (node)->prev;                                               \
        (node)->prev = (node)->next = NULL;                                                  \
    } while (0)

/* ---- status.c: thread-local detail messages ---------------------------------------- */

/* Records the detail message for the calling thread and client, returns status. The
 * format is for human text only; commands are never built with it. */
crd_status crd__fail(const crd_client *c, crd_status status, const char *fmt, ...)
    CRD__PRINTF(3, 4);
#ifdef __clang_analyzer__
/* The analyzer reads one file at a time and cannot see that crd__fail returns its status
 * argument (never CRD_OK on a failure path): it then follows "st == CRD_OK" with no reply
 * into callers (conn.c setup_cmd, release.c, script.c final_status). Spelled out for it
 * only; status.c defines the function as (crd__fail). */
#define crd__fail(c, status, ...) (crd__fail((c), (status), __VA_ARGS__), (crd_status)(status))
#endif
/* Clears the calling thread's detail for c (a successful call). */
void crd__ok(const crd_client *c);
/* Validates a handle for use: NULL, failed, closed, forked. */
crd_status crd__client_check(crd_client *c);

/* ---- grow.c ------------------------------------------------------------------------- */

/* Room for need elements of size bytes in the array v of *cap (doubled, from first when
 * empty, until need fits): v itself when it has the room, else the array moved (*cap
 * updated), or NULL with v and *cap untouched when memory ran out. */
void *crd__grow(void *v, size_t *cap, size_t need, size_t size, size_t first);
/* Bytewise order of two byte strings (a shorter prefix first): <0, 0, >0 as memcmp. */
int crd__bytes_cmp(const void *a, size_t alen, const void *b, size_t blen);
/* crd__client_check, then out (a public call's out-parameter): CRD_INVALID_ARGUMENT "out is
 * NULL" when it is NULL. The caller then sets *out to NULL. */
crd_status crd__client_check_out(crd_client *c, const void *out);

/* ---- clock.c ------------------------------------------------------------------------ */

int64_t crd__now_ms(void);      /* CLOCK_MONOTONIC */
int64_t crd__now_us(void);      /* CLOCK_MONOTONIC, microseconds */
int64_t crd__epoch_ms(void);    /* CLOCK_REALTIME, for the fair lock's deadlines only */
/* Absolute CLOCK_MONOTONIC timespec for a deadline in monotonic ms. */
struct timespec crd__abstime(int64_t deadline_ms);
/* A condition variable that waits on CLOCK_MONOTONIC. */
int crd__cond_init(pthread_cond_t *cv);
/* A subsystem's mutex (and its condition variable on the monotonic clock, when cv is not
 * NULL) made and put in c->fork_mu at its rank; 0, or an error number (nothing made). */
int crd__mutex_make(crd_client *c, int rank, pthread_mutex_t *mu, pthread_cond_t *cv);
/* Their end: out of c->fork_mu first, then destroyed (cv may be NULL). */
void crd__mutex_drop(crd_client *c, int rank, pthread_mutex_t *mu, pthread_cond_t *cv);

/* ---- thread.c ---------------------------------------------------------------------- */

/* pthread_create for every thread of the library: the new thread starts with every
 * signal blocked, so a signal sent to the process runs the application's handler on one
 * of the application's threads, never on the library's. Returns pthread_create's
 * result. */
int crd__thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);

/* The start of every client thread: names the calling thread `name` (at most 15 bytes).
 * Its signals, SIGPIPE among them, are blocked from its start (crd__thread_create). */
void crd__thread_enter(const char *name);
/* The stop of a client thread: under mu, *stop set and cv (may be NULL) broadcast; then,
 * outside it, one byte written to wake_fd (-1: none; a thread that sleeps in poll, not on
 * cv) and the thread joined if *started said it was, in this process (a fork child has no
 * such thread). The caller clears *started and frees what is left. */
void crd__thread_stop(crd_client *c, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop,
                      const bool *started, const pthread_t *thread, int wake_fd);

/* ---- owner.c ----------------------------------------------------------------------- */

/* Writes v in decimal at p (at most 20 bytes, no NUL); returns the new end. */
char *crd__put_u64(char *p, uint64_t v);
/* Writes "<uuid>:<id>" into buf (>= 58 bytes); returns its length. */
size_t crd__owner_field(const char *uuid, uint64_t owner, char *buf);
/* 16 random bytes from the OS as 32 lowercase hex characters plus NUL. */
crd_status crd__random_hex32(char out[33]);
/* Forget buffered random bytes (fork child handler). */
void crd__random_after_fork(void);
/* A v4 UUID from libuuid (which reads the OS CSPRNG), lowercase. */
void crd__uuid_v4(char out[37]);
/* This process's pid as of the last refresh (at the first client, and in fork children). */
pid_t crd__process_pid(void);
void crd__process_refresh(void);
/* Thread-exit hook: called with the exiting thread's owner id (if it had one). */
void crd__owner_set_exit_hook(void (*hook)(uint64_t owner));

/* ---- interrupt.c: interrupt tokens (crd_interrupt) ------------------------------------- */

/* One wait registered on a token: its thread calls wake(arg) when the token is raised
 * while the wait is registered. The caller owns the record (a stack variable of the wait). */
typedef struct crd__intr_wait {
    void (*wake)(void *arg);
    void *arg;
    struct crd__intr_wait *prev, *next;
} crd__intr_wait;
/* The token the calling thread bound (crd_interrupt_bind), or NULL. */
crd_interrupt *crd__intr_current(void);
/* Whether in (may be NULL) is raised. */
bool crd__intr_raised(const crd_interrupt *in);
/* Registers w on in (NULL: nothing) before a wait sleeps, and removes it after the wait
 * has let go of its own mutex; once _leave returns, wake is not called for w any more.
 * Both take in's mutex: call them with no other mutex held. */
void crd__intr_enter(crd_interrupt *in, crd__intr_wait *w, void (*wake)(void *arg), void *arg);
void crd__intr_leave(crd_interrupt *in, crd__intr_wait *w);

/* ---- url.c: the URL forms of crd_options.url --------------------------------------- */

/* One seed node of a cluster: where to ask for the topology first. */
typedef struct crd__seed {
    char *host;
    int port;
} crd__seed;

typedef struct crd__endpoint {
    char *host;
    int port;
    char *unix_path;
    char *username;
    char *password;
    int db;
    bool tls;         /* rediss:// */
    bool cluster;     /* redis-cluster://, or deployment CRD_DEPLOYMENT_CLUSTER */
    crd__seed *seeds; /* cluster: every seed node (the first is also host and port) */
    int nseeds;
} crd__endpoint;

/* Parses a redis://, rediss://, redis-cluster:// or unix:// URL into *out (cleared
 * first). On failure writes a reason into err and leaves *out empty. Pure; any thread. */
crd_status crd__url_parse(const char *url, crd__endpoint *out, char *err, size_t errlen);
/* Parses a seed list "host[:port][,host[:port]...]" (port 6379 by default, [v6]:port
 * allowed) into out->seeds, replacing any there; host and port become the first seed.
 * Pure; any thread. */
crd_status crd__seeds_parse(const char *list, size_t len, crd__endpoint *out, char *err,
                            size_t errlen);
/* Sentinel mode's configuration: where the sentinels are (each with the sentinels'
 * credentials), the master name, and the data nodes' database and TLS switch from a
 * redis-sentinel:// URL. */
typedef struct crd__sentinel_cfg {
    crd__endpoint *addrs;
    size_t naddrs;
    char *master;
    int db;
    bool tls; /* rediss-sentinel:// */
} crd__sentinel_cfg;

/* Whether url starts with redis-sentinel:// or rediss-sentinel://. Pure. */
bool crd__url_is_sentinel(const char *url);
/* Parses a redis-sentinel:// or rediss-sentinel:// URL into *out (cleared first); on
 * failure writes a reason into err and leaves *out empty. Pure; any thread. */
crd_status crd__sentinel_url_parse(const char *url, crd__sentinel_cfg *out, char *err,
                                   size_t errlen);
/* Appends the sentinels of "host[:port],..." (crd_options.sentinel_addrs) to *out. */
crd_status crd__sentinel_addrs_parse(const char *list, crd__sentinel_cfg *out, char *err,
                                     size_t errlen);
void crd__sentinel_cfg_clear(crd__sentinel_cfg *cfg);
void crd__endpoint_clear(crd__endpoint *ep);

/* ---- slot.c: Redis Cluster key slots ------------------------------------------------ */

#define CRD__NSLOTS 16384
/* CRC16/XMODEM, the checksum Redis Cluster hashes keys with. Pure. */
uint16_t crd__crc16(const char *p, size_t len);
/* The slot of a key: the CRC16 of its hash tag (first '{' to the next '}', non-empty)
 * or of the whole key, modulo 16384. Pure. */
int crd__key_slot(const char *key, size_t len);

/* ---- metrics.c: counters, histograms and log messages ------------------------------------ */

#define CRD__HIST_BUCKETS 48

typedef struct crd__hist {
    atomic_uint_fast64_t bucket[CRD__HIST_BUCKETS]; /* bucket i: values < 2^i ms */
    atomic_int_fast64_t max;
    atomic_uint_fast64_t sum_ms; /* of every value added (the Prometheus _sum) */
} crd__hist;

typedef struct crd__metrics {
    atomic_uint_fast64_t acquisitions, contended, acquire_busy, releases, renewals,
        renewal_failures, locks_lost, connects, connection_failures, subscribes,
        watchdog_round_trips, runs_skipped, runs_degraded, local_queued, deferred,
        late_holds_released, outcomes_unknown, permits_acquired, permits_released,
        permit_acquires_contended, permit_acquire_busy, latch_count_downs, latch_awaits_woken,
        latch_await_timeouts, eviction_warnings, sync_refusals, crossslot_rebatches;
    /* A gauge: threads asleep in a blocking acquire or await right now (pubsub.c's
     * crd__sub_wait, gate.c's queue and deferral); 0 in a forked child (lifecycle.c). */
    atomic_int_fast64_t waiting;
    /* A gauge: the holds the client records (holds.c keeps it with its table's count). */
    atomic_int_fast64_t holds;
    crd__hist wait, hold;
} crd__metrics;

void crd__hist_add(crd__hist *h, int64_t ms);
#define CRD__COUNT(c, field) atomic_fetch_add_explicit(&(c)->metrics.field, 1, memory_order_relaxed)
#define CRD__COUNT_N(c, field, n)                                                            \
    atomic_fetch_add_explicit(&(c)->metrics.field, (uint_fast64_t)(n), memory_order_relaxed)
/* Moves the waiting gauge by d (+1 before a blocking wait, -1 after it). */
#define CRD__WAITING(c, d)                                                                     \
    atomic_fetch_add_explicit(&(c)->metrics.waiting, (d), memory_order_relaxed)
/* Sends one line to on_log, if set. */
void crd__log(crd_client *c, crd_log_level level, const char *fmt, ...) CRD__PRINTF(3, 4);

/* ---- client.c ------------------------------------------------------------------------ */

/* The client's mutexes, in the one order a thread may take them (docs/ARCHITECTURE.md;
 * off->mu is a leaf taken first only by the fork handler). Each subsystem puts its mutex
 * in crd_client.fork_mu when it makes it; the fork handler (lifecycle.c) takes them all in
 * this order, after registry_mu, and lets go in the reverse one. */
typedef enum crd__mu_rank {
    CRD__MU_OFFLOAD,  /* off->mu (offload.c) */
    CRD__MU_PUBSUB,   /* ps->mu (pubsub.c) */
    CRD__MU_CLUSTER,  /* cl->mu (cluster.c) */
    CRD__MU_ENGINE,   /* e->mu (engine.c) */
    CRD__MU_HOLDS,    /* holds->mu (holds.c) */
    CRD__MU_GATES,    /* gates->mu (gate.c) */
    CRD__MU_WATCHDOG, /* wd->mu (watchdog.c) */
    CRD__MU_TOPOLOGY, /* topo->mu (sentinel.c) */
    CRD__MU_RANKS
} crd__mu_rank;

typedef struct crd__pool crd__pool;
typedef struct crd__pubsub crd__pubsub;
typedef struct crd__holds crd__holds;
typedef struct crd__gates crd__gates;
typedef struct crd__gate crd__gate;
typedef struct crd__watchdog crd__watchdog;
typedef struct crd__loop crd__loop;
typedef struct crd__topology crd__topology;
typedef struct crd__deploy crd__deploy;

struct crd_client {
    crd_options opts;     /* copies; strings below are owned */
    crd__endpoint ep;
    SSL_CTX *tls;         /* TLS connections: the client's one context; NULL for plaintext */
    char *tls_name;       /* the name the server's certificate must match (SNI) */
    bool tls_verify;
    char uuid[37];
    char errmsg_init[256]; /* why crd_client_new failed, for a failed client */
    bool failed;
    atomic_bool closed;
    pid_t pid;            /* process that created the client (fork detection) */

    crd__pool *pool;      /* standalone: the endpoint's peer; cluster: NULL (per node) */
    struct crd__engine *engine; /* engine.c: the I/O thread, its peers and requests */
    struct crd__cluster *cluster; /* cluster mode: the slot map and the nodes (cluster.c) */
    bool sharded;         /* SSUBSCRIBE / SPUBLISH instead of SUBSCRIBE / PUBLISH */
    const char *publish;  /* "SPUBLISH" or "PUBLISH": what unlock scripts are told */
    crd__pubsub *ps;
    crd__holds *holds;
    crd__gates *gates;    /* gate.c: local waiter queues and release deferrals per name */
    crd__watchdog *wd;
    crd__loop *loop; /* event-loop operations (loop.c); loop thread only */
    struct crd__offload *off; /* the loop API's helper thread (offload.c) */
    crd__topology *topo;  /* sentinel.c: where the primary is; replica sync */
    crd__deploy *deploy;  /* deploy.c: what the deployment allows (WAIT, slots, eviction) */
    /* The subscriber thread's hook into the watchdog (set by watchdog.c; pubsub.c does
     * not call watchdog.c directly): a message came on a watched hold's channel. */
    void (*on_watched_message)(crd_client *c);
    /* Set by watchdog.c: the primary moved (sentinel.c, no lock held); every hold is
     * renewed there now instead of at the next period. */
    void (*on_primary_moved)(crd_client *c);
    /* Set by watchdog.c when events_on_loop: each crd_loop_dispatch delivers the events it
     * kept for the loop thread first (loop.c does not call watchdog.c). */
    void (*on_loop_dispatch)(crd_client *c);
    /* Set by watchdog.c, whose thread writes the identity record: ident.c has something
     * new to write (a label, the first hold after idling, a NOSCRIPT to answer) and wakes
     * that thread through it (ident.c does not call watchdog.c); NULL before the start. */
    void (*on_ident_news)(crd_client *c);
    /* The engine's hooks into the layers above it (set by client.c, so that engine.c
     * calls none of them): where the primary is now and its generation (Sentinel mode;
     * NULL otherwise), and the event loop's wake-up. */
    crd_status (*primary_at)(crd_client *c, crd__endpoint *out, uint64_t *gen, char *why,
                             size_t whylen);
    uint64_t (*primary_gen)(crd_client *c);
    void (*wake_loop)(crd_client *c);

    pthread_mutex_t *fork_mu[CRD__MU_RANKS]; /* see crd__mu_rank; NULL: none (yet) */
    struct crd_client *next_client; /* registry (lifecycle.c) */
    crd__metrics metrics;
    struct crd__ident *ident; /* ident.c: the identity record (NULL when identity is off) */
};

#endif /* CRD_BASE_H */
