/*
 * internal.h -- declarations shared by the units of src/ (and the CLI and unit tests,
 * which link the internals). Nothing here is public. docs/ARCHITECTURE.md draws the
 * flow; this says who owns what.
 *
 * Units and their locks (a thread never takes them in another order than this):
 *   lifecycle.c (registry_mu) the client registry, fork and thread-exit handling
 *   pubsub.c  (ps->mu)    subscriber thread, channel entries, waiter wake-ups (it reads
 *                         the cluster's slot map, cl->mu, while holding it)
 *   cluster.c (cl->mu)    a cluster's slot map and nodes
 *   engine.c  (e->mu)     the I/O thread's peers, links and requests (engine.h)
 *   holds.c   (holds->mu) what this client believes it holds: count, lease, validity
 *   gate.c    (gates->mu) local waiter queues and release deferrals (a leaf)
 *   watchdog.c (wd->mu)   renewal thread's schedule
 * holds->mu and ps->mu are never held together outside the fork handler; pool->mu is a
 * leaf; no Redis traffic happens under any of them. Files call only files below them:
 * acquire/release/lock -> kinds -> names; everything that talks to Redis -> script ->
 * pool -> conn; lifecycle -> release.
 */
#ifndef CRD_INTERNAL_H
#define CRD_INTERNAL_H

#include "credisson.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "crd_scripts.h"

#define CRD__PRINTF(a, b) __attribute__((format(printf, a, b)))

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

/* ---- clock.c ------------------------------------------------------------------------ */

int64_t crd__now_ms(void);      /* CLOCK_MONOTONIC */
int64_t crd__now_us(void);      /* CLOCK_MONOTONIC, microseconds */
int64_t crd__epoch_ms(void);    /* CLOCK_REALTIME, for the fair lock's deadlines only */
/* Absolute CLOCK_MONOTONIC timespec for a deadline in monotonic ms. */
struct timespec crd__abstime(int64_t deadline_ms);
/* A condition variable that waits on CLOCK_MONOTONIC. */
int crd__cond_init(pthread_cond_t *cv);

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

/* ---- names.c: Redisson's derived names (PROTOCOL.md 2.1), the one place they live ----------- */

typedef struct crd__buf {
    char *p;
    size_t len;
} crd__buf;

/* Lock kinds. A hold is identified by (name, owner, kind): one owner may hold the read
 * and the write lock of one name at once. What each kind sends is in kinds.c. */
typedef enum crd__kind {
    CRD__RLOCK = 0,
    CRD__FAIR = 1,
    CRD__READ = 2,
    CRD__WRITE = 3,
    CRD__FENCED = 4
} crd__kind;
#define CRD__NKINDS 5

#define CRD__LOCK_CHANNEL "redisson_lock__channel" /* RLock, fair (+ ":<field>" per waiter) */
#define CRD__RW_CHANNEL "redisson_rwlock"          /* read-write lock */
#define CRD__LATCH "redisson_unlock_latch"         /* unlock latch, "<latch>:{N}:<rid>" */
#define CRD__FAIR_QUEUE "redisson_lock_queue"      /* fair: LIST of waiting owner fields */
#define CRD__FAIR_DEADLINES "redisson_lock_timeout" /* fair: ZSET field -> epoch ms */
#define CRD__FENCED_TOKEN "redisson_lock_token"    /* fenced: the token counter (STRING) */
#define CRD__WRITE_SUFFIX ":write"                 /* a writer's field: "<uuid>:<id>:write" */
#define CRD__READ_TIMEOUT_SUFFIX ":rwlock_timeout" /* read hold i: "<P>:<field>:rwlock_timeout:i" */
#define CRD__FIELD_MAX 80                          /* an owner field, with ":write" and NUL */

/* Every key and channel one lock of one kind uses. */
typedef struct crd__names {
    crd__buf channel;      /* rlock, fair: redisson_lock__channel:{N}; rw: redisson_rwlock:{N} */
    crd__buf latch_prefix; /* redisson_unlock_latch:{N}: (a latch is this plus a request id) */
    crd__buf queue;        /* fair: redisson_lock_queue:{N} */
    crd__buf deadlines;    /* fair: redisson_lock_timeout:{N} */
    crd__buf rw_prefix;    /* read-write: P = {N}, or N when it has a '{' */
    crd__buf token;        /* fenced: redisson_lock_token:{N} */
} crd__names;

crd_status crd__names_init(crd__names *n, crd__kind kind, const char *name, size_t len);
void crd__names_clear(crd__names *n);
/* "<prefix>:{N}" or "<prefix>:N" when N contains '{' (Redisson's prefixName). */
crd_status crd__derived_name(const char *prefix, const char *name, size_t len, crd__buf *out);
/* The read-write key prefix P: "{N}", or N when it contains '{' (Redisson's suffixName
 * without a suffix). _len says how long it is; _put writes it and a NUL into out. */
size_t crd__rw_prefix_len(const char *name, size_t len);
size_t crd__rw_prefix_put(const char *name, size_t len, char *out);
/* The fenced token counter "redisson_lock_token:{N}" (or ":N"): length, and written with
 * a NUL into out. */
size_t crd__token_key_len(const char *name, size_t len);
size_t crd__token_key_put(const char *name, size_t len, char *out);
/* An owner's hash field, "<uuid>:<id>" or "<uuid>:<id>:write"; buf >= CRD__FIELD_MAX. */
size_t crd__field(const char *uuid, uint64_t owner, bool write, char *buf);
/* A read hold's timeout key base "<P>:<field>:rwlock_timeout" (hold i adds ":i") into buf
 * (plen + flen + 16 bytes). Returns its length. */
size_t crd__read_timeout_base(const char *prefix, size_t plen, const char *field, size_t flen,
                              char *buf);
/* True for names whose braces break slot co-location (PROTOCOL.md 2.3 class C). */
bool crd__name_is_unsafe(const char *name, size_t len);

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

/* ---- tls.c: TLS over a connected socket (OpenSSL) ------------------------------------ */

/* OpenSSL's own type names (the same typedefs as <openssl/types.h>), so that this header
 * needs no OpenSSL header. */
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

/* What crd_options says about TLS; borrowed strings. */
typedef struct crd__tls_config {
    const char *ca_file, *ca_dir, *cert_file, *key_file;
    bool insecure; /* no verification of the server's certificate */
} crd__tls_config;

/* Creates the one context of a client: CA, client certificate and key loaded once
 * (the system's CAs when neither CA option is given). On failure err says which file
 * and why: CRD_INVALID_ARGUMENT, CRD_NO_MEMORY. Any thread. */
crd_status crd__tls_ctx_new(const crd__tls_config *cfg, SSL_CTX **out, char *err, size_t errlen);
void crd__tls_ctx_free(SSL_CTX *ctx);
/* The handshake on a connected socket fd, done by deadline_ms (monotonic). server_name
 * (may be NULL) is sent as SNI unless it is an IP address, and the certificate must
 * match it when verify. Returns CRD_OK with *out; CRD_AUTH when the certificate was not
 * trusted or the server refused ours; CRD_IO for a transport failure (timeout, a
 * server that does not speak TLS); err says which in words. The socket is left
 * blocking, as it was. */
