/*
 * internal.h -- declarations shared by the units of src/. Nothing here is public.
 *
 * Units and their locks (a thread never takes them in another order than this):
 *   client.c  (pool_mu)  connection pool, options, lifetime, fork handling
 *   holds.c   (holds_mu) what this client believes it holds: count, lease, validity
 *   pubsub.c  (ps.mu)    subscriber thread, channel entries, waiter wake-ups
 *   watchdog.c (wd_mu)   renewal thread
 * holds_mu and ps.mu are never held together; pool_mu is a leaf.
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
/* Clears the calling thread's detail for c (a successful call). */
void crd__ok(const crd_client *c);

/* ---- clock.c ------------------------------------------------------------------------ */

int64_t crd__now_ms(void);      /* CLOCK_MONOTONIC */
int64_t crd__now_us(void);      /* CLOCK_MONOTONIC */
int64_t crd__epoch_ms(void);    /* CLOCK_REALTIME, for the fair lock's deadlines only */
/* Absolute CLOCK_MONOTONIC timespec for a deadline in monotonic ms. */
struct timespec crd__abstime(int64_t deadline_ms);
/* A condition variable that waits on CLOCK_MONOTONIC. */
int crd__cond_init(pthread_cond_t *cv);

/* ---- owner.c ----------------------------------------------------------------------- */

/* Writes "<uuid>:<id>" into buf (>= 58 bytes); returns its length. */
size_t crd__owner_field(const char *uuid, uint64_t owner, char *buf);
/* 16 random bytes from the OS as 32 lowercase hex characters plus NUL. */
crd_status crd__random_hex32(char out[33]);
/* Forget buffered random bytes (fork child handler). */
void crd__random_after_fork(void);
/* A v4 UUID from libuuid (which reads the OS CSPRNG), lowercase. */
void crd__uuid_v4(char out[37]);
/* Thread-exit hook: called with the exiting thread's owner id (if it had one). */
void crd__owner_set_exit_hook(void (*hook)(uint64_t owner));

/* ---- names.c: Redisson's derived names (PROTOCOL.md 2.1), the one place they live ----------- */

typedef struct crd__buf {
    char *p;
    size_t len;
} crd__buf;

/* Lock kinds. A hold is identified by (name, owner, kind): one owner may hold the read
 * and the write lock of one name at once. What each kind sends is in kinds.c. */
typedef enum crd__kind { CRD__RLOCK = 0, CRD__FAIR = 1, CRD__READ = 2, CRD__WRITE = 3 } crd__kind;
#define CRD__NKINDS 4

#define CRD__LOCK_CHANNEL "redisson_lock__channel" /* RLock, fair (+ ":<field>" per waiter) */
#define CRD__RW_CHANNEL "redisson_rwlock"          /* read-write lock */
#define CRD__LATCH "redisson_unlock_latch"         /* unlock latch, "<latch>:{N}:<rid>" */
#define CRD__FAIR_QUEUE "redisson_lock_queue"      /* fair: LIST of waiting owner fields */
#define CRD__FAIR_DEADLINES "redisson_lock_timeout" /* fair: ZSET field -> epoch ms */
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
} crd__names;

crd_status crd__names_init(crd__names *n, crd__kind kind, const char *name, size_t len);
void crd__names_clear(crd__names *n);
/* "<prefix>:{N}" or "<prefix>:N" when N contains '{' (Redisson's prefixName). */
crd_status crd__derived_name(const char *prefix, const char *name, size_t len, crd__buf *out);
/* The read-write key prefix P: "{N}", or N when it contains '{' (Redisson's suffixName
 * without a suffix). _len says how long it is; _put writes it and a NUL into out. */
