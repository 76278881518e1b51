/*
 * permits.c -- Redisson's RPermitExpirableSemaphore: the string N (available count), the
 * zset {N}:timeout of the permits out (16-byte random id -> deadline, epoch ms of the
 * acquirer's wall clock, 922337203685477 without a lease) and the channel
 * redisson_sc:{N} (PROTOCOL.md 14; golden pes_*). One script per operation
 * (lua/pes_*.lua); expired permits are reclaimed lazily by the scripts, as in Java.
 *
 * An acquire whose reply was lost is resolved by reading back whether the ids it sent
 * are in the zset (nobody else has them), before anything is sent again; a release or
 * an add whose reply was lost is CRD_OUTCOME_UNKNOWN.
 *
 * Threads: any caller thread. Locks: none of its own.
 */
#include "sync.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PERMITS 1024 /* ids in one acquire or release: one script's ARGV */

CRD__SYNC_HANDLE_CALLS(permit_semaphore, CRD__SYNC_PERMITS)

/* ---- ids ---------------------------------------------------------------------------- */

/* The 16 bytes an id's 32 hex characters encode (what Java's release(id) sends). */
static bool id_bytes(const char *id, unsigned char out[16])
{
    if (id == NULL || strnlen(id, 33) != 32 || strspn(id, "0123456789abcdefABCDEF") != 32)
        return false;
    for (int i = 0; i < 16; i++) {
        char pair[3] = {id[2 * i], id[2 * i + 1], '\0'};
        out[i] = (unsigned char)strtoul(pair, NULL, 16);
    }
    return true;
}

static crd_status bad_id(crd__sync *s, const char *id)
{
    return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                     "permit semaphore \"%.*s\": \"%.40s\" is not a permit id (32 hex "
                     "characters); nothing was changed", CRD__SYNC_NAME_FMT(s),
                     id != NULL ? id : "(null)");
}

/* KEYS N, zset, channel: the order of the reading scripts and the acquire. */
static void keys_nzc(crd__cmd *cmd, int script, const crd__sync *s, int cap)
{
    crd__cmd_init(cmd, script, cap);
    crd__cmd_key(cmd, s->name, s->name_len);
    crd__cmd_key(cmd, s->timeouts.p, s->timeouts.len);
    crd__cmd_key(cmd, s->channel.p, s->channel.len);
}

/* KEYS N, channel: try-set and add (their scripts know no zset). */
static void keys_nc(crd__cmd *cmd, int script, const crd__sync *s, int cap)
{
    crd__cmd_init(cmd, script, cap);
    crd__cmd_key(cmd, s->name, s->name_len);
    crd__cmd_key(cmd, s->channel.p, s->channel.len);
}

/* KEYS N, channel, zset: the order of the release scripts and set_permits. */
static void keys_ncz(crd__cmd *cmd, int script, const crd__sync *s, int cap)
{
    crd__cmd_init(cmd, script, cap);
    crd__cmd_key(cmd, s->name, s->name_len);
    crd__cmd_key(cmd, s->channel.p, s->channel.len);
    crd__cmd_key(cmd, s->timeouts.p, s->timeouts.len);
}

static crd_status check(crd_permit_semaphore *ps)
{
    return crd__sync_check(ps != NULL ? &ps->s : NULL);
}

/* check, then the id's 16 bytes into b (release, lease update). */
static crd_status check_id(crd_permit_semaphore *ps, const char *id, unsigned char b[16])
{
    crd_status st = check(ps);
    if (st == CRD_OK && !id_bytes(id, b))
        st = bad_id(&ps->s, id);
    return st;
}

/* ---- setting the permits ---------------------------------------------------------------- */

crd_status crd_permit_semaphore_try_set_permits(crd_permit_semaphore *ps, int64_t permits,
                                                bool *set)
{
    if (set != NULL)
        *set = false;
    crd_status st = check(ps);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &ps->s;
    if (permits < 0)
        return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                         "permit semaphore \"%.*s\": permits must be >= 0 (got %lld); nothing "
                         "was changed", CRD__SYNC_NAME_FMT(s), (long long)permits);
    crd__cmd cmd;
    keys_nc(&cmd, CRD__SCRIPT_SEMAPHORE_TRY_SET, s, 4);
    crd__cmd_arg_i64(&cmd, permits);
    crd__cmd_arg_str(&cmd, s->publish);
    int64_t v = 0;
    st = crd__sync_run_int(s, &cmd, "permit semaphore try-set", true, &v);
    if (st == CRD_OK) {
        if (set != NULL)
            *set = v == 1;
        crd__ok(s->client);
    }
    return st;
}