/* The engine's non-blocking TLS (link.c): a session over fd, not yet handshaken... */
crd_status crd__tls_session(SSL_CTX *ctx, int fd, const char *server_name, bool verify,
                            SSL **out, char *err, size_t errlen);
/* ...one handshake step: 0 done, POLLIN or POLLOUT wanted, -1 failed (*st, err). */
int crd__tls_handshake(SSL *ssl, bool verify, const char *server_name, crd_status *st,
                       char *err, size_t errlen);
/* Non-blocking read: bytes, 0 (a record without data: read again), -2 would block, -1
 * failed (why, *refused). */
int crd__tls_recv(SSL *ssl, char *buf, size_t cap, char *why, size_t whylen, bool *refused);
/* Non-blocking write: bytes written, 0 would block, -1 failed (*why). */
long crd__tls_send(SSL *ssl, const char *buf, size_t len, const char **why);
crd_status crd__tls_connect(SSL_CTX *ctx, int fd, const char *server_name, bool verify,
                            int64_t deadline_ms, SSL **out, char *err, size_t errlen);
/* One read: > 0 bytes; 0 when a record without data arrived (read again); -1 on failure
 * with why in words (*refused: the server refused our certificate). Blocks up to the
 * socket's receive timeout. */
int crd__tls_read(SSL *ssl, char *buf, size_t cap, char *why, size_t whylen, bool *refused);
/* Writes all of buf; false with *why on failure (never raises SIGPIPE). */
bool crd__tls_write(SSL *ssl, const char *buf, size_t len, const char **why);
/* The server asked for a client certificate and none is configured (it may require one:
 * a TLS 1.3 server then drops the connection after the handshake). */
bool crd__tls_cert_requested(SSL *ssl);
/* Decrypted bytes wait inside the SSL object: poll() on the socket would not see them. */
bool crd__tls_pending(SSL *ssl);
/* Frees the SSL object without a close_notify (nothing is written). */
void crd__tls_free(SSL *ssl);
/* ---- slot.c: Redis Cluster key slots ------------------------------------------------ */

#define CRD__NSLOTS 16384
/* CRC16/XMODEM, the checksum Redis Cluster hashes keys with. Pure. */
uint16_t crd__crc16(const char *p, size_t len);
/* The slot of a key: the CRC16 of its hash tag (first '{' to the next '}', non-empty)
 * or of the whole key, modulo 16384. Pure. */
int crd__key_slot(const char *key, size_t len);

/* ---- conn.c: one hiredis connection --------------------------------------------------- */

typedef struct crd__conn {
    redisContext *ctx;
    SSL *ssl;       /* TLS connections: the session over ctx->fd; NULL for plaintext */
    bool broken;    /* an I/O error happened: discard, never reuse */
    bool replied;   /* a reply has been read on it (a plaintext connection closed before
                       its first reply may be talking to a TLS-only port) */
    bool refused;   /* TLS: the server refused our certificate after the handshake */
    char why[200];  /* TLS: the words of the last read failure (errstr holds 128 bytes) */
    unsigned epoch; /* pool connections: the pool epoch when it was opened */
    struct crd__pool *pool; /* pool connections: the pool it belongs to */
    uint64_t topo_gen; /* the primary's generation it was opened under (sentinel.c) */
    int replicas;      /* cluster replica sync: its node's replicas (ROLE), read at */
    int64_t replicas_at; /* replicas_at (monotonic ms; 0: never) */
} crd__conn;

/* Opens a connection to ep with the client's timeouts, AUTH and SELECT. The endpoint is
 * an argument so that each connect can resolve where to go (Sentinel, Cluster nodes). */
crd_status crd__conn_open(crd_client *c, const crd__endpoint *ep, crd__conn *conn);
void crd__conn_close(crd__conn *conn);
/* In a forked child: give up a connection another (parent) thread may have been using
 * at the fork. Its socket is closed (never written); its memory, possibly caught
 * mid-update, is never touched again, only kept reachable. */
void crd__conn_abandon(crd__conn *conn);
/* Sends one command (argv with lengths) and reads its reply. On CRD_IO the connection is
 * marked broken; *reply is NULL. Error replies are returned as CRD_OK with the reply
 * (callers classify them with crd__reply_classify). Traces the command when the client
 * has on_trace. */
crd_status crd__conn_command(crd_client *c, crd__conn *conn, int argc, const char **argv,
                             const size_t *lens, redisReply **reply);
/* Pipelined form: appends all commands, then reads all replies into replies[]. */
crd_status crd__conn_pipeline(crd_client *c, crd__conn *conn, int ncmd, const int *argcs,
                              const char *const *const *argvs,
                              const size_t *const *lens, redisReply **replies);
void crd__trace(crd_client *c, int argc, const char *const *argv, const size_t *lens,
                const redisReply *r, const char *io_error, bool subscriber);
/* Appends argv as one RESP command to the buffer *p (length *len, capacity *cap, grown
 * with realloc). False when out of memory (the buffer is unchanged). */
bool crd__resp_append(char **p, size_t *len, size_t *cap, int argc, const char *const *argv,
                      const size_t *lens);
/* The second half of crd__conn_command for a command already sent (or not: sent false,
 * why the send failed): reads and traces its reply, or fails as it would. */
crd_status crd__conn_reply(crd_client *c, crd__conn *conn, int argc, const char **argv,
                           const size_t *lens, bool sent, const char *why, redisReply **reply);
/* Writes all of buf on the connection's transport; false with *why on failure. */
bool crd__conn_send(crd__conn *conn, const char *buf, size_t len, const char **why);
/* One read from the transport into the context's reply reader. REDIS_OK, or REDIS_ERR
 * with conn->ctx->err and errstr set. */
int crd__conn_fill(crd__conn *conn);
/* Bytes already read from the socket wait to be parsed (TLS): do not poll() first. */
bool crd__conn_buffered(const crd__conn *conn);
/* Reads one reply, blocking (bounded by the command timeout): REDIS_OK with *out, or
 * REDIS_ERR with conn->ctx->errstr. For the CLI's raw connections (its own commands). */
int crd__conn_read(crd__conn *conn, redisReply **out);

/* ---- reply.c: every reply classified once ---------------------------------------------- */

typedef enum crd__reply_class {
    CRD__REPLY_OK,        /* not an error reply: the command ran */
    CRD__REPLY_ERROR,     /* the server refused or the script failed (WRONGTYPE, ERR, ...) */
    CRD__REPLY_NOSCRIPT,  /* EVALSHA of a script the server has not cached: nothing ran */
    CRD__REPLY_MOVED,     /* cluster: the key's slot is served by another node */
    CRD__REPLY_ASK,       /* cluster: ask another node, for this one command */
    CRD__REPLY_READONLY,  /* a replica answered a write: not the primary */
    CRD__REPLY_BUSY,      /* LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN: not now */
    CRD__REPLY_NONE       /* no reply at all (NULL) */
} crd__reply_class;

