/*
 * test_r47.c -- Redisson 4.7's lock family through the library's API, on a real server:
 * the non-reentrant locks (a reentry is CRD_DEADLOCK in one round trip, nothing changed;
 * the fair one keeps one FIFO with the reentrant fair lock's waiters), the spin lock (no
 * PUBLISH, no SUBSCRIBE, a release noticed within one back-off step, waits bounded by
 * their deadline), the grouped multi-lock (one script per acquire, its channel, one
 * renewal call per group, exclusion value by value across six processes), the rate
 * limiter (configuration, waits the server names and never past the deadline, eight
 * processes sharing one rate), RSemaphore.releaseIfExists, the event-loop forms, and bad
 * input (a status and a message, nothing changed).
 *
 * The eight-process rate test runs a 3 s window here (CRDT_RL_WINDOW_S sets another:
 * `make soak-r47` runs 10 s); the golden replays are tests/test_golden_r47.c.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "syncs.h"
#include "waiters.h"

/* ---- helpers -------------------------------------------------------------------------- */

/* A waiter thread acquiring l as an owner of its own with a 20 s lease, keeping the hold. */
static void waiter_start(crdt_waiter *w, crd_lock *l, int64_t wait_ms)
{
    *w = (crdt_waiter){
        .lock = l, .owner = crd_owner_new(), .wait_ms = wait_ms, .lease_ms = 20000, .hold = true};
    crdt_waiter_start(w);
}

static crd_lock *nrlock(crd_client *c, const char *name)
{
    crd_lock *l = NULL;
    cr_assert_eq(crd_nonreentrant_lock_new(c, name, &l), CRD_OK, "%s", crd_client_errmsg(c));
    return l;
}

static crd_lock *nrfair(crd_client *c, const char *name)
{
    crd_lock *l = NULL;
    cr_assert_eq(crd_nonreentrant_fair_lock_new(c, name, &l), CRD_OK, "%s",
                 crd_client_errmsg(c));
    return l;
}

static crd_lock *fair(crd_client *c, const char *name)
{
    crd_lock *l = NULL;
    cr_assert_eq(crd_fair_lock_new(c, name, &l), CRD_OK);
    return l;
}

static crd_lock *spin(crd_client *c, const char *name)
{
    crd_lock *l = NULL;
    cr_assert_eq(crd_spin_lock_new(c, name, &l), CRD_OK, "%s", crd_client_errmsg(c));
    return l;
}

static crd_lock *group(crd_client *c, const char *name, const char *const *values, size_t n)
{
    crd_lock *l = NULL;
    cr_assert_eq(crd_group_lock_new(c, name, values, n, &l), CRD_OK, "%s", crd_client_errmsg(c));
    return l;
}

/* ---- non-reentrant locks ----------------------------------------------------------------- */

/* NOSCRIPT answers from `from` (a script's first use: its EVAL follows). */
static size_t noscripts(crdt_tracelog *tl, size_t from)
{
    size_t n = 0;
    crdt_trace_entry e;
    for (size_t i = from; crdt_tracelog_get(tl, i, &e); i++) {
        n += strncmp(e.reply, "(error) NOSCRIPT", 16) == 0;
        crdt_trace_entry_free(&e);
    }
    return n;
}

/* The holder asks again in each of the ways Java can (lock, lock with a lease, tryLock,
 * tryLock with a wait): each is one script, refused, CRD_DEADLOCK at once. */