static crd_status amount(crd_permit_semaphore *ps, int script, int64_t n, bool non_negative,
                         const char *what)
{
    crd__sync *s = ps != NULL ? &ps->s : NULL;
    crd_status st = crd__sync_amount(s, n, non_negative ? 0 : INT64_MIN, what);
    if (st != CRD_OK || s == NULL /* for clang's analyzer (checked) */)
        return st;
    crd__cmd cmd;
    if (script == CRD__SCRIPT_PES_SET_PERMITS)
        keys_ncz(&cmd, script, s, 5);
    else
        keys_nc(&cmd, script, s, 4);
    crd__cmd_arg_i64(&cmd, n);
    crd__cmd_arg_str(&cmd, s->publish);
    return crd__sync_run_ok(s, &cmd, what, false, NULL);
}

crd_status crd_permit_semaphore_set_permits(crd_permit_semaphore *ps, int64_t permits)
{
    return amount(ps, CRD__SCRIPT_PES_SET_PERMITS, permits, true, "permit semaphore set");
}

crd_status crd_permit_semaphore_add_permits(crd_permit_semaphore *ps, int64_t delta)
{
    return amount(ps, CRD__SCRIPT_PES_ADD, delta, false, "permit semaphore add");
}

/* ---- acquire -------------------------------------------------------------------------- */

typedef struct pes_try {
    crd__sync *s;
    int64_t n;
    int64_t lease_ms;
    char (*ids)[CRD_PERMIT_ID_SIZE]; /* the caller's: set only when taken */
    char (*sent)[CRD_PERMIT_ID_SIZE]; /* this attempt's ids */
    bool pending;                    /* the last attempt's reply was lost: read back first */
} pes_try;

/* How many of the ids of the lost attempt are permits out (ZSCORE each, idempotent). */
static crd_status read_back(pes_try *t, int64_t *present)
{
    *present = 0;
    for (int64_t i = 0; i < t->n; i++) {
        unsigned char b[16];
        id_bytes(t->sent[i], b);
        crd__cmd cmd;
        crd__cmd_init(&cmd, CRD__PLAIN, 3);
        crd__cmd_arg_str(&cmd, "ZSCORE");
        crd__cmd_arg(&cmd, t->s->timeouts.p, t->s->timeouts.len);
        crd__cmd_arg(&cmd, (const char *)b, 16);
        redisReply *r = NULL;
        crd_status st = crd__sync_call(t->s, &cmd, "permit read-back", true, &r, NULL);
        if (st != CRD_OK)
            return st;
        if (r->type != REDIS_REPLY_NIL)
            (*present)++;
        freeReplyObject(r);
    }
    return CRD_OK;
}

static void taken(pes_try *t)
{
    memcpy(t->ids, t->sent, (size_t)t->n * sizeof t->sent[0]);
}

/* An acquire attempt in two halves the event loop can run apart: the command (fresh
 * random ids), then its reading. A lost reply sets pending: the next attempt is the
 * read-back (pes_try_once), never a second acquire. */
static crd_status pes_build(void *arg, crd__cmd *cmd)
{
    pes_try *t = arg;
    crd__sync *s = t->s;
    for (int64_t i = 0; i < t->n; i++)
        if (crd__random_hex32(t->sent[i]) != CRD_OK)
            return crd__fail(s->client, CRD_IO, "no random bytes from the OS for a permit id");
    int64_t now = crd__epoch_ms();
    keys_nzc(cmd, CRD__SCRIPT_PES_ACQUIRE, s, 8 + (int)t->n);
    crd__cmd_arg_i64(cmd, t->n);
    crd__cmd_arg_i64(cmd, t->lease_ms > 0 ? now + t->lease_ms : CRD__PERMIT_NO_LEASE_MS);
    crd__cmd_arg_i64(cmd, now);
    crd__cmd_arg_str(cmd, CRD__PERMIT_NO_LEASE);
    crd__cmd_arg_str(cmd, s->publish);
    for (int64_t i = 0; i < t->n; i++) {
        char *b = crd__cmd_space(cmd, 16);
        if (b != NULL) {
            id_bytes(t->sent[i], (unsigned char *)b);
            crd__cmd_arg(cmd, b, 16);
        }
    }
    return CRD_OK;
}