/* Which class a reply is in. Every class but OK and ERROR means the command did not
 * run, so sending it again (elsewhere, or later) cannot apply it twice. Pure. */
crd__reply_class crd__reply_classify(const redisReply *r);
/* Records and returns the status for a reply the caller cannot use: CRD_SERVER with the
 * server's words for an error reply (without the script SHA and the "@user_script"
 * position Redis appends: internal identifiers say nothing to a user), CRD_PROTOCOL with
 * the reply rendered for anything else. what names the operation. */
crd_status crd__reply_fail(crd_client *c, const redisReply *r, const char *what);
/* The server's words of an error reply without the script tail; returns their length. */
size_t crd__reply_error_text(const redisReply *r, const char **text);
/* Renders a reply for traces and messages. */
void crd__reply_render(const redisReply *r, char *buf, size_t len);
/* Reads a decimal integer reply, or a string holding one (HGET of a count). NIL is 0.
 * False for anything else. */
bool crd__reply_int(const redisReply *r, int64_t *out);

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
        latch_await_timeouts;
    /* A gauge: threads asleep in a blocking acquire or await right now (pubsub.c's
     * crd__sub_wait, gate.c's queue and deferral); 0 in a forked child (lifecycle.c). */
    atomic_int_fast64_t waiting;
    crd__hist wait, hold;
} crd__metrics;

void crd__hist_add(crd__hist *h, int64_t ms);
#define CRD__COUNT(c, field) atomic_fetch_add_explicit(&(c)->metrics.field, 1, memory_order_relaxed)
#define CRD__COUNT_N(c, field, n)                                                            \
    atomic_fetch_add_explicit(&(c)->metrics.field, (uint_fast64_t)(n), memory_order_relaxed)
/* Moves the waiting gauge by d (+1 before a blocking wait, -1 after it). */
#define CRD__WAITING(c, d) atomic_fetch_add_explicit(&(c)->metrics.waiting, (d), memory_order_relaxed)
/* Sends one line to on_log, if set. */
void crd__log(crd_client *c, crd_log_level level, const char *fmt, ...) CRD__PRINTF(3, 4);

/* ---- client.c ------------------------------------------------------------------------ */

typedef struct crd__pool crd__pool;
typedef struct crd__pubsub crd__pubsub;
typedef struct crd__holds crd__holds;
typedef struct crd__gates crd__gates;
typedef struct crd__gate crd__gate;
typedef struct crd__watchdog crd__watchdog;
typedef struct crd__loop crd__loop;
typedef struct crd__topology crd__topology;

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
    /* The subscriber thread's hook into the watchdog (set by watchdog.c; pubsub.c does
     * not call watchdog.c directly): a message came on a watched hold's channel. */
    void (*on_watched_message)(crd_client *c);
    /* Set by watchdog.c: the primary moved (sentinel.c, no lock held); every hold is
     * renewed there now instead of at the next period. */
    void (*on_primary_moved)(crd_client *c);
    /* The engine's hooks into the layers above it (set by client.c, so that engine.c
     * calls none of them): where the primary is now and its generation (Sentinel mode;
     * NULL otherwise), and the event loop's wake-up. */
    crd_status (*primary_at)(crd_client *c, crd__endpoint *out, uint64_t *gen, char *why,
                             size_t whylen);
    uint64_t (*primary_gen)(crd_client *c);
    void (*wake_loop)(crd_client *c);

    struct crd_client *next_client; /* registry (lifecycle.c) */
    crd__metrics metrics;
};

/* ---- sentinel.c: where the primary is, and replica sync ------------------------------------- */

/* Replica sync's WAIT timeout when a script on key may be followed by a WAIT (replica
 * sync on, and its node not known to have no replica), else 0: what its round trip may
 * take beyond the command timeout (acquire.c's attempt budget). */
int64_t crd__sync_budget_ms(crd_client *c, const char *key, size_t keylen);

/* Sets up the topology: sentinel mode when cfg is non-NULL (taken over, cleared), and
 * replica sync from the options. No I/O. */
crd_status crd__topology_init(crd_client *c, crd__sentinel_cfg *cfg, const crd_options *o);
/* Sentinel mode: resolves the primary once (the client's start fails when that fails)
 * and starts the +switch-master listener thread. Standalone: nothing. */
crd_status crd__topology_start(crd_client *c);
void crd__topology_stop(crd_client *c); /* joins the listener */
void crd__topology_free(crd_client *c);
bool crd__topology_sentinel(const crd_client *c);
/* The primary's generation: it moves whenever the primary's address changes. A
 * connection opened under an older one must be reopened (crd__conn.topo_gen). */
uint64_t crd__topology_gen(crd_client *c);
/* Where to connect now: a copy of the endpoint (standalone: c->ep; sentinel: the resolved
 * primary with the data nodes' credentials, resolving first when needed) and its
 * generation. The caller frees *out with crd__endpoint_clear. */
crd_status crd__endpoint_for_connect(crd_client *c, crd__endpoint *out, uint64_t *gen);
/* The same without ever asking the sentinels (the I/O thread): CRD_IO with why when the
 * primary is not known yet. */
crd_status crd__endpoint_peek(crd_client *c, crd__endpoint *out, uint64_t *gen, char *why,
                              size_t whylen);
/* crd__conn_open to the current primary, setting conn->topo_gen; in sentinel mode a
 * failed connect re-resolves and, when the primary moved, tries the new one once. */
crd_status crd__conn_open_primary(crd_client *c, crd__conn *conn);
/* The hook for "the primary may have moved": a READONLY reply or a failed connection
 * seen on a connection of generation gen_seen (0: whatever the current one). Sentinel
 * mode re-resolves (unless another thread already moved past gen_seen) and returns the
 * resolution's status; standalone returns CRD_OK at once. */
/* Blocks SIGPIPE in the calling thread: the client's own threads (subscriber, sentinel
 * listener, cluster refresher) write sockets; nothing they do may raise it (conn.c). */
void crd__block_sigpipe(void);
crd_status crd__topology_changed(crd_client *c, uint64_t gen_seen);
/* The same hook for a caller's thread, which must not outlive its deadline: sentinel
 * mode asks the listener thread to ask the sentinels now and returns at once (without
 * the thread, a fork child's before its next connect, it re-resolves itself). */
void crd__topology_suspect(crd_client *c);
/* Replica sync's one rule: how many replicas WAIT waits for after a lock script sent to
 * peer p (a primary), 0 for no WAIT (sync off, or no replicas), and its timeout in
 * *timeout_ms. May send ROLE to p (through the engine, bounded by deadline_ms) to refresh
 * the count. */
