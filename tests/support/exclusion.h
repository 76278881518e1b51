/*
 * exclusion.h -- the mutual-exclusion checker of the lock and semaphore suites
 * (test_exclusion.c, test_fair.c, test_rwlock.c, test_semaphore.c).
 *
 * What it provides
 *   One worker and one run for every lock kind. Workers take one lock over and over:
 *   some on threads of the test process, sharing one client (crdt_client()), the others
 *   in forked processes with a client each (crdt_plain_client()), one or more workers
 *   per process. The overlap detector lives in Redis:
 *   - a plain or fair lock's holder runs crdt_exclusion_section (INCR inside must read
 *     1, a GET/SET read-modify-write of a counter that must end at the total, DECR);
 *   - a read-write lock's writer INCRs writers (must read 1) and reads readers (must be
 *     0), a reader INCRs readers and reads writers (must be 0); write_percent of the
 *     holds are writes, chosen by a seeded rand_r per worker.
 *   - a semaphore's or a permit semaphore's holder (one permit each) INCRs inside and
 *     must read at most permits.
 *   Each worker adds what it saw (violations, failed acquires or releases, holds done,
 *   writes) to counters in Redis, so a process's findings reach the test as a thread's
 *   do; a process exits 0 once its workers ran (3: no client, 4: no thread, 5: no
 *   connection, 6: never told to start).
 *
 * crdt_ex_run forks the processes before the test process starts a thread of its own
 * (ThreadSanitizer cannot follow a fork of a threaded process); they wait on a go list
 * until the test's prepare hook (if any: a semaphore's permits) has run on the test's
 * client. Then it runs the threads, waits for every worker and reads the counters back;
 * crdt_ex_assert asserts what every exclusion test asserts. The workers themselves
 * assert nothing (they run in children).
 */
#ifndef CRDT_EXCLUSION_H
#define CRDT_EXCLUSION_H

#include <stdint.h>

#include "harness.h"

enum { CRDT_EX_MAX_PROCS = 8, CRDT_EX_MAX_WORKERS = 32 };

typedef enum crdt_ex_kind {
    CRDT_EX_LOCK,      /* crd_lock_new */
    CRDT_EX_FAIR_LOCK, /* crd_fair_lock_new */
    CRDT_EX_RWLOCK,    /* crd_rwlock_new: reads and writes */
    CRDT_EX_SEMAPHORE, /* crd_semaphore_new: one permit a hold */
    CRDT_EX_PERMIT_SEMAPHORE, /* crd_permit_semaphore_new: one permit a hold, leased */
} crdt_ex_kind;

/* crdt_ex.lease_ms: a 20 s lease on even workers, the watchdog on odd ones. */
#define CRDT_EX_HALF_WATCHDOG 0

typedef struct crdt_ex {
    /* Set by the test (a designated initialiser leaves the rest zero). */
    const char *tag;       /* names the run in its report line, e.g. "fair" */
    crdt_ex_kind kind;
    const char *suffix;    /* the lock's name is crdt_key(suffix) */
    int threads;           /* workers on threads of the test process, one client */
    int procs;             /* forked processes, one client each */
    int per_proc;          /* workers per process (0: 1), sharing its client */
    int total;             /* holds over all workers, spread evenly */
    int write_percent;     /* read-write lock: the share of write holds */
    int64_t lease_ms;      /* every hold's lease, or CRDT_EX_HALF_WATCHDOG */
    int64_t deadline_ms;   /* for the processes to end (then they are killed) */
    int permits;           /* semaphores: the holders allowed inside at once */
    /* Run in the test process once the processes are forked, before any worker starts,
     * on the client its threads share (NULL: nothing to prepare). */
    void (*prepare)(struct crdt_ex *x, crd_client *c);
    /* Run by crdt_ex_assert after its own checks, on a raw connection and the lock's
     * name: what the kind must not leave behind (NULL: nothing more). */
    void (*check)(redisContext *r, const char *name);
    /* Made by crdt_ex_run. */
    struct {
        const char *lock, *inside, *counter, *readers, *writers;
        const char *violations, *failures, *done, *writes, *go;
    } key;
    int port;
    int child_rc[CRDT_EX_MAX_PROCS]; /* crdt_wait_child()'s report of each process */
    int64_t elapsed_ms;
    /* The counters, read back once every worker ended. */
    struct {
        long long counter, inside, readers, writers, violations, failures, done, writes;
    } got;
} crdt_ex;

/* Runs x (asserts its shape and every fork and thread start), prints its report line
 * ("[tag] exclusion: ...") and fills x's results. */
void crdt_ex_run(crdt_ex *x);
/* Asserts what an exclusion run must show: every process exited 0, no violation, no
 * failed acquire or release, total holds done (the counter at the total for a plain or
 * fair lock: no lost update), and nobody left inside; then x->check. */
void crdt_ex_assert(const crdt_ex *x);

#endif /* CRDT_EXCLUSION_H */
