/*
 * test_lock.c -- core RLock behaviour against a real redis-server: every operation of
 * the lock API and every status it can return, reentrancy, ownership, lease expiry,
 * force-unlock, foreign state (WRONGTYPE, a hash without TTL), script cache flushes,
 * invalid arguments, crd_lock_run and crd_strerror.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"
#include "probes.h"
#include "waiters.h"

static long long hlen(redisContext *r, const char *key)
{
    return crdt_cmd_int(r, "HLEN %s", key);
}

static void assert_ttl_sane(redisContext *r, const char *key)
{
    long long t = crdt_pttl(r, key);
    cr_assert(t > 0 || t == -2, "PTTL of %s is %lld after a credisson operation", key, t);
}

Test(lock, acquire_and_release_create_and_delete_the_hash_with_the_owner_field)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "L", crdt_lock);

    size_t nlen = 0;
    cr_assert_str_eq(crd_lock_name(f.la, &nlen), f.key);
    cr_assert_eq(nlen, strlen(f.key));

    bool b = true;
    cr_assert_eq(crd_lock_is_locked(f.la, &b), CRD_OK);
    cr_assert_not(b);
    int64_t ttl = 0;
    cr_assert_eq(crd_lock_remaining_ttl(f.la, &ttl), CRD_OK);
    cr_assert_eq(ttl, -2);

    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    char field[96];
    crdt_owner_field(f.a, crd_owner_current(), field, sizeof field);
    cr_assert_eq(crdt_hget_int(f.r, f.key, field), 1, "the owner field %s must hold count 1",
                 field);
    cr_assert_eq(hlen(f.r, f.key), 1);
    long long t = crdt_pttl(f.r, f.key);
    cr_assert(t > 0 && t <= 10000, "PTTL %lld not in (0, 10000]", t);

    cr_assert_eq(crd_lock_is_locked(f.la, &b), CRD_OK);
    cr_assert(b);
    cr_assert_eq(crd_lock_is_held(f.la, &b), CRD_OK);
    cr_assert(b);
    int64_t count = 0;
    cr_assert_eq(crd_lock_hold_count(f.la, &count), CRD_OK);
    cr_assert_eq(count, 1);
    cr_assert_eq(crd_lock_remaining_ttl(f.la, &ttl), CRD_OK);
    cr_assert(ttl > 0 && ttl <= 10000, "remaining ttl %" PRId64, ttl);
    int64_t validity = 0;
    cr_assert_eq(crd_lock_validity_ms(f.la, &validity), CRD_OK);
    cr_assert(validity > 8000 && validity <= 10000, "validity %" PRId64, validity);

    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);
    cr_assert_eq(crd_lock_is_locked(f.la, &b), CRD_OK);
    cr_assert_not(b);
    cr_assert_eq(crd_lock_is_held(f.la, &b), CRD_OK);
    cr_assert_not(b);
    cr_assert_eq(crd_lock_hold_count(f.la, &count), CRD_OK);
    cr_assert_eq(count, 0);
    cr_assert_eq(crd_lock_validity_ms(f.la, &validity), CRD_NOT_OWNER);

    crdt_fixture_close(&f);
}

Test(lock, reentrancy_three_deep_counts_up_and_down_and_rearms_the_ttl)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "L", crdt_lock);
    char field[96];
    crdt_owner_field(f.a, crd_owner_current(), field, sizeof field);

    for (int i = 1; i <= 3; i++) {
        if (i > 1) /* shorten the TTL so that the re-arm is visible */
            cr_assert_eq(crdt_cmd_int(f.r, "PEXPIRE %s 2000", f.key), 1);
        cr_assert_eq(crd_lock_acquire(f.la, 0, 20000), CRD_OK, "acquire #%d", i);
        int64_t count = 0;
        cr_assert_eq(crd_lock_hold_count(f.la, &count), CRD_OK);
        cr_assert_eq(count, i);
        cr_assert_eq(crdt_hget_int(f.r, f.key, field), i);
        long long t = crdt_pttl(f.r, f.key);
        cr_assert(t > 2000 && t <= 20000, "acquire #%d: PTTL %lld was not re-armed to the lease",
                  i, t);
    }
    for (int i = 2; i >= 0; i--) {
        cr_assert_eq(crdt_cmd_int(f.r, "PEXPIRE %s 2000", f.key), 1);
        cr_assert_eq(crd_lock_release(f.la), CRD_OK, "release leaving %d", i);
        int64_t count = -1;
        cr_assert_eq(crd_lock_hold_count(f.la, &count), CRD_OK);
        cr_assert_eq(count, i);
        if (i > 0) {
            cr_assert_eq(crdt_hget_int(f.r, f.key, field), i);
            long long t = crdt_pttl(f.r, f.key);
            cr_assert(t > 2000 && t <= 20000,
                      "partial release: PTTL %lld not re-armed to the last lease", t);
        } else {
            cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);
        }
    }
    cr_assert_eq(crd_lock_release(f.la), CRD_NOT_OWNER);
    crdt_fixture_close(&f);
}