int crd__sync_replicas(crd_client *c, crd__pool *p, int64_t *timeout_ms, int64_t deadline_ms);
void crd__topology_lock_for_fork(crd_client *c, bool lock);
void crd__topology_after_fork_child(crd_client *c);

/* ---- engine.c: peers (one server or cluster node each; engine.h has the rest) ---------- */

/* The peer for ep (borrowed; must outlive the client): up to opts.pool_size pipelined
 * links, opened on demand by the I/O thread. NULL when out of memory. */
crd__pool *crd__pool_new(crd_client *c, const crd__endpoint *ep);
/* Peers live as long as the client's engine: a no-op kept for cluster.c. */
void crd__pool_destroy(crd__pool *p);
/* Where a peer's links go (&c->ep: the primary, which the sentinels name). */
const crd__endpoint *crd__pool_ep(const crd__pool *p);
/* Replica sync on a cluster: the node's replica count as last read, whether it is
 * younger than max_age; and setting it. */
int crd__pool_replicas(crd__pool *p, int64_t now, int64_t max_age, bool *fresh);
void crd__pool_set_replicas(crd__pool *p, int n, int64_t now);

/* ---- route.c: which peer serves a key ---------------------------------------------------- */

/* Standalone: the endpoint's peer. Cluster: reads the topology from the seeds and makes
 * one peer per primary (cluster.c). */
crd_status crd__pool_init(crd_client *c);
/* The peer for a command on key: standalone, the one endpoint's; cluster, the primary's
 * serving the key's slot (NULL, with the detail set, when the map has none). The one
 * place a peer is chosen for a key. No I/O. */
crd__pool *crd__pool_for(crd_client *c, const char *key, size_t keylen);
/* Forgets the peers (the engine frees them) and frees the cluster's nodes. */
void crd__pool_free(crd_client *c);

/* ---- cluster.c: the slot map and the nodes of a Redis Cluster ------------------------- */

/* One node the client has heard of (a seed, a primary of the map, a redirect target).
 * Nodes are never freed before the client, so a pointer to one stays valid. */
typedef struct crd__node {
    crd__endpoint ep; /* host owned; username and password borrowed from the client's */
    crd__pool *pool;  /* commands to this node */
    struct crd__node *next;
} crd__node;

typedef struct crd__cluster crd__cluster;

/* Reads the slot map from the first seed that answers CLUSTER SLOTS and creates a pool
 * per primary. CRD_IO when no seed answers, CRD_INVALID_ARGUMENT when a seed is not in
 * cluster mode; the message names the seeds tried. */
crd_status crd__cluster_init(crd_client *c);
/* Frees the nodes and their pools (waiting for connections in use to come back). */
void crd__cluster_free(crd_client *c);
/* The primary serving key's slot (any primary for a NULL key). Refreshes the map first
 * when it is stale or due for its periodic refresh (one refresh in flight at a time;
 * others use the current map). NULL only when no slot map could ever be read. */
crd__node *crd__cluster_node_for(crd_client *c, const char *key, size_t len);
/* The primary serving key's slot in the map as it is now: no refresh, no I/O (for
 * callers holding a mutex). NULL when the map has no owner for it. */
crd__node *crd__cluster_node_peek(crd_client *c, const char *key, size_t len);
/* The node at host:port, added to the known nodes if new (a redirect's target). NULL
 * when out of memory. */
crd__node *crd__cluster_node_at(crd_client *c, const char *host, size_t hostlen, int port);
/* Parses "MOVED <slot> <host>:<port>" or "ASK ..." (host may be empty or [v6]). Pure. */
bool crd__cluster_parse_redirect(const redisReply *r, int *slot, const char **host,
                                 size_t *hostlen, int *port);
/* A MOVED reply: slot is served by n from now on; a full refresh follows at the next
 * chance. */
void crd__cluster_moved(crd_client *c, int slot, crd__node *n);
/* The map may be wrong (a connection failed, READONLY, a pushed SUNSUBSCRIBE): refresh
 * it at the next chance. */
void crd__cluster_stale(crd_client *c);
/* Refreshes the map now unless a refresh is in flight (then returns at once). */
crd_status crd__cluster_refresh(crd_client *c);
/* Calls fn for every known node's pool (fork handlers, wake-ups). Takes the cluster's
 * mutex around the walk unless held says the caller (the fork handler) holds it. */
void crd__cluster_foreach_pool(crd_client *c, void (*fn)(crd_client *, crd__pool *, void *),
                               void *arg, bool held);
/* The nodes serving slots now (the primaries), at most max, in slot order; nodes are
 * never freed before the client. */
int crd__cluster_primaries(crd_client *c, crd__node **out, int max);
void crd__cluster_lock_for_fork(crd_client *c, bool lock);
void crd__cluster_after_fork_child(crd_client *c);
/* Fork handlers (lifecycle.c): hold the pool's mutex across fork(); in the child, free
 * idle connections and abandon the ones parent threads had checked out. */
void crd__pool_lock_for_fork(crd_client *c, bool lock);
void crd__pool_after_fork_child(crd_client *c);

/* ---- script.c: the one call path for scripts and commands ---------------------------- */

#define CRD__PLAIN (-1) /* a crd__cmd that is a plain command, not a script */
#define CRD__CMD_INLINE 16
#define CRD__CMD_SCRATCH 512

/* One command being built: a script's KEYS then ARGV (all keys before any argument), or
 * a plain command's words. Three leading slots are kept for EVALSHA, the SHA1 and the key
 * count, so the call path sends v[] as it is. Numbers and derived keys are formatted into
 * the command's own scratch space. */
typedef struct crd__cmd {
    int script; /* CRD__SCRIPT_* or CRD__PLAIN */
    int nkeys, nargs, cap;
    const char **v;
    size_t *len;
    const char *v_inline[3 + CRD__CMD_INLINE];
    size_t len_inline[3 + CRD__CMD_INLINE];
    char numkeys[12];
    char scratch[CRD__CMD_SCRATCH];
    size_t used;
    char *heap[8]; /* chunks of scratch that did not fit, 4 KiB or more each */
    size_t heap_used, heap_cap; /* of the newest chunk */
    bool oom;
    bool sync;  /* a lock script replica sync follows with WAIT (acquire, release,
                   renewal); crd__call may then return CRD_NOT_SYNCED */
    int64_t deadline_ms; /* monotonic; 0: the command timeout from the call */
    const struct crd__undo *undo; /* an acquire: what to give back if its reply comes
                                     after the caller gave up (undo.c); borrowed */
    bool handed; /* out (crd__call): sent, unanswered by the deadline, and its outcome
                    handed to undo.c (the caller must not read it back) */
    bool unsent; /* out (crd__call): never written, its deadline passed while it waited for
                    a connection (CRD_IO) */
} crd__cmd;

/* ---- undo.c: acquires whose callers were told they failed --------------------------- */

