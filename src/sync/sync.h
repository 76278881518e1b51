/*
 * sync.h -- the synchronizers (issue 27): semaphores, permit-expirable semaphores and
 * latches. sync.c holds what the three share (handles' names, the waiter loop, the call
 * path's reading of a lost reply); semaphore.c, permits.c and latch.c one object each;
 * loop.c runs their waits as event-loop operations. Nothing below them sees this.
 * PROTOCOL.md 14 and the golden sem_*, pes_*, cdl_* recordings are the wire.
 */
#ifndef CRD_SYNC_H
#define CRD_SYNC_H

#include "locks.h"

/* sync.c */
typedef enum crd__sync_kind {
    CRD__SYNC_SEMAPHORE = 0, /* RSemaphore: string N */
    CRD__SYNC_PERMITS = 1,   /* RPermitExpirableSemaphore: string N + zset {N}:timeout */
    CRD__SYNC_LATCH = 2,     /* RCountDownLatch: string N */
    CRD__SYNC_LIMITER = 3    /* RRateLimiter: hash N, {N}:value, {N}:permits (no channel) */
} crd__sync_kind;

/* What the three handles share: the client, the name, and the keys and channel of its
 * kind. Immutable after crd__sync_init: any thread may use it. */
typedef struct crd__sync {
    crd_client *client;
    crd__sync_kind kind;
    char *name;
    size_t name_len;
    crd__buf channel;    /* redisson_sc:{N}, or the latch channel */
    crd__buf timeouts;   /* permits: {N}:timeout */
    const char *publish; /* PUBLISH or SPUBLISH, as the client's locks */
    const char *label;   /* "semaphore", "permit semaphore", "latch" (messages) */
} crd__sync;

/* Checks out, the client and the name (as a lock's, plus: in cluster mode the key,
 * channel and zset must share one slot, else CRD_INVALID_ARGUMENT saying why), then
 * fills s. */
crd_status crd__sync_init(crd__sync *s, crd_client *c, crd__sync_kind kind, const void *out,
                          const char *name, size_t len);
void crd__sync_clear(crd__sync *s);
/* A handle of `size` bytes, a struct whose first (only) member is its crd__sync: calloc,
 * then crd__sync_init. *s gets it, or NULL on failure (the client's error says why). */
crd_status crd__sync_new(crd_client *c, crd__sync_kind kind, const void *out, const char *name,
                         size_t len, size_t size, crd__sync **s);
/* Clears and frees a handle made by crd__sync_new; NULL is accepted. */
void crd__sync_free(crd__sync *s);
/* The handle's name and its length (NULL and 0 for a NULL handle): the *_name functions. */
const char *crd__sync_name(const crd__sync *s, size_t *len);
/* A NULL handle, or a client that cannot be used now. */
crd_status crd__sync_check(const crd__sync *s);
/* crd__sync_check, then "<p_name> is NULL" (CRD_INVALID_ARGUMENT) when p is NULL. */
crd_status crd__sync_check_ptr(const crd__sync *s, const void *p, const char *p_name);
#ifdef __clang_analyzer__
/* The analyzer reads one file at a time and cannot see that a NULL handle (or output)
 * never passes these checks: spelled out for it only; sync.c defines the functions in
 * parentheses. */
#define crd__sync_check(s) ((s) == NULL ? CRD_INVALID_ARGUMENT : (crd__sync_check)(s))
#define crd__sync_check_ptr(s, p, n)                                                         \
    ((s) == NULL || (p) == NULL ? CRD_INVALID_ARGUMENT : (crd__sync_check_ptr)((s), (p), (n)))
#endif
/* The name (at most 60 bytes of it) for messages. */
#define CRD__SYNC_NAME_FMT(s) (int)((s)->name_len > 60 ? 60 : (s)->name_len), (s)->name

/* Runs cmd (freed here) through crd__call. A reply lost after the command was sent is
 * CRD_OUTCOME_UNKNOWN when !idempotent (it is never resent), CRD_IO otherwise; *sent
 * (may be NULL) says whether it may have run. CRD_OK leaves the reply in *reply. */
crd_status crd__sync_call(crd__sync *s, crd__cmd *cmd, const char *what, bool idempotent,
                          redisReply **reply, bool *sent);
/* The integer of an integer reply, or of a bulk string holding one (GET); nil is 0. */
crd_status crd__sync_int(crd__sync *s, const redisReply *r, const char *what, int64_t *out);
/* crd__sync_call, then crd__sync_int into *out (may be NULL); the reply is freed here. */
crd_status crd__sync_run_int(crd__sync *s, crd__cmd *cmd, const char *what, bool idempotent,
                             int64_t *out);
/* crd__sync_run_int, and on success the client's detail cleared (crd__ok): the last step of
 * a call that ends with this command. */
