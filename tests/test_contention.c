/*
 * test_contention.c -- fairness and prompt loss (issue #20), against the test server.
 *
 *   - local_fifo: the waiters of one lock in one client are served in arrival order, and
 *     a thread that releases and asks again queues behind them; only the longest waiter
 *     sends commands;
 *   - release_defer_ms: a release that woke a waiter of another client makes the
 *     releaser's next attempt wait, so that waiter takes the lock first; without such a
 *     waiter nothing is deferred; one that woke a herd (four or more) lets each in and
 *     tries once, with the last one's release, and never stalls when nobody comes; a
 *     steady herd keeps its subscriptions from turn to turn;
 *   - prompt_loss_detection: a force-unlock by another client is reported to the holder
 *     (CRD_EVENT_LOCK_LOST) within milliseconds, p99 over 100 trials, with no renewal
 *     traffic added while nothing happens.
 * The throughput side (threads-16, procs-16, handoff) is measured by credisson-bench.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "standalone/events.h"
#include "waiters.h"

/* The channels of this test's keys (the suite's tests run in parallel processes). */
static const char *this_tests_channels(void)
{
    static char pattern[300];
    snprintf(pattern, sizeof pattern, "*%s*", crdt_key_prefix());
    return pattern;
}

/* ---- local FIFO ----------------------------------------------------------------------- */

enum { NWAITERS = 5 };

typedef struct order_log {
    pthread_mutex_t mu;
    int ids[2 * NWAITERS];
    int n;
} order_log;

typedef struct fifo_waiter {
    crd_lock *lock;
    order_log *log;
    int id;
    bool again;    /* release, then ask again at once */
    crd_status st; /* first failure, or CRD_OK */
    pthread_t th;
} fifo_waiter;

static void note(order_log *log, int id)
{
    pthread_mutex_lock(&log->mu);
    if (log->n < 2 * NWAITERS)
        log->ids[log->n++] = id;
    pthread_mutex_unlock(&log->mu);
}

static void *fifo_body(void *arg)
{
    fifo_waiter *w = arg;
    for (int round = 0; round < (w->again ? 2 : 1); round++) {
        w->st = crd_lock_acquire(w->lock, 20000, 30000);
        if (w->st != CRD_OK)
            return NULL;
        note(w->log, w->id); /* inside the lock: the log's order is the acquisition order */
        w->st = crd_lock_release(w->lock);
        if (w->st != CRD_OK)
            return NULL;
    }
    return NULL;
}

Test(contention, local_waiters_are_served_in_arrival_order_and_a_releaser_queues_behind_them,
     .timeout = 60)
{
    crdt_fixture f;
    crd_options o;
    crdt_tracelog *tl = crdt_traced_options(&o);
    crdt_fixture_open_opts(&f, 1, "fifo", crdt_lock, &o, NULL);
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);

    order_log log = {.n = 0};
    pthread_mutex_init(&log.mu, NULL);
    fifo_waiter w[NWAITERS];
    size_t from = crdt_tracelog_count(tl);
    for (int i = 0; i < NWAITERS; i++) {
        w[i] = (fifo_waiter){.lock = f.la, .log = &log, .id = i + 1, .again = i == 0};
        cr_assert_eq(pthread_create(&w[i].th, NULL, fifo_body, &w[i]), 0);
        if (i == 0) {
            /* the first one is the queue's head: it tries, subscribes and waits */
            cr_assert(crdt_await_subscribed(f.r, f.channel, 5000), "waiter 1 never subscribed");
        } else {
            cr_assert(crdt_await_metric(f.a, CRDT_METRIC(local_queued), (uint64_t)i, UINT64_MAX,
                                        5000),
                      "waiter %d never queued", i + 1);
        }
    }
    /* Only the head talked to Redis: its attempt and its re-check after subscribing. */
    cr_assert_eq(crdt_tracelog_count_scripts(tl, from), 2, "queued waiters sent commands");
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    for (int i = 0; i < NWAITERS; i++) {
        cr_assert_eq(pthread_join(w[i].th, NULL), 0);
        cr_assert_eq(w[i].st, CRD_OK, "waiter %d: %s", i + 1, crd_strerror(w[i].st));
    }
    /* 1 took the lock first, released and asked again at once: it came back last. */
    int want[NWAITERS + 1] = {1, 2, 3, 4, 5, 1};
    cr_assert_eq(log.n, NWAITERS + 1);
    for (int i = 0; i <= NWAITERS; i++)
        cr_assert_eq(log.ids[i], want[i], "acquisition %d went to waiter %d, not %d", i + 1,
                     log.ids[i], want[i]);
    crd_metrics m;
    crd_client_metrics(f.a, &m, sizeof m);
    cr_assert_eq(m.local_queued, NWAITERS, "four first arrivals and the one that came back");
    /* One SUBSCRIBE for the whole chain: the subscription is handed down the queue. */
    cr_assert_eq(crdt_tracelog_count_cmd(tl, from, "SUBSCRIBE", 1), 1);
    cr_assert_eq(crdt_exists(f.r, f.key), 0);
    pthread_mutex_destroy(&log.mu);
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
    cr_assert(crdt_pubsub_channels_empty(this_tests_channels()), "PUBSUB CHANNELS is not empty");
}

