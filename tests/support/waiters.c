/*
 * waiters.c -- the gates and waiter threads of waiters.h. A gate is a mutex, a
 * condition variable on CLOCK_MONOTONIC and an int; a waiter is one pthread that runs
 * waiter_main below and reports through its state gate.
 */
#include "waiters.h"
#include "locked.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------- */
/* Gates                                                                              */
/* ---------------------------------------------------------------------------------- */

void crdt_gate_init(crdt_gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &a);
    pthread_condattr_destroy(&a);
    g->value = 0;
}

void crdt_gate_destroy(crdt_gate *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

void crdt_gate_set(crdt_gate *g, int v)
{
    pthread_mutex_lock(&g->mu);
    if (v > g->value)
        g->value = v;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

int crdt_gate_value(crdt_gate *g) { return crdt_locked_int(&g->mu, &g->value); }

bool crdt_gate_wait(crdt_gate *g, int at_least, int64_t timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    while (g->value < at_least && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    bool ok = g->value >= at_least;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

/* ---------------------------------------------------------------------------------- */
/* Waiter threads                                                                     */
/* ---------------------------------------------------------------------------------- */

static void *waiter_main(void *arg)
{
    crdt_waiter *w = arg;
    bool own = w->owner == 0;
    if (own)
        w->owner = crd_owner_current();
    if (w->client != NULL)
        crdt_owner_field(w->client, w->owner, w->field, sizeof w->field);
    if (w->trace != NULL)
        w->trace_from = crdt_tracelog_count(w->trace);
    crdt_gate_set(&w->state, CRDT_WAITER_STARTED);
    w->t_start_ns = crdt_now_ns();
    w->t_start_ms = w->t_start_ns / 1000000;
    w->acquire_st = own ? crd_lock_acquire(w->lock, w->wait_ms, w->lease_ms)
                        : crd_lock_acquire_owner(w->lock, w->owner, w->wait_ms, w->lease_ms);
    w->t_acq_ns = crdt_now_ns();
    w->t_acq_ms = w->t_acq_ns / 1000000;
    if (w->trace != NULL)
        w->trace_to = crdt_tracelog_count(w->trace);
    crdt_gate_set(&w->state, CRDT_WAITER_RETURNED);
    if (w->acquire_st == CRD_OK && !w->hold) {
        if (w->release_gate != NULL)
            crdt_gate_wait(w->release_gate, 1, 30000);
        if (w->hold_ms > 0)
            crdt_sleep_ms(w->hold_ms);
        w->t_rel_ns = crdt_now_ns();
        w->release_st = own ? crd_lock_release(w->lock) : crd_lock_release_owner(w->lock, w->owner);
    }
    crdt_gate_set(&w->state, CRDT_WAITER_DONE);
    return NULL;
}

void crdt_waiter_start(crdt_waiter *w)
{
    w->field[0] = '\0';
    crdt_gate_init(&w->state);
    cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
    cr_assert(crdt_gate_wait(&w->state, CRDT_WAITER_STARTED, 5000), "waiter thread did not start");
}

bool crdt_waiter_returned(crdt_waiter *w)
{
    return crdt_gate_value(&w->state) >= CRDT_WAITER_RETURNED;
}

bool crdt_waiter_wait(crdt_waiter *w, int state, int64_t timeout_ms)
{
    return crdt_gate_wait(&w->state, state, timeout_ms);
}

void crdt_waiter_join(crdt_waiter *w, int64_t timeout_ms, const char *what)
{
    cr_assert(crdt_gate_wait(&w->state, CRDT_WAITER_DONE, timeout_ms),
              "%s%sthe waiter thread did not finish within %lld ms", what != NULL ? what : "",
              what != NULL ? ": " : "", (long long)timeout_ms);
    pthread_join(w->th, NULL);
    crdt_gate_destroy(&w->state);
}

int64_t crdt_release_wakes(crd_lock *held, crdt_waiter *w, const char *what)
{
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(held), CRD_OK, "%s: release", what);
    crdt_waiter_join(w, 10000, what);
    cr_assert_eq(w->acquire_st, CRD_OK, "%s: the waiter got %s", what, crd_strerror(w->acquire_st));
    int64_t took = w->t_acq_ms - t0;
    cr_assert_lt(took, 1500, "%s: woken %lld ms after the release (by the TTL, not the message)",
                 what, (long long)took);
    return took;
}

void crdt_threads_run(int n, int batch, void *(*fn)(void *arg), void *args, size_t arg_size)
{
    pthread_t th[64];
    cr_assert(batch >= 1 && batch <= 64, "batch %d", batch);
    for (int base = 0; base < n; base += batch) {
        int k = n - base < batch ? n - base : batch;
        for (int i = 0; i < k; i++)
            cr_assert_eq(pthread_create(&th[i], NULL, fn,
                                        (char *)args + (size_t)(base + i) * arg_size),
                         0);
        for (int i = 0; i < k; i++)
            pthread_join(th[i], NULL);
    }
}