crd_status crd__sync_run_ok(crd__sync *s, crd__cmd *cmd, const char *what, bool idempotent,
                            int64_t *out);
/* crd__sync_check, then CRD_OK when n is at least min and within +-INT64_MAX / 2 (the
 * scripts add amounts); otherwise CRD_INVALID_ARGUMENT, "<label> "<name>": <what> of <n>
 * permits; nothing was changed". */
crd_status crd__sync_amount(crd__sync *s, int64_t n, int64_t min, const char *what);
/* GET of the handle's name as an integer (missing: 0), idempotent. */
crd_status crd__sync_get(crd__sync *s, const char *what, int64_t *out);

/* One attempt of a waiting operation (acquire, await). Returns CRD_OK when it is done,
 * CRD_BUSY when it must wait (*retry_epoch_ms: the wall-clock time at which to retry
 * even without a message, or 0), CRD_IO when nothing was sent (it is retried within
 * the wait), anything else to end the wait with that status. */
typedef crd_status (*crd__sync_try_fn)(void *arg, int64_t *retry_epoch_ms);
/* The object's last word on a wait's outcome st: a lost reply's read-back and its
 * metrics (waited: whether the first try was busy and the call went on to wait). What it
 * returns is the operation's status. */
typedef crd_status (*crd__sync_end_fn)(crd__sync *s, void *arg, crd_status st, bool waited);
/* A lost reply (st CRD_IO after the command was sent) of a command that is not
 * idempotent is CRD_OUTCOME_UNKNOWN, with a message; any other st is returned as is. */
crd_status crd__sync_lost(crd__sync *s, crd_status st, bool sent, bool idempotent,
                          const char *what);

/* An attempt that the event loop can put on the engine instead of running it inside
 * dispatch: build writes its command into cmd (initialised by build; CRD_OK, or a
 * status that ends the operation), read turns the outcome into what the try function
 * would have returned: st as crd__call gives it (CRD_OK with a reply r that is not an
 * error, which read frees; else r is NULL), sent whether the command went out. */
typedef struct crd__sync_attempt {
    crd_status (*build)(void *arg, crd__cmd *cmd);
    crd_status (*read)(void *arg, crd_status st, redisReply *r, bool sent,
                       int64_t *retry_epoch_ms);
    /* May be NULL; true when the next attempt must be the try function (a lost reply to
     * read back first), and then also the end hook: each a blocking call. */
    bool (*run_inline)(void *arg);
    /* May be NULL; an error reply it says yes to is read (read gets it with CRD_OK) rather
     * than turned into CRD_SERVER (crd__cmd.keep_error: the rate limiter's states). */
    bool (*keep_error)(const redisReply *r);
    /* May be NULL; with run_inline saying yes, the read-back of the lost reply that comes
     * before the next attempt (CRD_BUSY: nothing went in, attempt again). */
    crd_status (*resolve)(void *arg);
} crd__sync_attempt;

/* One attempt of at on the calling thread: the read-back of a lost reply first if at asks
 * for one, then build, crd__sync_call (idempotent), read. */
crd_status crd__sync_attempt_call(crd__sync *s, const crd__sync_attempt *at, void *arg,
                                  const char *what, int64_t *retry_epoch_ms);

/* What a synchronizer's wait is: its object, its attempt (fn; at, the same in halves for
 * the engine, may be NULL), fn's argument, the end hook (may be NULL), the channel's wake
 * rule (CRD__WAKE_*), whether the wait's end makes one last attempt (the latch reads its
 * count once more, as Redisson does), and how it waits (wait.h): its object's channel
 * (CRD__WAIT_CHANNEL, 0) or the delay each attempt's server answer names
 * (CRD__WAIT_DELAY, the rate limiter: no channel, and a delay past the deadline ends the
 * wait at once). */
typedef struct crd__sync_op {
    crd__sync *s;
    crd__sync_try_fn fn;
    const crd__sync_attempt *at;
    void *arg;
    crd__sync_end_fn end;
    int rule;
    bool last_try;
    crd__wait_how how;
} crd__sync_op;

/* The synchronizers' waiter, a state machine shaped like the lock's (acquire.h) and
 * driven the same two ways: by the blocking call (crd__sync_wait) and by the event loop
 * (loop.c). Try; unless wait_ms is 0, take the object's channel with its rule (shared by
 * this client's waiters), try again, then sleep for the slice (wait.h: a message, the
 * retry time the last try gave, the deadline, or without a live subscription the poll
 * interval) and try after each. When the wait runs out: CRD_TIMEOUT (CRD_IO when the last
 * attempt failed on the connection), after one last attempt when last_try. wait_ms 0 and
 * busy: CRD_BUSY. Then the end hook and, on CRD_OK, the client's detail string is
 * cleared: both before the channel's reference is given back, the last moment
 * crd_client_free (which wakes a waiter and waits for those references) leaves the
 * client to this wait. */
