/* events.h -- a counter of watchdog events (crd_options.on_event) for the Criterion suites
 * and the programs without Criterion (tests/stress, tests/chaos, tests/soak): how many of
 * each kind came, when the first and the last lock-lost came (CLOCK_MONOTONIC ns, the
 * clock of crdt_now_ns) and on which thread the last one was delivered.
 *
 * Lock-free (atomics only), so the thread that reports an event (watchdog, subscriber or
 * loop thread) never waits on the test; a test waits for a count with a deadline
 * (crdt_events_await_lost, or crdt_wait_until / an event loop with
 * crdt_events_saw_lost). Header-only (static functions), like redis_child.h. */
#ifndef CRDT_EVENTS_H
#define CRDT_EVENTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "credisson.h"

typedef struct crdt_events {
    atomic_int lost, failing, recovered;
    _Atomic int64_t first_lost_ns, last_lost_ns; /* 0 until a lock-lost came */
    _Atomic pthread_t lost_thread;               /* the thread of the last lock-lost */
} crdt_events;

/* The crd_event_fn: counts ev into the crdt_events at user. */
static inline void crdt_events_count(void *user, const crd_event *ev)
{
    crdt_events *e = user;
    switch (ev->kind) {
    case CRD_EVENT_LOCK_LOST: {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, zero = 0;
        atomic_compare_exchange_strong(&e->first_lost_ns, &zero, ns);
        atomic_store(&e->last_lost_ns, ns);
        atomic_store(&e->lost_thread, pthread_self());
        atomic_fetch_add(&e->lost, 1);
        break;
    }
    case CRD_EVENT_RENEWAL_FAILING:
        atomic_fetch_add(&e->failing, 1);
        break;
    case CRD_EVENT_RENEWAL_RECOVERED:
        atomic_fetch_add(&e->recovered, 1);
        break;
    }
}

/* Zeroes e and points o's on_event at it. */
static inline void crdt_events_attach(crdt_events *e, crd_options *o)
{
    memset(e, 0, sizeof *e);
    o->on_event = crdt_events_count;
    o->event_user_data = e;
}

/* A crdt_wait_until predicate: at least one lock-lost came (arg: the crdt_events). */
static inline bool crdt_events_saw_lost(void *arg)
{
    return atomic_load(&((crdt_events *)arg)->lost) > 0;
}

/* Waits until at least n lock-lost events came or timeout_ms passed (looking every
 * millisecond); returns whether they came. */
static inline bool crdt_events_await_lost(crdt_events *e, int n, int64_t timeout_ms)
{
    struct timespec ts, ms = {0, 1000000L};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_ms;
    for (;;) {
        if (atomic_load(&e->lost) >= n)
            return true;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 >= deadline)
            return false;
        nanosleep(&ms, NULL);
    }
}

#endif /* CRDT_EVENTS_H */
