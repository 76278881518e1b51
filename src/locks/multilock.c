/*
 * multilock.c -- several locks taken all or nothing (Redisson RedissonMultiLock), and
 * crd_lock_run_policy (what to do when Redis is unavailable).
 *
 * Deadlock: every multi-lock puts its set in one order (name bytes; for one name, the
 * write lock before the read lock, so an owner can still downgrade) and waits for each
 * lock only while holding locks that come before it. A holder of lock i waits only for
 * locks after i, so no circle of waiters can form among multi-locks, and the holder of
 * the highest lock always progresses. Java's RedissonMultiLock takes its list in the
 * caller's order, but bounds each wait and releases everything when one fails, so a
 * mixed C/Java cycle dissolves when Java's bounded wait ends.
 *
 * No Redis traffic of its own: it calls acquire.c and release.c per lock. Threads: any
 * caller thread; a multi-lock handle may be shared, each owner acquiring it in turn.
 */
#include "locks.h"

#include <stdlib.h>
#include <string.h>

struct crd_multilock {
    size_t n;
    crd_lock **locks; /* in acquisition order */
    crd_lock *failed; /* the lock the last acquire stopped at */
};

/* For one name, the write lock first (a writer may also read, not the reverse). */
static int kind_rank(crd__kind k) { return k == CRD__WRITE ? 0 : k == CRD__READ ? 1 : 2 + (int)k; }

static int order(const void *pa, const void *pb)
{
    const crd_lock *a = *(crd_lock *const *)pa, *b = *(crd_lock *const *)pb;
    int c = crd__bytes_cmp(a->name, a->name_len, b->name, b->name_len);
    if (c != 0)
        return c;
    return kind_rank(a->kind) - kind_rank(b->kind);
}

crd_status crd_multilock_new(crd_lock *const *locks, size_t n, crd_multilock **out)
{
    if (out == NULL || locks == NULL || n == 0)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "a multi-lock needs locks and an out");
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (locks[i] == NULL)
            return crd__fail(NULL, CRD_INVALID_ARGUMENT, "lock %zu of the set is NULL", i);
    crd_multilock *m = calloc(1, sizeof *m);
    if (m != NULL)
        m->locks = malloc(n * sizeof *m->locks);
    if (m == NULL || m->locks == NULL) {
        free(m);
        return crd__fail(locks[0]->client, CRD_NO_MEMORY, "cannot allocate a multi-lock");
    }
    memcpy(m->locks, locks, n * sizeof *m->locks);
    m->n = n;
    qsort(m->locks, n, sizeof *m->locks, order);
    for (size_t i = 1; i < n; i++)
        if (order(&m->locks[i - 1], &m->locks[i]) == 0) {
            crd_lock *d = m->locks[i];
            crd_multilock_free(m);
            return crd__fail(d->client, CRD_INVALID_ARGUMENT, "the set names the %s \"%.*s\" "
                             "twice", crd__kinds[d->kind].label, CRD__NAME_FMT(d));
        }
    *out = m;
    return CRD_OK;
}

void crd_multilock_free(crd_multilock *m)
{
    if (m == NULL)
        return;
    free(m->locks);
    free(m);
}

crd_lock *crd_multilock_failed(const crd_multilock *m) { return m == NULL ? NULL : m->failed; }

/* Gives back the first `held` locks, last first. A release whose outcome stayed unknown
 * is tried again (the latch makes that safe), so a rollback leaves nothing renewed. */
static crd_status release_first(crd_multilock *m, size_t held, uint64_t owner)
{
    crd_status first = CRD_OK;
    while (held-- > 0) {
        crd_status st = CRD_IO;
        for (int tries = 0; tries < 3 && st == CRD_IO; tries++)
            st = crd_lock_release_owner(m->locks[held], owner);
        if (first == CRD_OK)
            first = st;
    }
    return first;
}