static void refused_reentry(crd_lock *(*make)(crd_client *, const char *), const char *suffix,
                            bool fair_kind)
{
    crd_options o;
    crdt_tracelog *tl = crdt_traced_options(&o);
    crd_client *c = crdt_client_opts(&o);
    redisContext *r = crdt_redis();
    const char *name = crdt_key(suffix);
    crd_lock *l = make(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    long long ttl0 = crdt_pttl(r, name);
    const int64_t waits[] = {CRD_WAIT_FOREVER, 0, 5000, 200};
    const int64_t leases[] = {CRD_LEASE_WATCHDOG, CRD_LEASE_WATCHDOG, CRD_LEASE_WATCHDOG, 5000};
    for (int i = 0; i < 4; i++) {
        size_t from = crdt_tracelog_count(tl);
        int64_t t0 = crdt_now_ms();
        crd_status st = crd_lock_acquire(l, waits[i], leases[i]);
        int64_t took = crdt_now_ms() - t0;
        cr_assert_eq(st, CRD_DEADLOCK, "reentry %d: %s (%s)", i, crd_strerror(st),
                     crd_client_errmsg(c));
        cr_expect(strstr(crd_client_errmsg(c), "not reentrant") != NULL, "%s",
                  crd_client_errmsg(c));
        /* One script answered (a first use's NOSCRIPT is answered by its EVAL), nothing
         * else sent. */
        cr_expect_eq(crdt_tracelog_count_scripts(tl, from), 1, "reentry %d: one round trip", i);
        cr_expect_eq(crdt_tracelog_count(tl) - from - noscripts(tl, from), 1,
                     "reentry %d: nothing but the script", i);
        cr_expect_lt(took, crdt_scaled_ms(200), "reentry %d took %lld ms", i, (long long)took);
    }
    cr_expect_eq(crdt_tracelog_count_cmd(tl, 0, "SUBSCRIBE", -1), 0, "no wait, no subscription");
    int64_t count = 0;
    cr_assert_eq(crd_lock_hold_count(l, &count), CRD_OK);
    cr_expect_eq(count, 1, "the hold count stays 1");
    cr_expect_leq(crdt_pttl(r, name), ttl0, "the TTL was not refreshed");
    if (fair_kind) {
        char q[300];
        snprintf(q, sizeof q, "redisson_lock_queue:{%s}", name);
        cr_expect_eq(crdt_exists(r, q), 0, "a refused reentry queues nothing");
    }
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_expect_eq(crdt_exists(r, name), 0);
    crd_lock_free(l);
    crd_client_free(c);
    crdt_tracelog_free(tl);
    redisFree(r);
}

Test(r47, a_nonreentrant_reacquire_by_the_holder_is_deadlock_in_one_round_trip)
{
    refused_reentry(nrlock, "nr", false);
}

Test(r47, a_nonreentrant_fair_reacquire_by_the_holder_is_deadlock_in_one_round_trip)
{
    refused_reentry(nrfair, "nrf", true);
}

Test(r47, the_refusal_is_told_apart_from_other_server_errors)
{
    crd_client *c = crdt_client();
    redisContext *r = crdt_redis();
    const char *name = crdt_key("wrongtype");
    freeReplyObject(crdt_cmd(r, "SET %s x", name));
    crd_lock *l = nrlock(c, name);
    cr_expect_eq(crd_lock_acquire(l, 0, 1000), CRD_SERVER, "WRONGTYPE is a server error");
    cr_expect(strstr(crd_client_errmsg(c), "WRONGTYPE") != NULL, "%s", crd_client_errmsg(c));
    crd_lock *f = nrfair(c, name);
    cr_expect_eq(crd_lock_acquire(f, 0, 1000), CRD_SERVER);
    char buf[16];
    cr_expect_str_eq(crdt_cmd_str(r, buf, sizeof buf, "GET %s", name), "x", "nothing changed");
    crd_lock_free(l);
    crd_lock_free(f);
    crd_client_free(c);
    redisFree(r);
}

Test(r47, nonreentrant_and_reentrant_locks_of_one_name_exclude_each_other)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "mix", nrlock);
    crd_lock *plain = crdt_lock(f.b, f.key);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    cr_expect_eq(crd_lock_acquire(plain, 0, 10000), CRD_BUSY);
    crdt_waiter w;
    waiter_start(&w, plain, 10000);
    crdt_sleep_ms(100); /* it waits on the channel (time passing is the point) */
    cr_expect_not(crdt_waiter_returned(&w));
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK);
    cr_expect_lt(w.t_acq_ms - released, crdt_scaled_ms(200), "woken by the unlock message");
    cr_expect_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_BUSY, "and the other way round");
    cr_assert_eq(crd_lock_release_owner(plain, w.owner), CRD_OK);
    crd_lock_free(plain);
    crdt_fixture_close(&f);
}

/* H holds the non-reentrant fair lock; waiters of the reentrant fair lock and of the
 * non-reentrant one queue in turn (each queued before the next asks); each release hands
 * the lock to the next in that order. */
Test(r47, the_nonreentrant_fair_lock_keeps_fifo_with_reentrant_fair_waiters, .timeout = 60)
{
    crd_client *a = crdt_client(), *b = crdt_client(), *c = crdt_client();
    redisContext *r = crdt_redis();
    const char *name = crdt_key("fifo");
    char queue[300];
    snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", name);
    crd_lock *h = nrfair(a, name);
    crd_lock *order[4] = {fair(b, name), nrfair(c, name), fair(a, name), nrfair(b, name)};
    cr_assert_eq(crd_lock_acquire(h, 0, 30000), CRD_OK);
    crdt_waiter w[4];
    for (int i = 0; i < 4; i++) {
        waiter_start(&w[i], order[i], 20000);
        cr_assert(crdt_await_llen(r, queue, i + 1, i + 1, 5000), "waiter %d queued", i);
    }
    cr_assert_eq(crd_lock_release(h), CRD_OK);
    for (int i = 0; i < 4; i++) {
        cr_assert(crdt_waiter_wait(&w[i], CRDT_WAITER_RETURNED, 10000), "waiter %d got it", i);
        crdt_waiter_join(&w[i], 30000, NULL);
        cr_assert_eq(w[i].acquire_st, CRD_OK, "waiter %d: %s", i, crd_strerror(w[i].acquire_st));
        for (int j = i + 1; j < 4; j++)
            cr_expect_not(crdt_waiter_returned(&w[j]), "waiter %d before %d", j, i);
        cr_assert_eq(crd_lock_release_owner(order[i], w[i].owner), CRD_OK);
    }
    cr_expect_eq(crdt_exists(r, name), 0);
    cr_expect_eq(crdt_exists(r, queue), 0);
    crd_lock_free(h);
    for (int i = 0; i < 4; i++)
        crd_lock_free(order[i]);
    crd_client_free(a);
    crd_client_free(b);
    crd_client_free(c);
    redisFree(r);
}

Test(r47, a_nonreentrant_reacquire_on_the_event_loop_is_deadlock)
{
    crd_client *c = crdt_client();
    crd_lock *l = nrlock(c, crdt_key("loop"));
    uint64_t owner = crd_owner_new();
    cr_assert_eq(crd_lock_acquire_owner(l, owner, 0, 10000), CRD_OK);
    crdt_op_rec rec = {0};
    cr_assert_eq(crd_lock_acquire_async(l, owner, 5000, 10000, crdt_op_rec_done, &rec, NULL),
                 CRD_OK);
    int64_t t0 = crdt_now_ms();
    crdt_loop_until(c, &rec.done, 1, 5000);
    cr_assert_eq(rec.done, 1);
    cr_expect_eq(rec.last, CRD_DEADLOCK, "%s", crd_strerror(rec.last));
    cr_expect_lt(crdt_now_ms() - t0, crdt_scaled_ms(500));
    cr_assert_eq(crd_lock_release_owner(l, owner), CRD_OK);
    crd_lock_free(l);
    crd_client_free(c);
}