static crd_status pes_read(void *arg, crd_status st, redisReply *r, bool sent,
                           int64_t *retry_epoch_ms)
{
    pes_try *t = arg;
    crd__sync *s = t->s;
    if (st == CRD_IO && sent) {
        t->pending = true; /* resolved by the next try, before anything is sent */
        return st;
    }
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_STRING && r->len == 2 && memcmp(r->str, "OK", 2) == 0) {
        freeReplyObject(r);
        taken(t);
        return CRD_OK;
    }
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        return CRD_BUSY;
    }
    if (r->type == REDIS_REPLY_STRING && r->len > 1 && r->str[0] == ':') {
        char *end = NULL;
        long long at = strtoll(r->str + 1, &end, 10);
        bool ok = end == r->str + r->len;
        freeReplyObject(r);
        if (ok) {
            *retry_epoch_ms = at;
            return CRD_BUSY;
        }
        return crd__fail(s->client, CRD_PROTOCOL, "permit semaphore acquire: a deadline that is "
                         "not a number");
    }
    st = crd__reply_fail(s->client, r, "permit semaphore acquire");
    freeReplyObject(r);
    return st;
}

/* The read-back of a lost attempt: whether its ids are all out (taken), none (go on),
 * or some (unknown). */
static crd_status pes_resolve(void *arg)
{
    pes_try *t = arg;
    int64_t present = 0;
    crd_status st = read_back(t, &present);
    if (st != CRD_OK)
        return st; /* CRD_IO: nothing was sent; the wait retries the read-back */
    t->pending = false;
    if (present == t->n) {
        taken(t);
        return CRD_OK;
    }
    if (present != 0)
        return crd__fail(t->s->client, CRD_OUTCOME_UNKNOWN,
                         "permit semaphore \"%.*s\": an acquire's reply was lost and only "
                         "%lld of its %lld permits are out now (the others expired or were "
                         "released)", CRD__SYNC_NAME_FMT(t->s), (long long)present,
                         (long long)t->n);
    return CRD_BUSY; /* none went in: a new attempt */
}

/* On the loop, an attempt that must first read a lost reply back runs on a helper thread. */
static bool pes_inline(void *arg) { return ((pes_try *)arg)->pending; }

static const crd__sync_attempt pes_attempt = {pes_build, pes_read, pes_inline, NULL,
                                               pes_resolve};

static crd_status pes_try_once(void *arg, int64_t *retry_epoch_ms)
{
    return crd__sync_attempt_call(((pes_try *)arg)->s, &pes_attempt, arg,
                                  "permit semaphore acquire",
                                  retry_epoch_ms);
}

/* The argument checks of an acquire (blocking or on the loop). */
static crd_status check_acquire(crd_permit_semaphore *ps, int64_t permits, int64_t wait_ms,
                                int64_t lease_ms, const void *ids)
{
    crd_status st = crd__sync_check_ptr(ps != NULL ? &ps->s : NULL, ids, "ids");
    if (st != CRD_OK)
        return st;
    crd__sync *s = &ps->s;
    if (permits < 1 || permits > MAX_PERMITS || wait_ms < -1 || wait_ms > CRD_DURATION_MAX_MS ||
        (lease_ms != CRD_PERMIT_NO_LEASE && (lease_ms < 1 || lease_ms > CRD_DURATION_MAX_MS)))
        return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                         "permit semaphore \"%.*s\": permits must be 1 to %d, wait_ms -1, 0 or "
                         "up to %lld, lease_ms CRD_PERMIT_NO_LEASE or 1 to %lld (got %lld, %lld, "
                         "%lld)", CRD__SYNC_NAME_FMT(s), MAX_PERMITS,
                         (long long)CRD_DURATION_MAX_MS, (long long)CRD_DURATION_MAX_MS,
                         (long long)permits, (long long)wait_ms, (long long)lease_ms);
    return CRD_OK;
}