Test(contention, a_reentry_and_a_try_without_wait_never_queue)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "reentry", crdt_lock);
    cr_assert_eq(crd_lock_acquire(f.la, -1, CRD_LEASE_WATCHDOG), CRD_OK);
    /* a waiter of another thread queues; the holder's re-entry must not wait behind it */
    crdt_waiter w = {.lock = f.la, .wait_ms = 20000, .lease_ms = 30000};
    crdt_waiter_start(&w);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000));
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(f.la, 5000, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_lt(crdt_now_ms() - t0, 1000, "the re-entry waited");
    char field[128];
    crdt_owner_field(f.a, crd_owner_current(), field, sizeof field);
    cr_assert_eq(crdt_hget_int(f.r, f.key, field), 2);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_waiter_join(&w, 10000, "waiter");
    cr_assert_eq(w.acquire_st, CRD_OK);
    crd_metrics m;
    crd_client_metrics(f.a, &m, sizeof m);
    cr_assert_eq(m.local_queued, 0);
    crdt_fixture_close(&f);
}

/* ---- the same queue for event-loop operations ------------------------------------------ */

typedef struct loop_order {
    crd_lock *lock;
    uint64_t owners[3];
    int order[4]; /* which op was served, in order */
    int n, failures, released;
} loop_order;

static void loop_released(void *user, crd_op *op, crd_status st)
{
    (void)op;
    loop_order *o = user;
    o->failures += st != CRD_OK;
    o->released++;
}

static void loop_acquired(void *user, crd_op *op, crd_status st)
{
    loop_order *o = user;
    if (st != CRD_OK) {
        o->failures++;
        return;
    }
    uint64_t owner = crd_op_owner(op);
    for (int i = 0; i < 3; i++)
        if (o->owners[i] == owner && o->n < 4)
            o->order[o->n++] = i;
    /* release at once, from the callback: the next queued operation is served next */
    if (crd_lock_release_async(o->lock, owner, loop_released, o, NULL) != CRD_OK)
        o->failures++;
}

Test(contention, event_loop_acquires_of_one_lock_are_served_in_arrival_order, .timeout = 60)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "loopfifo", crdt_lock);
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    loop_order o = {.lock = f.la};
    for (int i = 0; i < 3; i++) {
        o.owners[i] = crd_owner_new();
        cr_assert_eq(crd_lock_acquire_async(f.la, o.owners[i], 20000, 30000, loop_acquired, &o,
                                            NULL), CRD_OK);
    }
    int fd = crd_loop_fd(f.a);
    cr_assert_geq(fd, 0);
    /* step until the first is subscribed and the other two wait behind it */
    int64_t deadline = crdt_now_ms() + 5000;
    crd_metrics m = {0};
    while (crdt_now_ms() < deadline) {
        crd_loop_dispatch(f.a);
        crd_client_metrics(f.a, &m, sizeof m);
        if (m.local_queued >= 2 && crdt_numsub(f.r, f.channel) >= 1)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 10);
    }
    cr_assert_eq(m.local_queued, 2, "the second and third operations queued");
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    deadline = crdt_now_ms() + 10000;
    while (o.released < 3 && o.failures == 0 && crdt_now_ms() < deadline) {
        int64_t t = crd_loop_timeout_ms(f.a);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, t < 0 || t > 100 ? 100 : (int)t);
        crd_loop_dispatch(f.a);
    }
    cr_assert_eq(o.failures, 0);
    cr_assert_eq(o.released, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(o.order[i], i, "acquisition %d went to operation %d", i + 1, o.order[i]);
    crdt_fixture_close(&f);
}

