/*
 * exclusion.c -- the mutual-exclusion checker of exclusion.h: one worker loop for the
 * plain, fair and read-write locks, and the run that puts workers on threads and in
 * processes.
 */
#include "exclusion.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ex_worker {
    const crdt_ex *x;
    crd_client *client; /* threads share the test's client; a process makes its own */
    int index, iterations;
    unsigned seed;
} ex_worker;

/* One worker's handle of the run's kind, and the permit it holds. */
typedef struct ex_handle {
    crd_lock *l;
    crd_rwlock *rw;
    crd_semaphore *s;
    crd_permit_semaphore *ps;
    crd_lock *held; /* the lock or the rwlock's side taken */
    char id[CRD_PERMIT_ID_SIZE];
} ex_handle;

static crd_status ex_open(const ex_worker *w, ex_handle *h)
{
    const char *name = w->x->key.lock;
    switch (w->x->kind) {
    case CRDT_EX_LOCK:
        return crd_lock_new(w->client, name, &h->l);
    case CRDT_EX_FAIR_LOCK:
        return crd_fair_lock_new(w->client, name, &h->l);
    case CRDT_EX_RWLOCK:
        return crd_rwlock_new(w->client, name, &h->rw);
    case CRDT_EX_SEMAPHORE:
        return crd_semaphore_new(w->client, name, &h->s);
    case CRDT_EX_PERMIT_SEMAPHORE:
        return crd_permit_semaphore_new(w->client, name, &h->ps);
    }
    return CRD_INVALID_ARGUMENT;
}

static crd_status ex_acquire(ex_handle *h, bool write, int64_t lease)
{
    if (h->s != NULL)
        return crd_semaphore_acquire(h->s, 1, 30000);
    if (h->ps != NULL)
        return crd_permit_semaphore_acquire(h->ps, 30000, lease, h->id);
    h->rw != NULL ? (h->held = write ? crd_rwlock_write(h->rw) : crd_rwlock_read(h->rw))
                  : (h->held = h->l);
    return crd_lock_acquire(h->held, 30000, lease);
}

static crd_status ex_release(ex_handle *h)
{
    if (h->s != NULL)
        return crd_semaphore_release(h->s, 1);
    if (h->ps != NULL)
        return crd_permit_semaphore_release(h->ps, h->id);
    return crd_lock_release(h->held);
}

static void ex_close(ex_handle *h)
{
    crd_lock_free(h->l);
    crd_rwlock_free(h->rw);
    crd_semaphore_free(h->s);
    crd_permit_semaphore_free(h->ps);
}

/* A read-write hold's check: a writer must be alone, a reader must see no writer.
 * Returns the violations it saw (0, 1 or 2). */
static int rw_section(redisContext *r, const crdt_ex *x, bool write)
{
    const char *mine = write ? x->key.writers : x->key.readers;
    const char *other = write ? x->key.readers : x->key.writers;
    int violations = 0;
    long long in = crdt_reply_int(redisCommand(r, "INCR %s", mine));
    if (write && in != 1)
        violations++;
    if (crdt_reply_int(redisCommand(r, "GET %s", other)) != 0)
        violations++;
    crdt_reply_int(redisCommand(r, "DECR %s", mine));
    return violations;
}

/* A semaphore's: at most permits holders inside. Returns 1 when there were more. */
static int permits_section(redisContext *r, const crdt_ex *x)
{
    long long in = crdt_reply_int(redisCommand(r, "INCR %s", x->key.inside));
    crdt_reply_int(redisCommand(r, "DECR %s", x->key.inside));
    return in > x->permits || in < 1;
}

static int ex_section(redisContext *r, const crdt_ex *x, bool write)
{
    switch (x->kind) {
    case CRDT_EX_RWLOCK:
        return rw_section(r, x, write);
    case CRDT_EX_SEMAPHORE:
    case CRDT_EX_PERMIT_SEMAPHORE:
        return permits_section(r, x);
    case CRDT_EX_LOCK:
    case CRDT_EX_FAIR_LOCK:
        break;
    }
    return crdt_exclusion_section(r, x->key.inside, x->key.counter);
}

