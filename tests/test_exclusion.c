/*
 * test_exclusion.c -- mutual exclusion under contention: 8 threads sharing one client
 * in this process and 4 forked processes with a client each take one lock, together
 * CRDT_EXCLUSION_TOTAL times (default 10000, set by the build). The overlap detector
 * lives in Redis: right after acquiring, a holder INCRs a key and must read 1, and
 * DECRs it before releasing; each holder also does a GET/SET read-modify-write of a
 * counter that must end exactly at the total.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef CRDT_EXCLUSION_TOTAL_DEFAULT
#define CRDT_EXCLUSION_TOTAL_DEFAULT 10000
#endif

enum { THREADS = 8, PROCS = 4, WORKERS = THREADS + PROCS };

typedef struct shared {
    const char *lock;      /* lock name */
    const char *inside;    /* overlap detector */
    const char *counter;   /* read-modify-write counter */
    const char *violations;/* violations seen by any worker */
    const char *failures;  /* acquires or releases that did not succeed */
    int port;
} shared;

typedef struct worker {
    const shared *sh;
    crd_client *client; /* threads share the parent's client; processes make their own */
    int iterations;
    bool watchdog;
    int violations;
    int failures;
} worker;

/* The loop of one worker; plain C (no Criterion asserts: it also runs in children). */
static void work(worker *w)
{
    const shared *sh = w->sh;
    redisContext *r = crdt_raw_connect(sh->port, 10000);
    if (r == NULL) {
        w->failures = w->iterations;
        return;
    }
    crd_lock *l = NULL;
    if (crd_lock_new(w->client, sh->lock, &l) != CRD_OK) {
        w->failures = w->iterations;
        redisFree(r);
        return;
    }
    int64_t lease = w->watchdog ? CRD_LEASE_WATCHDOG : 20000;
    for (int i = 0; i < w->iterations; i++) {
        crd_status st = crd_lock_acquire(l, 30000, lease);
        if (st != CRD_OK) {
            w->failures++;
            continue;
        }
        w->violations += crdt_exclusion_section(r, sh->inside, sh->counter);
        if (crd_lock_release(l) != CRD_OK)
            w->failures++;
    }
    if (w->violations > 0)
        freeReplyObject(redisCommand(r, "INCRBY %s %d", sh->violations, w->violations));
    if (w->failures > 0)
        freeReplyObject(redisCommand(r, "INCRBY %s %d", sh->failures, w->failures));
    crd_lock_free(l);
    redisFree(r);
}

static void *thread_main(void *arg)
{
    work(arg);
    return NULL;
}

static int process_main(void *arg)
{
    worker *w = arg;
    crd_client *c = crdt_plain_client(w->sh->port);
    if (c == NULL)
        return 3;
    w->client = c;
    work(w);
    crd_client_free(c);
    return w->failures > 0 ? 2 : (w->violations > 0 ? 1 : 0);
}

static int total_acquisitions(void)
{
    const char *e = getenv("CRDT_EXCLUSION_TOTAL");
    int n = e != NULL ? atoi(e) : CRDT_EXCLUSION_TOTAL_DEFAULT;
    return n >= WORKERS ? n : WORKERS;
}

Test(exclusion, threads_and_processes_never_hold_the_lock_together, .timeout = 240)
{
    shared sh = {crdt_key("lock"), crdt_key("inside"), crdt_key("counter"),
                 crdt_key("violations"), crdt_key("failures"), crdt_port()};
    int total = total_acquisitions();
    worker ws[WORKERS];
    memset(ws, 0, sizeof ws);
    for (int i = 0; i < WORKERS; i++) {
        ws[i].sh = &sh;
        ws[i].iterations = total / WORKERS + (i < total % WORKERS ? 1 : 0);
        ws[i].watchdog = i % 2 == 1; /* half renew through the watchdog */
    }

    int64_t t0 = crdt_now_ms();
    /* Fork before this process starts threads of its own. */
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++)
        pids[p] = crdt_fork(process_main, &ws[THREADS + p]);

    crd_client *c = crdt_client();
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ws[t].client = c;
        cr_assert_eq(pthread_create(&th[t], NULL, thread_main, &ws[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    int child_rc[PROCS];
    for (int p = 0; p < PROCS; p++)
        child_rc[p] = crdt_wait_child(pids[p], 180000);
    int64_t elapsed = crdt_now_ms() - t0;

    redisContext *r = crdt_redis();
    long long counter = crdt_reply_int(crdt_cmd(r, "GET %s", sh.counter));
    long long violations = crdt_reply_int(crdt_cmd(r, "GET %s", sh.violations));
    long long failures = crdt_reply_int(crdt_cmd(r, "GET %s", sh.failures));
    long long inside = crdt_reply_int(crdt_cmd(r, "GET %s", sh.inside));
    fprintf(stderr,
            "[exclusion] %d acquisitions by %d threads + %d processes in %.2f s (%.0f/s): "
            "counter=%lld violations=%lld failures=%lld\n",
            total, THREADS, PROCS, (double)elapsed / 1000.0,
            elapsed > 0 ? total * 1000.0 / (double)elapsed : 0.0, counter, violations, failures);
    for (int p = 0; p < PROCS; p++)
        cr_assert(child_rc[p] == 0 || child_rc[p] == 1 || child_rc[p] == 2,
                  "worker process %d ended with %d", p, child_rc[p]);
    cr_assert_eq(violations, 0, "%lld times two owners were inside together", violations);
    cr_assert_eq(failures, 0, "%lld acquires or releases failed", failures);
    cr_assert_eq(counter, total, "the counter ended at %lld, not %d", counter, total);
    cr_assert_eq(inside, 0);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", sh.lock), 0, "the lock is free at the end");
    crd_client_free(c);
    redisFree(r);
}
