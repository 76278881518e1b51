/*
 * test_pubsub.c -- waiting without polling: a blocked waiter sends the same small
 * number of commands whether the holder keeps the lock 0.3 s or 3 s; it wakes within
 * milliseconds of the release (latency printed); it survives its subscriber connection
 * being killed; local waiters share one subscription and hand the lock on; two lone
 * waiters of one client on two names each wake on their own release only; a waiter that
 * joins a subscription kept after a hand-off is not woken by what was published before it;
 * and no channel stays subscribed after any test (PUBSUB CHANNELS is empty).
 *
 * This executable runs its tests one at a time (tests/CMakeLists.txt), so server-wide
 * numbers (INFO commandstats, PUBSUB CHANNELS, CLIENT KILL TYPE pubsub) are this
 * test's own.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"
#include "waiters.h"

/* A waiter is blocked in its wait once it sent the attempt and the re-check after its
 * subscription was confirmed. */
struct blocked_pred {
    crdt_tracelog *tl;
    size_t from;
};

static bool blocked_fn(void *arg)
{
    struct blocked_pred *p = arg;
    return crdt_tracelog_count_cmd(p->tl, p->from, "SUBSCRIBE", 1) >= 1 &&
           crdt_tracelog_count_scripts(p->tl, p->from) >= 2;
}

struct live_pred {
    struct blocked_pred *bp;
    redisContext *r;
    const char *channel;
};

static bool blocked_live_fn(void *arg)
{
    struct live_pred *p = arg;
    return crdt_tracelog_count_scripts(p->bp->tl, p->bp->from) >= 2 &&
           crdt_numsub(p->r, p->channel) >= 1;
}

static long long scripts_run(redisContext *r)
{
    return crdt_cmdstat_calls(r, "evalsha") + crdt_cmdstat_calls(r, "eval");
}

typedef struct counts {
    size_t scripts;   /* the waiter's script commands */
    size_t commands;  /* everything the waiter's client sent */
    long long server_scripts; /* scripts the server ran meanwhile (both clients) */
    int64_t wake_ms;
} counts;

/* The fixture of the tests that follow what client b sends: a plain client a and a client
 * b whose commands the returned log records (freed by the caller, after the fixture). */
static crdt_tracelog *open_traced_b(crdt_fixture *f, const char *suffix)
{
    crd_options o;
    crdt_options(&o);
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    crdt_fixture_open_opts(f, 2, suffix, crdt_lock, NULL, &o);
    return tl;
}

/* Holder A keeps the lock hold_ms after waiter B is blocked, then releases. */
static counts wait_behind(int64_t hold_ms)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, "L%" PRId64, hold_ms);
    crdt_fixture f;
    crdt_tracelog *tl = open_traced_b(&f, suffix);
    /* Warm the server's script cache so that no NOSCRIPT retry skews the counts. */
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);

    long long s0 = scripts_run(f.r);
    size_t from = crdt_tracelog_count(tl);
    crdt_waiter w = {.lock = f.lb, .wait_ms = 20000, .lease_ms = 30000};
    crdt_waiter_start(&w);
    struct blocked_pred bp = {tl, from};
    cr_assert(crdt_wait_until(blocked_fn, &bp, 5000), "the waiter never blocked");
    /* The holder keeps the lock for hold_ms: the time that passes is the behaviour
     * under test (a polling waiter would send more the longer it waits). */
    crdt_sleep_ms(hold_ms);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK);
    /* The waiter's UNSUBSCRIBE is sent by the subscriber thread after the acquire
     * returned; count once it is there. */
    cr_assert(crdt_await_traced(tl, from, "UNSUBSCRIBE", 1, 1, 2000),
              "the waiter never unsubscribed");
    counts c = {0};
    c.wake_ms = w.t_acq_ms - t0;
    /* count up to the release of the waiter itself (its own unlock is one script) */
    c.scripts = crdt_tracelog_count_scripts(tl, from);
    c.commands = crdt_tracelog_count(tl) - from;
    c.server_scripts = scripts_run(f.r) - s0;
    fprintf(stderr,
            "[pubsub] hold %" PRId64 " ms: waiter sent %zu scripts, %zu commands in all; "
            "server ran %lld scripts; woke %" PRId64 " ms after the release\n",
            hold_ms, c.scripts, c.commands, c.server_scripts, c.wake_ms);
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
    return c;
}

