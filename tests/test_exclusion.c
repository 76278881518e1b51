/*
 * test_exclusion.c -- mutual exclusion under contention: 8 threads sharing one client
 * in this process and 4 forked processes with a client each take one lock, together
 * CRDT_EXCLUSION_TOTAL times (default 10000, set by the build). The overlap detector
 * lives in Redis: right after acquiring, a holder INCRs a key and must read 1, and
 * DECRs it before releasing; each holder also does a GET/SET read-modify-write of a
 * counter that must end exactly at the total. The workers and the checks are
 * support/exclusion.h's, shared with the fair and read-write lock suites.
 */
#include <criterion/criterion.h>

#include <stdlib.h>

#include "exclusion.h"
#include "harness.h"

#ifndef CRDT_EXCLUSION_TOTAL_DEFAULT
#define CRDT_EXCLUSION_TOTAL_DEFAULT 10000
#endif

enum { THREADS = 8, PROCS = 4, WORKERS = THREADS + PROCS };

static int total_acquisitions(void)
{
    const char *e = getenv("CRDT_EXCLUSION_TOTAL");
    int n = e != NULL ? atoi(e) : CRDT_EXCLUSION_TOTAL_DEFAULT;
    return n >= WORKERS ? n : WORKERS;
}

static void lock_free(redisContext *r, const char *name)
{
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0, "the lock is free at the end");
}

/* Half the workers renew through the watchdog (CRDT_EX_HALF_WATCHDOG). */
Test(exclusion, threads_and_processes_never_hold_the_lock_together, .timeout = 240)
{
    crdt_ex x = {.tag = "exclusion", .kind = CRDT_EX_LOCK, .suffix = "lock", .check = lock_free,
                 .threads = THREADS, .procs = PROCS, .lease_ms = CRDT_EX_HALF_WATCHDOG,
                 .total = total_acquisitions(), .deadline_ms = 180000};
    crdt_ex_run(&x);
    crdt_ex_assert(&x);
}