/* What an acquire command took, if it ran (borrowed strings, valid during the call). */
typedef struct crd__undo {
    crd_client *c;
    crd__kind kind;
    const char *name;
    size_t name_len;
    uint64_t owner;
    const char *field;
    size_t flen;
    int64_t lease_ms;
    bool nowait;
} crd__undo;
struct crd__req;
/* A copy for one request (freed with crd__undo_free); at: the index of the acquire's reply.
 * Once tracked (the engine, when the caller goes away with the request unanswered; a loop
 * attempt from its start) the job counts as an acquire of its (name, owner, kind) under way
 * until its request ends (see crd__settle_enter); while the caller waits, its machine
 * counts. */
void *crd__undo_new(const crd__undo *u, int at);
void crd__undo_track(void *job);
void crd__undo_free(void *job);
/* The engine's on_late for an acquire: a late reply that says "taken" is given back
 * (the kind's unlock, one hold); a lost link reads the field back once the node answers
 * and gives back a hold this client does not record. I/O thread. */
void crd__undo_late(crd_client *c, struct crd__req *rq);
/* Gives one hold of u's owner back (the acquire ran, and its caller went away). */
void crd__undo_give_back(const crd__undo *u);

/* Read-backs of lost acquires are settled one at a time per (name, owner, kind), and only
 * while no acquire of that owner on that name is under way: Redis's count is compared with
 * this client's record only when every acquire that may have run is either recorded or
 * known lost. An acquire machine enters before its first command and leaves when it ends
 * (*entered: it was counted; false only when out of memory, and then it must not leave);
 * park_until > 0 first waits (until then, monotonic ms) for a read-back under way to end:
 * CRD_TIMEOUT when it did not end in time (nothing entered). Any thread but the engine's
 * under its mutex; takes holds->mu. */
crd_status crd__settle_enter(crd_client *c, const char *name, size_t len, uint64_t owner,
                             int kind, int64_t park_until, bool *entered);
void crd__settle_leave(crd_client *c, const char *name, size_t len, uint64_t owner, int kind);

/* Starts a command; cap > CRD__CMD_INLINE words allocate (the watchdog's batches). */
void crd__cmd_init(crd__cmd *cmd, int script, int cap);
void crd__cmd_free(crd__cmd *cmd);
void crd__cmd_key(crd__cmd *cmd, const char *p, size_t len);
void crd__cmd_arg(crd__cmd *cmd, const char *p, size_t len);
void crd__cmd_arg_str(crd__cmd *cmd, const char *s);
void crd__cmd_arg_i64(crd__cmd *cmd, int64_t v);
/* Room for n bytes that live as long as the command (NULL when out of memory). */
char *crd__cmd_space(crd__cmd *cmd, size_t n);
/* Fills the three leading slots (EVALSHA sha numkeys, or EVAL text numkeys when eval) and
 * returns the index of the command's first word (3 for a plain command); argc from
 * there. (cmd.c) */
int crd__cmd_head(crd__cmd *cmd, bool eval);
int crd__cmd_argc(const crd__cmd *cmd, int first);

/* Runs cmd on a connection from the pool chosen by its first key (a plain command by its
 * second word, which is the key of every plain command this library sends): a script
 * with EVALSHA, and on NOSCRIPT (nothing ran) once more with EVAL. The reply is
 * classified here and only here: CRD_OK leaves a reply that is not an error in *reply
 * (the caller frees it); an error reply becomes a status with the server's words
 * (crd__reply_fail). In cluster mode redirects, READONLY and busy replies (all proofs
 * that nothing ran) are followed or retried here within the command timeout; in
 * standalone mode they are errors. CRD_IO: no reply; *sent_ms (may be NULL) is 0 when
 * nothing was sent, else the time of the last send, so a caller knows whether the
 * command may have run. what names the operation for messages. */
crd_status crd__call(crd_client *c, crd__cmd *cmd, const char *what, redisReply **reply,
                     int64_t *sent_ms);
/* (crd__call, continued) Sentinel mode: a READONLY reply (nothing ran) re-resolves the
 * primary and sends the command again there, up to twice. Replica sync: a cmd marked
 * sync goes out in one pipeline with WAIT (crd__sync_replicas); when no replica
 * acknowledged, the status is CRD_NOT_SYNCED and *reply still holds the script's reply
 * (the caller frees it and decides: acquire.c undoes, release.c accepts). */
/* Pipelined form for the watchdog: every command of cmds (scripts) in one round trip on
 * conn; on NOSCRIPT the script is loaded once (SCRIPT LOAD) and the round resent,
 * which is safe for renewals (idempotent in effect). *sent_ms: when the round that
 * produced the replies was sent. */
crd_status crd__script_pipeline(crd_client *c, crd__pool *p, crd__cmd *cmds, int ncmd,
                                redisReply **replies, int64_t *sent_ms);
/* (pipeline, continued) When cmds[0].sync, one WAIT ends the round; no replica
 * acknowledging gives CRD_NOT_SYNCED with every reply in place. */

/* The hand-off (acquire.c, pubsub.c): a blocked waiter prepares its acquire on a spare
 * pool connection and lends both to the subscriber thread, which sends the acquire the
 * moment it reads the unlock message, before waking the waiter; the waiter then reads
 * the reply. The wake-up of the waiter overlaps the script's round trip instead of
 * preceding it. Standalone and Sentinel without replica sync only. */
typedef struct crd__handoff {
    crd__cmd cmd;        /* the acquire, built in place by the caller */
    struct crd__req *rq; /* its request, awaited by the waiter (engine.h) */
    int sent;            /* 0 not sent, 1 submitted, -1 refused (subscriber, ps->mu) */
    int64_t sent_ms;
    int64_t until;       /* the waiter's own deadline (monotonic ms) */
    uint64_t gen;        /* Sentinel mode: the primary's generation when it was sent */
} crd__handoff;
/* Encodes h->cmd into a request the waiter will await; false: no hand-off. */
bool crd__handoff_prepare(crd_client *c, crd__handoff *h);
/* The subscriber thread: submits the prepared request (never blocks). */
void crd__handoff_send(crd_client *c, crd__handoff *h);
/* The waiter, once the subscriber can no longer send: whether the acquire went out, with
 * its outcome as crd__call gives it (*st, *reply, *sent_ms); gives the connection back.
 * A NOSCRIPT or READONLY reply counts as not sent (nothing ran). */
bool crd__handoff_finish(crd_client *c, crd__handoff *h, crd_status *st, redisReply **reply,
                         int64_t *sent_ms);
/* In a forked child (pubsub.c): frees what a parent's waiter lent and the child cannot
 * reach otherwise (its stack is not here): the command and, when never sent, the request
 * (a sent one is in the engine's queues, which its fork handler frees). */
void crd__handoff_forget(crd__handoff *h);

/* ---- pubsub.c ------------------------------------------------------------------------ */

typedef struct crd__sub crd__sub;