crd_status crd_multilock_acquire_owner(crd_multilock *m, uint64_t owner, int64_t wait_ms,
                                       int64_t lease_ms)
{
    if (m == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "multi-lock is NULL");
    m->failed = NULL;
    int64_t deadline = wait_ms < 0 ? INT64_MAX : crd__now_ms() + wait_ms;
    for (size_t i = 0; i < m->n; i++) {
        int64_t left = CRD_WAIT_FOREVER;
        if (wait_ms >= 0) {
            left = deadline - crd__now_ms();
            left = left > 0 ? left : 0;
        }
        crd_status st = crd_lock_acquire_owner(m->locks[i], owner, left, lease_ms);
        if (st == CRD_OK)
            continue;
        m->failed = m->locks[i];
        crd_client *c = m->locks[i]->client;
        /* A later lock found held once the budget was spent: the set timed out. */
        if (st == CRD_BUSY && wait_ms != 0)
            st = crd__fail(c, CRD_TIMEOUT, "lock \"%.*s\" of the set still held when the wait "
                           "of %lld ms ran out", CRD__NAME_FMT(m->locks[i]), (long long)wait_ms);
        char msg[512];
        memcpy(msg, crd_client_errmsg(c), sizeof msg);
        msg[sizeof msg - 1] = '\0';
        release_first(m, i, owner);
        crd__fail(c, st, "%s", msg); /* the rollback's messages are not the news */
        return st;
    }
    return CRD_OK;
}

crd_status crd_multilock_acquire(crd_multilock *m, int64_t wait_ms, int64_t lease_ms)
{
    return crd_multilock_acquire_owner(m, crd_owner_current(), wait_ms, lease_ms);
}

crd_status crd_multilock_release_owner(crd_multilock *m, uint64_t owner)
{
    if (m == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "multi-lock is NULL");
    return release_first(m, m->n, owner);
}

crd_status crd_multilock_release(crd_multilock *m)
{
    return crd_multilock_release_owner(m, crd_owner_current());
}

/* ---- run with a policy ---------------------------------------------------------------- */

/* Redis could not be used at all: unreachable, refusing us, or never reached. */
static bool unavailable(crd_client *c, crd_status st)
{
    return st == CRD_IO || st == CRD_AUTH || (st == CRD_CLOSED && c != NULL && c->failed);
}

crd_status crd_lock_run_policy(crd_client *client, crd_lock *l, int64_t wait_ms,
                               int64_t lease_ms, crd_unavailable_policy policy,
                               int (*fn)(void *arg), void *arg, int *fn_result)
{
    crd_client *c = l != NULL ? l->client : client;
    if (fn == NULL || c == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "fn and a lock (or a client) are needed");
    if (policy != CRD_UNAVAILABLE_FAIL && policy != CRD_UNAVAILABLE_SKIP &&
        policy != CRD_UNAVAILABLE_DEGRADE)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "unknown policy %d", (int)policy);
    crd_status st = l != NULL ? crd_lock_acquire(l, wait_ms, lease_ms) : crd__client_check(c);
    if (st == CRD_OK && l == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "lock is NULL");
    if (st == CRD_OK) {
        int rc = fn(arg);
        if (fn_result != NULL)
            *fn_result = rc;
        return crd_lock_release(l);
    }
    if (!unavailable(c, st) || policy == CRD_UNAVAILABLE_FAIL)
        return st;
    char why[512];
    memcpy(why, crd_client_errmsg(c), sizeof why);
    why[sizeof why - 1] = '\0';
    const char *name = l != NULL ? l->name : "";
    int nlen = l != NULL ? (int)(l->name_len > 60 ? 60 : l->name_len) : 0;
    if (policy == CRD_UNAVAILABLE_SKIP) {
        CRD__COUNT(c, runs_skipped);
        crd__log(c, CRD_LOG_WARN, "lock \"%.*s\": Redis unavailable (%s); the work was skipped",
                 nlen, name, why);
        return crd__fail(c, CRD_SKIPPED, "Redis unavailable, work skipped: %s", why);
    }
    CRD__COUNT(c, runs_degraded);
    crd__log(c, CRD_LOG_WARN, "lock \"%.*s\": Redis unavailable (%s); running the work WITHOUT "
             "the lock (degrade policy): others may run it at the same time", nlen, name, why);
    int rc = fn(arg);
    if (fn_result != NULL)
        *fn_result = rc;
    return crd__fail(c, CRD_DEGRADED, "Redis unavailable, work ran without the lock: %s", why);
}