/* ---- bounded barging across clients ---------------------------------------------------- */

Test(contention, a_release_that_woke_a_waiter_elsewhere_lets_that_waiter_in_first, .timeout = 60)
{
    crd_options oa;
    crdt_options(&oa);
    /* generous: a loaded machine (or memcheck) must not decide this */
    oa.release_defer_ms = crdt_scaled_ms(300);
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 2, "defer", crdt_lock, &oa, NULL);

    /* No waiter elsewhere: release and acquire again at once, nothing deferred. */
    int64_t t0 = crdt_now_ms();
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(crd_lock_acquire(f.la, 5000, CRD_LEASE_WATCHDOG), CRD_OK);
        cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    }
    crd_metrics m;
    crd_client_metrics(f.a, &m, sizeof m);
    cr_assert_eq(m.deferred, 0);
    cr_assert_lt(crdt_now_ms() - t0, crdt_scaled_ms(3000));

    /* B waits; A releases and asks again at once: B's turn comes first. */
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    /* B holds 50 ms once it is in: a critical section that A must wait out. */
    crdt_waiter b = {.lock = f.lb, .wait_ms = 20000, .lease_ms = 30000, .hold_ms = 50};
    crdt_waiter_start(&b);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000), "B never subscribed");
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.la, 20000, CRD_LEASE_WATCHDOG), CRD_OK);
    int64_t a_acquired = crdt_now_ms();
    crdt_waiter_join(&b, 30000, "B");
    cr_assert_eq(b.acquire_st, CRD_OK, "B's acquire: %s", crd_strerror(b.acquire_st));
    cr_assert_eq(b.release_st, CRD_OK, "B's release: %s", crd_strerror(b.release_st));
    cr_assert_leq(b.t_acq_ms, a_acquired, "A took the lock back before the woken B");
    cr_assert_geq(a_acquired, b.t_rel_ns / 1000000, "A and B overlapped");
    crd_client_metrics(f.a, &m, sizeof m);
    cr_assert_eq(m.deferred, 1, "A's attempt right after its release was deferred once");
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_fixture_close(&f);
}

/* Issue #48: a release that woke a herd (four or more waiters elsewhere) makes the
 * releaser's next acquire count their turns instead of sleeping: it lets one release per
 * woken waiter pass and tries with the last one's release, once. Each waiter holds 30 ms
 * (A could only pass one by taking the lock while it is held, which the exclusion would
 * show); release_defer_ms is long (2 s, scaled), so a timed deferral would still be
 * asleep when the last waiter is done: A must take the lock within moments of that
 * release, after every waiter, with one acquire script. */
enum { HERD = 4 };

static bool herd_asleep(void *arg)
{
    const crdt_probe *p = arg;
    return crdt_numsub(p->r, p->name) >= p->n;
}

/* The acquire scripts (EVALSHA/EVAL with one key: the lock's acquire) in t from entry
 * from, recorded with a tag of at least min_tag. */
static int acquire_scripts_tagged(crdt_tracelog *t, size_t from, const char *key, int min_tag)
{
    int n = 0;
    for (size_t i = from; i < crdt_tracelog_count(t); i++) {
        crdt_trace_entry e;
        if (!crdt_tracelog_get(t, i, &e))
            continue;
        n += !e.subscriber && e.tag >= min_tag && e.argc > 3 &&
             strncasecmp(e.argv[0], "EVAL", 4) == 0 && strcmp(e.argv[2], "1") == 0 &&
             strcmp(e.argv[3], key) == 0;
        crdt_trace_entry_free(&e);
    }
    return n;
}

/* A's acquire scripts from entry from. */
static int acquire_scripts(crdt_tracelog *t, size_t from, const char *key)
{
    return acquire_scripts_tagged(t, from, key, 0);
}

