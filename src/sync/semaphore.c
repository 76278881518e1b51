/*
 * semaphore.c -- Redisson's RSemaphore: a string N holding the available permits and the
 * channel redisson_sc:{N} (PROTOCOL.md 14; golden sem_*). Each operation is one script
 * (lua/semaphore_*.lua) or a GET; waiting is sync.c's loop with the counting wake rule.
 *
 * Permits have no owner, so a lost reply cannot be read back: a release, an add, a drain
 * or an acquire whose reply was lost is CRD_OUTCOME_UNKNOWN, never resent.
 *
 * Threads: any caller thread. Locks: none of its own.
 */
#include "sync.h"

#include <stdlib.h>
#include <string.h>

CRD__SYNC_HANDLE_CALLS(semaphore, CRD__SYNC_SEMAPHORE)

/* KEYS N [, channel] for a semaphore script. */
static void keys(crd__cmd *cmd, int script, const crd__sync *s, bool channel)
{
    crd__cmd_init(cmd, script, 6);
    crd__cmd_key(cmd, s->name, s->name_len);
    if (channel)
        crd__cmd_key(cmd, s->channel.p, s->channel.len);
}

crd_status crd_semaphore_try_set_permits(crd_semaphore *sem, int64_t permits, int64_t ttl_ms,
                                         bool *set)
{
    if (set != NULL)
        *set = false;
    crd_status st = crd__sync_check(sem != NULL ? &sem->s : NULL);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &sem->s;
    if (permits < 0 || ttl_ms < 0 || ttl_ms > CRD_DURATION_MAX_MS)
        return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                         "semaphore \"%.*s\": permits must be >= 0 and ttl_ms 0 (none) or up "
                         "to %lld ms (got %lld and %lld); nothing was changed",
                         CRD__SYNC_NAME_FMT(s), (long long)CRD_DURATION_MAX_MS,
                         (long long)permits, (long long)ttl_ms);
    crd__cmd cmd;
    keys(&cmd, ttl_ms > 0 ? CRD__SCRIPT_SEMAPHORE_TRY_SET_TTL : CRD__SCRIPT_SEMAPHORE_TRY_SET, s,
         true);
    crd__cmd_arg_i64(&cmd, permits);
    crd__cmd_arg_str(&cmd, s->publish);
    if (ttl_ms > 0)
        crd__cmd_arg_i64(&cmd, ttl_ms);
    int64_t v = 0;
    st = crd__sync_run_ok(s, &cmd, "semaphore try-set", true, &v);
    if (st == CRD_OK && set != NULL)
        *set = v == 1;
    return st;
}

typedef struct sem_try {
    crd__sync *s;
    int64_t permits;
} sem_try;

/* One acquire attempt, in two halves the event loop can run apart: the command, then
 * its reading (semaphore_acquire replies 1, taken, or 0). */
static crd_status sem_build(void *arg, crd__cmd *cmd)
{
    sem_try *t = arg;
    keys(cmd, CRD__SCRIPT_SEMAPHORE_ACQUIRE, t->s, false);
    crd__cmd_arg_i64(cmd, t->permits);
    return CRD_OK;
}

static crd_status sem_read(void *arg, crd_status st, redisReply *r, bool sent,
                           int64_t *retry_epoch_ms)
{
    sem_try *t = arg;
    (void)retry_epoch_ms;
    st = crd__sync_lost(t->s, st, sent, false, "semaphore acquire");
    int64_t v = 0;
    if (st == CRD_OK)
        st = crd__sync_int(t->s, r, "semaphore acquire", &v);
    freeReplyObject(r);
    if (st != CRD_OK)
        return st;
    if (v == 1)
        return CRD_OK;
    if (v == 0)
        return CRD_BUSY;
    return crd__fail(t->s->client, CRD_PROTOCOL, "semaphore acquire: reply %lld", (long long)v);
}

static const crd__sync_attempt sem_attempt = {sem_build, sem_read, NULL};

static crd_status sem_try_once(void *arg, int64_t *retry_epoch_ms)
{
    return crd__sync_attempt_call(((sem_try *)arg)->s, &sem_attempt, arg, "semaphore acquire",
                                  retry_epoch_ms);
}

static crd_status sem_end(crd__sync *s, void *arg, crd_status st, bool waited)
{
    crd__sync_count_acquire(s, st, ((sem_try *)arg)->permits, waited);
    return st;
}

/* The handle and the arguments of an acquire, blocking or on the loop. */
static crd_status check_acquire(crd_semaphore *sem, int64_t permits, int64_t wait_ms)
{
    crd_status st = crd__sync_check(sem != NULL ? &sem->s : NULL);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &sem->s;
    if (permits < 1 || wait_ms < -1 || wait_ms > CRD_DURATION_MAX_MS)
        return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                         "semaphore \"%.*s\": permits must be >= 1 and wait_ms -1, 0 or up to "
                         "%lld (got %lld and %lld)", CRD__SYNC_NAME_FMT(s),
                         (long long)CRD_DURATION_MAX_MS, (long long)permits, (long long)wait_ms);
    return CRD_OK;
}