/* ---- spin lock ---------------------------------------------------------------------------- */

/* A C spin holder and a C spin waiter: the release publishes nothing (a PSUBSCRIBE on the
 * test's keys hears nothing, the holder's client sends no PUBLISH and nobody subscribes),
 * and the waiter takes the lock at its next attempt, within one back-off step. */
static int64_t spin_notice(const crd_spin_options *so, int64_t hold_ms, size_t *subs,
                           int *messages)
{
    crd_options o;
    crdt_tracelog *tl = crdt_traced_options(&o);
    crd_client *holder = crdt_client_opts(&o), *wc = crdt_client_opts(&o);
    const char *name = crdt_key("spin");
    crdt_watch watch;
    crdt_watch_open(&watch, "*", true);
    crd_lock *hl = spin(holder, name), *wl = NULL;
    cr_assert_eq(crd_spin_lock_new_n(wc, name, strlen(name), so, &wl), CRD_OK);
    cr_assert_eq(crd_lock_acquire(hl, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_waiter w;
    waiter_start(&w, wl, 20000);
    crdt_sleep_ms(hold_ms); /* the holder works; the waiter backs off meanwhile */
    cr_expect_not(crdt_waiter_returned(&w));
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release(hl), CRD_OK);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK, "%s", crd_strerror(w.acquire_st));
    crdt_msg msgs[16];
    *messages = crdt_watch_collect(&watch, msgs, 16);
    *subs = crdt_tracelog_count_cmd(tl, 0, "SUBSCRIBE", -1) +
            crdt_tracelog_count_cmd(tl, 0, "SSUBSCRIBE", -1) +
            crdt_tracelog_count_cmd(tl, 0, "PUBLISH", -1);
    cr_assert_eq(crd_lock_release_owner(wl, w.owner), CRD_OK);
    crd_lock_free(hl);
    crd_lock_free(wl);
    crd_client_free(holder);
    crd_client_free(wc);
    crdt_tracelog_free(tl);
    crdt_watch_close(&watch);
    return w.t_acq_ms - released;
}

Test(r47, a_spin_release_is_noticed_within_one_backoff_step_and_publishes_nothing, .timeout = 60)
{
    int64_t worst = 0, sum = 0;
    enum { RUNS = 5 };
    for (int i = 0; i < RUNS; i++) {
        size_t subs = 0;
        int messages = 0;
        int64_t late = spin_notice(NULL, 400 + 37 * i, &subs, &messages);
        cr_expect_eq(messages, 0, "run %d: %d messages published", i, messages);
        cr_expect_eq(subs, 0, "run %d: no SUBSCRIBE, no PUBLISH", i);
        worst = late > worst ? late : worst;
        sum += late;
    }
    fprintf(stderr, "[r47] spin release noticed by a C spin waiter after %lld ms on average, "
            "%lld ms at worst (%d runs; exponential back-off, step at most 128 ms)\n",
            (long long)(sum / RUNS), (long long)worst, RUNS);
    cr_expect_leq(worst, 128 + crdt_scaled_ms(30), "within one back-off step (%lld ms)",
                  (long long)worst);
    crd_spin_options so;
    crd_spin_options_init(&so);
    so.backoff = CRD_BACKOFF_CONSTANT;
    so.delay_ms = 20;
    size_t subs = 0;
    int messages = 0;
    int64_t late = spin_notice(&so, 300, &subs, &messages);
    fprintf(stderr, "[r47] with a constant 20 ms back-off: noticed after %lld ms\n",
            (long long)late);
    cr_expect_leq(late, 20 + crdt_scaled_ms(30));
}

Test(r47, a_spin_wait_ends_by_its_deadline_and_reentry_counts_up)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "spind", spin);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK, "reentrant");
    int64_t count = 0;
    cr_assert_eq(crd_lock_hold_count(f.la, &count), CRD_OK);
    cr_expect_eq(count, 2);
    int64_t t0 = crdt_now_ms();
    cr_expect_eq(crd_lock_acquire(f.lb, 300, 10000), CRD_TIMEOUT);
    int64_t took = crdt_now_ms() - t0;
    cr_expect(took >= 300 && took <= 300 + crdt_scaled_ms(60), "the wait took %lld ms",
              (long long)took);
    cr_expect_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_BUSY);
    bool was = false;
    cr_assert_eq(crd_lock_force_unlock(f.lb, &was), CRD_OK);
    cr_expect(was);
    cr_expect_eq(crd_lock_release(f.la), CRD_LOCK_LOST);
    crd_spin_options so;
    crd_spin_options_init(&so);
    so.backoff = (crd_backoff_kind)7;
    crd_lock *bad = NULL;
    cr_expect_eq(crd_spin_lock_new_n(f.a, f.key, strlen(f.key), &so, &bad), CRD_INVALID_ARGUMENT);
    cr_expect(strstr(crd_client_errmsg(f.a), "unknown back-off") != NULL);
    cr_expect_null(bad);
    crdt_fixture_close(&f);
}

/* a's lock held is taken; b's lock waiting, which conflicts with it, is asked for on b's
 * event loop (5 s wait): it does not get it within 200 ms, and gets it once held is
 * released. Frees both locks and both clients. */
