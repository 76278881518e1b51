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

/* Two ARGV: v and the wall clock now, or now first when now_first (Redisson's try-once
 * forms of the fair and the grouped lock take now before their wait or lease). */
void crd__arg_and_now(crd__cmd *cmd, int64_t v, bool now_first);

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
/* The fair acquire's KEYS and ARGV under script (kinds.c's fair lock calls it): the fair and the non-reentrant
 * fair lock share them, the latter adding the reentry error. */
void crd__fair_acquire_cmd(const crd_lock *l, const crd__acq_args *a, int script, crd__cmd *cmd);

/* ---- spin lock ------------------------------------------------------------------------------ */

/* Its acquire is the reentrant lock's (lua/rlock_acquire.lua, kinds.c rlock_acquire), its
 * renewal lock_renew; release and force-unlock publish nothing. crd__kind_ops signatures. */
void crd__spin_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd);
/* 1 released, 0 still held, nil not this owner's. */
crd__rel_outcome crd__spin_release_reply(const redisReply *r);
void crd__spin_force_unlock(const crd_lock *l, crd__cmd *cmd);

/* The spin waiter's back-off is the wait layer's (wait.h, crd__spin_backoff). */

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
    /* A view (crd__group_view): name and the fields point into a hold key (packed: the
     * fields one after the other, 22 bytes each, no NUL), channel and latch_prefix are
     * borrowed or empty, and crd__group_clear frees nothing. */
    const char *packed;
    bool view;
} crd__group;

/* A group's hold key (crd_lock.name of a CRD__GROUP lock): the group name G, the distinct
 * fields of the values sorted bytewise (22 bytes each), and their count in 8 hex digits.
 * The same set of values (in any order, with repeats) gives the same key; G is its prefix,
 * so the key routes as G does. n >= 1 values (binary-safe); *out allocated.
 * CRD_INVALID_ARGUMENT (n 0, a NULL value of non-zero length, over CRD__GROUP_MAX values),
 * CRD_NO_MEMORY. */
#define CRD__GROUP_MAX 100000
crd_status crd__group_key(const char *name, size_t len, const void *const *values,
                          const size_t *lens, size_t n, crd__buf *out);
/* A view of the group in hold key (key, len): false when it is not one. */
bool crd__group_view(crd__group *g, const char *key, size_t len);
/* The group name's length in a hold key (0 when it is not one). */
size_t crd__group_key_route(const char *key, size_t len);
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
/* Owner field's hold count in the group: HMGET G F1 F1:<field>:lock_count
 * F1:<field>:expire_time, read by crd__group_count_reply (the count when F1 names field
 * with a live entry, else 0): all values are taken and counted together. */
void crd__group_hold_count(const crd__group *g, const char *field, size_t flen, crd__cmd *cmd);
bool crd__group_count_reply(const redisReply *r, const char *field, size_t flen, int64_t *count);
/* Reply: the number of values freed. */
void crd__group_force_unlock(const crd__group *g, const char *publish, crd__cmd *cmd);
/* The watchdog's renewal of one owner's hold on the whole group: reply 1, or 0 (lost). */
void crd__group_renew(const crd__group *g, const char *field, size_t flen, int64_t timeout_ms,
                      crd__cmd *cmd);
void crd__group_is_locked(const crd__group *g, crd__cmd *cmd);
void crd__group_is_held(const crd__group *g, const char *field, size_t flen, crd__cmd *cmd);

/* The rate limiter's and RSemaphore.releaseIfExists's builders are the synchronizers'
 * (sync.h: ratelimiter.c, semaphore.c). */

#endif /* CRD_KINDS_EXT_H */