struct other_thread_release {
    crd_lock *lock;
    crd_status st;
};

static void *release_from_thread(void *arg)
{
    struct other_thread_release *o = arg;
    o->st = crd_lock_release(o->lock);
    return NULL;
}

Test(lock, release_by_a_non_owner_changes_nothing_and_reports_not_owner)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "L", crdt_lock);
    char latch_pattern[300];
    snprintf(latch_pattern, sizeof latch_pattern, "redisson_unlock_latch:{%s}:*", f.key);

    /* A free lock: nobody owns it. */
    cr_assert_eq(crd_lock_release(f.lb), CRD_NOT_OWNER);

    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    char field[96];
    crdt_owner_field(f.a, crd_owner_current(), field, sizeof field);

    /* Same thread id, other client (other UUID). */
    cr_assert_eq(crd_lock_release(f.lb), CRD_NOT_OWNER);
    cr_assert_str_neq(crd_client_errmsg(f.b), "", "a failed call leaves a detail message");
    /* Same client, other thread (other owner id). */
    struct other_thread_release o = {f.la, CRD_OK};
    pthread_t th;
    pthread_create(&th, NULL, release_from_thread, &o);
    pthread_join(th, NULL);
    cr_assert_eq(o.st, CRD_NOT_OWNER);
    /* Explicit owner that never acquired. */
    cr_assert_eq(crd_lock_release_owner(f.la, crd_owner_new()), CRD_NOT_OWNER);

    cr_assert_eq(hlen(f.r, f.key), 1);
    cr_assert_eq(crdt_hget_int(f.r, f.key, field), 1);
    cr_assert_eq(crdt_count_keys(f.r, latch_pattern), 0, "a refused unlock writes no latch");
    bool held = true;
    cr_assert_eq(crd_lock_is_held(f.lb, &held), CRD_OK);
    cr_assert_not(held);
    cr_assert_eq(crd_lock_is_held(f.la, &held), CRD_OK);
    cr_assert(held);

    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_fixture_close(&f);
}

struct owner_job {
    crd_lock *lock;
    uint64_t owner;
    crd_status st;
    bool held;
    int64_t count;
};

static void *acquire_owner_thread(void *arg)
{
    struct owner_job *j = arg;
    j->st = crd_lock_acquire_owner(j->lock, j->owner, 0, 10000);
    return NULL;
}

static void *release_owner_thread(void *arg)
{
    struct owner_job *j = arg;
    crd_lock_is_held_owner(j->lock, j->owner, &j->held);
    crd_lock_hold_count_owner(j->lock, j->owner, &j->count);
    j->st = crd_lock_release_owner(j->lock, j->owner);
    return NULL;
}