size_t crd__rw_prefix_len(const char *name, size_t len);
size_t crd__rw_prefix_put(const char *name, size_t len, char *out);
/* An owner's hash field, "<uuid>:<id>" or "<uuid>:<id>:write"; buf >= CRD__FIELD_MAX. */
size_t crd__field(const char *uuid, uint64_t owner, bool write, char *buf);
/* A read hold's timeout key base "<P>:<field>:rwlock_timeout" (hold i adds ":i") into buf
 * (plen + flen + 16 bytes). Returns its length. */
size_t crd__read_timeout_base(const char *prefix, size_t plen, const char *field, size_t flen,
                              char *buf);
/* True for names whose braces break slot co-location (PROTOCOL.md 2.3 class C). */
bool crd__name_is_unsafe(const char *name, size_t len);

/* ---- url.c: the URL forms of crd_options.url --------------------------------------- */

typedef struct crd__endpoint {
    char *host;
    int port;
    char *unix_path;
    char *username;
    char *password;
    int db;
} crd__endpoint;

/* Parses a redis:// or unix:// URL into *out (cleared first). On failure writes a
 * reason into err and leaves *out empty. Pure function; any thread. */
crd_status crd__url_parse(const char *url, crd__endpoint *out, char *err, size_t errlen);
void crd__endpoint_clear(crd__endpoint *ep);

/* ---- conn.c: one hiredis connection --------------------------------------------------- */

typedef struct crd__conn {
    redisContext *ctx;
    bool broken;    /* an I/O error happened: discard, never reuse */
    unsigned epoch; /* pool connections: the pool epoch when it was opened */
} crd__conn;

/* Opens a connection with the client's endpoint, timeouts, AUTH and SELECT. */
crd_status crd__conn_open(crd_client *c, crd__conn *conn);
void crd__conn_close(crd__conn *conn);
/* Sends one command (argv with lengths) and reads its reply. On CRD_IO the connection is
 * marked broken; *reply is NULL. Error replies are returned as CRD_OK with the reply
 * (callers decide). Traces the command when the client has on_trace. */
crd_status crd__conn_command(crd_client *c, crd__conn *conn, int argc, const char **argv,
                             const size_t *lens, redisReply **reply);
/* Pipelined form: appends all commands, then reads all replies into replies[]. */
crd_status crd__conn_pipeline(crd_client *c, crd__conn *conn, int ncmd, const int *argcs,
                              const char *const *const *argvs,
                              const size_t *const *lens, redisReply **replies);
/* Renders a reply for traces and messages. */
void crd__reply_render(const redisReply *r, char *buf, size_t len);
void crd__trace(crd_client *c, int argc, const char *const *argv, const size_t *lens,
                const redisReply *r, const char *io_error, bool subscriber);

/* ---- metrics.c: counters, histograms and log messages ------------------------------------ */

#define CRD__HIST_BUCKETS 48

typedef struct crd__hist {
    atomic_uint_fast64_t bucket[CRD__HIST_BUCKETS]; /* bucket i: values < 2^i ms */
    atomic_int_fast64_t max;
} crd__hist;

typedef struct crd__metrics {
    atomic_uint_fast64_t acquisitions, contended, acquire_busy, releases, renewals,
        renewal_failures, locks_lost, connects, connection_failures, subscribes,
        watchdog_round_trips;
    crd__hist wait, hold;
} crd__metrics;

void crd__hist_add(crd__hist *h, int64_t ms);
#define CRD__COUNT(c, field) atomic_fetch_add_explicit(&(c)->metrics.field, 1, memory_order_relaxed)
/* Sends one line to on_log, if set. */
void crd__log(crd_client *c, crd_log_level level, const char *fmt, ...) CRD__PRINTF(3, 4);

/* ---- client.c ------------------------------------------------------------------------ */

typedef struct crd__pubsub crd__pubsub;
typedef struct crd__holds crd__holds;
typedef struct crd__watchdog crd__watchdog;

