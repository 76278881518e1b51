/*
 * waiters.h -- gates and waiter threads for the credisson test suites.
 *
 * What it provides
 *   - crdt_gate: a one-way signal between threads of one process. Its value only grows;
 *     a thread waits until it reaches a level, with a deadline on the monotonic clock
 *     (a condition variable, never a sleep loop).
 *   - crdt_waiter: one thread that acquires a lock (crd_lock_acquire with its wait and
 *     lease, or crd_lock_acquire_owner as an owner of the test's), records when it
 *     started and returned and what it got, then releases at once, after a critical
 *     section, when a gate opens, or keeps the hold. Its progress is a gate the test
 *     waits on (CRDT_WAITER_STARTED, _RETURNED, _DONE).
 *   - crdt_threads_run: many short-lived threads, a batch at a time.
 *
 * Threads only: a forked child gets a copy of a gate, not the gate (tests that need
 * processes to meet use a pipe or a Redis list). The waiter's start and join assert with
 * Criterion, so they run in a test; the waiter thread itself asserts nothing.
 */
#ifndef CRDT_WAITERS_H
#define CRDT_WAITERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* ---------------------------------------------------------------------------------- */
/* Gates                                                                              */
/* ---------------------------------------------------------------------------------- */

typedef struct crdt_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    int value;
} crdt_gate;

/* Value 0. Destroy with crdt_gate_destroy once no thread uses it. */
void crdt_gate_init(crdt_gate *g);
void crdt_gate_destroy(crdt_gate *g);
/* Raise the value to v (a lower v changes nothing) and wake every waiting thread. */
void crdt_gate_set(crdt_gate *g, int v);
/* The current value (does not wait). */
int crdt_gate_value(crdt_gate *g);
/* Wait until the value is at least at_least or timeout_ms passes; returns whether it
 * got there. */
bool crdt_gate_wait(crdt_gate *g, int at_least, int64_t timeout_ms);

/* ---------------------------------------------------------------------------------- */
/* Waiter threads                                                                     */
/* ---------------------------------------------------------------------------------- */

/* The values a waiter's state gate goes through. */
enum {
    CRDT_WAITER_STARTED = 1,  /* owner, field and trace_from are known */
    CRDT_WAITER_RETURNED = 2, /* the acquire returned: acquire_st, t_acq_* are set */
    CRDT_WAITER_DONE = 3      /* the thread is about to end (released, or keeps the hold) */
};

typedef struct crdt_waiter {
    /* Set by the test before crdt_waiter_start (a designated initialiser leaves the rest
     * zero). */
    crd_lock *lock;
    int64_t wait_ms, lease_ms; /* crd_lock_acquire's arguments */
    crd_client *client;        /* the lock's client, to fill field (NULL: field stays "") */
    crdt_tracelog *trace;      /* the client's recorder, to fill trace_from/_to (or NULL) */
    bool hold;                 /* keep the lock once acquired (no release) */
    crdt_gate *release_gate;   /* unless hold: release when it reaches 1 (deadline 30 s);
                                * NULL: release at once */
    int64_t hold_ms;           /* unless hold: then keep it this long before the release
                                * (a critical section, where time passing is the point) */
    uint64_t owner;            /* acquire and release as this owner (crd_lock_*_owner);
                                * 0: the thread's own, crd_owner_current(), set here */
    /* Filled by the thread; read them once the state gate says so. */
    char field[128];                        /* "<client uuid>:<owner>" */
    crd_status acquire_st, release_st;      /* release_st: CRD_OK untouched unless released */
    int64_t t_start_ns, t_acq_ns, t_rel_ns; /* crdt_now_ns() before acquire, after it
                                             * returned, before the release */
    int64_t t_start_ms, t_acq_ms;           /* the same readings in ms */
    size_t trace_from, trace_to;            /* recorder entries before and after the acquire */
    crdt_gate state;                        /* CRDT_WAITER_* */
    pthread_t th;
} crdt_waiter;

/* Start the thread and wait (deadline 5 s, asserted) until it is CRDT_WAITER_STARTED. */
void crdt_waiter_start(crdt_waiter *w);
/* Whether the acquire has returned (does not wait). */
bool crdt_waiter_returned(crdt_waiter *w);
/* Wait until the waiter reaches state (a CRDT_WAITER_* value) or timeout_ms passes;
 * returns whether it did. */
bool crdt_waiter_wait(crdt_waiter *w, int state, int64_t timeout_ms);
/* Assert the thread finishes within timeout_ms ("<what>: the waiter thread did not
 * finish"), join it and destroy its gate. what may be NULL. */
void crdt_waiter_join(crdt_waiter *w, int64_t timeout_ms, const char *what);
/* Releases held (the waiter w waits on it), joins w and asserts it acquired within
 * 1.5 s of the release: woken by the unlock message, not by the lease running out.
 * Returns release -> acquired in ms. */
int64_t crdt_release_wakes(crd_lock *held, crdt_waiter *w, const char *what);

/* Runs fn on each of n arguments (args, arg_size bytes apart), each on a thread of its
 * own, batch threads at a time: starts a batch (asserts each start), joins it, starts
 * the next. For tests of what threads leave behind them as they come and go. */
void crdt_threads_run(int n, int batch, void *(*fn)(void *arg), void *args, size_t arg_size);

#endif /* CRDT_WAITERS_H */
