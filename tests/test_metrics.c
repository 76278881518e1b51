/*
 * test_metrics.c -- the metrics snapshot and the log callback (issue #8): known
 * operations move the counters by known amounts, and the log callback hears about
 * renewal failures and lost locks; the synchronizers' counters (issue #27) move by exact
 * amounts and leave the lock counters alone.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "harness.h"
#include "syncs.h"

static crd_metrics snapshot(crd_client *c)
{
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    return m;
}

Test(metrics, known_operations_move_the_counters_by_known_amounts)
{
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, crdt_key("m"));
    crd_metrics m0 = snapshot(c);
    cr_assert_eq(m0.acquisitions, 0);
    cr_assert_eq(m0.holds_now, 0);
    cr_assert_geq(m0.connects, 1, "the start-up connection counts");

    for (int i = 0; i < 3; i++)
        cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK);
    crd_metrics m1 = snapshot(c);
    cr_assert_eq(m1.acquisitions, 3);
    cr_assert_eq(m1.contended, 0);
    cr_assert_eq(m1.holds_now, 1, "re-entries share one hold record");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_metrics m2 = snapshot(c);
    cr_assert_eq(m2.releases, 3);
    cr_assert_eq(m2.holds_now, 0);
    cr_assert_geq(m2.hold_ms_max, 0);

    /* A contended acquire: another client holds for a while, then releases. */
    crd_client *other = crdt_client();
    crd_lock *ol = crdt_lock(other, crdt_key("m"));
    cr_assert_eq(crd_lock_acquire(ol, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_BUSY);
    /* Long enough for its subscription to be confirmed while it waits (counted below):
     * 50 ms was not under memcheck once, with the subscriber connection still to open. */
    cr_assert_eq(crd_lock_acquire(l, crdt_scaled_ms(300), 10000), CRD_TIMEOUT);
    crd_metrics m3 = snapshot(c);
    cr_assert_eq(m3.acquire_busy, 2);
    cr_assert_eq(crd_lock_release(ol), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l, 1000, 10000), CRD_OK);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_metrics m4 = snapshot(c);
    cr_assert_eq(m4.acquisitions, 4);
    cr_assert_geq(m4.subscribes, 1, "the timed wait subscribed");
    cr_assert_leq(m4.wait_ms_p50, m4.wait_ms_max + 1);

    /* Bad arguments. */
    cr_assert_eq(crd_client_metrics(NULL, &m4, sizeof m4), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_client_metrics(c, NULL, sizeof m4), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_client_metrics(c, &m4, 8), CRD_INVALID_ARGUMENT);
    crd_lock_free(ol);
    crd_lock_free(l);
    crd_client_free(other);
    crd_client_free(c);
}

Test(metrics, a_caller_built_against_the_first_struct_gets_only_its_fields)
{
    crd_client *c = crdt_client();
    const size_t v1 = offsetof(crd_metrics, hold_ms_max) + sizeof(int64_t);
    unsigned char buf[sizeof(crd_metrics) + 16];
    memset(buf, 0xAB, sizeof buf);
    cr_assert_eq(crd_client_metrics(c, (crd_metrics *)(void *)buf, v1), CRD_OK);
    for (size_t i = v1; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 0xAB, "byte %zu past the first struct's %zu was written", i, v1);
    cr_assert_eq(crd_client_metrics(c, (crd_metrics *)(void *)buf, v1 - 1), CRD_INVALID_ARGUMENT);
    crd_client_free(c);
}

/* The watchdog sends each period's renewals in pipelines of up to 64 script calls of up
 * to 100 holds each: 150 holds = 2 calls = 1 round trip per period. */
enum { TWO_ROUNDS_OF_RENEWALS = 300 };