Test(contention, a_release_that_woke_a_herd_lets_each_in_and_tries_once_with_the_last_release,
     .timeout = 90)
{
    crd_options oa;
    crdt_tracelog *ta = crdt_traced_options(&oa);
    oa.release_defer_ms = crdt_scaled_ms(2000);
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 1, "herd", crdt_lock, &oa, NULL);
    crd_client *cw[HERD];
    crd_lock *lw[HERD];
    crdt_waiter w[HERD];
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    for (int i = 0; i < HERD; i++) {
        cw[i] = crdt_client();
        lw[i] = crdt_lock(cw[i], f.key);
        w[i] = (crdt_waiter){.lock = lw[i], .client = cw[i], .wait_ms = 30000,
                             .lease_ms = 30000, .hold_ms = 30};
        crdt_waiter_start(&w[i]);
    }
    crdt_probe p = {.r = f.r, .name = f.channel, .n = HERD};
    cr_assert(crdt_wait_until(herd_asleep, &p, 10000), "the %d waiters never subscribed", HERD);
    for (int i = 0; i < HERD; i++)
        cr_assert(crdt_await_waiting(cw[i], 1, 10000), "waiter %d never went to sleep", i);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    size_t from = crdt_tracelog_count(ta);
    cr_assert_eq(crd_lock_acquire(f.la, 30000, CRD_LEASE_WATCHDOG), CRD_OK);
    int64_t a_ns = crdt_now_ns();
    int64_t last_rel_ns = 0;
    for (int i = 0; i < HERD; i++) {
        crdt_waiter_join(&w[i], 30000, "herd waiter");
        cr_assert_eq(w[i].acquire_st, CRD_OK, "waiter %d: %s", i, crd_strerror(w[i].acquire_st));
        cr_assert_eq(w[i].release_st, CRD_OK);
        cr_assert_lt(w[i].t_acq_ns, a_ns, "A took the lock before waiter %d", i);
        if (w[i].t_rel_ns > last_rel_ns)
            last_rel_ns = w[i].t_rel_ns;
    }
    int64_t after_ms = (a_ns - last_rel_ns) / 1000000;
    cr_assert_lt(after_ms, crdt_scaled_ms(500), "A took the lock %lld ms after the last "
                 "waiter's release (a timed deferral: %lld ms)", (long long)after_ms,
                 (long long)oa.release_defer_ms);
    cr_assert_eq(acquire_scripts(ta, from, f.key), 1, "A's attempts after its release");
    crd_metrics m;
    crd_client_metrics(f.a, &m, sizeof m);
    cr_assert_eq(m.deferred, 1);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    for (int i = 0; i < HERD; i++) {
        crd_lock_free(lw[i]);
        crd_client_free(cw[i]);
    }
    crdt_fixture_close(&f);
    crdt_tracelog_free(ta);
}

/* The counted deferral cannot stall: when the release reached four listeners that do not
 * want the lock (plain SUBSCRIBE connections), no release follows, and the releaser's next
 * acquire tries release_defer_ms after it began, and takes the lock. */
Test(contention, a_counted_deferral_that_hears_no_release_tries_after_release_defer_ms,
     .timeout = 60)
{
    crd_options oa;
    crdt_options(&oa);
    oa.release_defer_ms = crdt_scaled_ms(300);
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 1, "herdless", crdt_lock, &oa, NULL);
    redisContext *listeners[HERD];
    for (int i = 0; i < HERD; i++) {
        listeners[i] = crdt_redis();
        redisReply *rep = redisCommand(listeners[i], "SUBSCRIBE %s", f.channel);
        cr_assert(rep != NULL);
        freeReplyObject(rep);
    }
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(f.la, 30000, CRD_LEASE_WATCHDOG), CRD_OK);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_geq(took, oa.release_defer_ms - 1, "tried before the deferral ended: %lld ms",
                  (long long)took);
    cr_assert_lt(took, oa.release_defer_ms + crdt_scaled_ms(1000), "%lld ms", (long long)took);
    crd_metrics m;
    crd_client_metrics(f.a, &m, sizeof m);
    cr_assert_eq(m.deferred, 1);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    for (int i = 0; i < HERD; i++)
        redisFree(listeners[i]);
    crdt_fixture_close(&f);
}

