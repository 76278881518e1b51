/*
 * latch.c -- Redisson's RCountDownLatch: a string N holding the count, deleted at zero,
 * and the channel redisson_countdownlatch__channel__{N} (PROTOCOL.md 14; golden cdl_*).
 * try-set, count-down and delete are one script each (lua/latch_*.lua); the count and
 * the waiter's checks are a GET.
 *
 * Where credisson differs from Redisson on purpose: every message on the channel wakes
 * this client's waiters to read the count again (CRD__WAKE_ALL), so the "1" of a delete
 * ends their wait (Redisson's waiters only react to "0"). The wire is the same.
 *
 * Threads: any caller thread. Locks: none of its own.
 */
#include "sync.h"

#include <stdlib.h>
#include <string.h>

CRD__SYNC_HANDLE_CALLS(latch, CRD__SYNC_LATCH)

static crd_status check(crd_latch *l) { return crd__sync_check(l != NULL ? &l->s : NULL); }

/* A latch script: KEYS N, channel; ARGV message [, count], publish. */
static crd_status script(crd_latch *l, int which, const char *message, int64_t count,
                         const char *what, bool idempotent, int64_t *out)
{
    crd__sync *s = &l->s;
    crd__cmd cmd;
    crd__cmd_init(&cmd, which, 6);
    crd__cmd_key(&cmd, s->name, s->name_len);
    crd__cmd_key(&cmd, s->channel.p, s->channel.len);
    crd__cmd_arg_str(&cmd, message);
    if (count > 0)
        crd__cmd_arg_i64(&cmd, count);
    crd__cmd_arg_str(&cmd, s->publish);
    return crd__sync_run_ok(s, &cmd, what, idempotent, out);
}

crd_status crd_latch_try_set_count(crd_latch *l, int64_t count, bool *set)
{
    if (set != NULL)
        *set = false;
    crd_status st = check(l);
    if (st != CRD_OK)
        return st;
    if (count < 1)
        return crd__fail(l->s.client, CRD_INVALID_ARGUMENT,
                         "latch \"%.*s\": count must be >= 1 (got %lld); nothing was changed",
                         CRD__SYNC_NAME_FMT(&l->s), (long long)count);
    int64_t v = 0;
    st = script(l, CRD__SCRIPT_LATCH_TRY_SET, "1", count, "latch try-set", true, &v);
    if (st == CRD_OK && set != NULL)
        *set = v == 1;
    return st;
}

crd_status crd_latch_count_down(crd_latch *l)
{
    crd_status st = check(l);
    if (st != CRD_OK)
        return st;
    st = script(l, CRD__SCRIPT_LATCH_COUNT_DOWN, "0", 0, "latch count-down", false, NULL);
    if (st == CRD_OK)
        CRD__COUNT(l->s.client, latch_count_downs);
    return st;
}

crd_status crd_latch_delete(crd_latch *l, bool *deleted)
{
    if (deleted != NULL)
        *deleted = false;
    crd_status st = check(l);
    if (st != CRD_OK)
        return st;
    int64_t v = 0;
    st = script(l, CRD__SCRIPT_LATCH_DELETE, "1", 0, "latch delete", true, &v);
    if (st == CRD_OK && deleted != NULL)
        *deleted = v == 1;
    return st;
}

static crd_status get_count(crd_latch *l, int64_t *count)
{
    return crd__sync_get(&l->s, "latch count", count);
}

crd_status crd_latch_count(crd_latch *l, int64_t *count)
{
    crd_status st = crd__sync_check_ptr(l != NULL ? &l->s : NULL, count, "count");
    if (st != CRD_OK)
        return st;
    *count = 0;
    st = get_count(l, count);
    if (st == CRD_OK)
        crd__ok(l->s.client);
    return st;
}

/* One check of a waiter: zero (or missing) ends the wait. arg: a crd_latch *. */
static crd_status await_try(void *arg, int64_t *retry_epoch_ms)
{
    (void)retry_epoch_ms;
    int64_t count = 0;
    crd_status st = get_count(arg, &count);
    if (st != CRD_OK)
        return st;
    return count <= 0 ? CRD_OK : CRD_BUSY;
}

/* The metrics of an await that ended with st. */
static crd_status await_end(crd__sync *s, void *arg, crd_status st, bool waited)
{
    (void)arg;
    if (st == CRD_OK && waited)
        CRD__COUNT(s->client, latch_awaits_woken);
    else if (st == CRD_BUSY || st == CRD_TIMEOUT)
        CRD__COUNT(s->client, latch_await_timeouts);
    return st;
}

/* The handle and the wait of an await, blocking or on the loop. */
static crd_status check_await(crd_latch *l, int64_t wait_ms)
{
    crd_status st = check(l);
    if (st != CRD_OK)
        return st;
    if (wait_ms < -1 || wait_ms > CRD_DURATION_MAX_MS)
        return crd__fail(l->s.client, CRD_INVALID_ARGUMENT,
                         "latch \"%.*s\": wait_ms must be -1, 0 or up to %lld (got %lld)",
                         CRD__SYNC_NAME_FMT(&l->s), (long long)CRD_DURATION_MAX_MS,
                         (long long)wait_ms);
    return CRD_OK;
}

crd_status crd_latch_await(crd_latch *l, int64_t wait_ms)
{
    crd_status st = check_await(l, wait_ms);
    if (st != CRD_OK)
        return st;
    crd__sync_op op = {&l->s, await_try, NULL, l, await_end, CRD__WAKE_ALL, true};
    return crd__sync_wait(&op, wait_ms);
}

/* The event loop's await: its argument is a copy of the handle pointer (the loop frees
 * what it is given). */
typedef struct await_arg {
    crd_latch *l;
} await_arg;

static crd_status await_try_loop(void *arg, int64_t *retry_epoch_ms)
{
    return await_try(((await_arg *)arg)->l, retry_epoch_ms);
}

/* The same check in two halves, for the engine: GET, then its reading. */
static crd_status await_build(void *arg, crd__cmd *cmd)
{
    crd__sync *s = &((await_arg *)arg)->l->s;
    crd__cmd_init(cmd, CRD__PLAIN, 2);
    crd__cmd_arg_str(cmd, "GET");
    crd__cmd_arg(cmd, s->name, s->name_len);
    return CRD_OK;
}

static crd_status await_read(void *arg, crd_status st, redisReply *r, bool sent,
                             int64_t *retry_epoch_ms)
{
    (void)sent;
    (void)retry_epoch_ms;
    int64_t count = 0;
    if (st == CRD_OK)
        st = crd__sync_int(&((await_arg *)arg)->l->s, r, "latch count", &count);
    freeReplyObject(r);
    if (st != CRD_OK)
        return st;
    return count <= 0 ? CRD_OK : CRD_BUSY;
}

static const crd__sync_attempt await_attempt = {await_build, await_read, NULL};

crd_status crd_latch_await_async(crd_latch *l, int64_t wait_ms, crd_op_done_fn done, void *user,
                                 crd_op **op)
{
    if (op != NULL)
        *op = NULL;
    crd_status st = check_await(l, wait_ms);
    if (st != CRD_OK)
        return st;
    await_arg *a = malloc(sizeof *a);
    if (a == NULL)
        return crd__fail(l->s.client, CRD_NO_MEMORY, "cannot allocate an operation");
    a->l = l;
    crd__sync_op sop = {&l->s, await_try_loop, &await_attempt, a, await_end, CRD__WAKE_ALL, true};
    return crd__sync_start(&sop, wait_ms, done, user, op);
}