static void loop_wait_takes_it_after_the_release(crd_client *a, crd_lock *held, crd_client *b,
                                                 crd_lock *waiting)
{
    cr_assert_eq(crd_lock_acquire(held, 0, 10000), CRD_OK);
    crdt_op_rec rec = {0};
    uint64_t owner = crd_owner_new();
    cr_assert_eq(crd_lock_acquire_async(waiting, owner, 5000, 10000, crdt_op_rec_done, &rec, NULL),
                 CRD_OK);
    crdt_loop_until(b, &rec.done, 1, 200);
    cr_expect_eq(rec.done, 0, "the waiter got the lock while it was held");
    cr_assert_eq(crd_lock_release(held), CRD_OK);
    crdt_loop_until(b, &rec.done, 1, 5000);
    cr_assert_eq(rec.done, 1, "the waiter did not get the lock within 5 s of the release");
    cr_expect_eq(rec.last, CRD_OK, "%s", crd_strerror(rec.last));
    cr_assert_eq(crd_lock_release_owner(waiting, owner), CRD_OK);
    crd_lock_free(held);
    crd_lock_free(waiting);
    crd_client_free(a);
    crd_client_free(b);
}

Test(r47, a_spin_wait_on_the_event_loop_takes_the_lock_after_a_silent_release)
{
    crd_client *a = crdt_client(), *b = crdt_client();
    const char *name = crdt_key("spinloop");
    loop_wait_takes_it_after_the_release(a, spin(a, name), b, spin(b, name));
}

/* ---- grouped multi-lock ------------------------------------------------------------------ */

static const char *const ABC[] = {"a", "b", "c"};
static const char *const CD[] = {"c", "d"};
static const char *const DE[] = {"d", "e"};

Test(r47, a_group_takes_every_value_in_one_script_and_answers_correctly)
{
    crd_options o;
    crdt_tracelog *tl = crdt_traced_options(&o);
    crd_client *a = crdt_client_opts(&o), *b = crdt_client();
    redisContext *r = crdt_redis();
    const char *g = crdt_key("grp");
    crd_lock *abc = group(a, g, ABC, 3), *cd = group(b, g, CD, 2), *de = group(b, g, DE, 2);
    size_t n0 = crdt_tracelog_count_scripts(tl, 0);
    cr_assert_eq(crd_lock_acquire(abc, 0, 10000), CRD_OK);
    cr_expect_eq(crdt_tracelog_count_scripts(tl, 0) - n0, 1, "one script for three values");
    cr_expect_eq(crdt_cmd_int(r, "HLEN %s", g), 9, "three fields per value");
    size_t len = 0;
    cr_expect_str_eq(crd_lock_name(abc, &len), g);
    cr_expect_eq(len, strlen(g));
    bool yes = false;
    cr_assert_eq(crd_lock_is_held(abc, &yes), CRD_OK);
    cr_expect(yes);
    cr_assert_eq(crd_lock_is_held_owner(cd, crd_owner_current(), &yes), CRD_OK);
    cr_expect_not(yes, "b does not hold c (Redisson's isHeldByCurrentThread says it does)");
    cr_assert_eq(crd_lock_is_locked(cd, &yes), CRD_OK);
    cr_expect(yes, "c is held");
    cr_expect_eq(crd_lock_acquire(cd, 0, 10000), CRD_BUSY);
    cr_assert_eq(crd_lock_acquire(de, 0, 10000), CRD_OK, "other values of the same group");
    cr_assert_eq(crd_lock_acquire(abc, 0, 10000), CRD_OK, "reentry");
    int64_t count = 0;
    cr_assert_eq(crd_lock_hold_count(abc, &count), CRD_OK);
    cr_expect_eq(count, 2);
    /* The same set in another order, with a repeat, is the same hold. */
    const char *const cba[] = {"c", "b", "a", "b"};
    crd_lock *again = group(a, g, cba, 4);
    cr_assert_eq(crd_lock_hold_count(again, &count), CRD_OK);
    cr_expect_eq(count, 2);
    cr_assert_eq(crd_lock_release(again), CRD_OK);
    cr_assert_eq(crd_lock_release(abc), CRD_OK);
    cr_expect_eq(crd_lock_release(abc), CRD_NOT_OWNER);
    /* Force-unlock of several values: true (Redisson's answers false). */
    cr_assert_eq(crd_lock_acquire(abc, 0, 10000), CRD_OK);
    bool was = false;
    cr_assert_eq(crd_lock_force_unlock(cd, &was), CRD_OK, "%s", crd_client_errmsg(b));
    cr_expect(was, "c and d were freed");
    cr_assert_eq(crd_lock_force_unlock(cd, &was), CRD_OK, "a free set is no error");
    cr_expect_not(was);
    cr_expect_eq(crd_lock_release(abc), CRD_LOCK_LOST, "c was force-unlocked");
    cr_expect_eq(crd_lock_release(de), CRD_LOCK_LOST, "d too");
    crd_lock_free(abc);
    crd_lock_free(cd);
    crd_lock_free(de);
    crd_lock_free(again);
    crd_client_free(a);
    crd_client_free(b);
    crdt_tracelog_free(tl);
    redisFree(r);
}

Test(r47, a_group_waiter_is_woken_on_the_groups_channel_and_renewed_in_one_call, .timeout = 60)
{
    crd_options oa;
    crdt_tracelog *tl = crdt_traced_options(&oa);
    oa.watchdog_timeout_ms = 900;
    crd_client *a = crdt_client_opts(&oa), *b = crdt_client();
    redisContext *r = crdt_redis();
    const char *g = crdt_key("grpw");
    crd_lock *abc = group(a, g, ABC, 3), *cd = group(b, g, CD, 2);
    cr_assert_eq(crd_lock_acquire(abc, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_waiter w;
    waiter_start(&w, cd, 20000);
    size_t from = crdt_tracelog_count(tl);
    crdt_sleep_ms(1500); /* watchdog periods pass: the renewal is what is watched */
    size_t renewals = crdt_tracelog_count_scripts(tl, from);
    cr_expect(renewals >= 3 && renewals <= 6, "%zu renewal calls in 1.5 s (one per 300 ms)",
              renewals);
    cr_expect_gt(crdt_pttl(r, g), 0);
    cr_expect_not(crdt_waiter_returned(&w));
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release(abc), CRD_OK);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK);
    cr_expect_lt(w.t_acq_ms - released, crdt_scaled_ms(200), "woken by the unlock message");
    cr_assert_eq(crd_lock_release_owner(cd, w.owner), CRD_OK);
    cr_expect_eq(crdt_exists(r, g), 0);
    crd_lock_free(abc);
    crd_lock_free(cd);
    crd_client_free(a);
    crd_client_free(b);
    crdt_tracelog_free(tl);
    redisFree(r);
}