typedef enum crd__sw_state {
    CRD__SW_TRY,       /* one attempt (nonblocking: on the engine when it can go there) */
    CRD__SW_IO,        /* event loop: the attempt is in flight; its completion writes the fd */
    CRD__SW_SUBSCRIBE, /* take the channel, then TRY again */
    CRD__SW_WAIT,      /* the driver waits for a wake-up or wake_at: crd__swait_woken */
    CRD__SW_END,       /* the end hook runs on the outcome (a read-back may block) */
    CRD__SW_DONE       /* result holds the outcome; the subscription is given back */
} crd__sw_state;

typedef struct crd__swait {
    crd__sw_state state;
    crd__sync_op op;
    bool nonblocking;  /* driven by an event loop: never wait inside a step */
    bool tried;        /* the first attempt has been made */
    bool waited;       /* that first attempt was busy */
    bool last;         /* the attempt under way is the one after the deadline */
    bool failed;       /* the last attempt failed on the connection */
    bool confirmed;    /* the subscription is live */
    int64_t wait_ms, deadline, wake_at;
    int64_t retry_epoch; /* the last attempt's retry time (wall clock ms), or 0 */
    crd__backoff backoff;
    crd__sub *sub;
    uint64_t seen_events; /* crd__sub_events(sub) when the loop last looked */
    struct crd__aio *aio; /* CRD__SW_IO */
    crd_status ending;  /* CRD__SW_END: the outcome the end hook gets */
    crd_status result;  /* CRD__SW_DONE */
} crd__swait;

/* Prepares w for a wait of wait_ms (-1 forever, 0 try once). State CRD__SW_TRY. */
void crd__swait_begin(crd__swait *w, const crd__sync_op *op, int64_t wait_ms, bool nonblocking);
/* Runs the current state's work and moves on (nothing in CRD__SW_WAIT or _DONE). */
void crd__swait_step(crd__swait *w);
/* The driver's report after CRD__SW_WAIT: woken (CRD_OK), slice over (CRD_TIMEOUT) or
 * CRD_CLOSED; confirmed is the subscription's state now. */
void crd__swait_woken(crd__swait *w, crd_status woke, bool confirmed);
/* Whether the next step is a blocking call the event loop runs on its helper thread
 * (an attempt that cannot go on the engine, an end hook that reads back). */
bool crd__swait_blocks(const crd__swait *w);
/* Ends a wait that is not done with st (CRD_CANCELLED, CRD_CLOSED) through its end hook
 * (nonblocking: CRD__SW_END when that hook must read back); an attempt in flight is
 * dropped (what it took stays taken: the outcome is then CRD_OK only if it had landed). */
void crd__swait_cancel(crd__swait *w, crd_status st);
/* The blocking driver: runs op's wait to its end on the calling thread. */
crd_status crd__sync_wait(const crd__sync_op *op, int64_t wait_ms);

/* The event-loop driver: op's wait as an event-loop operation (loop.c). op->arg
 * (malloc'd, may be NULL) is freed when the operation ends. On failure to start, op->arg
 * is freed and the status returned. */
crd_status crd__sync_start(const crd__sync_op *op, int64_t wait_ms, crd_op_done_fn done,
                           void *user, crd_op **out);

/* How a public acquire runs: NULL blocks the caller, else an event-loop operation that
 * calls done(user) and is put in *op (the _async call has set *op to NULL). */
typedef struct crd__sync_async {
    crd_op_done_fn done;
    void *user;
    crd_op **op;
} crd__sync_async;
/* Either driver for op: crd__sync_wait when as is NULL, else crd__sync_start on a copy of
 * op->arg (arg_size bytes, the caller's: it may be on the stack) that the operation owns. */
crd_status crd__sync_go(const crd__sync_op *op, size_t arg_size, int64_t wait_ms,
                        const crd__sync_async *as);
/* The metrics of a semaphore or permit-semaphore acquire of permits that ended with st
 * (waited: as crd__sync_end_fn's). */
void crd__sync_count_acquire(crd__sync *s, crd_status st, int64_t permits, bool waited);

/* The four public calls every synchronizer handle has: type_new_n, type_new, type_free and
 * type_name (crd_<type>_*), for a struct type whose only member is its crd__sync s. */