static void add_to(redisContext *r, const char *key, int n)
{
    if (n > 0)
        freeReplyObject(redisCommand(r, "INCRBY %s %d", key, n));
}

/* The loop of one worker; plain C (no Criterion asserts: it also runs in children). A
 * worker that cannot reach the server reports nothing: the holds done then fall short. */
static void ex_work(ex_worker *w)
{
    const crdt_ex *x = w->x;
    redisContext *r = crdt_raw_connect(x->port, 30000);
    if (r == NULL)
        return;
    ex_handle h = {0};
    int violations = 0, failures = 0, done = 0, writes = 0;
    bool open = ex_open(w, &h) == CRD_OK;
    if (!open)
        failures = w->iterations;
    int64_t lease = x->lease_ms != CRDT_EX_HALF_WATCHDOG ? x->lease_ms
                    : w->index % 2 == 1                  ? CRD_LEASE_WATCHDOG
                                                         : 20000;
    for (int i = 0; open && i < w->iterations; i++) {
        bool write = x->kind == CRDT_EX_RWLOCK &&
                     (int)(rand_r(&w->seed) % 100) < x->write_percent;
        if (ex_acquire(&h, write, lease) != CRD_OK) {
            failures++;
            continue;
        }
        violations += ex_section(r, x, write);
        writes += write;
        if (ex_release(&h) != CRD_OK)
            failures++;
        done++;
    }
    add_to(r, x->key.violations, violations);
    add_to(r, x->key.failures, failures);
    add_to(r, x->key.done, done);
    add_to(r, x->key.writes, writes);
    ex_close(&h);
    redisFree(r);
}

static void *ex_thread(void *arg)
{
    ex_work(arg);
    return NULL;
}

/* A process: one client shared by its workers, the first on its main thread. */
static int ex_process(void *arg)
{
    ex_worker *ws = arg;
    const crdt_ex *x = ws[0].x;
    int n = x->per_proc > 0 ? x->per_proc : 1;
    redisContext *r = crdt_raw_connect(x->port, 10000);
    if (r == NULL)
        return 5;
    bool go = crdt_await_go(r, x->key.go);
    redisFree(r);
    if (!go)
        return 6;
    crd_client *c = crdt_plain_client(x->port);
    if (c == NULL)
        return 3;
    pthread_t th[CRDT_EX_MAX_WORKERS];
    int started = 1, rc = 0;
    for (int t = 0; t < n; t++)
        ws[t].client = c;
    for (; started < n; started++)
        if (pthread_create(&th[started], NULL, ex_thread, &ws[started]) != 0) {
            rc = 4;
            break;
        }
    ex_work(&ws[0]);
    for (int t = 1; t < started; t++)
        pthread_join(th[t], NULL);
    crd_client_free(c);
    return rc;
}

static long long get_counter(redisContext *r, const char *key)
{
    return crdt_reply_int(crdt_cmd(r, "GET %s", key));
}