Test(r47, a_group_of_no_values_or_a_null_value_is_refused_and_nothing_changes)
{
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 1, "grpbad", NULL, NULL, NULL);
    const char *g = f.key;
    crd_lock *l = (crd_lock *)1;
    cr_expect_eq(crd_group_lock_new(f.a, g, ABC, 0, &l), CRD_INVALID_ARGUMENT);
    cr_expect(strstr(crd_client_errmsg(f.a), "no values") != NULL, "%s", crd_client_errmsg(f.a));
    cr_expect_null(l);
    const char *const withnull[] = {"a", NULL};
    cr_expect_eq(crd_group_lock_new(f.a, g, withnull, 2, &l), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_group_lock_new(f.a, NULL, ABC, 3, &l), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_group_lock_new(f.a, "a}b", ABC, 3, &l), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crdt_exists(f.r, g), 0);
    freeReplyObject(crdt_cmd(f.r, "SET %s x", g));
    /* The fixture frees la with its client. */
    f.la = l = group(f.a, g, ABC, 3);
    cr_expect_eq(crd_lock_acquire(l, 0, 1000), CRD_SERVER, "WRONGTYPE");
    char buf[8];
    cr_expect_str_eq(crdt_cmd_str(f.r, buf, sizeof buf, "GET %s", g), "x");
    crdt_fixture_close(&f);
}

Test(r47, a_group_acquire_on_the_event_loop_waits_and_takes_every_value)
{
    crd_client *a = crdt_client(), *b = crdt_client();
    const char *g = crdt_key("grploop");
    loop_wait_takes_it_after_the_release(a, group(a, g, ABC, 3), b, group(b, g, CD, 2));
}

/* Six processes lock overlapping sets of ten values (process i: values i, i+1, i+3 mod
 * 10), each holder INCRs a per-value counter for every value it holds and must read 1,
 * then DECRs it. Shown to fail once on a broken library (docs: group_take.lua made to
 * take a value over a live holder's: 30+ overlaps). */
enum { G_PROCS = 6, G_VALUES = 10, G_ROUNDS = 40 };

typedef struct gshare {
    const char *group, *prefix, *bad;
    int port;
} gshare;

static int group_proc(int index, void *arg)
{
    const gshare *sh = arg;
    crd_client *c = crdt_plain_client(sh->port);
    redisContext *r = crdt_raw_connect(sh->port, 10000);
    if (c == NULL || r == NULL)
        return 2;
    char vals[3][8];
    const char *vp[3];
    int which[3] = {index % G_VALUES, (index + 1) % G_VALUES, (index + 3) % G_VALUES};
    for (int i = 0; i < 3; i++) {
        snprintf(vals[i], sizeof vals[i], "v%d", which[i]);
        vp[i] = vals[i];
    }
    crd_lock *l = NULL;
    if (crd_group_lock_new(c, sh->group, vp, 3, &l) != CRD_OK)
        return 3;
    int bad = 0, fails = 0;
    for (int k = 0; k < G_ROUNDS; k++) {
        if (crd_lock_acquire(l, 30000, index % 2 ? CRD_LEASE_WATCHDOG : 20000) != CRD_OK) {
            fails++;
            continue;
        }
        for (int i = 0; i < 3; i++)
            bad += crdt_reply_int(redisCommand(r, "INCR %s:%d", sh->prefix, which[i])) != 1;
        for (int i = 0; i < 3; i++)
            crdt_reply_int(redisCommand(r, "DECR %s:%d", sh->prefix, which[i]));
        if (crd_lock_release(l) != CRD_OK)
            fails++;
    }
    if (bad > 0)
        crdt_reply_int(redisCommand(r, "INCRBY %s %d", sh->bad, bad));
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
    return fails > 0 ? 1 : 0;
}

Test(r47, six_processes_locking_overlapping_value_sets_never_overlap_on_a_value, .timeout = 120)
{
    gshare sh = {crdt_key("rows"), crdt_key("inside"), crdt_key("overlaps"), crdt_port()};
    int codes[G_PROCS];
    int64_t t0 = crdt_now_ms();
    int ok = crdt_run_children(G_PROCS, group_proc, &sh, 100000, codes);
    for (int i = 0; i < G_PROCS; i++)
        cr_expect_eq(codes[i], 0, "process %d exited %d", i, codes[i]);
    cr_assert_eq(ok, G_PROCS);
    redisContext *r = crdt_redis();
    long long overlaps = crdt_reply_int(redisCommand(r, "GET %s", sh.bad));
    fprintf(stderr, "[r47] %d processes x %d grouped acquires of 3 of %d values: %lld overlaps "
            "(%lld ms)\n", G_PROCS, G_ROUNDS, G_VALUES, overlaps,
            (long long)(crdt_now_ms() - t0));
    cr_expect_eq(overlaps, 0, "%lld times a value was held twice", overlaps);
    cr_expect_eq(crdt_exists(r, sh.group), 0, "everything released");
    redisFree(r);
}