#define CRD__SYNC_HANDLE_CALLS(type, kind)                                                    \
    crd_status crd_##type##_new_n(crd_client *c, const char *name, size_t len,              \
                                  crd_##type **out)                                         \
    {                                                                                        \
        crd__sync *s = NULL;                                                                 \
        crd_status st = crd__sync_new(c, kind, out, name, len, sizeof(crd_##type), &s);      \
        if (out != NULL)                                                                     \
            *out = (crd_##type *)(void *)s; /* s is its first member */                      \
        return st;                                                                           \
    }                                                                                        \
    crd_status crd_##type##_new(crd_client *c, const char *name, crd_##type **out)           \
    {                                                                                        \
        return crd_##type##_new_n(c, name, name != NULL ? strlen(name) : 0, out);            \
    }                                                                                        \
    void crd_##type##_free(crd_##type *h) { crd__sync_free(h != NULL ? &h->s : NULL); }      \
    const char *crd_##type##_name(const crd_##type *h, size_t *len)                          \
    {                                                                                        \
        return crd__sync_name(h != NULL ? &h->s : NULL, len);                                \
    }

struct crd_semaphore {
    crd__sync s;
};
struct crd_permit_semaphore {
    crd__sync s;
};
struct crd_latch {
    crd__sync s;
};

/* ---- ratelimiter.c: RRateLimiter's scripts (golden r47_rl_*, docs/KINDS-R47.md) ------------ */

typedef enum crd__rl_mode {
    CRD__RL_OVERALL = 0,   /* one budget for every client */
    CRD__RL_PER_CLIENT = 1 /* one budget per client id (its uuid) */
} crd__rl_mode;

/* The five keys every rate limiter script but try_set_rate takes, in Redisson's order. */
typedef struct crd__rl_names {
    crd__buf keys[5]; /* N, {N}:value, {N}:value:<uuid>, {N}:permits, {N}:permits:<uuid> */
} crd__rl_names;
/* Redisson's suffixName rule: "{N}:value", or "N:value" when N has a '{'. */
crd_status crd__rl_names_init(crd__rl_names *n, const char *name, size_t len, const char *uuid);
void crd__rl_names_clear(crd__rl_names *n);

void crd__rl_try_set_rate(const crd__rl_names *n, int64_t rate, int64_t interval_ms,
                          crd__rl_mode mode, int64_t keep_alive_ms, crd__cmd *cmd);
/* setRate(RateLimiterArgs) (require_exist false) and updateRate (true). */
void crd__rl_set_rate(const crd__rl_names *n, int64_t rate, int64_t interval_ms, crd__rl_mode mode,
                      int64_t keep_alive_ms, bool keep_state, bool require_exist, crd__cmd *cmd);
/* Draws the 16 random bytes of the record (into random[16] too, for a read-back): CRD_IO
 * when the OS gives none. */
crd_status crd__rl_try_acquire(const crd__rl_names *n, int64_t permits, crd__cmd *cmd);
/* The same, the 16 bytes also written to drawn (may be NULL). */
crd_status crd__rl_try_acquire_with(const crd__rl_names *n, int64_t permits, crd__cmd *cmd,
                                    unsigned char drawn[16]);
void crd__rl_available(const crd__rl_names *n, crd__cmd *cmd);
void crd__rl_release(const crd__rl_names *n, int64_t permits, crd__cmd *cmd);
void crd__rl_expire(const crd__rl_names *n, int64_t ttl_ms, crd__cmd *cmd);
/* delete(): a plain DEL of the five keys (another client's PER_CLIENT keys stay). */
void crd__rl_delete(const crd__rl_names *n, crd__cmd *cmd);

typedef enum crd__rl_outcome {
    CRD__RL_GRANTED,       /* nil: the permits were taken */
    CRD__RL_WAIT,          /* an integer: try again in *wait_ms */
    CRD__RL_UNINITIALIZED, /* "RateLimiter is not initialized": no rate set (or it expired) */
    CRD__RL_TOO_MANY,      /* "Requested permits amount cannot exceed defined rate" */
    CRD__RL_BAD            /* anything else (the caller reports the server's words) */
} crd__rl_outcome;
/* Reads ratelimiter_try_acquire's reply (also Redisson's own script's error texts). */
crd__rl_outcome crd__rl_acquire_reply(const redisReply *r, int64_t *wait_ms);
/* A count answered as an integer or as a bulk string holding one (available_permits). */
bool crd__rl_count_reply(const redisReply *r, int64_t *count);

struct crd_rate_limiter {
    crd__sync s;
    crd__rl_names names;
};

/* ---- semaphore.c: RSemaphore.releaseIfExists ------------------------------------------------ */

/* KEYS N, channel; ARGV permits, publish: reply 1 released, 0 no such semaphore. */
void crd__semaphore_release_if_exists(const char *name, size_t len, const crd__buf *channel,
                                      const char *publish, int64_t permits, crd__cmd *cmd);

#endif /* CRD_SYNC_H */