crd_status crd__pubsub_start(crd_client *c);
void crd__pubsub_stop(crd_client *c);
/* Takes a reference on the channel's shared subscription (subscribing if it is the
 * first) and waits until the subscription is confirmed or deadline_ms passes.
 * *confirmed tells which. The reference must be dropped with crd__sub_release(). */
crd_status crd__sub_acquire(crd_client *c, const char *channel, size_t len,
                            int64_t deadline_ms, crd__sub **out, bool *confirmed);
void crd__sub_release(crd_client *c, crd__sub *s);
/* prompt_loss_detection: a hold's reference on its lock's channel, kept subscribed while
 * held (no wait for the confirmation; NULL when out of memory). A message on it marks
 * the entry for a check and calls c->on_watched_message. */
crd__sub *crd__sub_watch(crd_client *c, const char *channel, size_t len);
void crd__sub_unwatch(crd_client *c, crd__sub *s);
/* Lends h to the entry: the next message sends it (crd__handoff_send) before waking.
 * False when the entry is not live, has other waiters or a wake-up pending. */
bool crd__sub_arm(crd_client *c, crd__sub *s, crd__handoff *h);
/* Takes the hand-off back: after this the subscriber thread never touches h. */
void crd__sub_disarm(crd_client *c, crd__sub *s);
/* Entries marked since the last call (at most max), unmarked. */
int crd__sub_take_checks(crd_client *c, crd__sub **out, int max);
/* Waits (until deadline_ms) for channel's subscription to be confirmed; whether it is. */
bool crd__sub_await_live(crd_client *c, const char *channel, size_t len, int64_t deadline_ms);
/* Whether this client's subscriber has channel subscribed now. */
bool crd__sub_is_live(crd_client *c, const char *channel, size_t len);
/* Waits for one wake-up permit, or for the caller's lent attempt (mine, or NULL) to be
 * sent, or until deadline_ms. Returns CRD_OK when woken, CRD_TIMEOUT when the deadline
 * passed, CRD_CLOSED on shutdown. *confirmed is updated with whether the subscription is
 * live now. */
crd_status crd__sub_wait(crd_client *c, crd__sub *s, int64_t deadline_ms,
                         const crd__handoff *mine, bool *confirmed);
void crd__pubsub_lock_for_fork(crd_client *c, bool lock);
void crd__pubsub_after_fork_child(crd_client *c);
/* The event-loop API (loop.c): one eventfd per client, made readable when an operation
 * may progress (a permit or a confirmation for a subscription with loop operations, or
 * crd__pubsub_loop_notify); -1 when it cannot be made. */
int crd__pubsub_loop_fd(crd_client *c);
void crd__pubsub_loop_notify(crd_client *c);
/* A loop operation starts or stops polling s (it then counts for notifications). */
void crd__sub_loop_watch(crd_client *c, crd__sub *s, bool on);
/* Takes one wake-up permit without waiting; *confirmed: the subscription is live. */
bool crd__sub_try_take(crd_client *c, crd__sub *s, bool *confirmed);
/* How many wake-ups and confirmations s has had (no lock: a cheap "anything new?"). */
uint64_t crd__sub_events(const crd__sub *s);

/* ---- holds.c ------------------------------------------------------------------------ */

/* What this client believes one owner holds on one name. */
typedef struct crd__hold {
    char *name;           /* points at name_buf: one allocation per hold */
    size_t name_len;
    uint64_t owner;
    int kind;             /* crd__kind */
    uint64_t id;          /* unique per record: tells a replaced record from the old one */
    int64_t count;        /* local view of the hold count */
    int64_t lease_ms;     /* lease of the most recent acquire (re-arm on unlock) */
    bool watchdog;        /* renewed by the watchdog */
    bool releasing;       /* a final release is in flight: do not renew */
    bool lost;            /* known lost; kept only until the owner is told */
    bool failing;         /* renewals are failing */
    int64_t valid_until;  /* monotonic ms: send time of last acquire/renewal + lease */
    int64_t since;        /* monotonic ms of the first acquire of this hold */
    struct crd__sub *watch_sub; /* prompt_loss_detection: its channel's watch reference */
    struct crd__hold *next;
    char name_buf[];      /* the name, NUL-terminated */
} crd__hold;

/* undo.c's bookkeeping for one (name, owner, kind) while an acquire of it is under way or a
 * lost acquire of it is still to be read back (crd__settle_enter); under holds->mu. */
typedef struct crd__settle {
    struct crd__settle *next;
    uint64_t owner;
    int kind;
    int busy;          /* acquire machines under way, and commands of theirs still in flight */
    uint64_t epoch;    /* bumped whenever busy changes */
    int unknown;       /* lost acquires still to read back */
    int64_t until;     /* monotonic ms: the leases of those end; no read-back after it */
    bool turn;         /* a read-back (and the give-backs it decided) is under way */
    int giving;        /* give-backs of that turn not answered yet */
    int64_t forgotten; /* holds no longer recorded but legitimately taken (their thread
                          ended: lifecycle.c stops renewing them, the lease ends them) */
    void *job;         /* undo.c's copy of the latest lost acquire (field, lease, kind) */
    size_t name_len;
    char name[];       /* NUL-terminated */
} crd__settle;

#define CRD__SETTLE_BUCKETS 256

struct crd__holds {
    pthread_mutex_t mu;
    pthread_cond_t settled; /* a read-back turn ended (crd__settle_enter parks on it) */
    crd__settle *settle[CRD__SETTLE_BUCKETS];
    crd__hold **buckets;
    size_t nbuckets;
    size_t count;
    uint64_t next_id;
    /* Watch references of removed holds, dropped outside the mutex (crd__watch_flush) */
    struct crd__sub **unwatch;
    size_t nunwatch, capunwatch;
};

crd_status crd__holds_init(crd_client *c);
void crd__holds_free(crd_client *c);
/* Lookup; caller holds holds->mu. */
crd__hold *crd__holds_find(crd__holds *h, const char *name, size_t len, uint64_t owner,
                           int kind);
/* Insert a new record with count 0; caller holds holds->mu. NULL on OOM. */
crd__hold *crd__holds_insert(crd__holds *h, const char *name, size_t len, uint64_t owner,
                             int kind);
/* Remove and free; caller holds holds->mu. */
void crd__holds_remove(crd__holds *h, crd__hold *hold);
/* Iterate all records; caller holds holds->mu. */
void crd__holds_foreach(crd__holds *h, void (*fn)(crd__hold *, void *), void *arg);
/* Hands over the watch references of removed holds (*out: the caller frees it). Caller
 * holds h->mu. */
size_t crd__holds_take_unwatch(crd__holds *h, struct crd__sub ***out);
/* The registry entry of (name, owner, kind), NULL when none; _get makes one (NULL: out of
 * memory); _drop frees it when nothing is left to do. Caller holds h->mu. */
crd__settle *crd__settle_find(crd__holds *h, const char *name, size_t len, uint64_t owner,
                              int kind);
crd__settle *crd__settle_get(crd__holds *h, const char *name, size_t len, uint64_t owner,
                             int kind);