/* ---- rate limiter --------------------------------------------------------------------------- */

static crd_rate_limiter *limiter(crd_client *c, const char *name)
{
    crd_rate_limiter *rl = NULL;
    cr_assert_eq(crd_rate_limiter_new(c, name, &rl), CRD_OK, "%s", crd_client_errmsg(c));
    return rl;
}

Test(r47, a_rate_limiter_is_configured_read_and_refuses_bad_rates_changing_nothing)
{
    crd_client *c = crdt_client();
    redisContext *r = crdt_redis();
    const char *name = crdt_key("rl");
    crd_rate_limiter *rl = limiter(c, name);
    crd_rate_config bad[] = {{CRD_RATE_OVERALL, 0, 1000, 0},
                             {CRD_RATE_OVERALL, 5, 0, 0},
                             {(crd_rate_mode)7, 5, 1000, 0},
                             {CRD_RATE_PER_CLIENT, 5, 1000, 500},
                             {CRD_RATE_OVERALL, -3, 1000, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool set = true;
        cr_expect_eq(crd_rate_limiter_try_set_rate(rl, &bad[i], &set), CRD_INVALID_ARGUMENT,
                     "config %zu", i);
        cr_expect_not(set);
        cr_expect(strstr(crd_client_errmsg(c), "nothing was changed") != NULL, "%zu: %s", i,
                  crd_client_errmsg(c));
        cr_expect_eq(crd_rate_limiter_set_rate(rl, &bad[i], true), CRD_INVALID_ARGUMENT);
    }
    cr_expect_eq(crd_rate_limiter_try_set_rate(rl, NULL, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crdt_exists(r, name), 0);
    cr_expect_eq(crd_rate_limiter_acquire(rl, 1, 0), CRD_INVALID_ARGUMENT, "no rate yet");
    cr_expect(strstr(crd_client_errmsg(c), "has no rate") != NULL, "%s", crd_client_errmsg(c));
    int64_t avail = -1;
    cr_expect_eq(crd_rate_limiter_available(rl, &avail), CRD_INVALID_ARGUMENT);
    crd_rate_config cfg = {CRD_RATE_OVERALL, 3, 2000, 0}, got;
    bool set = false, exists = true;
    cr_assert_eq(crd_rate_limiter_get_rate(rl, &got, &exists), CRD_OK);
    cr_expect_not(exists);
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &cfg, &set), CRD_OK);
    cr_expect(set);
    crd_rate_config other = {CRD_RATE_OVERALL, 9, 1000, 0};
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &other, &set), CRD_OK);
    cr_expect_not(set, "the first rate stays");
    cr_assert_eq(crd_rate_limiter_get_rate(rl, &got, &exists), CRD_OK);
    cr_expect(exists);
    cr_expect(got.mode == cfg.mode && got.rate == 3 && got.interval_ms == 2000 &&
              got.keep_alive_ms == 0);
    bool updated = false;
    crd_rate_limiter *missing = limiter(c, crdt_key("rl-missing"));
    cr_assert_eq(crd_rate_limiter_update_rate(missing, &other, true, &updated), CRD_OK);
    cr_expect_not(updated);
    cr_assert_eq(crd_rate_limiter_update_rate(rl, &other, true, &updated), CRD_OK);
    cr_expect(updated);
    cr_assert_eq(crd_rate_limiter_get_rate(rl, &got, NULL), CRD_OK);
    cr_expect_eq(got.rate, 9);
    /* A key of another type: a server error, nothing changed. */
    const char *str = crdt_key("rl-string");
    freeReplyObject(crdt_cmd(r, "SET %s x", str));
    crd_rate_limiter *wrong = limiter(c, str);
    cr_expect_eq(crd_rate_limiter_try_set_rate(wrong, &cfg, &set), CRD_SERVER);
    cr_expect(strstr(crd_client_errmsg(c), "WRONGTYPE") != NULL, "%s", crd_client_errmsg(c));
    cr_expect_eq(crd_rate_limiter_acquire(wrong, 1, 0), CRD_SERVER);
    char buf[8];
    cr_expect_str_eq(crdt_cmd_str(r, buf, sizeof buf, "GET %s", str), "x");
    bool deleted = false;
    cr_assert_eq(crd_rate_limiter_delete(rl, &deleted), CRD_OK);
    cr_expect(deleted);
    cr_expect_eq(crdt_exists(r, name), 0);
    crd_rate_limiter_free(rl);
    crd_rate_limiter_free(missing);
    crd_rate_limiter_free(wrong);
    crd_client_free(c);
    redisFree(r);
}

