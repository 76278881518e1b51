/*
 * test_metrics.c -- the metrics snapshot and the log callback (issue #8): known
 * operations move the counters by known amounts, and the log callback hears about
 * renewal failures and lost locks.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "harness.h"

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
    cr_assert_eq(crd_lock_acquire(l, 50, 10000), CRD_TIMEOUT);
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
static bool two_rounds_done(void *arg)
{
    crd_metrics m;
    return crd_client_metrics(arg, &m, sizeof m) == CRD_OK && m.renewals >= 300;
}

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
    cr_assert(crdt_wait_until(two_rounds_done, c, 20000), "no two renewal rounds in 20 s");
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

typedef struct logbook {
    pthread_mutex_t mu;
    int warn_renewal, error_lost, info;
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

static bool lost_logged(void *arg)
{
    logbook *b = arg;
    pthread_mutex_lock(&b->mu);
    bool done = b->error_lost > 0;
    pthread_mutex_unlock(&b->mu);
    return done;
}

static bool failing_logged(void *arg)
{
    logbook *b = arg;
    pthread_mutex_lock(&b->mu);
    bool done = b->warn_renewal > 0;
    pthread_mutex_unlock(&b->mu);
    return done;
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
    o.watchdog_timeout_ms = 900;
    o.command_timeout_ms = 150;
    o.on_log = on_log;
    o.log_user_data = &book;
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(c, "metrics:log");
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);

    /* Writes paused longer than the lease: renewals fail, then the lease runs out. */
    redisContext *r = crdt_redis_port(srv.port);
    freeReplyObject(crdt_cmd(r, "CLIENT PAUSE 1500 WRITE"));
    cr_assert(crdt_wait_until(failing_logged, &book, 1200), "no renewal-failure log line");
    cr_assert(crdt_wait_until(lost_logged, &book, 2000), "no lock-lost log line");
    crd_metrics m = snapshot(c);
    cr_assert_geq(m.renewal_failures, 1);
    cr_assert_geq(m.locks_lost, 1);
    cr_assert_eq(crd_lock_release(l), CRD_LOCK_LOST);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
    crdt_server_stop(&srv);
}