Test(pubsub, a_blocked_waiter_sends_the_same_few_commands_for_a_short_and_a_long_hold,
     .timeout = 60)
{
    counts shorter = wait_behind(300);
    counts longer = wait_behind(3000);
    /* attempt, re-check after SUBSCRIBE, retry after the message, its own unlock */
    cr_assert_leq(longer.scripts, 4, "%zu scripts while waiting 3 s", longer.scripts);
    cr_assert_eq(longer.scripts, shorter.scripts,
                 "a waiter that polls sends more the longer it waits (%zu vs %zu)",
                 longer.scripts, shorter.scripts);
    cr_assert_eq(longer.commands, shorter.commands, "%zu vs %zu commands", longer.commands,
                 shorter.commands);
    cr_assert_eq(longer.server_scripts, shorter.server_scripts,
                 "INFO commandstats: %lld vs %lld scripts", longer.server_scripts,
                 shorter.server_scripts);
    cr_assert_leq(longer.commands, 8);
    cr_assert(crdt_pubsub_channels_empty(NULL), "PUBSUB CHANNELS is not empty");
}

Test(pubsub, a_waiter_wakes_within_milliseconds_of_the_release, .timeout = 60)
{
    enum { ROUNDS = 30 };
    crdt_fixture f;
    crdt_tracelog *tl = open_traced_b(&f, "L");
    int64_t lat[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);
        crdt_waiter w;
        struct blocked_pred bp = {tl, crdt_tracelog_count(tl)};
        w = (crdt_waiter){.lock = f.lb, .wait_ms = 20000, .lease_ms = 30000};
        crdt_waiter_start(&w);
        cr_assert(crdt_wait_until(blocked_fn, &bp, 5000), "round %d: the waiter never blocked",
                  i);
        int64_t t0 = crdt_now_ns();
        cr_assert_eq(crd_lock_release(f.la), CRD_OK);
        crdt_waiter_join(&w, 30000, NULL);
        cr_assert_eq(w.acquire_st, CRD_OK, "round %d: %s", i, crd_strerror(w.acquire_st));
        lat[i] = w.t_acq_ms - t0 / 1000000;
        /* the subscription of this round is gone before the next one starts */
        cr_assert(crdt_pubsub_channels_empty(NULL));
    }
    crdt_sort_i64(lat, ROUNDS);
    fprintf(stderr, "[pubsub] wake-up latency over %d rounds (30 s lease): p50 %" PRId64
                    " ms, p90 %" PRId64 " ms, max %" PRId64 " ms\n",
            ROUNDS, lat[ROUNDS / 2], lat[ROUNDS * 9 / 10], lat[ROUNDS - 1]);
    cr_assert_lt(lat[ROUNDS - 1], 500, "a waiter took %" PRId64 " ms to notice a release",
                 lat[ROUNDS - 1]);
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
    cr_assert(crdt_pubsub_channels_empty(NULL), "PUBSUB CHANNELS is not empty");
}

static void kill_pubsub_clients(redisContext *r)
{
    long long killed = crdt_cmd_int(r, "CLIENT KILL TYPE pubsub");
    cr_assert_geq(killed, 1, "no subscriber connection to kill");
}