Test(r47, a_rate_limiter_acquire_waits_what_the_server_says_and_never_past_its_deadline,
     .timeout = 60)
{
    crd_options o;
    crdt_tracelog *tl = crdt_traced_options(&o);
    crd_client *c = crdt_client_opts(&o);
    const char *name = crdt_key("rlw");
    crd_rate_limiter *rl = limiter(c, name);
    crd_rate_config cfg = {CRD_RATE_OVERALL, 3, 1200, 0};
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &cfg, NULL), CRD_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(crd_rate_limiter_acquire(rl, 1, 0), CRD_OK);
    int64_t avail = -1;
    cr_assert_eq(crd_rate_limiter_available(rl, &avail), CRD_OK);
    cr_expect_eq(avail, 0);
    cr_expect_eq(crd_rate_limiter_acquire(rl, 1, 0), CRD_BUSY);
    int64_t t0 = crdt_now_ms();
    cr_expect_eq(crd_rate_limiter_acquire(rl, 4, CRD_WAIT_FOREVER), CRD_INVALID_ARGUMENT,
                 "more than the rate never waits for ever");
    cr_expect_lt(crdt_now_ms() - t0, crdt_scaled_ms(200));
    /* The server's delay (about 1.2 s) ends after a 300 ms deadline: at once. */
    size_t from = crdt_tracelog_count(tl);
    t0 = crdt_now_ms();
    cr_expect_eq(crd_rate_limiter_acquire(rl, 1, 300), CRD_TIMEOUT);
    int64_t took = crdt_now_ms() - t0;
    cr_expect_leq(took, 300, "never past the deadline: %lld ms", (long long)took);
    cr_expect_eq(crdt_tracelog_count_scripts(tl, from), 1, "one attempt: nothing could come sooner");
    /* A wait long enough: one sleep of the server's delay, then the permit. */
    from = crdt_tracelog_count(tl);
    t0 = crdt_now_ms();
    cr_assert_eq(crd_rate_limiter_acquire(rl, 1, 3000), CRD_OK, "%s", crd_client_errmsg(c));
    took = crdt_now_ms() - t0;
    cr_expect(took >= 700 && took <= 1200 + crdt_scaled_ms(100), "waited %lld ms", (long long)took);
    size_t tries = crdt_tracelog_count_scripts(tl, from);
    cr_expect(tries >= 2 && tries <= 3, "%zu attempts: the wait is the server's, no polling", tries);
    cr_expect_eq(crdt_tracelog_count_cmd(tl, 0, "SUBSCRIBE", -1), 0);
    /* release gives permits back before their interval ends, up to the rate */
    int64_t before = 0;
    cr_assert_eq(crd_rate_limiter_available(rl, &before), CRD_OK);
    cr_assert_eq(crd_rate_limiter_release(rl, 1), CRD_OK);
    cr_assert_eq(crd_rate_limiter_available(rl, &avail), CRD_OK);
    cr_expect_eq(avail, before + 1 < 3 ? before + 1 : 3, "%lld then %lld", (long long)before,
                 (long long)avail);
    cr_expect_eq(crd_rate_limiter_acquire(rl, 0, 0), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_rate_limiter_release(rl, 0), CRD_INVALID_ARGUMENT);
    crd_rate_limiter_free(rl);
    crd_client_free(c);
    crdt_tracelog_free(tl);
}

Test(r47, per_client_rates_are_separate_budgets)
{
    crd_client *a = crdt_client(), *b = crdt_client();
    const char *name = crdt_key("rlpc");
    crd_rate_limiter *ra = limiter(a, name), *rb = limiter(b, name);
    crd_rate_config cfg = {CRD_RATE_PER_CLIENT, 2, 10000, 0};
    cr_assert_eq(crd_rate_limiter_try_set_rate(ra, &cfg, NULL), CRD_OK);
    cr_assert_eq(crd_rate_limiter_acquire(ra, 2, 0), CRD_OK);
    cr_expect_eq(crd_rate_limiter_acquire(ra, 1, 0), CRD_BUSY);
    cr_expect_eq(crd_rate_limiter_acquire(rb, 1, 0), CRD_OK, "b has its own two");
    crd_rate_limiter_delete(ra, NULL);
    crd_rate_limiter_free(ra);
    crd_rate_limiter_free(rb);
    crd_client_free(a);
    crd_client_free(b);
}

Test(r47, a_rate_limiter_acquire_on_the_event_loop_sleeps_on_the_loop_timeout)
{
    crd_client *c = crdt_client();
    crd_rate_limiter *rl = limiter(c, crdt_key("rlloop"));
    crd_rate_config cfg = {CRD_RATE_OVERALL, 1, 500, 0};
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &cfg, NULL), CRD_OK);
    cr_assert_eq(crd_rate_limiter_acquire(rl, 1, 0), CRD_OK);
    crdt_op_rec rec = {0};
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_rate_limiter_acquire_async(rl, 1, 3000, crdt_op_rec_done, &rec, NULL),
                 CRD_OK);
    crdt_loop_until(c, &rec.done, 1, 100);
    cr_expect_eq(rec.done, 0);
    int64_t left = crd_loop_timeout_ms(c);
    cr_expect(left > 100 && left <= 500, "the loop sleeps the server's delay (%lld ms)",
              (long long)left);
    crdt_loop_until(c, &rec.done, 1, 3000);
    cr_assert_eq(rec.done, 1);
    cr_expect_eq(rec.last, CRD_OK);
    int64_t took = crdt_now_ms() - t0;
    cr_expect(took >= 350 && took <= 500 + crdt_scaled_ms(150), "%lld ms", (long long)took);
    /* a delay past the deadline ends the operation at once */
    rec.done = 0;
    cr_assert_eq(crd_rate_limiter_acquire_async(rl, 1, 100, crdt_op_rec_done, &rec, NULL),
                 CRD_OK);
    crdt_loop_until(c, &rec.done, 1, 1000);
    cr_expect_eq(rec.last, CRD_TIMEOUT);
    crd_rate_limiter_free(rl);
    crd_client_free(c);
}

/* Eight processes share 50 permits a second for a window of W seconds (3 here; the soak
 * runs 10): together they get 50 W permits, within one interval's 50. */
enum { RL_PROCS = 8, RL_RATE = 50 };

typedef struct rlshare {
    const char *name, *total, *go;
    int port;
    int64_t window_ms;
} rlshare;