Test(metrics, watchdog_round_trips_count_the_renewal_pipelines, .timeout = 60)
{
    crd_options o;
    crdt_options(&o);
    o.watchdog_timeout_ms = 1500; /* a round every 500 ms */
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l[150];
    for (int i = 0; i < 150; i++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "wd%d", i);
        l[i] = crdt_lock(c, crdt_key(suffix));
        cr_assert_eq(crd_lock_acquire(l[i], 0, CRD_LEASE_WATCHDOG), CRD_OK);
    }
    crd_metrics m0 = snapshot(c);
    cr_assert(crdt_await_metric(c, CRDT_METRIC(renewals), TWO_ROUNDS_OF_RENEWALS, UINT64_MAX,
                                20000),
              "no two renewal rounds in 20 s");
    crd_metrics m1 = snapshot(c);
    uint64_t rounds = m1.renewals / 150;
    cr_assert_geq(m1.watchdog_round_trips, 2);
    /* One pipeline per round (the round in flight may be counted without its renewals). */
    cr_assert_leq(m1.watchdog_round_trips - m0.watchdog_round_trips, rounds + 1,
                  "%llu round trips for %llu rounds",
                  (unsigned long long)(m1.watchdog_round_trips - m0.watchdog_round_trips),
                  (unsigned long long)rounds);
    for (int i = 0; i < 150; i++) {
        cr_assert_eq(crd_lock_release(l[i]), CRD_OK);
        crd_lock_free(l[i]);
    }
    crd_client_free(c);
}

/* What on_log heard: counts a waiting test reads without the mutex, which guards last. */
typedef struct logbook {
    pthread_mutex_t mu;
    atomic_int warn_renewal, error_lost, info;
    char last[512];
} logbook;

static void on_log(void *ud, crd_log_level level, const char *msg)
{
    logbook *b = ud;
    pthread_mutex_lock(&b->mu);
    if (level == CRD_LOG_WARN && strstr(msg, "renewing") != NULL)
        b->warn_renewal++;
    if (level == CRD_LOG_ERROR && strstr(msg, "lost") != NULL)
        b->error_lost++;
    if (level == CRD_LOG_INFO)
        b->info++;
    snprintf(b->last, sizeof b->last, "%s", msg);
    pthread_mutex_unlock(&b->mu);
}

/* One of a logbook's counts has moved. */
static bool counted(void *count)
{
    return atomic_load((atomic_int *)count) > 0;
}

Test(metrics, the_log_callback_hears_renewal_failures_and_lost_locks)
{
    /* A private server: CLIENT PAUSE must not stall the other tests. */
    crdt_server srv;
    crdt_server_start(&srv, false, NULL, NULL, NULL);
    logbook book = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, ""};
    crd_options o;
    crdt_options(&o);
    o.port = srv.port;
    /* The scenario's times, stretched together under memcheck (CRDT_TIME_SCALE): a
     * 150 ms command timeout failed crd_client_new's first command there. */
    o.watchdog_timeout_ms = crdt_scaled_ms(900);
    o.command_timeout_ms = crdt_scaled_ms(150);
    o.on_log = on_log;
    o.log_user_data = &book;
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(c, "metrics:log");
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);

    /* Writes paused longer than the lease: renewals fail, then the lease runs out. */
    redisContext *r = crdt_redis_port(srv.port);
    freeReplyObject(crdt_cmd(r, "CLIENT PAUSE %lld WRITE", (long long)crdt_scaled_ms(1500)));
    cr_assert(crdt_wait_until(counted, &book.warn_renewal, crdt_scaled_ms(1200)),
              "no renewal-failure log line");
    cr_assert(crdt_wait_until(counted, &book.error_lost, crdt_scaled_ms(2000)),
              "no lock-lost log line");
    crd_metrics m = snapshot(c);
    cr_assert_geq(m.renewal_failures, 1);
    cr_assert_geq(m.locks_lost, 1);
    cr_assert_eq(crd_lock_release(l), CRD_LOCK_LOST);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
    crdt_server_stop(&srv);
}

/* ---- the synchronizers (issue #27) ------------------------------------------------------- */

/* The counters a lock moves: none of the synchronizers' calls may touch them. */
static void assert_lock_counters_untouched(const crd_metrics *m)
{
    cr_assert_eq(m->acquisitions, 0);
    cr_assert_eq(m->contended, 0);
    cr_assert_eq(m->acquire_busy, 0);
    cr_assert_eq(m->releases, 0);
    cr_assert_eq(m->holds_now, 0);
}