Test(pubsub, a_waiter_whose_subscriber_connection_is_killed_still_wakes_promptly,
     .timeout = 60)
{
    crdt_fixture f;
    crdt_tracelog *tl = open_traced_b(&f, "L");

    /* 1. Killed, and the release comes before the subscriber is back: the message
     * is lost; the re-check after resubscribing must find the lock free. */
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_waiter w;
    struct blocked_pred bp = {tl, crdt_tracelog_count(tl)};
    w = (crdt_waiter){.lock = f.lb, .wait_ms = 25000, .lease_ms = 30000};
    crdt_waiter_start(&w);
    cr_assert(crdt_wait_until(blocked_fn, &bp, 5000), "the waiter never blocked");
    kill_pubsub_clients(f.r);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK, "%s", crd_strerror(w.acquire_st));
    int64_t lost_ms = w.t_acq_ms - t0;

    /* 2. Killed, and the release comes after the subscriber is back: the new
     * subscription must deliver the message. */
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    bp.from = crdt_tracelog_count(tl);
    w = (crdt_waiter){.lock = f.lb, .wait_ms = 25000, .lease_ms = 30000};
    crdt_waiter_start(&w);
    /* The subscription of phase 1 may still be live when this waiter arrives (its
     * UNSUBSCRIBE not sent yet): then it is reused and no new SUBSCRIBE is traced. What
     * shows the waiter blocked is its attempt, its re-check, and a live subscription. */
    struct live_pred lp = {&bp, f.r, f.channel};
    cr_assert(crdt_wait_until(blocked_live_fn, &lp, 5000), "the waiter never blocked");
    bp.from = crdt_tracelog_count(tl);
    kill_pubsub_clients(f.r);
    /* a SUBSCRIBE confirmed after the kill */
    cr_assert(crdt_await_traced(tl, bp.from, "SUBSCRIBE", 1, 1, 10000),
              "the waiter never resubscribed");
    cr_assert_eq(crdt_numsub(f.r, f.channel), 1, "resubscribed to the lock's channel");
    t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK, "%s", crd_strerror(w.acquire_st));
    int64_t back_ms = w.t_acq_ms - t0;
    fprintf(stderr,
            "[pubsub] subscriber killed: woke %" PRId64 " ms after a release made while "
            "disconnected, %" PRId64 " ms after a release once resubscribed\n",
            lost_ms, back_ms);
    cr_assert_lt(lost_ms, 3000, "the lost message cost %" PRId64 " ms (lease 30 s)", lost_ms);
    cr_assert_lt(back_ms, 500, "after resubscribing the waiter took %" PRId64 " ms", back_ms);

    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
    cr_assert(crdt_pubsub_channels_empty(NULL), "PUBSUB CHANNELS is not empty");
}

struct subscribers_pred {
    redisContext *r;
    const char *channel;
    crdt_tracelog *tl;
    size_t from;
    size_t waiters;
    crd_client *client;
};

static bool all_blocked_fn(void *arg)
{
    struct subscribers_pred *p = arg;
    /* the longest waiter made its attempt and its re-check after the subscription; the
     * others queued behind it (local_fifo) without a command */
    crd_metrics m;
    crd_client_metrics(p->client, &m, sizeof m);
    return crdt_tracelog_count_scripts(p->tl, p->from) >= 2 &&
           m.local_queued >= p->waiters - 1;
}

Test(pubsub, local_waiters_share_one_subscription_and_hand_the_lock_on, .timeout = 60)
{
    enum { N = 10 };
    crdt_fixture f;
    crdt_tracelog *tl = open_traced_b(&f, "L");
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);

    size_t from = crdt_tracelog_count(tl);
    crdt_waiter w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (crdt_waiter){.lock = f.lb, .wait_ms = 20000, .lease_ms = 30000};
        crdt_waiter_start(&w[i]);
    }
    struct subscribers_pred sp = {f.r, f.channel, tl, from, N, f.b};
    cr_assert(crdt_wait_until(all_blocked_fn, &sp, 5000), "the waiters never blocked");
    cr_assert_eq(crdt_numsub(f.r, f.channel), 1, "one subscriber connection per client");
    cr_assert_eq(crdt_tracelog_count_cmd(tl, from, "SUBSCRIBE", 1), 1,
                 "local waiters share one SUBSCRIBE");
    cr_assert_eq(crdt_tracelog_count_scripts(tl, from), 2, "queued waiters sent nothing");

    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    int64_t last = t0;
    for (int i = 0; i < N; i++) {
        crdt_waiter_join(&w[i], 30000, NULL);
        cr_assert_eq(w[i].acquire_st, CRD_OK, "waiter %d: %s", i, crd_strerror(w[i].acquire_st));
        if (w[i].t_acq_ms > last)
            last = w[i].t_acq_ms;
    }
    fprintf(stderr, "[pubsub] %d local waiters handed the lock on in %" PRId64 " ms\n", N,
            last - t0);
    /* each release wakes the next waiter: nobody waits out the 30 s lease; the channel
     * stayed subscribed from the first waiter to the last (the queue hands it on) */
    cr_assert_eq(crdt_tracelog_count_cmd(tl, from, "SUBSCRIBE", 1), 1,
                 "the subscription was handed on, not renewed");
    cr_assert_lt(last - t0, 3000, "the hand-off chain took %" PRId64 " ms", last - t0);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
    cr_assert(crdt_pubsub_channels_empty(NULL), "PUBSUB CHANNELS is not empty");
}