void crd__settle_drop(crd__holds *h, crd__settle *s);
/* Frees every entry (a fork child: the parent's owners are not its own; the client's end). */
void crd__settle_forget(crd__holds *h);

/* ---- watchdog.c ---------------------------------------------------------------------- */

crd_status crd__watchdog_start(crd_client *c);
void crd__watchdog_stop(crd_client *c); /* joins the thread; stays allocated */
void crd__watchdog_free(crd_client *c);
/* A watchdog hold was added: make sure the thread has a tick scheduled. */
/* prompt_loss_detection: drops the watch references of removed holds (outside every
 * mutex: the releasing thread after a release, the watchdog thread each round). */
void crd__watch_flush(crd_client *c);
void crd__watchdog_kick(crd_client *c);
void crd__watchdog_lock_for_fork(crd_client *c, bool lock);
void crd__watchdog_after_fork_child(crd_client *c);
/* Delivers the events kept for the loop thread (events_on_loop): crd_loop_dispatch. */
void crd__watchdog_loop_events(crd_client *c);
/* Logs an event and calls on_event (watchdog thread or caller, no lock held), or keeps
 * it for crd_loop_dispatch when the options say events_on_loop. */
void crd__emit_event(crd_client *c, crd_event_kind kind, const char *name, size_t name_len,
                     uint64_t owner, int64_t valid_until, crd_status st, const char *detail);

/* ---- kinds.c: the lock kinds as data ----------------------------------------------------- */

struct crd_lock {
    crd_client *client;
    crd__kind kind;
    char *name;
    size_t name_len;
    crd__names names; /* the keys and channels of its kind */
    const char *publish; /* what its unlock scripts publish with: PUBLISH or SPUBLISH */
    bool view;        /* read or write view owned by a crd_rwlock */
};

/* What an acquire script's reply means. */
typedef enum crd__acq_outcome {
    CRD__ACQ_TAKEN,       /* acquired or re-entered */
    CRD__ACQ_HELD,        /* held by another owner; the reply is a wait hint in ms */
    CRD__ACQ_HELD_NO_TTL, /* held through a hash without TTL: no hint */
    CRD__ACQ_NOT_MY_TURN, /* fair: free, but another waiter is at the head */
    CRD__ACQ_REFUSED,     /* fair try-once form: not acquired, no hint */
    CRD__ACQ_BAD          /* a reply the script never gives */
} crd__acq_outcome;

/* What a release script's reply means. */
typedef enum crd__rel_outcome {
    CRD__REL_RELEASED,   /* the last hold: the lock is free and waiters were told */
    CRD__REL_STILL_HELD, /* one hold fewer; this owner still holds the lock */
    CRD__REL_READ_ONE,   /* read: one of this owner's read holds ended (the local count
                            tells whether more remain) */
    CRD__REL_GONE,       /* fair: the lock no longer existed (expired or force-unlocked) */
    CRD__REL_NOT_HELD,   /* this owner holds nothing */
    CRD__REL_BAD         /* a reply the script never gives */
} crd__rel_outcome;

/* An acquire's inputs. */
typedef struct crd__acq_args {
    const char *field;
    size_t flen;
    int64_t lease_ms;
    bool nowait;        /* fair: the try-once form, which never joins the queue */
    int64_t fair_wait;  /* fair: the wait announced to the queue */
    bool want_token;    /* fenced: the form that returns the token */
} crd__acq_args;

/* A release's inputs. */
typedef struct crd__rel_args {
    const char *field;
    size_t flen;
    int64_t rearm_ms;   /* lease re-armed when holds remain */
    const char *latch;  /* the request's latch key */
    size_t latch_len;
    int64_t latch_ttl_ms;
} crd__rel_args;

/* One lock kind: the scripts it runs, how it builds their KEYS/ARGV, and what their
 * replies mean. Nothing outside kinds.c branches on the kind to build or decode. */
typedef struct crd__kind_ops {
    const char *label;     /* "lock", "fair lock", "read lock", "write lock" */
    bool write_field;      /* its owner field ends in ":write" */
    bool queued;           /* fair: a waiter joins a queue it must leave when it gives up */
    bool own_channel;      /* fair: a waiter listens on "<channel>:<field>" */
    bool fenced;           /* draws a token with every acquire */
    bool local_fifo;       /* exclusive and not fair: local waiters queue (gate.c) */
    bool counts_receivers; /* its unlock replies 1 + the connections the message reached */
    int renew_script;      /* lock_renew, rw_read_renew or fenced_renew */
    /* The second key per renewed hold (read: P, fenced: the token counter), or NULL for
     * holds renewed on N alone: its length, and the key written with a NUL. */
    size_t (*renew_key2_len)(const char *name, size_t len);
    size_t (*renew_key2_put)(const char *name, size_t len, char *out);
    void (*acquire)(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd);
    /* *token: the token a fenced acquire returned, else left alone. */
    crd__acq_outcome (*acquire_reply)(const redisReply *r, bool nowait, int64_t *hint_ms,
                                      int64_t *token);
    void (*release)(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd);
    crd__rel_outcome (*release_reply)(const redisReply *r);
    void (*force_unlock)(const crd_lock *l, crd__cmd *cmd);
    void (*is_locked)(const crd_lock *l, crd__cmd *cmd); /* integer reply 1 = locked */
    void (*extend)(const crd_lock *l, const char *field, size_t flen, int64_t lease_ms,
                   crd__cmd *cmd); /* array reply {1} = extended, {0} = gone */
} crd__kind_ops;

extern const crd__kind_ops crd__kinds[CRD__NKINDS];

/* Fills l with a copy of the name and the keys and channels of its kind. */
crd_status crd__lock_init(crd_lock *l, crd_client *c, crd__kind kind, const char *name,
                          size_t len);
void crd__lock_clear(crd_lock *l);
/* The lock kind's fair-waiter builder: give up a place in the queue. */
void crd__fair_give_up_cmd(const crd_lock *l, const char *field, size_t flen, int64_t wait_ms,
                           crd__cmd *cmd);

/* ---- lock.c: handles, force-unlock, introspection, extend -------------------------------- */

/* NULL lock, or a client that cannot be used. */
crd_status crd__lock_check(crd_lock *l);
/* crd__lock_check, then an out-parameter: "<what> is NULL" when it is missing. */
crd_status crd__lock_check_out(crd_lock *l, const void *out, const char *what);
/* crd__lock_check_out for a token, then the lock's kind must be fenced; why ends the message. */
crd_status crd__lock_check_fenced(crd_lock *l, const int64_t *token, const char *why);
/* A name (at most 60 bytes of it) for messages. */
#define CRD__NAME_FMT(l) (int)((l)->name_len > 60 ? 60 : (l)->name_len), (l)->name
/* This client's local hold count of (name, owner, kind): 0 when none or lost. */
int64_t crd__local_count(const crd_lock *l, uint64_t owner, crd__kind kind);