Test(metrics, semaphore_acquires_and_releases_count_permits_waits_and_busy_exactly)
{
    crdt_sync_fixture f; /* a is the client counted, b the other one */
    crdt_sync_open(&f, CRDT_SYNC_SEMAPHORE, "msem");
    crd_metrics m0 = snapshot(f.a);
    cr_assert_eq(m0.permits_acquired + m0.permits_released + m0.permit_acquire_busy, 0);

    CRDT_OK(f.a, crd_semaphore_try_set_permits(f.sa, 3, 0, NULL));
    CRDT_OK(f.a, crd_semaphore_acquire(f.sa, 2, 0));        /* 2 permits, no wait */
    CRDT_OK(f.a, crd_semaphore_acquire(f.sa, 1, 1000));     /* 1 more, free at once */
    cr_assert_eq(crd_semaphore_acquire(f.sa, 1, 0), CRD_BUSY);
    cr_assert_eq(crd_semaphore_acquire(f.sa, 1, 50), CRD_TIMEOUT);
    CRDT_OK(f.a, crd_semaphore_release(f.sa, 3));
    CRDT_OK(f.a, crd_semaphore_add_permits(f.sa, 2));       /* counts in neither */
    int64_t drained = 0;
    CRDT_OK(f.a, crd_semaphore_drain(f.sa, &drained));      /* nor does a drain */
    cr_assert_eq(drained, 5);
    crd_metrics m1 = snapshot(f.a);
    cr_assert_eq(m1.permits_acquired, 3);
    cr_assert_eq(m1.permits_released, 3);
    cr_assert_eq(m1.permit_acquires_contended, 0, "nothing had to wait for its permits");
    cr_assert_eq(m1.permit_acquire_busy, 2);

    /* A waiter that gets its 2 permits once the other client releases them. */
    crdt_sync_waiter w = {.s = f.sa, .permits = 2, .wait_ms = 20000};
    crdt_sync_waiter_start(&w);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000), "the waiter subscribes");
    int64_t released = crdt_now_ms();
    CRDT_OK(f.b, crd_semaphore_release(f.sb, 2));
    crdt_sync_waiter_woken(&w, released, 2000, "the waiting acquire");
    crd_metrics m2 = snapshot(f.a);
    cr_assert_eq(m2.permits_acquired, 5);
    cr_assert_eq(m2.permit_acquires_contended, 1);
    cr_assert_eq(m2.permit_acquire_busy, 2);
    cr_assert_eq(m2.permits_released, 3, "the other client's release is not ours");
    crd_metrics o = snapshot(f.b);
    cr_assert_eq(o.permits_released, 2);
    cr_assert_eq(o.permits_acquired, 0);
    assert_lock_counters_untouched(&m2);
    assert_lock_counters_untouched(&o);
    /* A refused release counts nothing. */
    cr_assert_eq(crd_semaphore_release(f.sa, 0), CRD_INVALID_ARGUMENT);
    cr_assert_eq(snapshot(f.a).permits_released, 3);
    crdt_sync_close(&f);
}

Test(metrics, permit_semaphore_ids_count_as_permits_and_unknown_ids_count_nothing)
{
    crd_client *c = crdt_client();
    const char *name = crdt_key("mpes");
    crd_permit_semaphore *ps = crdt_pes_of(c, name);
    CRDT_OK(c, crd_permit_semaphore_try_set_permits(ps, 3, NULL));
    char ids[3][CRD_PERMIT_ID_SIZE], one[CRD_PERMIT_ID_SIZE];
    CRDT_OK(c, crd_permit_semaphore_acquire_n(ps, 2, 0, 10000, ids));
    CRDT_OK(c, crd_permit_semaphore_acquire(ps, 0, 10000, one));
    cr_assert_eq(crd_permit_semaphore_acquire(ps, 0, 10000, ids[2]), CRD_BUSY);
    cr_assert_eq(crd_permit_semaphore_acquire(ps, 50, 10000, ids[2]), CRD_TIMEOUT);
    crd_metrics m1 = snapshot(c);
    cr_assert_eq(m1.permits_acquired, 3);
    cr_assert_eq(m1.permit_acquire_busy, 2);
    cr_assert_eq(m1.permit_acquires_contended, 0);

    const char *both[2] = {ids[0], ids[1]};
    CRDT_OK(c, crd_permit_semaphore_release_n(ps, both, 2));
    CRDT_OK(c, crd_permit_semaphore_release(ps, one));
    cr_assert_eq(crd_permit_semaphore_release(ps, one), CRD_NOT_OWNER, "released twice");
    crd_metrics m2 = snapshot(c);
    cr_assert_eq(m2.permits_released, 3, "the refused release counts nothing");
    assert_lock_counters_untouched(&m2);
    crd_permit_semaphore_free(ps);
    crd_client_free(c);
}