struct two_blocked_pred {
    crd_client *client;
    redisContext *r;
    const char *ch[2];
};

static bool two_blocked_fn(void *arg)
{
    struct two_blocked_pred *p = arg;
    crd_metrics m;
    crd_client_metrics(p->client, &m, sizeof m);
    return m.waiting_now == 2 && crdt_numsub(p->r, p->ch[0]) >= 1 &&
           crdt_numsub(p->r, p->ch[1]) >= 1;
}

/* Two lone waiters of one client on two names, each with its next attempt prepared on a
 * spare connection and lent to the subscriber thread (acquire.c, lend_attempt): with the
 * default pool of two connections both may be lent at once. Each wakes promptly on its
 * own release and only on it. Which waiter came first, and which name is released
 * first, change from round to round. */
Test(pubsub, two_lone_waiters_of_one_client_on_two_names_each_wake_on_their_own_release,
     .timeout = 120)
{
    enum { ROUNDS = 12 };
    crdt_fixture f;
    crdt_tracelog *tl = open_traced_b(&f, "X");
    const char *ykey = crdt_key("Y");
    crd_lock *ya = crdt_lock(f.a, ykey), *yb = crdt_lock(f.b, ykey);
    char ych[400];
    snprintf(ych, sizeof ych, "redisson_lock__channel:{%s}", ykey);
    crd_lock *held[2] = {f.la, ya}, *waited[2] = {f.lb, yb};
    struct two_blocked_pred bp = {f.b, f.r, {f.channel, ych}};
    int64_t worst = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < 2; i++)
            cr_assert_eq(crd_lock_acquire(held[i], 0, CRD_LEASE_WATCHDOG), CRD_OK);
        crdt_waiter w[2];
        int first = round % 2, freed = (round / 2) % 2;
        for (int k = 0; k < 2; k++) {
            int i = (first + k) % 2;
            w[i] = (crdt_waiter){.lock = waited[i], .wait_ms = 20000, .lease_ms = 30000};
            crdt_waiter_start(&w[i]);
        }
        cr_assert(crdt_wait_until(two_blocked_fn, &bp, 5000), "round %d: the waiters never "
                  "blocked", round);
        for (int k = 0; k < 2; k++) {
            int i = (freed + k) % 2;
            int64_t t0 = crdt_now_ms();
            cr_assert_eq(crd_lock_release(held[i]), CRD_OK);
            cr_assert(crdt_waiter_wait(&w[i], CRDT_WAITER_RETURNED, 20000));
            cr_assert_eq(w[i].acquire_st, CRD_OK, "round %d, name %d: %s", round, i,
                         crd_strerror(w[i].acquire_st));
            int64_t took = w[i].t_acq_ms - t0;
            worst = took > worst ? took : worst;
            if (k == 0)
                cr_assert_eq(crdt_gate_value(&w[1 - i].state), CRDT_WAITER_STARTED,
                             "round %d: the other waiter returned on a message not its own",
                             round);
        }
        for (int i = 0; i < 2; i++)
            crdt_waiter_join(&w[i], 30000, NULL);
    }
    fprintf(stderr, "[pubsub] two waiters on two names, %d rounds: the slowest woke %" PRId64
                    " ms after its release\n", ROUNDS, worst);
    cr_assert_lt(worst, crdt_scaled_ms(500), "a waiter took %" PRId64 " ms to notice its release",
                 worst);
    crd_lock_free(ya);
    crd_lock_free(yb);
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
    cr_assert(crdt_pubsub_channels_empty(NULL), "PUBSUB CHANNELS is not empty");
}