Test(lock, an_explicit_owner_acquires_in_one_thread_and_releases_in_another)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "L", crdt_lock);

    uint64_t o1 = crd_owner_new();
    uint64_t o2 = crd_owner_new();
    cr_assert_neq(o1, 0);
    cr_assert_neq(o1, o2);
    cr_assert_neq(o1, crd_owner_current());
    cr_assert_neq(o2, crd_owner_current());

    struct owner_job j = {f.la, o1, CRD_IO, false, 0};
    pthread_t th;
    pthread_create(&th, NULL, acquire_owner_thread, &j);
    pthread_join(th, NULL);
    cr_assert_eq(j.st, CRD_OK);
    char field[96];
    crdt_owner_field(f.a, o1, field, sizeof field);
    cr_assert_eq(crdt_hget_int(f.r, f.key, field), 1,
                 "the hold is under the explicit owner's field");

    /* The main thread is not that owner. */
    bool held = true;
    cr_assert_eq(crd_lock_is_held(f.la, &held), CRD_OK);
    cr_assert_not(held);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 1000), CRD_BUSY);
    int64_t v = 0;
    cr_assert_eq(crd_lock_validity_ms_owner(f.la, o1, &v), CRD_OK);
    cr_assert(v > 0 && v <= 10000);

    j.st = CRD_IO;
    pthread_create(&th, NULL, release_owner_thread, &j);
    pthread_join(th, NULL);
    cr_assert(j.held);
    cr_assert_eq(j.count, 1);
    cr_assert_eq(j.st, CRD_OK);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);

    crdt_fixture_close(&f);
}

Test(lock, an_expired_lease_makes_release_report_lock_lost)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "L", crdt_lock);

    cr_assert_eq(crd_lock_acquire(f.la, 0, 150), CRD_OK);
    cr_assert(crdt_await_exists(f.r, f.key, false, 3000), "the 150 ms lease never expired");
    int64_t v = 12345;
    crd_status vs = crd_lock_validity_ms(f.la, &v);
    cr_assert(vs == CRD_OK || vs == CRD_LOCK_LOST, "validity after expiry: %s", crd_strerror(vs));
    cr_assert(v <= 0, "validity %" PRId64 " after the lease ran out", v);

    cr_assert_eq(crd_lock_release(f.la), CRD_LOCK_LOST);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0, "a lost release creates nothing");
    /* The loss has been reported; the hold is forgotten. */
    cr_assert_eq(crd_lock_release(f.la), CRD_NOT_OWNER);
    crdt_fixture_close(&f);
}

Test(lock, force_unlock_wakes_a_waiter_and_the_holder_then_sees_lock_lost)
{
    crd_client *a = crdt_client();
    crd_client *b = crdt_client();
    crd_client *f = crdt_client();
    redisContext *r = crdt_redis();
    const char *key = crdt_key("L");
    char channel[300];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", key);
    crd_lock *la = crdt_lock(a, key);
    crd_lock *lb = crdt_lock(b, key);
    crd_lock *lf = crdt_lock(f, key);

    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_waiter w = {.lock = lb, .wait_ms = 10000, .lease_ms = 10000};
    crdt_waiter_start(&w);
    cr_assert(crdt_await_subscribed(r, channel, 5000), "the waiter never subscribed");

    bool was = false;
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_force_unlock(lf, &was), CRD_OK);
    cr_assert(was);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK);
    cr_assert(w.t_acq_ms - t0 < 1000, "the waiter took %" PRId64 " ms after force-unlock",
              w.t_acq_ms - t0);
    cr_assert_eq(w.release_st, CRD_OK);

    cr_assert_eq(crd_lock_release(la), CRD_LOCK_LOST);
    cr_assert_eq(crd_lock_force_unlock(lf, &was), CRD_OK);
    cr_assert_not(was);
    cr_assert_eq(crd_lock_force_unlock(lf, NULL), CRD_OK);

    crd_lock_free(la);
    crd_lock_free(lb);
    crd_lock_free(lf);
    crd_client_free(a);
    crd_client_free(b);
    crd_client_free(f);
    redisFree(r);
    cr_assert(crdt_pubsub_channels_empty(channel));
}

/* Force-unlock through one kind of handle on a key that is not a lock: refused with
 * the words, key intact, nothing published. */
static void expect_refused(crd_client *c, crd_lock *l, redisContext *r, const char *key,
                           const char *words)
{
    bool was = true;
    crd_status st = crd_lock_force_unlock(l, &was);
    cr_assert_eq(st, CRD_INVALID_ARGUMENT, "force-unlock of %s: %s (%s)", key, crd_strerror(st),
                 crd_client_errmsg(c));
    cr_assert_not(was);
    cr_assert(strstr(crd_client_errmsg(c), words) != NULL &&
                  strstr(crd_client_errmsg(c), "nothing was deleted") != NULL,
              "message \"%s\" does not say \"%s\"", crd_client_errmsg(c), words);
    cr_assert_eq(crdt_exists(r, key), 1, "%s was deleted", key);
}

