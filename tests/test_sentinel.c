/*
 * test_sentinel.c -- Sentinel mode and replica sync against a real topology: one
 * primary, two replicas and three redis-sentinel processes (tests/support/sentinel.h),
 * started by each test on free loopback ports and stopped at its end.
 * Runs its tests one at a time (CRDT_SERIAL_TEST): failovers load both cores.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sentinel.h"

static crdt_topo topo;

static void topo_up(void)
{
    cr_assert(crdt_topo_start(&topo, NULL), "topology: %s", topo.err);
}

static void topo_down(void) { crdt_topo_stop(&topo); }

Test(sentinel, the_test_topology_comes_up_and_fails_over, .init = topo_up, .fini = topo_down)
{
    int first = crdt_topo_primary_port(&topo);
    cr_assert_eq(first, topo.nodes[0].port);
    int second = crdt_topo_failover(&topo, 30000);
    cr_assert(second > 0 && second != first, "failover: %s", topo.err);
    cr_assert(crdt_topo_settle(&topo, 20000), "%s", topo.err);
    int third = crdt_topo_kill_primary(&topo, 30000);
    cr_assert(third > 0 && third != second, "kill: %s", topo.err);
    cr_assert(crdt_topo_restart(&topo, crdt_topo_node_index(&topo, second), 20000), "%s",
              topo.err);
}

/* ---- helpers ------------------------------------------------------------------------- */

static crd_client *sentinel_client(crd_options *o)
{
    crd_client *c = NULL;
    crd_status st = crd_client_new(o, &c);
    cr_assert_eq(st, CRD_OK, "crd_client_new: %s", crd_client_errmsg(c));
    return c;
}

static void url_options(crd_options *o, char *url, size_t cap)
{
    crd_options_init(o);
    crdt_topo_url(&topo, url, cap);
    o->url = url;
    o->connect_timeout_ms = 500;
    o->command_timeout_ms = 2000;
}

static long long pttl_on(int port, const char *key)
{
    redisContext *r = crdt_topo_connect(&topo, port, 1000);
    cr_assert_not_null(r);
    long long v = crdt_pttl(r, key);
    redisFree(r);
    return v;
}

typedef struct waiter {
    crd_lock *l;
    int64_t wait_ms;
    crd_status st;
    int64_t done_ms;
    bool release_after;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->st = crd_lock_acquire(w->l, w->wait_ms, CRD_LEASE_WATCHDOG);
    w->done_ms = crdt_now_ms();
    if (w->st == CRD_OK && w->release_after)
        crd_lock_release(w->l);
    return NULL;
}

/* Events of the watchdog, counted. */
typedef struct events {
    pthread_mutex_t mu;
    int lost, failing, recovered;
} events;

static void on_event(void *ud, const crd_event *e)
{
    events *ev = ud;
    pthread_mutex_lock(&ev->mu);
    if (e->kind == CRD_EVENT_LOCK_LOST)
        ev->lost++;
    else if (e->kind == CRD_EVENT_RENEWAL_FAILING)
        ev->failing++;
    else
        ev->recovered++;
    pthread_mutex_unlock(&ev->mu);
}

/* ---- discovery ----------------------------------------------------------------------- */

Test(sentinel, every_lock_kind_works_through_discovery, .init = topo_up, .fini = topo_down)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.watchdog_timeout_ms = 600; /* renewals every 200 ms */
    crd_client *a = sentinel_client(&o), *b = sentinel_client(&o);
    const char *name = crdt_key("rl");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_eq(crd_lock_acquire(lb, 0, CRD_LEASE_WATCHDOG), CRD_BUSY);
    /* The watchdog keeps it past three leases. */
    crdt_sleep_ms(1800); /* time passing is the scenario */
    cr_assert_gt(pttl_on(topo.nodes[0].port, name), 0);
    waiter w = {lb, 10000, CRD_IO, 0, true};
    pthread_t th;
    pthread_create(&th, NULL, wait_thread, &w);
    redisContext *p = crdt_topo_connect(&topo, topo.nodes[0].port, 1000);
    char ch[300];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
    cr_assert(crdt_await_subscribed(p, ch, 5000), "the waiter never subscribed");
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release(la), CRD_OK);
    pthread_join(th, NULL);
    cr_assert_eq(w.st, CRD_OK);
    cr_assert_lt(w.done_ms - released, 1000, "woken after %lld ms", (long long)(w.done_ms - released));

    /* Fair and read-write locks. */
    crd_lock *fa = NULL, *fb = NULL;
    cr_assert_eq(crd_fair_lock_new(a, crdt_key("fair"), &fa), CRD_OK);
    cr_assert_eq(crd_fair_lock_new(b, crdt_key("fair"), &fb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(fa, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    waiter fw = {fb, 10000, CRD_IO, 0, true};
    pthread_create(&th, NULL, wait_thread, &fw);
    crdt_sleep_ms(200); /* let the waiter queue up; the release below wakes it either way */
    cr_assert_eq(crd_lock_release(fa), CRD_OK);
    pthread_join(th, NULL);
    cr_assert_eq(fw.st, CRD_OK);
    crd_rwlock *ra = NULL, *rb = NULL;
    cr_assert_eq(crd_rwlock_new(a, crdt_key("rw"), &ra), CRD_OK);
    cr_assert_eq(crd_rwlock_new(b, crdt_key("rw"), &rb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(ra), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rb), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rb), 0, CRD_LEASE_WATCHDOG), CRD_DEADLOCK);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(rb)), CRD_OK);
    waiter ww = {crd_rwlock_write(rb), 10000, CRD_IO, 0, true};
    pthread_create(&th, NULL, wait_thread, &ww);
    crdt_sleep_ms(200);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(ra)), CRD_OK);
    pthread_join(th, NULL);
    cr_assert_eq(ww.st, CRD_OK);
    redisFree(p);
    crd_rwlock_free(ra);
    crd_rwlock_free(rb);
    crd_lock_free(fa);
    crd_lock_free(fb);
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
}