/* The end of an acquire's wait: a lost reply still unresolved is read back once more
 * (its ids are either all out, taken, or none, not taken), then the metrics. */
static crd_status pes_end(crd__sync *s, void *arg, crd_status st, bool waited)
{
    pes_try *t = arg;
    if (st != CRD_OK && t->pending) {
        int64_t present = 0;
        if (read_back(t, &present) == CRD_OK && (present == 0 || present == t->n)) {
            if (present == t->n) {
                taken(t);
                st = CRD_OK;
            }
        } else {
            st = crd__fail(s->client, CRD_OUTCOME_UNKNOWN,
                           "permit semaphore \"%.*s\": an acquire's reply was lost and could not "
                           "be read back; if it ran, its permits expire at their lease",
                           CRD__SYNC_NAME_FMT(s));
        }
    }
    crd__sync_count_acquire(s, st, t->n, waited);
    return st;
}

crd_status crd_permit_semaphore_acquire_n(crd_permit_semaphore *ps, int64_t permits,
                                          int64_t wait_ms, int64_t lease_ms,
                                          char (*ids)[CRD_PERMIT_ID_SIZE])
{
    crd_status st = check_acquire(ps, permits, wait_ms, lease_ms, ids);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &ps->s;
    char (*sent)[CRD_PERMIT_ID_SIZE] = calloc((size_t)permits, sizeof *sent);
    if (sent == NULL)
        return crd__fail(s->client, CRD_NO_MEMORY, "cannot allocate permit ids");
    pes_try t = {s, permits, lease_ms, ids, sent, false};
    crd__sync_op op = {s, pes_try_once, NULL, &t, pes_end, CRD__WAKE_COUNT, false};
    st = crd__sync_wait(&op, wait_ms);
    free(sent);
    return st;
}

crd_status crd_permit_semaphore_acquire_async(crd_permit_semaphore *ps, int64_t permits,
                                              int64_t wait_ms, int64_t lease_ms,
                                              char (*ids)[CRD_PERMIT_ID_SIZE],
                                              crd_op_done_fn done, void *user, crd_op **op)
{
    if (op != NULL)
        *op = NULL;
    crd_status st = check_acquire(ps, permits, wait_ms, lease_ms, ids);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &ps->s;
    /* One allocation, freed by the loop: the attempt's state, then its ids. */
    pes_try *t = calloc(1, sizeof *t + (size_t)permits * CRD_PERMIT_ID_SIZE);
    if (t == NULL)
        return crd__fail(s->client, CRD_NO_MEMORY, "cannot allocate an operation");
    t->s = s;
    t->n = permits;
    t->lease_ms = lease_ms;
    t->ids = ids;
    t->sent = (char (*)[CRD_PERMIT_ID_SIZE])(void *)(t + 1);
    crd__sync_op sop = {s, pes_try_once, &pes_attempt, t, pes_end, CRD__WAKE_COUNT, false};
    return crd__sync_start(&sop, wait_ms, done, user, op);
}

crd_status crd_permit_semaphore_acquire(crd_permit_semaphore *ps, int64_t wait_ms,
                                        int64_t lease_ms, char id[CRD_PERMIT_ID_SIZE])
{
    if (id == NULL)
        return crd__sync_check_ptr(ps != NULL ? &ps->s : NULL, id, "id");
    return crd_permit_semaphore_acquire_n(ps, 1, wait_ms, lease_ms,
                                          (char (*)[CRD_PERMIT_ID_SIZE])id);
}

/* ---- release ------------------------------------------------------------------------- */

/* A script on one permit (its release, its lease left): KEYS in the order `keys` puts
 * them, ARGV the id's 16 bytes, arg, the time now and the publish command; the integer
 * reply in *v. */
static crd_status permit_call(crd__sync *s, int script,
                              void (*keys)(crd__cmd *, int, const crd__sync *, int),
                              const unsigned char b[16], const char *arg, const char *what,
                              bool idempotent, int64_t *v)
{
    crd__cmd cmd;
    keys(&cmd, script, s, 7);
    crd__cmd_arg(&cmd, (const char *)b, 16);
    crd__cmd_arg_str(&cmd, arg);
    crd__cmd_arg_i64(&cmd, crd__epoch_ms());
    crd__cmd_arg_str(&cmd, s->publish);
    return crd__sync_run_int(s, &cmd, what, idempotent, v);
}