static crd_status acquire(crd_semaphore *sem, int64_t permits, int64_t wait_ms,
                          const crd__sync_async *as)
{
    crd_status st = check_acquire(sem, permits, wait_ms);
    if (st != CRD_OK)
        return st;
    sem_try t = {&sem->s, permits};
    crd__sync_op op = {&sem->s, sem_try_once, &sem_attempt, &t, sem_end, CRD__WAKE_COUNT, false};
    return crd__sync_go(&op, sizeof t, wait_ms, as);
}

crd_status crd_semaphore_acquire(crd_semaphore *sem, int64_t permits, int64_t wait_ms)
{
    return acquire(sem, permits, wait_ms, NULL);
}

crd_status crd_semaphore_acquire_async(crd_semaphore *sem, int64_t permits, int64_t wait_ms,
                                       crd_op_done_fn done, void *user, crd_op **op)
{
    if (op != NULL)
        *op = NULL;
    crd__sync_async as = {done, user, op};
    return acquire(sem, permits, wait_ms, &as);
}

/* release and add: one script each, KEYS N, channel; ARGV amount, publish. */
static crd_status change(crd_semaphore *sem, int script, int64_t amount, bool positive,
                         const char *what)
{
    crd__sync *s = sem != NULL ? &sem->s : NULL;
    crd_status st = crd__sync_amount(s, amount, positive ? 1 : INT64_MIN, what);
    if (st != CRD_OK || s == NULL /* for clang's analyzer (checked) */)
        return st;
    crd__cmd cmd;
    keys(&cmd, script, s, true);
    crd__cmd_arg_i64(&cmd, amount);
    crd__cmd_arg_str(&cmd, s->publish);
    return crd__sync_run_ok(s, &cmd, what, false, NULL);
}

crd_status crd_semaphore_release(crd_semaphore *sem, int64_t permits)
{
    crd_status st = change(sem, CRD__SCRIPT_SEMAPHORE_RELEASE, permits, true,
                           "semaphore release");
    if (st == CRD_OK)
        CRD__COUNT_N(sem->s.client, permits_released, permits);
    return st;
}

crd_status crd_semaphore_add_permits(crd_semaphore *sem, int64_t delta)
{
    return change(sem, CRD__SCRIPT_SEMAPHORE_ADD, delta, false, "semaphore add");
}

crd_status crd_semaphore_available(crd_semaphore *sem, int64_t *available)
{
    crd_status st = crd__sync_check_ptr(sem != NULL ? &sem->s : NULL, available, "available");
    if (st != CRD_OK)
        return st;
    *available = 0;
    st = crd__sync_get(&sem->s, "semaphore available", available);
    if (st == CRD_OK)
        crd__ok(sem->s.client);
    return st;
}

crd_status crd_semaphore_drain(crd_semaphore *sem, int64_t *drained)
{
    if (drained != NULL)
        *drained = 0;
    crd_status st = crd__sync_check(sem != NULL ? &sem->s : NULL);
    if (st != CRD_OK)
        return st;
    crd__cmd cmd;
    keys(&cmd, CRD__SCRIPT_SEMAPHORE_DRAIN, &sem->s, false);
    return crd__sync_run_ok(&sem->s, &cmd, "semaphore drain", false, drained);
}

/* ---- RSemaphore.releaseIfExists ------------------------------------------------------------ */

void crd__semaphore_release_if_exists(const char *name, size_t len, const crd__buf *channel,
                                      const char *publish, int64_t permits, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_SEMAPHORE_RELEASE_IF_EXISTS, 0);
    crd__cmd_key(cmd, name, len);
    crd__cmd_key(cmd, channel->p, channel->len);
    crd__cmd_arg_i64(cmd, permits);
    crd__cmd_arg_str(cmd, publish);
}

crd_status crd_semaphore_release_if_exists(crd_semaphore *sem, int64_t permits, bool *released)
{
    if (released != NULL)
        *released = false;
    crd_status st = crd__sync_check(sem != NULL ? &sem->s : NULL);
    if (st != CRD_OK)
        return st;
    crd__sync *s = &sem->s;
    if (permits < 0 || permits > INT64_MAX / 2)
        return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                         "semaphore \"%.*s\": release_if_exists of %lld permits; nothing was "
                         "changed", CRD__SYNC_NAME_FMT(s), (long long)permits);
    if (permits == 0) { /* as Java: nothing is sent, and nothing was released */
        crd__ok(s->client);
        return CRD_OK;
    }
    crd__cmd cmd;
    crd__semaphore_release_if_exists(s->name, s->name_len, &s->channel, s->publish, permits, &cmd);
    int64_t v = 0;
    st = crd__sync_run_ok(s, &cmd, "semaphore release_if_exists", false, &v);
    if (st != CRD_OK)
        return st;
    if (v != 0 && v != 1)
        return crd__fail(s->client, CRD_PROTOCOL, "semaphore release_if_exists: reply %lld",
                         (long long)v);
    if (v == 1)
        CRD__COUNT_N(s->client, permits_released, permits);
    if (released != NULL)
        *released = v == 1;
    return CRD_OK;
}