/* ---- gate.c: the local queue of an exclusive lock's waiters, and release deferral ------ */

crd_status crd__gates_init(crd_client *c);
void crd__gates_free(crd_client *c);
/* Wakes every blocked queued waiter (the client is closing). */
void crd__gates_wake_all(crd_client *c);
/* Defers this client's attempts on name until until_us (monotonic µs). */
void crd__gate_defer(crd_client *c, const char *name, size_t len, int64_t until_us);
void crd__gates_lock_for_fork(crd_client *c, bool lock);
void crd__gates_after_fork_child(crd_client *c);

/* ---- offload.c: the loop API's helper thread ----------------------------------------------- */

typedef struct crd__offload crd__offload;
typedef struct crd__job crd__job;
/* Runs the job on the helper thread (run), or only frees what a detached job owns (the
 * client closed before it ran). */
typedef void (*crd__job_fn)(crd__job *j, bool run);
struct crd__job {
    crd__job_fn fn;
    crd_client *c;
    bool detached; /* the helper frees it (fn does); nobody waits for it */
    bool done;     /* under the helper's mutex: crd__job_done */
    crd__job *next;
};
/* Queues j on the client's helper thread (started on first use); the helper writes the
 * loop fd when it is done. False when the thread cannot be had (the caller runs the step
 * itself). */
bool crd__offload_run(crd_client *c, crd__job *j);
/* The helper's queue (crd_client_new; the thread starts on the first job). */
crd_status crd__offload_init(crd_client *c);
/* Whether an offloaded, not detached job has run (its owner may then touch what it
 * changed, and free it). */
bool crd__job_done(crd_client *c, crd__job *j);
void crd__job_wait(crd_client *c, crd__job *j);
/* A copy of cmd sent once through crd__call on the helper, its reply ignored (label is
 * a static string). False when it cannot be queued. */
bool crd__offload_call(crd_client *c, const crd__cmd *cmd, const char *label);
/* Joins the helper (crd_client_free: after every loop operation ended); detached jobs not
 * yet run are freed unsent. */
void crd__offload_stop(crd_client *c);
void crd__offload_lock_for_fork(crd_client *c, bool lock);

/* ---- loop.c: the event-loop API ---------------------------------------------------------- */

/* Ends every pending operation with CRD_CLOSED, callbacks on the calling thread
 * (crd_client_free), and frees the loop. */
void crd__loop_free(crd_client *c);

/* ---- release.c ---------------------------------------------------------------------------- */

/* Owner-checked release of one hold of l. */
/* The undo of an acquire no replica acknowledged: the same release without replica
 * sync's WAIT (its answer would change nothing, and it would hold the caller up to
 * replica_sync_timeout_ms more). */
crd_status crd__release_undo(crd_lock *l, uint64_t owner);
/* A release in three steps, for the event loop (loop.c) as for the blocking call: begin
 * (bookkeeping: a lost hold ends here with its status; the request id), the command (the
 * same request id on every try), end (the reply's outcome applied, the status). */
typedef struct crd__rel {
    crd_lock *l;
    uint64_t owner;
    char field[CRD__FIELD_MAX];
    size_t flen;
    int64_t rearm;
    bool known;
    char *latch;
    size_t latch_len;
    char latch_inline[256];
    bool nosync; /* no WAIT after it (an unsynced acquire's undo: crd__release_undo) */
} crd__rel;
crd_status crd__release_begin(crd__rel *r, crd_lock *l, uint64_t owner);
void crd__release_cmd(crd__rel *r, crd__cmd *cmd);
/* The blocking send: the command, and once more with the same request id after CRD_IO. */
crd_status crd__release_send(crd__rel *r, struct redisReply **reply);
/* st and reply as crd__call gave them (reply freed here); frees what begin took. */
crd_status crd__release_end(crd__rel *r, crd_status st, struct redisReply *reply);
void crd__release_clear(crd__rel *r);
/* An extend in two steps (lock.c), for the event loop as for the blocking call: begin
 * (checks; builds *cmd over the caller's field buffer when it returns CRD_OK, the caller
 * frees it), end (the reply
 * applied: crd__call's st, reply (freed here) and send time). */
crd_status crd__extend_begin(crd_lock *l, uint64_t owner, int64_t lease_ms,
                             char field[CRD__FIELD_MAX], crd__cmd *cmd);
crd_status crd__extend_end(crd_lock *l, uint64_t owner, int64_t lease_ms, crd_status st,
                           struct redisReply *r, int64_t sent);
crd_status crd__release(crd_lock *l, uint64_t owner);
/* The same without a lock handle (shutdown and thread exit). */
crd_status crd__release_by_name(crd_client *c, const char *name, size_t len, uint64_t owner,
                                crd__kind kind);

/* ---- lifecycle.c: the process around the clients ------------------------------------------ */

/* Installs the fork and thread-exit hooks once, and adds c to the registry they walk. */
void crd__lifecycle_register(crd_client *c);
void crd__lifecycle_unregister(crd_client *c);
/* Releases every hold of the client (release_on_close) or stops tracking it. */
void crd__lifecycle_release_all(crd_client *c);

/* ==== What the lock layer shares with the synchronizers (sync.h has the rest) ==== */

/* pubsub.c: what a message on a channel tells its local waiters (crd__sub_acquire_rule;
 * crd__sub_acquire is CRD__WAKE_LOCK). */
#define CRD__WAKE_LOCK 0  /* locks: "1" wakes every waiter, any other payload one */
#define CRD__WAKE_COUNT 1 /* semaphores: a payload k > 0 lets up to k waiters re-check,
                             k <= 0 none, a payload that is not a number every one */
#define CRD__WAKE_ALL 2   /* latch: every message wakes every waiter to re-check */
/* crd__sub_acquire with the entry's wake rule set first (one channel carries one kind of
 * object, so every reference agrees on it). */
crd_status crd__sub_acquire_rule(crd_client *c, const char *channel, size_t len, int rule,
                                 int64_t deadline_ms, crd__sub **out, bool *confirmed);

/* names.c */
#define CRD__SEMAPHORE_CHANNEL "redisson_sc"       /* both semaphores: redisson_sc:{N} */
#define CRD__LATCH_CHANNEL "redisson_countdownlatch__channel__" /* + "{N}", always braced */
#define CRD__PERMIT_TIMEOUTS ":timeout"            /* permits: ZSET {N}:timeout */
#define CRD__PERMIT_NO_LEASE "922337203685477"     /* a permit's deadline without a lease */
#define CRD__PERMIT_NO_LEASE_MS INT64_C(922337203685477)
/* The permit zset "{N}:timeout" ("N:timeout" when N has a '{'), allocated into *out. */
crd_status crd__timeouts_name(const char *name, size_t len, crd__buf *out);
/* The latch channel "redisson_countdownlatch__channel__{N}", allocated into *out. */
crd_status crd__latch_channel_name(const char *name, size_t len, crd__buf *out);

#endif /* CRD_INTERNAL_H */