/* Issue #48: a steady herd (six clients taking one lock in turn, each of its own
 * process's kind: its own client, subscriber and trace) keeps its subscriptions. A hold
 * taken in a counted turn keeps the channel's subscription through its release; its own
 * message is dropped there (were it counted as a turn, the next attempt would go out
 * with the next-to-last release and find the lock held: an acquire script more per
 * turn), and the releases after it are that client's next turns. Before, every
 * acquisition cost a SUBSCRIBE and an UNSUBSCRIBE (procs-16: 2.00 per acquisition).
 * Exclusion is checked throughout. */
enum { STEADY = 6, STEADY_ROUNDS = 40 };

typedef struct steady_member {
    crd_lock *lock;
    crdt_tracelog *trace;   /* tagged with the round */
    atomic_int *inside;     /* holders right now: never above one */
    atomic_int *violations;
    crd_status st;
    pthread_t th;
} steady_member;

static void *steady_body(void *arg)
{
    steady_member *m = arg;
    for (int i = 0; i < STEADY_ROUNDS; i++) {
        crdt_tracelog_set_tag(m->trace, i);
        m->st = crd_lock_acquire(m->lock, 30000, 30000);
        if (m->st != CRD_OK)
            return NULL;
        if (atomic_fetch_add(m->inside, 1) != 0)
            atomic_fetch_add(m->violations, 1);
        struct timespec cs = {0, 2 * 1000 * 1000}; /* the critical section: 2 ms */
        nanosleep(&cs, NULL);
        atomic_fetch_sub(m->inside, 1);
        m->st = crd_lock_release(m->lock);
        if (m->st != CRD_OK)
            return NULL;
    }
    return NULL;
}

Test(contention, a_steady_herd_keeps_its_subscriptions_and_tries_once_per_turn, .timeout = 120)
{
    const char *key = crdt_key("steady");
    crd_client *c[STEADY];
    crdt_tracelog *t[STEADY];
    steady_member m[STEADY];
    atomic_int inside = 0, violations = 0;
    for (int i = 0; i < STEADY; i++) {
        crd_options o;
        t[i] = crdt_traced_options(&o);
        o.release_defer_ms = crdt_scaled_ms(300); /* no counted turn times out: exact counts */
        c[i] = crdt_client_opts(&o);
        m[i] = (steady_member){.lock = crdt_lock(c[i], key), .trace = t[i], .inside = &inside,
                               .violations = &violations};
    }
    /* The herd forms behind a holder first: started together, the members' first attempts
     * find the lock free by turns, each releaser reaches fewer than four and sleeps out a
     * timed deferral unsubscribed, and that regime can last (it did under TSan). */
    crd_client *hc = crdt_client();
    crd_lock *hl = crdt_lock(hc, key);
    cr_assert_eq(crd_lock_acquire(hl, 0, 30000), CRD_OK);
    for (int i = 0; i < STEADY; i++)
        cr_assert_eq(pthread_create(&m[i].th, NULL, steady_body, &m[i]), 0);
    redisContext *r = crdt_redis();
    char channel[400];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", key);
    crdt_probe p = {.r = r, .name = channel, .n = STEADY};
    cr_assert(crdt_wait_until(herd_asleep, &p, 10000), "the %d members never subscribed", STEADY);
    for (int i = 0; i < STEADY; i++)
        cr_assert(crdt_await_waiting(c[i], 1, 10000), "member %d never went to sleep", i);
    cr_assert_eq(crd_lock_release(hl), CRD_OK);
    for (int i = 0; i < STEADY; i++)
        pthread_join(m[i].th, NULL);
    crd_lock_free(hl);
    crd_client_free(hc);
    redisFree(r);
    uint64_t acquisitions = 0, deferred = 0;
    size_t scripts = 0, subs = 0;
    for (int i = 0; i < STEADY; i++) {
        cr_assert_eq(m[i].st, CRD_OK, "member %d: %s", i, crd_strerror(m[i].st));
        crd_metrics mt;
        crd_client_metrics(c[i], &mt, sizeof mt);
        acquisitions += mt.acquisitions;
        deferred += mt.deferred;
        /* In the first round the holder's release wakes all six at once (and one more
         * attempt each goes out before they sleep); from the second on every turn is
         * counted. */
        scripts += (size_t)acquire_scripts_tagged(t[i], 0, key, 1);
        subs += crdt_tracelog_count_cmd(t[i], 0, "SUBSCRIBE", 1) +
                crdt_tracelog_count_cmd(t[i], 0, "UNSUBSCRIBE", 1);
    }
    cr_assert_eq(violations, 0, "two holders at once %d times", (int)violations);
    cr_assert_eq(acquisitions, STEADY * STEADY_ROUNDS);
    cr_log_info("steady herd: %zu acquire scripts after the first round, %zu SUBSCRIBE+"
                "UNSUBSCRIBE, %" PRIu64 " deferrals for %" PRIu64 " acquisitions", scripts, subs,
                deferred, acquisitions);
    cr_assert_gt(deferred, acquisitions / 2, "the herd was never counted (%" PRIu64 " deferrals)",
                 deferred);
    /* Kept: 18-20 on a quiet machine (each client's first, and the first round's), up
     * to 46 with the suite's other tests beside it (a stalled turn that timed out
     * subscribes again); not kept: 405 and more. */
    cr_assert_leq(subs, acquisitions / 2, "%zu SUBSCRIBE+UNSUBSCRIBE for %" PRIu64
                  " acquisitions: the subscriptions did not outlive the releases", subs,
                  acquisitions);
    size_t steady = STEADY * (STEADY_ROUNDS - 1);
    /* Exactly one per turn on a quiet machine, up to 240 of 234 under load; the releaser's
     * own message counted as a turn: 358 and more. */
    cr_assert_leq(scripts, steady + steady / 8, "%zu acquire scripts for the %zu acquisitions "
                  "after the first round: turns were miscounted", scripts, steady);
    for (int i = 0; i < STEADY; i++) {
        crd_lock_free(m[i].lock);
        crd_client_free(c[i]);
        crdt_tracelog_free(t[i]);
    }
}