crd_status crd_permit_semaphore_release(crd_permit_semaphore *ps, const char *id)
{
    unsigned char b[16];
    crd_status st = check_id(ps, id, b);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &ps->s;
    int64_t v = 0;
    st = permit_call(s, CRD__SCRIPT_PES_RELEASE, keys_ncz, b, "1", "permit semaphore release",
                     false, &v);
    if (st != CRD_OK)
        return st;
    if (v == 1 || v == 2)
        CRD__COUNT(s->client, permits_released);
    switch (v) {
    case 1:
        crd__ok(s->client);
        return CRD_OK;
    case 2:
        return crd__fail(s->client, CRD_LOCK_LOST,
                         "permit semaphore \"%.*s\": permit %.32s was given back, but its lease "
                         "had already run out", CRD__SYNC_NAME_FMT(s), id);
    case 0:
        return crd__fail(s->client, CRD_NOT_OWNER,
                         "permit semaphore \"%.*s\": %.32s is not a permit out (never issued, "
                         "already released, or reclaimed after its lease); nothing was changed",
                         CRD__SYNC_NAME_FMT(s), id);
    default:
        return crd__fail(s->client, CRD_PROTOCOL, "permit semaphore release: reply %lld",
                         (long long)v);
    }
}

crd_status crd_permit_semaphore_release_n(crd_permit_semaphore *ps, const char *const *ids,
                                          size_t n)
{
    crd_status st = check(ps);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &ps->s;
    if (ids == NULL || n == 0 || n > MAX_PERMITS)
        return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                         "permit semaphore \"%.*s\": release of %zu ids (1 to %d, not NULL)",
                         CRD__SYNC_NAME_FMT(s), ids == NULL ? (size_t)0 : n, MAX_PERMITS);
    unsigned char *b = malloc(16 * n);
    if (b == NULL)
        return crd__fail(s->client, CRD_NO_MEMORY, "cannot allocate permit ids");
    for (size_t i = 0; i < n; i++) {
        if (!id_bytes(ids[i], b + 16 * i)) {
            free(b);
            return bad_id(s, ids[i]);
        }
        for (size_t j = 0; j < i; j++)
            if (memcmp(b + 16 * j, b + 16 * i, 16) == 0) {
                free(b);
                return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                                 "permit semaphore \"%.*s\": id %.32s is given twice; nothing "
                                 "was changed", CRD__SYNC_NAME_FMT(s), ids[i]);
            }
    }
    crd__cmd cmd;
    keys_ncz(&cmd, CRD__SCRIPT_PES_RELEASE_MANY, s, 8 + (int)n);
    crd__cmd_arg_i64(&cmd, (int64_t)n);
    crd__cmd_arg_i64(&cmd, crd__epoch_ms());
    crd__cmd_arg_str(&cmd, s->publish);
    for (size_t i = 0; i < n; i++)
        crd__cmd_arg(&cmd, (const char *)b + 16 * i, 16);
    int64_t v = 0;
    st = crd__sync_run_int(s, &cmd, "permit semaphore release", false, &v);
    free(b);
    if (st != CRD_OK)
        return st;
    if (v >= 0 && v <= (int64_t)n)
        CRD__COUNT_N(s->client, permits_released, v);
    if (v == (int64_t)n) {
        crd__ok(s->client);
        return CRD_OK;
    }
    if (v == -1)
        return crd__fail(s->client, CRD_NOT_OWNER,
                         "permit semaphore \"%.*s\": one of the %zu ids is not a permit out; "
                         "nothing was changed", CRD__SYNC_NAME_FMT(s), n);
    if (v >= 0 && v < (int64_t)n)
        return crd__fail(s->client, CRD_LOCK_LOST,
                         "permit semaphore \"%.*s\": %lld of the %zu permits had expired and "
                         "were reclaimed; the other %lld were given back", CRD__SYNC_NAME_FMT(s),
                         (long long)((int64_t)n - v), n, (long long)v);
    return crd__fail(s->client, CRD_PROTOCOL, "permit semaphore release: reply %lld",
                     (long long)v);
}

/* ---- leases ------------------------------------------------------------------------- */