void crdt_ex_run(crdt_ex *x)
{
    int per = x->per_proc > 0 ? x->per_proc : 1;
    int workers = x->threads + x->procs * per;
    cr_assert(x->procs <= CRDT_EX_MAX_PROCS && workers <= CRDT_EX_MAX_WORKERS && workers > 0,
              "an exclusion run of %d threads and %d x %d processes is too large", x->threads,
              x->procs, per);
    x->key.lock = crdt_key(x->suffix);
    x->key.inside = crdt_key("inside");
    x->key.counter = crdt_key("counter");
    x->key.readers = crdt_key("readers");
    x->key.writers = crdt_key("writers");
    x->key.violations = crdt_key("violations");
    x->key.failures = crdt_key("failures");
    x->key.done = crdt_key("done");
    x->key.writes = crdt_key("writes");
    x->key.go = crdt_key("go");
    x->port = crdt_port();
    redisContext *go = crdt_redis();
    ex_worker ws[CRDT_EX_MAX_WORKERS];
    memset(ws, 0, sizeof ws);
    for (int i = 0; i < workers; i++) {
        ws[i].x = x;
        ws[i].index = i;
        ws[i].iterations = x->total / workers + (i < x->total % workers ? 1 : 0);
        ws[i].seed = 1000u + (unsigned)i;
    }

    int64_t t0 = crdt_now_ms();
    /* Fork before this process starts threads of its own. */
    pid_t pids[CRDT_EX_MAX_PROCS];
    for (int p = 0; p < x->procs; p++)
        pids[p] = crdt_fork(ex_process, &ws[x->threads + p * per]);
    crd_client *c = x->threads > 0 || x->prepare != NULL ? crdt_client() : NULL;
    if (x->prepare != NULL)
        x->prepare(x, c);
    for (int p = 0; p < x->procs; p++)
        freeReplyObject(crdt_cmd(go, "RPUSH %s 1", x->key.go));
    pthread_t th[CRDT_EX_MAX_WORKERS];
    for (int t = 0; t < x->threads; t++) {
        ws[t].client = c;
        cr_assert_eq(pthread_create(&th[t], NULL, ex_thread, &ws[t]), 0);
    }
    for (int t = 0; t < x->threads; t++)
        pthread_join(th[t], NULL);
    int64_t deadline = t0 + x->deadline_ms;
    for (int p = 0; p < x->procs; p++) {
        int64_t left = deadline - crdt_now_ms();
        x->child_rc[p] = crdt_wait_child(pids[p], left > 0 ? left : 0);
    }
    x->elapsed_ms = crdt_now_ms() - t0;
    crd_client_free(c);

    redisContext *r = go;
    x->got.counter = get_counter(r, x->key.counter);
    x->got.inside = get_counter(r, x->key.inside);
    x->got.readers = get_counter(r, x->key.readers);
    x->got.writers = get_counter(r, x->key.writers);
    x->got.violations = get_counter(r, x->key.violations);
    x->got.failures = get_counter(r, x->key.failures);
    x->got.done = get_counter(r, x->key.done);
    x->got.writes = get_counter(r, x->key.writes);
    redisFree(r);
    double s = (double)x->elapsed_ms / 1000.0;
    fprintf(stderr,
            "[%s] exclusion: %d holds (%lld writes) by %d threads + %d processes x %d in "
            "%.2f s (%.0f/s): counter=%lld violations=%lld failures=%lld\n",
            x->tag, x->total, x->got.writes, x->threads, x->procs, per, s,
            s > 0 ? x->total / s : 0.0, x->got.counter, x->got.violations, x->got.failures);
}

void crdt_ex_assert(const crdt_ex *x)
{
    for (int p = 0; p < x->procs; p++)
        cr_assert_eq(x->child_rc[p], 0, "worker process %d ended with %d", p, x->child_rc[p]);
    cr_assert_eq(x->got.violations, 0, "%lld times an owner was inside with a writer or holder",
                 x->got.violations);
    cr_assert_eq(x->got.failures, 0, "%lld acquires or releases failed", x->got.failures);
    cr_assert_eq(x->got.done, x->total, "%lld holds done, not %d", x->got.done, x->total);
    if (x->kind == CRDT_EX_LOCK || x->kind == CRDT_EX_FAIR_LOCK)
        cr_assert_eq(x->got.counter, x->total, "the counter ended at %lld, not %d",
                     x->got.counter, x->total);
    cr_assert_eq(x->got.inside, 0, "%lld holders left inside", x->got.inside);
    cr_assert_eq(x->got.readers, 0, "%lld readers left inside", x->got.readers);
    cr_assert_eq(x->got.writers, 0, "%lld writers left inside", x->got.writers);
    if (x->check != NULL) {
        redisContext *r = crdt_redis();
        x->check(r, x->key.lock);
        redisFree(r);
    }
}