/* The reply of the last script in t (an unlock's "(integer) 1 + receivers"), copied into
 * out; false when there is none. */
static bool last_script_reply(crdt_tracelog *t, char *out, size_t n)
{
    bool found = false;
    for (size_t i = crdt_tracelog_count(t); i-- > 0 && !found;) {
        crdt_trace_entry e;
        if (!crdt_tracelog_get(t, i, &e))
            continue;
        if (!e.subscriber && e.argc > 1 && strcasecmp(e.argv[0], "EVALSHA") == 0) {
            snprintf(out, n, "%s", e.reply);
            found = true;
        }
        crdt_trace_entry_free(&e);
    }
    return found;
}

static bool numsub_zero(void *arg)
{
    const crdt_probe *p = arg;
    return crdt_numsub(p->r, p->name) == 0;
}

/* Issue #48: after a hand-off the waiter's subscription was kept 2 ms without a waiter
 * (so that the acquire returned without waking the subscriber thread). Kept past that
 * client's own release, it was counted among the receivers of the next holder's release
 * elsewhere, which then deferred its next attempt for a waiter that did not wait: the
 * lock lay idle for release_defer_ms, and procs-4 ran at half its rate. Now the last
 * waiter writes the UNSUBSCRIBE itself on its way out (pubsub.c, leave_direct; over TLS
 * it wakes the subscriber thread to do it). Here B is handed the lock and gives it back
 * at once; A then takes it and releases with nobody waiting: A's unlock must reach
 * nobody (reply 1). With the 2 ms linger every one of the 20 rounds said 2 (it outlived
 * A's two round trips); written on the way out, none did in 10 runs, plain or TLS. */