Test(metrics, latch_count_downs_woken_awaits_and_timed_out_awaits_are_counted)
{
    crdt_sync_fixture f; /* a is the client counted, b the other one */
    crdt_sync_open(&f, CRDT_SYNC_LATCH, "mlatch");
    CRDT_OK(f.a, crd_latch_try_set_count(f.la, 2, NULL));
    cr_assert_eq(crd_latch_await(f.la, 0), CRD_BUSY);
    cr_assert_eq(crd_latch_await(f.la, 50), CRD_TIMEOUT);
    CRDT_OK(f.a, crd_latch_count_down(f.la));
    crd_metrics m1 = snapshot(f.a);
    cr_assert_eq(m1.latch_count_downs, 1);
    cr_assert_eq(m1.latch_await_timeouts, 2);
    cr_assert_eq(m1.latch_awaits_woken, 0);

    /* A waiter woken by the other client's last count-down. One waiter only: it
     * subscribes after its first check found the count above zero, so once the channel
     * is subscribed it is known to wait (a second waiter could still be at its first
     * check and see zero). */
    crdt_sync_waiter w = {.l = f.la, .wait_ms = 20000};
    crdt_sync_waiter_start(&w);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000), "the waiter subscribes");
    int64_t down = crdt_now_ms();
    CRDT_OK(f.b, crd_latch_count_down(f.lb));
    crdt_sync_waiter_woken(&w, down, 2000, "the await");
    /* An await on a latch already at zero returns at once: not a woken wait. */
    CRDT_OK(f.a, crd_latch_await(f.la, 1000));
    crd_metrics m2 = snapshot(f.a);
    cr_assert_eq(m2.latch_awaits_woken, 1);
    cr_assert_eq(m2.latch_count_downs, 1, "the other client's count-down is not ours");
    cr_assert_eq(m2.latch_await_timeouts, 2);
    cr_assert_eq(snapshot(f.b).latch_count_downs, 1);
    cr_assert_eq(m2.permits_acquired + m2.permits_released, 0);
    assert_lock_counters_untouched(&m2);
    crdt_sync_close(&f);
}

Test(metrics, waiting_now_counts_the_threads_asleep_in_an_acquire_and_nothing_else)
{
    crd_client *c = crdt_client(), *other = crdt_client();
    const char *name = crdt_key("mwaiting");
    crd_lock *l = crdt_lock(c, name), *ol = crdt_lock(other, name);
    cr_assert_eq(snapshot(c).waiting_now, 0);
    cr_assert_eq(crd_lock_acquire(ol, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_BUSY);
    cr_assert_eq(snapshot(c).waiting_now, 0, "a try that found the lock held never slept");

    /* Three threads of c wait: one on the lock's channel, two queued behind it. */
    crdt_waiter w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (crdt_waiter){.lock = l, .wait_ms = 20000, .lease_ms = 30000};
        crdt_waiter_start(&w[i]);
    }
    cr_assert(crdt_await_waiting(c, 3, 10000), "three waiters asleep");
    cr_assert_eq(snapshot(other).waiting_now, 0, "the holder's client waits for nothing");

    /* Each release lets one in; once all have had the lock, nobody sleeps. */
    cr_assert_eq(crd_lock_release(ol), CRD_OK);
    for (int i = 0; i < 3; i++)
        crdt_waiter_join(&w[i], 20000, "a waiter");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(w[i].acquire_st, CRD_OK);
    cr_assert_eq(snapshot(c).waiting_now, 0);
    crd_lock_free(l);
    crd_lock_free(ol);
    crd_client_free(other);
    crd_client_free(c);
}