Test(lock, force_unlock_refuses_a_key_that_is_not_a_lock_and_leaves_it_intact)
{
    crd_client *c = crdt_client();
    redisContext *r = crdt_redis();
    crdt_watch w;
    crdt_watch_open(&w, "redisson_*", true);
    const char *str = crdt_key("a-string"), *list = crdt_key("a-list");
    const char *hash = crdt_key("a-hash"), *big = crdt_key("a-big-hash");
    freeReplyObject(crdt_cmd(r, "SET %s data", str));
    freeReplyObject(crdt_cmd(r, "RPUSH %s a b", list));
    freeReplyObject(crdt_cmd(r, "HSET %s name bob uuid:7 1", hash));
    for (int i = 0; i < 65; i++)
        freeReplyObject(crdt_cmd(r, "HSET %s u:%d 1", big, i));
    const struct {
        const char *key, *words;
    } refused[] = {
        {str, "holds a string value, not a lock"},
        {list, "holds a list value"},
        {hash, "a hash whose fields are not a lock's owners"},
        {big, "a hash whose fields"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        crd_lock *l = crdt_lock(c, refused[i].key);
        expect_refused(c, l, r, refused[i].key, refused[i].words);
        crd_lock_free(l);
    }
    /* The fair and the read-write kinds check too; the fair queue is left alone. */
    crd_lock *f = NULL;
    cr_assert_eq(crd_fair_lock_new(c, str, &f), CRD_OK);
    expect_refused(c, f, r, str, "holds a string value");
    crd_lock_free(f);
    crd_rwlock *rw = NULL;
    cr_assert_eq(crd_rwlock_new(c, list, &rw), CRD_OK);
    expect_refused(c, crd_rwlock_write(rw), r, list, "holds a list value");
    expect_refused(c, crd_rwlock_read(rw), r, list, "holds a list value");
    crd_rwlock_free(rw);
    crdt_msg msgs[8];
    cr_assert_eq(crdt_watch_collect(&w, msgs, 8), 0, "a refused force-unlock published");
    /* A real lock with a foreign owner field shape is still a lock: deleted. */
    const char *lockkey = crdt_key("real");
    freeReplyObject(crdt_cmd(r, "HSET %s 0b7c5e2e-1111-2222-3333-444455556666:42 1", lockkey));
    crd_lock *l = crdt_lock(c, lockkey);
    bool was = false;
    cr_assert_eq(crd_lock_force_unlock(l, &was), CRD_OK, "%s", crd_client_errmsg(c));
    cr_assert(was);
    cr_assert_eq(crdt_exists(r, lockkey), 0);
    crd_lock_free(l);
    crdt_watch_close(&w);
    crd_client_free(c);
    redisFree(r);
}

Test(lock, a_name_holding_a_string_gives_a_server_error_and_is_never_acquired)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "L", crdt_lock);
    freeReplyObject(crdt_cmd(f.r, "SET %s %s", f.key, "not-a-hash"));

    cr_assert_eq(crd_lock_acquire(f.la, 0, 5000), CRD_SERVER);
    cr_assert(strstr(crd_client_errmsg(f.a), "WRONGTYPE") != NULL,
              "errmsg should carry Redis's words, got '%s'", crd_client_errmsg(f.a));
    cr_assert_eq(crd_lock_acquire(f.la, 500, 5000), CRD_SERVER, "a waiting acquire too");
    cr_assert_eq(crd_lock_acquire(f.la, CRD_WAIT_FOREVER, CRD_LEASE_WATCHDOG), CRD_SERVER);
    crd_status rs = crd_lock_release(f.la);
    cr_assert(rs == CRD_SERVER || rs == CRD_NOT_OWNER, "release: %s", crd_strerror(rs));
    cr_assert_neq(rs, CRD_OK);
    int64_t v = 0;
    cr_assert_eq(crd_lock_validity_ms(f.la, &v), CRD_NOT_OWNER, "nothing may be recorded as held");

    char buf[64];
    cr_assert_str_eq(crdt_cmd_str(f.r, buf, sizeof buf, "GET %s", f.key), "not-a-hash");
    cr_assert_eq(crdt_pttl(f.r, f.key), -1);
    crdt_fixture_close(&f);
}