static int rl_proc(int index, void *arg)
{
    (void)index;
    const rlshare *sh = arg;
    crd_client *c = crdt_plain_client(sh->port);
    redisContext *r = crdt_raw_connect(sh->port, 70000);
    if (c == NULL || r == NULL)
        return 2;
    crd_rate_limiter *rl = NULL;
    if (crd_rate_limiter_new(c, sh->name, &rl) != CRD_OK)
        return 3;
    /* The last child to be ready starts the window: no parent thread may run while the
     * children are forked (under ASan a thread inside malloc at fork() leaves the child's
     * allocator locked: the child's first thread hung there). */
    if (crdt_reply_int(redisCommand(r, "INCR %s:ready", sh->go)) == RL_PROCS) {
        freeReplyObject(redisCommand(r, "SET %s:t0 %lld", sh->go, (long long)crdt_now_ms()));
        for (int i = 0; i < RL_PROCS; i++)
            freeReplyObject(redisCommand(r, "RPUSH %s go", sh->go));
    }
    if (!crdt_await_go(r, sh->go))
        return 4;
    long long start = crdt_reply_int(redisCommand(r, "GET %s:t0", sh->go));
    int64_t end = start + sh->window_ms; /* the parent's monotonic clock: one host */
    int got = 0, fails = 0;
    for (;;) {
        int64_t left = end - crdt_now_ms();
        if (left <= 0)
            break;
        crd_status st = crd_rate_limiter_acquire(rl, 1, left);
        if (st == CRD_OK && crdt_now_ms() <= end)
            got++;
        else if (st != CRD_OK && st != CRD_TIMEOUT)
            fails++;
    }
    crdt_reply_int(redisCommand(r, "INCRBY %s %d", sh->total, got));
    crd_rate_limiter_free(rl);
    crd_client_free(c);
    redisFree(r);
    return fails > 0 ? 1 : 0;
}

Test(r47, eight_processes_sharing_fifty_permits_a_second_get_fifty_a_second, .timeout = 120)
{
    const char *w = getenv("CRDT_RL_WINDOW_S");
    int64_t window_s = w != NULL && atoi(w) > 0 ? atoi(w) : 3;
    rlshare sh = {crdt_key("rl8"), crdt_key("rl8total"), crdt_key("rl8go"), crdt_port(),
                  window_s * 1000};
    crd_client *c = crdt_client();
    crd_rate_limiter *rl = limiter(c, sh.name);
    crd_rate_config cfg = {CRD_RATE_OVERALL, RL_RATE, 1000, 0};
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &cfg, NULL), CRD_OK);
    crd_rate_limiter_free(rl);
    crd_client_free(c); /* its threads gone before the children are forked (see rl_proc) */
    int codes[RL_PROCS];
    int ok = crdt_run_children(RL_PROCS, rl_proc, &sh, (window_s + 30) * 1000, codes);
    c = crdt_client();
    rl = limiter(c, sh.name);
    cr_assert_eq(ok, RL_PROCS, "children exited %d %d %d %d ...", codes[0], codes[1], codes[2],
                 codes[3]);
    redisContext *r = crdt_redis();
    long long total = crdt_reply_int(redisCommand(r, "GET %s", sh.total));
    fprintf(stderr, "[r47] %d processes, %d permits/s, %lld s: %lld permits (expected %lld +- %d)\n",
            RL_PROCS, RL_RATE, (long long)window_s, total, (long long)(RL_RATE * window_s),
            RL_RATE);
    cr_expect(total >= RL_RATE * window_s - RL_RATE && total <= RL_RATE * window_s + RL_RATE,
              "%lld permits in %lld s", total, (long long)window_s);
    crd_rate_limiter_delete(rl, NULL);
    crd_rate_limiter_free(rl);
    crd_client_free(c);
    redisFree(r);
}

/* ---- RSemaphore.releaseIfExists -------------------------------------------------------------- */

Test(r47, release_if_exists_releases_only_an_existing_semaphore)
{
    crd_options o;
    crdt_tracelog *tl = crdt_traced_options(&o);
    crd_client *c = crdt_client_opts(&o), *b = crdt_client();
    redisContext *r = crdt_redis();
    const char *name = crdt_key("sem");
    crd_semaphore *s = NULL, *sb = NULL;
    cr_assert_eq(crd_semaphore_new(c, name, &s), CRD_OK);
    cr_assert_eq(crd_semaphore_new(b, name, &sb), CRD_OK);
    bool rel = true;
    cr_assert_eq(crd_semaphore_release_if_exists(s, 2, &rel), CRD_OK);
    cr_expect_not(rel);
    cr_expect_eq(crdt_exists(r, name), 0, "a missing semaphore is not created");
    size_t from = crdt_tracelog_count(tl);
    cr_assert_eq(crd_semaphore_release_if_exists(s, 0, &rel), CRD_OK);
    cr_expect_not(rel);
    cr_expect_eq(crdt_tracelog_count(tl), from, "0 permits send nothing");
    cr_expect_eq(crd_semaphore_release_if_exists(s, -1, &rel), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_semaphore_try_set_permits(s, 0, 0, NULL), CRD_OK);
    crdt_sync_waiter w = {.s = sb, .permits = 1, .wait_ms = 10000};
    crdt_sync_waiter_start(&w);
    crdt_sleep_ms(100); /* it waits on the channel */
    cr_expect_not(crdt_gate_value(&w.done));
    cr_assert_eq(crd_semaphore_release_if_exists(s, 1, &rel), CRD_OK);
    cr_expect(rel);
    crdt_sync_waiter_join(&w, 2000, "the waiter was woken");
    cr_expect_eq(w.st, CRD_OK);
    crd_semaphore_free(s);
    crd_semaphore_free(sb);
    crd_client_free(c);
    crd_client_free(b);
    crdt_tracelog_free(tl);
    redisFree(r);
}