Test(pubsub, a_waiter_that_times_out_or_acquires_at_once_leaves_no_subscription)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "L", crdt_lock);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.lb, 200, 30000), CRD_TIMEOUT);
    cr_assert(crdt_pubsub_channels_empty(NULL), "the timed-out waiter stayed subscribed");
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 30000), CRD_BUSY);
    cr_assert(crdt_pubsub_channels_empty(NULL));
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.lb, 5000, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    crdt_fixture_close(&f);
    cr_assert(crdt_pubsub_channels_empty(NULL), "PUBSUB CHANNELS is not empty");
}

/* ---- a subscription kept after a hand-off ------------------------------------------ */

/* Client b's trace callback: the recorder's, and once armed, the subscriber thread stops
 * in the confirmation of `cmd` `channel` until thaw opens (deadline 20 s). While it is
 * stopped it reads nothing and sends nothing: what the server pushes waits in the socket. */
struct freezer {
    crd_trace_fn inner;
    void *inner_ud;
    const char *cmd, *channel;
    atomic_bool armed;
    crdt_gate frozen, thaw;
};

static void freeze_cb(void *ud, const crd_trace *tr)
{
    struct freezer *fz = ud;
    fz->inner(fz->inner_ud, tr);
    /* armed first: cmd and channel are set before it is (the store orders them). */
    if (atomic_load(&fz->armed) && tr->subscriber && tr->argc == 2 &&
        tr->argvlen[0] == strlen(fz->cmd) &&
        strncasecmp(tr->argv[0], fz->cmd, tr->argvlen[0]) == 0 &&
        tr->argvlen[1] == strlen(fz->channel) &&
        memcmp(tr->argv[1], fz->channel, tr->argvlen[1]) == 0 &&
        atomic_exchange(&fz->armed, false)) {
        crdt_gate_set(&fz->frozen, 1);
        crdt_gate_wait(&fz->thaw, 1, 20000);
    }
}

/* Scripts on key from entry from to entry to (a NOSCRIPT answered by an EVAL counts once). */
static size_t scripts_on(crdt_tracelog *tl, size_t from, size_t to, const char *key)
{
    size_t n = 0;
    for (size_t i = from; i < to; i++) {
        crdt_trace_entry e;
        if (!crdt_tracelog_get(tl, i, &e))
            break;
        bool script = e.argc >= 4 && (strcasecmp(e.argv[0], "EVALSHA") == 0 ||
                                      strcasecmp(e.argv[0], "EVAL") == 0);
        if (script && strcmp(e.argv[3], key) == 0 && strstr(e.reply, "NOSCRIPT") == NULL)
            n++;
        crdt_trace_entry_free(&e);
    }
    return n;
}

struct afresh_pred {
    crdt_tracelog *tl;
    size_t from;
    const char *channel, *key;
};

static bool afresh_fn(void *arg)
{
    struct afresh_pred *p = arg;
    return crdt_tracelog_has(p->tl, p->from, "SUBSCRIBE", p->channel) &&
           scripts_on(p->tl, p->from, crdt_tracelog_count(p->tl), p->key) >= 2;
}

/* V (lock vb of client b, which the test's subscriber thread is held in fz) tries the lock
 * that held (client a) holds and joins its channel with nothing read since. It must not
 * take the entry as confirmed: its re-try waits for a confirmation of its own, which
 * cannot come while the thread is held (nothing else of client b runs a script
 * meanwhile). Then the thread goes on; V is subscribed to channel afresh, re-tries, is
 * woken by held's release and runs exactly the protocol's three scripts on key. */