Test(lock, a_hash_without_ttl_makes_a_waiter_time_out_after_bounded_rechecks)
{
    crd_options o;
    crdt_options(&o);
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    crd_client *c = crdt_client_opts(&o);
    redisContext *r = crdt_redis();
    const char *key = crdt_key("L");
    freeReplyObject(crdt_cmd(r, "HSET %s %s 1", key, "00000000-0000-4000-8000-000000000000:1"));
    crd_lock *l = crdt_lock(c, key);

    size_t before = crdt_tracelog_count(tl);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(l, 2500, 5000), CRD_TIMEOUT);
    int64_t took = crdt_now_ms() - t0;
    cr_assert(took >= 2400 && took < 4000, "the 2500 ms wait took %" PRId64 " ms", took);
    size_t scripts = crdt_tracelog_count_scripts(tl, before);
    size_t all = crdt_tracelog_count(tl) - before;
    fprintf(stderr, "[lock] no-TTL waiter: %zu scripts, %zu commands in %" PRId64 " ms\n",
            scripts, all, took);
    /* attempt + retry after subscribe + about one re-check per poll_interval (1000 ms) */
    cr_assert(scripts >= 3 && scripts <= 7, "%zu acquire scripts in 2.5 s is not bounded polling",
              scripts);
    cr_assert(all <= 12, "%zu commands", all);

    cr_assert_eq(crdt_pttl(r, key), -1, "the foreign hash is untouched");
    cr_assert_eq(hlen(r, key), 1);
    crd_lock_free(l);
    crd_client_free(c);
    crdt_tracelog_free(tl);
    freeReplyObject(crdt_cmd(r, "DEL %s", key));
    redisFree(r);
}

Test(lock, a_script_flush_between_calls_keeps_hold_counts_exact)
{
    crd_options o;
    crdt_options(&o);
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 1, "L", crdt_lock, &o, NULL);
    char field[96];
    crdt_owner_field(f.a, crd_owner_current(), field, sizeof field);

    freeReplyObject(crdt_cmd(f.r, "SCRIPT FLUSH"));
    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    assert_ttl_sane(f.r, f.key);
    cr_assert_eq(crdt_hget_int(f.r, f.key, field), 1);
    freeReplyObject(crdt_cmd(f.r, "SCRIPT FLUSH"));
    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    assert_ttl_sane(f.r, f.key);
    cr_assert_eq(crdt_hget_int(f.r, f.key, field), 2);
    freeReplyObject(crdt_cmd(f.r, "SCRIPT FLUSH"));
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    assert_ttl_sane(f.r, f.key);
    cr_assert_eq(crdt_hget_int(f.r, f.key, field), 1);
    freeReplyObject(crdt_cmd(f.r, "SCRIPT FLUSH"));
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    assert_ttl_sane(f.r, f.key);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);

    /* After each flush the library fell back to one EVAL and never to SCRIPT LOAD. */
    cr_assert_geq(crdt_tracelog_count_cmd(tl, 0, "EVAL", 0), 4);
    cr_assert_not(crdt_tracelog_has(tl, 0, "SCRIPT", "LOAD"));
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
}

Test(lock, try_lock_on_a_held_lock_returns_busy_or_times_out_after_the_wait)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "L", crdt_lock);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 20000), CRD_OK);

    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 20000), CRD_BUSY);
    cr_assert(crdt_now_ms() - t0 < 500, "a no-wait try must not wait");
    t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(f.lb, 300, 20000), CRD_TIMEOUT);
    int64_t took = crdt_now_ms() - t0;
    cr_assert(took >= 290 && took < 1500, "a 300 ms wait took %" PRId64 " ms", took);
    bool held = true;
    cr_assert_eq(crd_lock_is_held(f.lb, &held), CRD_OK);
    cr_assert_not(held);

    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 20000), CRD_OK);
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    crdt_fixture_close(&f);
    cr_assert(crdt_pubsub_channels_empty(f.channel), "the timed-out waiter unsubscribed");
}

struct renewals {
    crdt_tracelog *tl;
    size_t from;
};