struct crd_client {
    crd_options opts;     /* copies; strings below are owned */
    crd__endpoint ep;
    char uuid[37];
    char errmsg_init[256]; /* why crd_client_new failed, for a failed client */
    bool failed;
    atomic_bool closed;
    pid_t pid;            /* process that created the client (fork detection) */

    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    crd__conn *pool;
    int *pool_free; /* stack of free slot indexes */
    int pool_nfree;
    /* Bumped whenever a pool connection breaks: idle connections opened before are
     * reopened at their next use instead of failing one by one (a server restart or a
     * network cut kills them all at once). */
    atomic_uint pool_epoch;

    crd__pubsub *ps;
    crd__holds *holds;
    crd__watchdog *wd;

    struct crd_client *next_client; /* registry (thread-exit and fork hooks) */
    crd__metrics metrics;
};

/* In a forked child: give up a hiredis context that another (parent) thread may have
 * been using at the fork. Its socket is closed (never written); its memory, possibly
 * caught mid-update, is never touched again, only kept reachable. */
void crd__abandon_ctx(redisContext *ctx);

/* Validates a handle for use: NULL, failed, closed, forked. */
crd_status crd__client_check(crd_client *c);
/* Takes a pool connection (connecting it if needed); bounded by the timeouts. */
crd_status crd__pool_get(crd_client *c, crd__conn **out);
/* Returns a connection; a broken one is closed and its slot reconnects on next use. */
void crd__pool_put(crd_client *c, crd__conn *conn);
/* Runs one command on a pool connection. */
crd_status crd__command(crd_client *c, int argc, const char **argv, const size_t *lens,
                        redisReply **reply);

/* ---- script.c ------------------------------------------------------------------------ */

/* Runs an embedded script with EVALSHA; on NOSCRIPT (the script did not run) one EVAL.
 * keys/args with lengths. Returns CRD_IO with the connection broken when the outcome is
 * unknown. Error replies come back as CRD_OK with an error reply. */
crd_status crd__script_run(crd_client *c, crd__conn *conn, int script, int nkeys,
                           const char **keys, const size_t *keylens, int nargs,
                           const char **args, const size_t *arglens, redisReply **reply);

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
/* Waits for one wake-up permit or until deadline_ms. Returns CRD_OK when woken,
 * CRD_TIMEOUT when the deadline passed, CRD_CLOSED on shutdown. *confirmed is updated
 * with whether the subscription is live now. */
crd_status crd__sub_wait(crd_client *c, crd__sub *s, int64_t deadline_ms, bool *confirmed);
/* Wakes every waiter of every entry (shutdown). */
void crd__pubsub_wake_all(crd_client *c);

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
    struct crd__hold *next;
    char name_buf[];      /* the name, NUL-terminated */
} crd__hold;

struct crd__holds {
    pthread_mutex_t mu;
    crd__hold **buckets;
    size_t nbuckets;
    size_t count;
    size_t nwatchdog;
    uint64_t next_id;
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

/* ---- watchdog.c ---------------------------------------------------------------------- */

crd_status crd__watchdog_start(crd_client *c);
void crd__watchdog_stop(crd_client *c); /* joins the thread; stays allocated */
void crd__watchdog_free(crd_client *c);
/* A watchdog hold was added: make sure the thread has a tick scheduled. */
void crd__watchdog_kick(crd_client *c);
void crd__emit_event(crd_client *c, crd_event_kind kind, const char *name, size_t name_len,
                     uint64_t owner, int64_t valid_until, crd_status st, const char *detail);

/* ---- lock.c --------------------------------------------------------------------------- */

struct crd_lock {
    crd_client *client;
    crd__kind kind;
    char *name;
    size_t name_len;
    crd__names names; /* the keys and channels of its kind */
    bool view;        /* read or write view owned by a crd_rwlock */
};

/* Owner-checked release used by shutdown and thread exit (no lock handle needed). */
crd_status crd__release_hold_by_name(crd_client *c, const char *name, size_t len,
                                     uint64_t owner, int kind);

#endif /* CRD_INTERNAL_H */