static void joiner_runs_three(crdt_tracelog *tl, struct freezer *fz, crd_lock *vb,
                              crd_client *b, crd_lock *held, const char *channel,
                              const char *key)
{
    crdt_waiter v = {.lock = vb, .client = b, .trace = tl, .wait_ms = 20000, .lease_ms = 30000};
    crdt_waiter_start(&v);
    cr_assert(crdt_await_traced(tl, v.trace_from, NULL, -1, 1, 5000), "V never tried");
    cr_assert(!crdt_await_traced(tl, v.trace_from, NULL, -1, 2, crdt_scaled_ms(200)),
              "V re-tried on a subscription that was not confirmed for it");
    crdt_gate_set(&fz->thaw, 1);
    struct afresh_pred ap = {tl, v.trace_from, channel, key};
    cr_assert(crdt_wait_until(afresh_fn, &ap, 10000), "V was never subscribed afresh with a "
              "re-try after it (scripts: %zu)",
              scripts_on(tl, v.trace_from, crdt_tracelog_count(tl), key));
    cr_assert_eq(crd_lock_release(held), CRD_OK);
    crdt_waiter_join(&v, 10000, "V");
    cr_assert_eq(v.acquire_st, CRD_OK, "V: %s", crd_strerror(v.acquire_st));
    size_t scripts = scripts_on(tl, v.trace_from, v.trace_to, key);
    cr_assert_eq(scripts, 3, "V ran %zu acquire scripts (a message from before it joined woke "
                 "it)", scripts);
}

/* After a hand-off the waiter's last reference leaves without waking the subscriber
 * thread, and the subscription stays up until that thread looks (pubsub.c). A waiter of
 * the same client that joins it then must not count what was published before it: here
 * the previous holder's own release, still unread in the socket while the subscriber
 * thread is held in a trace callback. The joiner's entry is subscribed afresh (UNSUBSCRIBE,
 * SUBSCRIBE) and it runs exactly the protocol's three scripts: the try, the re-try once
 * subscribed, the hand-off. Were the stale message counted it would run a fourth. */
Test(pubsub, a_waiter_that_joins_a_subscription_kept_after_a_hand_off_hears_only_what_follows,
     .timeout = 90)
{
    crd_options o;
    crdt_options(&o);
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    const char *mkey = crdt_key("M");
    char mch[400];
    snprintf(mch, sizeof mch, "redisson_lock__channel:{%s}", mkey);
    struct freezer fz = {.inner = o.on_trace, .inner_ud = o.trace_user_data, .cmd = "SUBSCRIBE",
                         .channel = mch};
    crdt_gate_init(&fz.frozen);
    crdt_gate_init(&fz.thaw);
    o.on_trace = freeze_cb;
    o.trace_user_data = &fz;
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 2, "L", crdt_lock, NULL, &o);
    crd_lock *vb = crdt_lock(f.b, f.key);
    crd_lock *ma = crdt_lock(f.a, mkey), *mb = crdt_lock(f.b, mkey);
    /* Warm the script cache: no NOSCRIPT on the way. */
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(ma, 0, 30000), CRD_OK);

    /* T waits on L alone (its next try lent to the subscriber thread) and is handed L. */
    crdt_gate t_release;
    crdt_gate_init(&t_release);
    crdt_waiter t = {.lock = f.lb, .client = f.b, .trace = tl, .wait_ms = 20000,
                     .lease_ms = 30000, .release_gate = &t_release};
    crdt_waiter_start(&t);
    cr_assert(crdt_await_waiting(f.b, 1, 5000), "T never went to sleep on L");
    atomic_store(&fz.armed, true);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert(crdt_waiter_wait(&t, CRDT_WAITER_RETURNED, 10000));
    cr_assert_eq(t.acquire_st, CRD_OK, "T: %s", crd_strerror(t.acquire_st));

    /* U's subscription to M stops the subscriber thread in its confirmation. */
    crdt_waiter u = {.lock = mb, .client = f.b, .trace = tl, .wait_ms = 20000, .lease_ms = 30000};
    crdt_waiter_start(&u);
    cr_assert(crdt_gate_wait(&fz.frozen, 1, 5000), "the subscriber thread never confirmed M");

    /* T's release publishes on L; nobody reads it yet. A takes L; V tries and joins. */
    crdt_gate_set(&t_release, 1);
    cr_assert(crdt_waiter_wait(&t, CRDT_WAITER_DONE, 10000));
    cr_assert_eq(t.release_st, CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);
    joiner_runs_three(tl, &fz, vb, f.b, f.la, f.channel, f.key);
    crdt_waiter_join(&t, 10000, "T");
    cr_assert_eq(crd_lock_release(ma), CRD_OK);
    crdt_waiter_join(&u, 10000, "U");
    cr_assert_eq(u.acquire_st, CRD_OK, "U: %s", crd_strerror(u.acquire_st));
    crd_lock_free(vb);
    crd_lock_free(ma);
    crd_lock_free(mb);
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
    crdt_gate_destroy(&t_release);
    crdt_gate_destroy(&fz.frozen);
    crdt_gate_destroy(&fz.thaw);
    cr_assert(crdt_pubsub_channels_empty(NULL), "PUBSUB CHANNELS is not empty");
}