/* ---- failover during a hold ------------------------------------------------------------ */

static void hold_through(bool kill_primary)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.watchdog_timeout_ms = 6000; /* renewals every 2 s; the failover fits in the lease */
    events ev = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
    o.on_event = on_event;
    o.event_user_data = &ev;
    crd_client *a = sentinel_client(&o);
    const char *name = crdt_key("held");
    crd_lock *l = crdt_lock(a, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(a));
    int next = kill_primary ? crdt_topo_kill_primary(&topo, 30000) : crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    /* Renewals continue on the new primary: its copy of the lock gets a fresh TTL (the
     * lease is 6 s; after 7 s only a renewal there can keep it), or the loss is told. */
    int64_t deadline = crdt_now_ms() + 7000;
    while (crdt_now_ms() < deadline)
        crdt_sleep_ms(100); /* time passing is the scenario: a lease's worth */
    long long ttl = pttl_on(next, name);
    pthread_mutex_lock(&ev.mu);
    int lost = ev.lost;
    pthread_mutex_unlock(&ev.mu);
    cr_assert(ttl > 0 || lost > 0, "hold neither renewed on the new primary (pttl %lld) nor "
              "reported lost", ttl);
    cr_assert_eq(lost, 0, "the acquire was acknowledged by a replica, yet the hold was lost");
    int64_t validity = 0;
    cr_assert_eq(crd_lock_validity_ms(l, &validity), CRD_OK);
    cr_assert_gt(validity, 0);
    cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_eq(pttl_on(next, name), -2);
    crd_lock_free(l);
    crd_client_free(a);
}

Test(sentinel, a_hold_is_renewed_on_the_new_primary_after_sentinel_failover, .init = topo_up,
     .fini = topo_down)
{
    hold_through(false);
}

Test(sentinel, a_hold_is_renewed_on_the_new_primary_after_the_primary_is_killed,
     .init = topo_up, .fini = topo_down)
{
    hold_through(true);
}

/* ---- failover during a wait ------------------------------------------------------------ */

Test(sentinel, a_waiter_is_woken_by_the_release_on_the_new_primary, .init = topo_up,
     .fini = topo_down)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.poll_interval_ms = 60000; /* only a message (or a resubscribe) wakes the waiter */
    crd_client *a = sentinel_client(&o), *b = sentinel_client(&o);
    const char *name = crdt_key("wait");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    waiter w = {lb, 60000, CRD_IO, 0, true};
    pthread_t th;
    pthread_create(&th, NULL, wait_thread, &w);
    char ch[300];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
    redisContext *p = crdt_topo_connect(&topo, topo.nodes[0].port, 1000);
    cr_assert(crdt_await_subscribed(p, ch, 5000));
    redisFree(p);
    int next = crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    /* The waiter's subscription moves to the new primary. */
    p = crdt_topo_connect(&topo, next, 1000);
    cr_assert(crdt_await_subscribed(p, ch, 10000), "the waiter did not resubscribe on the new "
              "primary");
    redisFree(p);
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release(la), CRD_OK, "%s", crd_client_errmsg(a));
    pthread_join(th, NULL);
    cr_assert_eq(w.st, CRD_OK, "%s", crd_strerror(w.st));
    cr_assert_lt(w.done_ms - released, 2000, "woken %lld ms after the release",
                 (long long)(w.done_ms - released));
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
}