static bool three_renewals_pred(void *arg)
{
    struct renewals *x = arg;
    /* renewals are scripts whose reply is an array, e.g. "[1]" */
    size_t n = crdt_tracelog_count(x->tl);
    int seen = 0;
    for (size_t i = x->from; i < n; i++) {
        crdt_trace_entry e;
        if (!crdt_tracelog_get(x->tl, i, &e))
            break;
        if (e.argc > 0 && (strcasecmp(e.argv[0], "EVALSHA") == 0 ||
                           strcasecmp(e.argv[0], "EVAL") == 0) &&
            e.reply[0] == '[')
            seen++;
        crdt_trace_entry_free(&e);
    }
    return seen >= 3;
}

Test(lock, the_watchdog_keeps_a_lock_alive_beyond_its_lease_and_lease_zero_means_watchdog)
{
    crd_options o;
    crdt_options(&o);
    o.watchdog_timeout_ms = 900;
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 1, "L", crdt_lock, &o, NULL);

    int64_t t0 = crdt_now_ms();
    size_t from = crdt_tracelog_count(tl);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 0), CRD_OK);
    long long t = crdt_pttl(f.r, f.key);
    cr_assert(t > 0 && t <= 900, "lease 0 means the watchdog timeout, PTTL %lld", t);
    struct renewals x = {tl, from};
    cr_assert(crdt_wait_until(three_renewals_pred, &x, 4000), "three renewals within 4 s");
    int64_t elapsed = crdt_now_ms() - t0;
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 1,
                 "the lock must outlive its %d ms lease (%" PRId64 " ms)", 900, elapsed);
    t = crdt_pttl(f.r, f.key);
    cr_assert(t > 0 && t <= 900, "renewed PTTL %lld", t);
    int64_t v = 0;
    cr_assert_eq(crd_lock_validity_ms(f.la, &v), CRD_OK);
    cr_assert(v > 0 && v <= 900);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);
    crdt_fixture_close(&f);
    crdt_tracelog_free(tl);
}

Test(lock, extend_sets_a_new_ttl_for_the_holder_only)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "L", crdt_lock);

    cr_assert_eq(crd_lock_extend(f.la, 5000), CRD_NOT_OWNER);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 1000), CRD_OK);
    crdt_assert_extended(&f, 20000, 1000);
    cr_assert_eq(crd_lock_extend(f.lb, 20000), CRD_NOT_OWNER);

    /* The field is gone (force-unlocked): extend reports the loss. */
    cr_assert_eq(crd_lock_force_unlock(f.lb, NULL), CRD_OK);
    cr_assert_eq(crd_lock_extend(f.la, 20000), CRD_LOCK_LOST);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0, "extend never creates the key");
    crdt_fixture_close(&f);
}