/* A message that finds an entry with no waiter wakes nobody, and a waiter that comes
 * later must not take it for its own. A write unlock publishes "1" (wake every waiter);
 * here it is the last waiter's own release, heard while its subscription lingers after
 * the hand-off, and V joins while that subscription's UNSUBSCRIBE is on its way (the
 * subscriber thread is held in its confirmation). V waits for a subscription of its own
 * and runs the protocol's three scripts. Were the old "1" kept as a permit, V would re-try
 * once for nothing after its confirmation: four. (Under load this happened to the rwlock
 * suite's writer now and then, before and after the linger: 13 of 80 runs beside a chaos
 * run, 0 of 80 with the first waiter's permits cleared.) */
Test(pubsub, a_message_that_found_no_waiter_does_not_wake_the_next_one, .timeout = 90)
{
    crd_options o;
    crdt_options(&o);
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    struct freezer fz = {.inner = o.on_trace, .inner_ud = o.trace_user_data,
                         .cmd = "UNSUBSCRIBE"};
    crdt_gate_init(&fz.frozen);
    crdt_gate_init(&fz.thaw);
    o.on_trace = freeze_cb;
    o.trace_user_data = &fz;
    crdt_fixture f;
    crdt_fixture_open_rw(&f, 2, "W", NULL, &o);
    char ch[400];
    snprintf(ch, sizeof ch, "redisson_rwlock:{%s}", f.key);
    fz.channel = ch;
    crd_rwlock *vrw = NULL;
    cr_assert_eq(crd_rwlock_new(f.b, f.key, &vrw), CRD_OK);
    crd_lock *wa = crd_rwlock_write(f.rwa), *wb = crd_rwlock_write(f.rwb);
    crd_lock *vb = crd_rwlock_write(vrw);
    /* Warm the script cache: no NOSCRIPT on the way. */
    cr_assert_eq(crd_lock_acquire(wb, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(wb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(wa, 0, 30000), CRD_OK);

    /* T waits alone, is handed the lock, and gives it back at once: its unlock ("1")
     * reaches the subscription it has just left. */
    crdt_waiter t = {.lock = wb, .client = f.b, .trace = tl, .wait_ms = 20000,
                     .lease_ms = 30000};
    crdt_waiter_start(&t);
    cr_assert(crdt_await_waiting(f.b, 1, 5000), "T never went to sleep");
    atomic_store(&fz.armed, true);
    cr_assert_eq(crd_lock_release(wa), CRD_OK);
    crdt_waiter_join(&t, 10000, "T");
    cr_assert_eq(t.acquire_st, CRD_OK, "T: %s", crd_strerror(t.acquire_st));
    cr_assert_eq(t.release_st, CRD_OK);
    cr_assert(crdt_gate_wait(&fz.frozen, 1, 5000), "the subscription was never given up");

    /* A takes the lock; V tries and joins the entry whose UNSUBSCRIBE is in flight. */
    cr_assert_eq(crd_lock_acquire(wa, 0, 30000), CRD_OK);
    joiner_runs_three(tl, &fz, vb, f.b, wa, ch, f.key);
    crd_rwlock_free(vrw);
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
    crdt_gate_destroy(&fz.frozen);
    crdt_gate_destroy(&fz.thaw);
    cr_assert(crdt_pubsub_channels_empty(NULL), "PUBSUB CHANNELS is not empty");
}