Test(contention, a_hand_off_s_subscription_ends_with_its_holder_s_release, .timeout = 90)
{
    enum { ROUNDS = 20 };
    crd_options oa;
    crdt_tracelog *ta = crdt_traced_options(&oa);
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 2, "linger", crdt_lock, &oa, NULL);
    /* Warm B's script cache and connections: its hand-off needs an idle one. */
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    int counted = 0;
    char reply[64] = "";
    for (int round = 0; round < ROUNDS; round++) {
        cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);
        crdt_waiter b = {.lock = f.lb, .client = f.b, .wait_ms = 20000, .lease_ms = 30000};
        crdt_waiter_start(&b);
        cr_assert(crdt_await_waiting(f.b, 1, 5000), "round %d: B never went to sleep", round);
        cr_assert_eq(crd_lock_release(f.la), CRD_OK);
        crdt_waiter_join(&b, 10000, "B");
        cr_assert_eq(b.acquire_st, CRD_OK, "round %d: B: %s", round, crd_strerror(b.acquire_st));
        cr_assert_eq(b.release_st, CRD_OK);
        /* Nobody waits now: A takes the lock and gives it back. */
        cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);
        cr_assert_eq(crd_lock_release(f.la), CRD_OK);
        cr_assert(last_script_reply(ta, reply, sizeof reply), "A's unlock was not traced");
        counted += strcmp(reply, "(integer) 1") != 0;
        /* The next round starts with B's subscription gone (deadline: the linger's
         * own end is 2 ms; this is not what the test measures). */
        crdt_probe z = {.r = f.r, .name = f.channel};
        cr_assert(crdt_wait_until(numsub_zero, &z, 5000), "B's subscription stayed");
    }
    cr_assert_leq(counted, ROUNDS / 4, "%d of %d unlocks with nobody waiting reached a "
                  "subscription of B's that outlived B's release (last reply %s)", counted,
                  ROUNDS, reply);
    crdt_fixture_close(&f);
    crdt_tracelog_free(ta);
}

/* ---- prompt loss detection ------------------------------------------------------------- */

enum { TRIALS = 100 };

Test(contention, a_force_unlock_is_reported_to_the_holder_within_milliseconds, .timeout = 120)
{
    crdt_events seen;
    crd_options oa;
    crdt_options(&oa);
    oa.prompt_loss_detection = true;
    crdt_events_attach(&seen, &oa);
    crd_client *a = crdt_client_opts(&oa);
    crd_client *b = crdt_client();
    redisContext *r = crdt_redis();
    int64_t took_us[TRIALS];
    for (int i = 0; i < TRIALS; i++) {
        char suffix[32], channel[400];
        snprintf(suffix, sizeof suffix, "loss%d", i);
        const char *key = crdt_key(suffix);
        snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", key);
        crd_lock *la = crdt_lock(a, key), *lb = crdt_lock(b, key);
        cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
        /* the holder keeps its lock's channel subscribed while it holds it */
        cr_assert(crdt_await_subscribed(r, channel, 5000), "trial %d: the hold is not watched", i);
        bool was = false;
        int before = atomic_load(&seen.lost);
        int64_t t0 = crdt_now_ns();
        cr_assert_eq(crd_lock_force_unlock(lb, &was), CRD_OK);
        cr_assert(was);
        crdt_events_await_lost(&seen, before + 1, 5000);
        cr_assert_eq(atomic_load(&seen.lost), before + 1,
                     "trial %d: no CRD_EVENT_LOCK_LOST within 5 s", i);
        took_us[i] = (atomic_load(&seen.last_lost_ns) - t0) / 1000;
        int64_t valid = -1;
        cr_assert_eq(crd_lock_validity_ms(la, &valid), CRD_LOCK_LOST);
        cr_assert_eq(valid, 0);
        cr_assert_eq(crd_lock_release(la), CRD_LOCK_LOST);
        crd_lock_free(la);
        crd_lock_free(lb);
    }
    crdt_sort_i64(took_us, TRIALS);
    int64_t p50 = took_us[TRIALS / 2], p99 = took_us[TRIALS * 99 / 100 - 1];
    fprintf(stderr, "[contention] force-unlock seen by the holder: p50 %" PRId64 " us, p99 %" PRId64
            " us, max %" PRId64 " us over %d trials\n", p50, p99, took_us[TRIALS - 1], TRIALS);
    cr_assert_leq(p99, crdt_scaled_ms(100) * 1000, "p99 %" PRId64 " us", p99);
    /* Watching adds no renewal traffic: the only renewals were the checks after the
     * force-unlocks, and each found its hold gone (none renewed). */
    crd_metrics m;
    crd_client_metrics(a, &m, sizeof m);
    cr_assert_eq(m.renewals, 0);
    cr_assert_eq(m.locks_lost, TRIALS);
    crd_client_free(a);
    crd_client_free(b);
    redisFree(r);
    cr_assert(crdt_pubsub_channels_empty(this_tests_channels()),
              "a watch subscription outlived its hold");
}