Test(lock, every_invalid_argument_is_rejected_without_a_crash)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "L", crdt_lock);
    crd_lock *out = NULL;

    cr_assert_eq(crd_options_init(NULL), CRD_INVALID_ARGUMENT);
    crd_options o;
    crdt_options(&o);
    cr_assert_eq(crd_client_new(&o, NULL), CRD_INVALID_ARGUMENT);

    cr_assert_eq(crd_lock_new(NULL, f.key, &out), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_new(f.a, NULL, &out), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_new(f.a, f.key, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_new(f.a, "", &out), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_new_n(f.a, NULL, 3, &out), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_new_n(f.a, "abc", 0, &out), CRD_INVALID_ARGUMENT);
    cr_assert_null(out);

    uint64_t me = crd_owner_current();
    cr_assert_eq(crd_lock_acquire(NULL, 0, 1000), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_acquire_owner(NULL, me, 0, 1000), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_acquire_owner(f.la, 0, 0, 1000), CRD_INVALID_ARGUMENT, "owner id 0");
    const int64_t bad_times[] = {-2, -1000, INT64_MIN, CRD_DURATION_MAX_MS + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof bad_times / sizeof bad_times[0]; i++) {
        cr_assert_eq(crd_lock_acquire(f.la, bad_times[i], 1000), CRD_INVALID_ARGUMENT,
                     "wait %" PRId64, bad_times[i]);
        cr_assert_eq(crd_lock_acquire(f.la, 0, bad_times[i]), CRD_INVALID_ARGUMENT,
                     "lease %" PRId64, bad_times[i]);
        cr_assert_str_neq(crd_client_errmsg(f.a), "");
    }
    cr_assert_eq(crd_lock_release(NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_release_owner(NULL, me), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_release_owner(f.la, 0), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_force_unlock(NULL, NULL), CRD_INVALID_ARGUMENT);

    bool b;
    int64_t v;
    cr_assert_eq(crd_lock_is_locked(NULL, &b), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_is_locked(f.la, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_is_held(NULL, &b), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_is_held(f.la, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_is_held_owner(f.la, me, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_hold_count(NULL, &v), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_hold_count(f.la, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_hold_count_owner(f.la, me, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_remaining_ttl(NULL, &v), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_remaining_ttl(f.la, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_validity_ms(NULL, &v), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_validity_ms(f.la, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_validity_ms_owner(f.la, me, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_extend(NULL, 1000), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_extend(f.la, -5), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_extend(f.la, CRD_DURATION_MAX_MS + 1), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_extend_owner(NULL, me, 1000), CRD_INVALID_ARGUMENT);
    int res = 7;
    cr_assert_eq(crd_lock_run(NULL, 0, 1000, NULL, NULL, &res), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_run(f.la, 0, 1000, NULL, NULL, &res), CRD_INVALID_ARGUMENT);
    cr_assert_eq(res, 7);

    /* NULL is accepted by every _free and by errmsg; nothing reached Redis. */
    crd_lock_free(NULL);
    crd_client_free(NULL);
    cr_assert_not_null(crd_client_errmsg(NULL));
    cr_assert_not_null(crd_version());
    cr_assert_str_eq(crd_version(), CRD_VERSION_STRING);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);

    crdt_fixture_close(&f);
}

Test(lock, names_are_checked_when_the_handle_is_created)
{
    crd_client *c = crdt_client();
    crd_lock *out = NULL;
    char *big = malloc(CRD_NAME_MAX + 2);
    cr_assert_not_null(big);
    memset(big, 'n', CRD_NAME_MAX + 1);
    big[CRD_NAME_MAX + 1] = '\0';
    cr_assert_eq(crd_lock_new(c, big, &out), CRD_INVALID_ARGUMENT, "CRD_NAME_MAX + 1 bytes");
    big[CRD_NAME_MAX] = '\0';
    cr_assert_eq(crd_lock_new(c, big, &out), CRD_OK, "exactly CRD_NAME_MAX bytes is accepted");
    crd_lock_free(out);
    out = NULL;
    /* a binary name with a NUL inside is one name of its own */
    crd_lock *bin = NULL;
    cr_assert_eq(crd_lock_new_n(c, "ab\0cd", 5, &bin), CRD_OK);
    size_t len = 0;
    const char *nm = crd_lock_name(bin, &len);
    cr_assert_eq(len, 5);
    cr_assert_eq(memcmp(nm, "ab\0cd", 5), 0);
    crd_lock_free(bin);
    free(big);
    crd_client_free(c);
}

struct run_ctx {
    redisContext *r;
    const char *key;
    char field[96];
    bool ran;
    bool held_inside;
    bool wait_for_expiry;
};

static int run_fn(void *arg)
{
    struct run_ctx *x = arg;
    x->ran = true;
    redisReply *rep = crdt_cmd(x->r, "HEXISTS %s %s", x->key, x->field);
    x->held_inside = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    if (x->wait_for_expiry) {
        crdt_await_exists(x->r, x->key, false, 3000);
    }
    return 42;
}

Test(lock, lock_run_runs_the_function_under_the_lock_and_reports_both_results)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "L", crdt_lock);
    crd_client *other = crdt_client();
    crd_lock *lo = crdt_lock(other, f.key);

    struct run_ctx x = {.r = f.r, .key = f.key};
    crdt_owner_field(f.a, crd_owner_current(), x.field, sizeof x.field);
    int res = 0;
    cr_assert_eq(crd_lock_run(f.la, 0, 10000, run_fn, &x, &res), CRD_OK);
    cr_assert(x.ran);
    cr_assert(x.held_inside, "fn must run while the caller's owner holds the lock");
    cr_assert_eq(res, 42);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0, "released after fn");

    /* fn_result may be NULL */
    x.ran = false;
    cr_assert_eq(crd_lock_run(f.la, 0, 10000, run_fn, &x, NULL), CRD_OK);
    cr_assert(x.ran);

    /* Held elsewhere: the acquire's status, fn not run, result untouched. */
    cr_assert_eq(crd_lock_acquire(lo, 0, 10000), CRD_OK);
    x.ran = false;
    res = -1;
    cr_assert_eq(crd_lock_run(f.la, 0, 10000, run_fn, &x, &res), CRD_BUSY);
    cr_assert_not(x.ran);
    cr_assert_eq(res, -1);
    cr_assert_eq(crd_lock_run(f.la, 200, 10000, run_fn, &x, &res), CRD_TIMEOUT);
    cr_assert_not(x.ran);
    cr_assert_eq(crd_lock_release(lo), CRD_OK);

    /* The lease runs out while fn runs: fn's result and CRD_LOCK_LOST. */
    x.ran = false;
    x.wait_for_expiry = true;
    cr_assert_eq(crd_lock_run(f.la, 0, 150, run_fn, &x, &res), CRD_LOCK_LOST);
    cr_assert(x.ran);
    cr_assert_eq(res, 42);

    crdt_fixture_close(&f);
    crd_lock_free(lo);
    crd_client_free(other);
}

struct fork_ctx {
    crd_client *inherited;
    crd_lock *lock;
    const char *key;
    const char *parent_uuid;
};

static int fork_child(void *arg)
{
    struct fork_ctx *x = arg;
    if (CRDT_FORK_CHILD_LIMITED)
        return 0; /* the child's first command starts threads and allocates (harness.h) */
    if (crd_lock_release(x->lock) == CRD_OK)
        return 1; /* the child released the parent's hold */
    if (crd_lock_acquire(x->lock, 0, 1000) == CRD_OK)
        return 2;
    crd_client *c = NULL;
    crd_options o;
    crdt_options_plain(&o, atoi(getenv("CRDT_REDIS_PORT")));
    if (crd_client_new(&o, &c) != CRD_OK)
        return 3;
    if (strcmp(crd_client_id(c), x->parent_uuid) == 0)
        return 4;
    crd_lock *l = NULL;
    if (crd_lock_new(c, x->key, &l) != CRD_OK)
        return 5;
    crd_status st = crd_lock_acquire(l, 0, 1000);
    crd_lock_free(l);
    crd_client_free(c);
    return st == CRD_BUSY ? 0 : 6;
}

Test(lock, a_forked_child_cannot_use_or_release_the_parents_hold)
{
    crd_client *c = crdt_client();
    const char *key = crdt_key("L");
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, 20000), CRD_OK);
    char field[96];
    crdt_owner_field(c, crd_owner_current(), field, sizeof field);

    char parent_uuid[64];
    snprintf(parent_uuid, sizeof parent_uuid, "%s", crd_client_id(c));
    struct fork_ctx x = {c, l, key, parent_uuid};
    pid_t pid = crdt_fork(fork_child, &x);
    int rc = crdt_wait_child(pid, 10000);
    cr_assert_eq(rc, 0, "child failed at check %d", rc);
    redisContext *r = crdt_redis(); /* opened after the fork: the child inherits no copy */

    cr_assert_eq(crdt_hget_int(r, key, field), 1, "the parent's hold survives the child");
    cr_assert_eq(crd_lock_release(l), CRD_OK, "the parent's client still works");
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
}

Test(lock, strerror_gives_distinct_text_for_every_status)
{
    const crd_status all[] = {CRD_OK,        CRD_BUSY,     CRD_TIMEOUT,
                              CRD_NOT_OWNER, CRD_LOCK_LOST, CRD_INVALID_ARGUMENT,
                              CRD_IO,        CRD_PROTOCOL, CRD_SERVER,
                              CRD_NO_MEMORY, CRD_CLOSED,   CRD_AUTH,
                              CRD_DEADLOCK,  CRD_FORKED};
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = crd_strerror(all[i]);
        cr_assert_not_null(s);
        cr_assert_neq(s[0], '\0');
        cr_assert_str_neq(s, "unknown status", "status %d has no text", (int)all[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(s, crd_strerror(all[j]), "statuses %d and %d share text",
                              (int)all[i], (int)all[j]);
    }
    cr_assert_str_eq(crd_strerror((crd_status)999), "unknown status");
    cr_assert_str_eq(crd_strerror((crd_status)-1), "unknown status");
}
