/*
 * kinds_ext.h -- the kinds of Redisson 4.7's lock family (issue 44) as data, ready to
 * become rows of crd__kinds[] (kinds.c) and calls of the synchronizers: how each builds the
 * KEYS/ARGV of its lua/ scripts and what their replies mean, the grouped multi-lock's field
 * hash (fieldhash.c), the spin lock's back-off and the rate limiter's names. Nothing here
 * waits, sends or holds a lock: the waiter (issue 43) drives these. docs/KINDS-R47.md says
 * how each plugs in. Seen by kinds_ext.c, fieldhash.c and the unit tests.
 */
#ifndef CRD_KINDS_EXT_H
#define CRD_KINDS_EXT_H

#include "locks.h"

/* ---- fieldhash.c: the grouped multi-lock's field of a value ------------------------------ */

/* 22 base64 characters and a NUL. */
#define CRD__FML_FIELD_SIZE 23
/* Redisson's Hash.hash128toBase64 of the value's codec bytes (value, len): the field that
 * names the value in the group hash. The bytes are the ones Java's codec writes for the
 * value: StringCodec's UTF-8 text for the fleets that share a group with C (Redisson's
 * default Kryo5Codec writes other bytes, hence other fields). */
void crd__fml_field(const void *value, size_t len, char out[CRD__FML_FIELD_SIZE]);
/* HighwayHash under any key (the unit tests check the reference's vectors). */
uint64_t crd__highwayhash64(const uint64_t key[4], const void *data, size_t len);
void crd__highwayhash128(const uint64_t key[4], const void *data, size_t len, uint64_t out[2]);

/* ---- non-reentrant lock and fair lock ------------------------------------------------------ */

/* ARGV of every non-reentrant acquire: the error text the script answers a reentry with. */
#define CRD__REENTRY_ERROR "NON_REENTRANT_REACQUIRE"
/* Whether r is the non-reentrant acquire's refusal of a reentry: an error reply whose text
 * is exactly the token, with or without the "ERR " Redis 7 puts before an error_reply's
 * text. Every other error (WRONGTYPE, OOM, a Lua runtime error "ERR user_script:...") is
 * not: those carry other words, and a runtime error always names the script position. */
bool crd__reentry_refused(const redisReply *r);
/* The acquire builders, with crd__kind_ops.acquire's signature. Their replies read as the
 * reentrant kinds' (kinds.c acquire_reply / fair_acquire_reply) once crd__reentry_refused
 * has been asked: the refusal is CRD_DEADLOCK, at once, nothing changed. */
void crd__nrlock_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd);
/* a->nowait: the try-once script (now before wait, as Redisson). */
void crd__nrfair_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd);

/* ---- spin lock ------------------------------------------------------------------------------ */

/* Its acquire is the reentrant lock's (lua/rlock_acquire.lua, kinds.c rlock_acquire), its
 * renewal lock_renew; release and force-unlock publish nothing. crd__kind_ops signatures. */
void crd__spin_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd);
/* 1 released, 0 still held, nil not this owner's. */
crd__rel_outcome crd__spin_release_reply(const redisReply *r);
void crd__spin_force_unlock(const crd_lock *l, crd__cmd *cmd);

/* Redisson's LockOptions back-off between a spin waiter's attempts. Exponential (the
 * default: initial 1 ms, at most 128 ms, multiplier 2): each sleep is the previous one
 * times the multiplier plus a jitter in [0, failures), capped; constant: the same delay
 * every time (Redisson's default 64 ms). The caller bounds each sleep by its deadline. */
typedef struct crd__spin_backoff {
    int64_t next_ms;
    int64_t max_ms;
    int multiplier; /* 0: constant */
    int fails;
} crd__spin_backoff;
#define CRD__SPIN_INITIAL_MS 1
#define CRD__SPIN_MAX_MS 128
#define CRD__SPIN_MULTIPLIER 2
#define CRD__SPIN_CONSTANT_MS 64
void crd__spin_backoff_exponential(crd__spin_backoff *b, int64_t initial_ms, int64_t max_ms, int multiplier);
void crd__spin_backoff_constant(crd__spin_backoff *b, int64_t delay_ms);
/* The next sleep in ms; random is any 32 random bits (the jitter is random % failures). */
int64_t crd__spin_backoff_next(crd__spin_backoff *b, uint32_t random);

/* ---- grouped multi-lock (RedissonFasterMultiLock) ----------------------------------------- */

/* A group and its values: one hash G (the group name as given), one field per distinct
 * value (values with the same bytes are one value, as in Java's set of fields). */
typedef struct crd__group {
    char *name;
    size_t name_len;
    crd__buf channel;      /* redisson_lock__channel:{G}, or ...:G when G has a '{' */
    crd__buf latch_prefix; /* redisson_unlock_latch:{G}: (a latch is this plus a request id) */
    char (*fields)[CRD__FML_FIELD_SIZE];
    size_t nfields;
} crd__group;
/* n >= 1 values (binary-safe: values[i], lens[i]); CRD_INVALID_ARGUMENT for none,
 * CRD_NO_MEMORY. */
crd_status crd__group_init(crd__group *g, const char *name, size_t len, const void *const *values,
                           const size_t *lens, size_t n);
void crd__group_clear(crd__group *g);
/* a->nowait: the try-once script (reply 1/0), else the waiting form (nil / ms to wait). Both
 * carry the caller's clock (epoch ms). */
void crd__group_acquire(const crd__group *g, const crd__acq_args *a, crd__cmd *cmd);
/* crd__kind_ops.acquire_reply's signature: nil or 1 taken; 0 (try-once) refused; an integer
 * >= 0 held, the hint (ms until the blocking entry lapses). */
crd__acq_outcome crd__group_acquire_reply(const redisReply *r, bool nowait, int64_t *hint_ms,
                                          int64_t *token);
void crd__group_release(const crd__group *g, const crd__rel_args *a, const char *publish,
                        crd__cmd *cmd);
/* 1 + n released (n as the reentrant unlock's: receivers), 0 still held, nil or -1 (a
 * replayed nil) not held. */
crd__rel_outcome crd__group_release_reply(const redisReply *r);
/* Reply: the number of values freed. */
void crd__group_force_unlock(const crd__group *g, const char *publish, crd__cmd *cmd);
/* The watchdog's renewal of one owner's hold on the whole group: reply 1, or 0 (lost). */
void crd__group_renew(const crd__group *g, const char *field, size_t flen, int64_t timeout_ms,
                      crd__cmd *cmd);
void crd__group_is_locked(const crd__group *g, crd__cmd *cmd);
void crd__group_is_held(const crd__group *g, const char *field, size_t flen, crd__cmd *cmd);

/* ---- rate limiter (RRateLimiter) ------------------------------------------------------------ */

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
/* Draws the 16 random bytes of the record: CRD_IO when the OS gives none. */
crd_status crd__rl_try_acquire(const crd__rl_names *n, int64_t permits, crd__cmd *cmd);
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

/* ---- RSemaphore.releaseIfExists ------------------------------------------------------------ */

/* KEYS N, channel; ARGV permits, publish: reply 1 released, 0 no such semaphore. */
void crd__semaphore_release_if_exists(const char *name, size_t len, const crd__buf *channel,
                                      const char *publish, int64_t permits, crd__cmd *cmd);

#endif /* CRD_KINDS_EXT_H */