crd_status crd_permit_semaphore_update_lease(crd_permit_semaphore *ps, const char *id,
                                             int64_t lease_ms)
{
    unsigned char b[16];
    crd_status st = check_id(ps, id, b);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &ps->s;
    if (lease_ms != CRD_PERMIT_NO_LEASE && (lease_ms < 1 || lease_ms > CRD_DURATION_MAX_MS))
        return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                         "permit semaphore \"%.*s\": lease_ms must be CRD_PERMIT_NO_LEASE or 1 "
                         "to %lld (got %lld)", CRD__SYNC_NAME_FMT(s),
                         (long long)CRD_DURATION_MAX_MS, (long long)lease_ms);
    int64_t v = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int64_t now = crd__epoch_ms();
        crd__cmd cmd;
        keys_nzc(&cmd, CRD__SCRIPT_PES_UPDATE_LEASE, s, 7);
        crd__cmd_arg(&cmd, (const char *)b, 16);
        crd__cmd_arg_i64(&cmd, lease_ms > 0 ? now + lease_ms : CRD__PERMIT_NO_LEASE_MS);
        crd__cmd_arg_i64(&cmd, now);
        crd__cmd_arg_str(&cmd, s->publish);
        st = crd__sync_run_int(s, &cmd, "permit lease update", true, &v);
        if (st != CRD_IO) /* setting a deadline twice sets it once: one retry */
            break;
    }
    if (st != CRD_OK)
        return st;
    if (v == 1) {
        crd__ok(s->client);
        return CRD_OK;
    }
    return crd__fail(s->client, CRD_NOT_OWNER,
                     "permit semaphore \"%.*s\": %.32s is not a permit out (released, or "
                     "reclaimed after its lease ran out)", CRD__SYNC_NAME_FMT(s), id);
}

crd_status crd_permit_semaphore_lease_left(crd_permit_semaphore *ps, const char *id,
                                           int64_t *left_ms)
{
    crd_status st = crd__sync_check_ptr(ps != NULL ? &ps->s : NULL, left_ms, "left_ms");
    if (st != CRD_OK)
        return st;
    crd__sync *s = &ps->s;
    *left_ms = 0;
    unsigned char b[16];
    if (!id_bytes(id, b))
        return bad_id(s, id);
    int64_t v = 0;
    st = permit_call(s, CRD__SCRIPT_PES_LEASE_LEFT, keys_nzc, b, CRD__PERMIT_NO_LEASE,
                     "permit lease", true, &v);
    if (st != CRD_OK)
        return st;
    if (v == 0)
        return crd__fail(s->client, CRD_NOT_OWNER,
                         "permit semaphore \"%.*s\": %.32s is not a permit out",
                         CRD__SYNC_NAME_FMT(s), id);
    *left_ms = v;
    crd__ok(s->client);
    return CRD_OK;
}

/* ---- counts ------------------------------------------------------------------------------ */

static crd_status count(crd_permit_semaphore *ps, int script, int64_t *out, const char *what)
{
    crd_status st = check(ps);
    if (st != CRD_OK)
        return st;
    if (out == NULL)
        return crd__fail(ps->s.client, CRD_INVALID_ARGUMENT, "%s: out is NULL", what);
    *out = 0;
    crd__cmd cmd;
    keys_nzc(&cmd, script, &ps->s, 5);
    crd__cmd_arg_i64(&cmd, crd__epoch_ms());
    crd__cmd_arg_str(&cmd, ps->s.publish);
    st = crd__sync_run_int(&ps->s, &cmd, what, true, out);
    if (st == CRD_OK)
        crd__ok(ps->s.client);
    return st;
}

crd_status crd_permit_semaphore_available(crd_permit_semaphore *ps, int64_t *available)
{
    return count(ps, CRD__SCRIPT_PES_AVAILABLE, available, "permit semaphore available");
}

crd_status crd_permit_semaphore_permits(crd_permit_semaphore *ps, int64_t *total)
{
    return count(ps, CRD__SCRIPT_PES_PERMITS, total, "permit semaphore permits");
}

crd_status crd_permit_semaphore_acquired(crd_permit_semaphore *ps, int64_t *acquired)
{
    return count(ps, CRD__SCRIPT_PES_ACQUIRED, acquired, "permit semaphore acquired");
}
