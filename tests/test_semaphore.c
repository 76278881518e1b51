/*
 * test_semaphore.c -- RSemaphore and RPermitExpirableSemaphore (issue 27) against a real
 * redis-server: the keys and messages Redisson keeps (checked with a raw connection and
 * a channel watcher), exclusion across threads and processes, wake-ups by the channel
 * (a waiter returns long before its deadline once a release publishes), deadlines,
 * the lease of a permit ending without a message, lost replies (a fault proxy executes
 * the command and drops its reply), and bad input (status, message, nothing changed).
 * Golden parity with the Redisson recordings is test_golden_sync.c.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exclusion.h"
#include "faultproxy.h"
#include "harness.h"
#include "syncs.h"
#include "waiters.h"

static long long get_int(redisContext *r, const char *key)
{
    return crdt_reply_int(crdt_cmd(r, "GET %s", key));
}

/* The fixture of most tests: a semaphore or a permit semaphore named for the test, with
 * two clients (sa/sb, pa/pb) and a raw connection, or one client through a fault proxy
 * (the lost replies); closed after the test. */
static crdt_sync_fixture f;
static void semaphore_open(void) { crdt_sync_open(&f, CRDT_SYNC_SEMAPHORE, "sem"); }
static void permit_semaphore_open(void) { crdt_sync_open(&f, CRDT_SYNC_PERMIT_SEMAPHORE, "pes"); }
static void proxied_semaphore_open(void)
{
    crdt_sync_open_proxied(&f, CRDT_SYNC_SEMAPHORE, "lost");
}
static void sync_close(void) { crdt_sync_close(&f); }

/* ---- RSemaphore ------------------------------------------------------------------------- */

Test(semaphore, try_set_acquire_release_drain_keep_the_count_in_the_string_and_publish_it,
     .init = semaphore_open, .fini = sync_close)
{
    crdt_watch w;
    crdt_watch_open(&w, f.channel, false);

    cr_assert_eq(crd_semaphore_acquire(f.sa, 1, 0), CRD_BUSY, "no semaphore: nothing to take");
    int64_t n = -7;
    CRDT_OK(f.a, crd_semaphore_available(f.sa, &n));
    cr_assert_eq(n, 0);
    bool set = false;
    CRDT_OK(f.a, crd_semaphore_try_set_permits(f.sa, 3, 0, &set));
    cr_assert(set);
    CRDT_OK(f.a, crd_semaphore_try_set_permits(f.sa, 5, 0, &set));
    cr_assert_not(set, "a second try-set must not set");
    cr_assert_eq(get_int(f.r, f.name), 3);
    CRDT_OK(f.a, crd_semaphore_acquire(f.sa, 2, 0));
    cr_assert_eq(crd_semaphore_acquire(f.sa, 2, 0), CRD_BUSY);
    CRDT_OK(f.a, crd_semaphore_acquire(f.sa, 1, 0));
    cr_assert_eq(get_int(f.r, f.name), 0);
    CRDT_OK(f.a, crd_semaphore_release(f.sa, 3));
    cr_assert_eq(get_int(f.r, f.name), 3);
    CRDT_OK(f.a, crd_semaphore_drain(f.sa, &n));
    cr_assert_eq(n, 3);
    cr_assert_eq(get_int(f.r, f.name), 0);
    CRDT_OK(f.a, crd_semaphore_add_permits(f.sa, -2));
    CRDT_OK(f.a, crd_semaphore_available(f.sa, &n));
    cr_assert_eq(n, -2, "add with a negative amount goes below zero");

    crdt_msg m[8];
    int k = crdt_watch_collect(&w, m, 8);
    cr_assert_eq(k, 3, "try-set, release and add publish; got %d", k);
    cr_assert_str_eq(m[0].payload, "3");
    cr_assert_str_eq(m[1].payload, "3");
    cr_assert_str_eq(m[2].payload, "-2");
    crdt_watch_close(&w);
}

Test(semaphore, try_set_with_a_ttl_sets_px_and_acquire_keeps_it,
     .init = semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_semaphore_try_set_permits(f.sa, 2, 60000, NULL));
    long long ttl = crdt_pttl(f.r, f.name);
    cr_assert(ttl > 50000 && ttl <= 60000, "pttl %lld", ttl);
    CRDT_OK(f.a, crd_semaphore_acquire(f.sa, 1, 0));
    CRDT_OK(f.a, crd_semaphore_release(f.sa, 1));
    ttl = crdt_pttl(f.r, f.name);
    cr_assert(ttl > 50000 && ttl <= 60000, "acquire and release keep the TTL: pttl %lld", ttl);
}

Test(semaphore, a_blocked_acquire_is_woken_by_the_release_message_not_by_its_deadline,
     .init = semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_semaphore_try_set_permits(f.sa, 1, 0, NULL));
    CRDT_OK(f.a, crd_semaphore_acquire(f.sa, 1, 0));

    crdt_sync_waiter t = {.s = f.sb, .permits = 1, .wait_ms = 20000};
    crdt_sync_waiter_start(&t);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000), "the waiter subscribes");
    cr_assert_not(crdt_gate_wait(&t.done, 1, 200), "nothing to take yet");
    int64_t released = crdt_now_ms();
    CRDT_OK(f.a, crd_semaphore_release(f.sa, 1));
    crdt_sync_waiter_woken(&t, released, 2000, "the acquire");
    cr_assert_eq(get_int(f.r, f.name), 0);
    cr_assert(crdt_pubsub_channels_empty(f.channel), "the waiter unsubscribed");
}

Test(semaphore, try_acquire_with_a_wait_times_out_at_its_deadline_and_takes_nothing,
     .init = semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_semaphore_try_set_permits(f.sa, 1, 0, NULL));
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_semaphore_acquire(f.sa, 2, 300), CRD_TIMEOUT);
    int64_t took = crdt_now_ms() - t0;
    cr_assert(took >= 300 && took < 2000, "timed out after %lld ms", (long long)took);
    cr_assert_eq(get_int(f.r, f.name), 1, "nothing taken");
}

Test(semaphore, a_release_of_two_wakes_both_local_waiters_and_negative_counts_wake_none,
     .init = semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_semaphore_try_set_permits(f.sa, 0, 0, NULL));
    crdt_sync_waiter t1 = {.s = f.sb, .permits = 1, .wait_ms = 20000};
    crdt_sync_waiter t2 = {.s = f.sb, .permits = 1, .wait_ms = 20000};
    crdt_sync_waiter_start(&t1);
    crdt_sync_waiter_start(&t2);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000));
    cr_assert_eq(crdt_numsub(f.r, f.channel), 1, "two local waiters share one subscription");
    CRDT_OK(f.a, crd_semaphore_add_permits(f.sa, -1)); /* publishes -1: wakes nobody */
    cr_assert_not(crdt_gate_wait(&t1.done, 1, 200));
    cr_assert_eq(crdt_gate_value(&t2.done), 0);
    int64_t released = crdt_now_ms();
    CRDT_OK(f.a, crd_semaphore_release(f.sa, 3)); /* count 2: both may take one */
    crdt_sync_waiter_woken(&t1, released, 2000, "the first acquire");
    crdt_sync_waiter_woken(&t2, released, 2000, "the second acquire");
    cr_assert_eq(get_int(f.r, f.name), 0);
}

/* Exclusion: 4 threads of this process and 3 processes take one of 2 permits and check
 * that no more than 2 are inside (support/exclusion.h's checker); every permit comes
 * back. */
static void two_permits(crdt_ex *x, crd_client *c)
{
    bool set = false;
    if (x->kind == CRDT_EX_PERMIT_SEMAPHORE) {
        crd_permit_semaphore *ps = crdt_pes_of(c, x->key.lock);
        CRDT_OK(c, crd_permit_semaphore_try_set_permits(ps, 2, &set));
        crd_permit_semaphore_free(ps);
    } else {
        crd_semaphore *s = crdt_sem_of(c, x->key.lock);
        CRDT_OK(c, crd_semaphore_try_set_permits(s, 2, 0, &set));
        crd_semaphore_free(s);
    }
    cr_assert(set);
}

static void two_back(redisContext *r, const char *name)
{
    cr_assert_eq(get_int(r, name), 2, "every permit came back");
}

static void exclusion(crdt_ex_kind kind)
{
    crdt_ex x = {.tag = "semaphore", .kind = kind, .suffix = "excl", .prepare = two_permits,
                 .check = two_back, .permits = 2, .threads = 4, .procs = 3, .lease_ms = 20000,
                 .total = 7 * crdt_scaled_count(150, 20), .deadline_ms = 120000};
    crdt_ex_run(&x);
    crdt_ex_assert(&x);
}

Test(semaphore, two_permits_are_never_held_by_more_than_two_threads_and_processes, .timeout = 180)
{
    exclusion(CRDT_EX_SEMAPHORE);
}

Test(semaphore, expirable_two_permits_are_never_held_by_more_than_two_holders, .timeout = 180)
{
    exclusion(CRDT_EX_PERMIT_SEMAPHORE);
}

Test(semaphore, bad_input_is_refused_with_a_status_and_changes_nothing,
     .init = semaphore_open, .fini = sync_close)
{
    freeReplyObject(crdt_cmd(f.r, "HSET %s f v", f.name));
    crd_status st = crd_semaphore_acquire(f.sa, 1, 0);
    cr_assert_eq(st, CRD_SERVER, "%s", crd_strerror(st));
    cr_assert(strstr(crd_client_errmsg(f.a), "WRONGTYPE") != NULL, "%s", crd_client_errmsg(f.a));
    cr_assert_eq(crd_semaphore_release(f.sa, 1), CRD_SERVER);
    cr_assert_eq(crd_semaphore_add_permits(f.sa, 1), CRD_SERVER);
    cr_assert_eq(crd_semaphore_try_set_permits(f.sa, 1, 0, NULL), CRD_SERVER);
    char type[32];
    cr_assert_str_eq(crdt_cmd_str(f.r, type, sizeof type, "TYPE %s", f.name), "hash");
    cr_assert_eq(crdt_cmd_int(f.r, "HLEN %s", f.name), 1, "the hash is untouched");

    const char *good = crdt_key("good");
    crd_semaphore *g = crdt_sem_of(f.a, good);
    CRDT_OK(f.a, crd_semaphore_try_set_permits(g, 2, 0, NULL));
    cr_assert_eq(crd_semaphore_acquire(g, 0, 0), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_semaphore_acquire(g, -1, 0), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_semaphore_release(g, -2), CRD_INVALID_ARGUMENT);
    cr_assert(strstr(crd_client_errmsg(f.a), "-2") != NULL, "%s", crd_client_errmsg(f.a));
    cr_assert_eq(crd_semaphore_try_set_permits(g, -1, 0, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_semaphore_acquire(g, 1, -5), CRD_INVALID_ARGUMENT);
    cr_assert_eq(get_int(f.r, good), 2, "nothing changed");
    freeReplyObject(crdt_cmd(f.r, "SET %s abc", good));
    cr_assert_eq(crd_semaphore_acquire(g, 1, 0), CRD_SERVER, "a value that is not a number");
    int64_t n = 0;
    cr_assert_eq(crd_semaphore_available(g, &n), CRD_PROTOCOL);
    char v[16];
    cr_assert_str_eq(crdt_cmd_str(f.r, v, sizeof v, "GET %s", good), "abc");

    crd_semaphore *x = NULL;
    cr_assert_eq(crd_semaphore_new(f.a, "", &x), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_semaphore_new(f.a, "a}b", &x), CRD_INVALID_ARGUMENT);
    cr_assert_null(x);
    cr_assert_eq(crd_semaphore_acquire(NULL, 1, 0), CRD_INVALID_ARGUMENT);
    crd_semaphore_free(NULL);
    crd_semaphore_free(g);
}

/* A release whose reply is lost after Redis ran it: CRD_OUTCOME_UNKNOWN, never resent. */
Test(semaphore, a_release_whose_reply_is_lost_is_an_unknown_outcome_and_is_not_resent,
     .init = proxied_semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_semaphore_try_set_permits(f.sa, 1, 0, NULL));
    /* Each script once, so that the lost ones run at once (not NOSCRIPT, then EVAL). */
    CRDT_OK(f.a, crd_semaphore_acquire(f.sa, 1, 0));
    CRDT_OK(f.a, crd_semaphore_release(f.sa, 1));
    CRDT_OK(f.a, crd_semaphore_add_permits(f.sa, 0));
    CRDT_OK(f.a, crd_semaphore_acquire(f.sa, 1, 0));
    int rule = crdt_proxy_arm(f.p, f.name, NULL, CRDT_PROXY_EXECUTE_THEN_CLOSE, 0);
    crd_status st = crd_semaphore_release(f.sa, 1);
    cr_assert(crdt_proxy_fired(f.p, rule));
    cr_assert_eq(st, CRD_OUTCOME_UNKNOWN, "%s: %s", crd_strerror(st), crd_client_errmsg(f.a));
    cr_assert(strstr(crd_client_errmsg(f.a), "not resent") != NULL, "%s", crd_client_errmsg(f.a));
    cr_assert_eq(get_int(f.r, f.name), 1, "it ran exactly once");
    rule = crdt_proxy_arm(f.p, f.name, NULL, CRDT_PROXY_EXECUTE_THEN_CLOSE, 0);
    cr_assert_eq(crd_semaphore_add_permits(f.sa, 5), CRD_OUTCOME_UNKNOWN);
    cr_assert_eq(get_int(f.r, f.name), 6);
}

/* ---- RPermitExpirableSemaphore -------------------------------------------------------------- */

static bool is_hex32(const char *id)
{
    if (strlen(id) != 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    return true;
}

/* ZSCORE of a permit (its hex id decoded to the 16 bytes Redis keeps); -1 when absent. */
Test(semaphore, expirable_acquire_returns_an_id_kept_with_its_deadline_and_release_by_id,
     .init = permit_semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_permit_semaphore_try_set_permits(f.pa, 2, NULL));
    char a[CRD_PERMIT_ID_SIZE], b[CRD_PERMIT_ID_SIZE], x[CRD_PERMIT_ID_SIZE];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long before = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    CRDT_OK(f.a, crd_permit_semaphore_acquire(f.pa, 0, 10000, a));
    CRDT_OK(f.a, crd_permit_semaphore_acquire(f.pa, 0, CRD_PERMIT_NO_LEASE, b));
    cr_assert(is_hex32(a) && is_hex32(b) && strcmp(a, b) != 0, "%s %s", a, b);
    long long sa = crdt_permit_score(f.r, f.timeouts, a);
    cr_assert(sa >= before + 10000 && sa < before + 12000, "deadline %lld", sa);
    cr_assert_eq(crdt_permit_score(f.r, f.timeouts, b), 922337203685477LL);
    cr_assert_eq(crd_permit_semaphore_acquire(f.pa, 0, 1000, x), CRD_BUSY);
    int64_t n = -1;
    CRDT_OK(f.a, crd_permit_semaphore_available(f.pa, &n));
    cr_assert_eq(n, 0);
    CRDT_OK(f.a, crd_permit_semaphore_permits(f.pa, &n));
    cr_assert_eq(n, 2);
    CRDT_OK(f.a, crd_permit_semaphore_acquired(f.pa, &n));
    cr_assert_eq(n, 2);
    int64_t left = 0;
    CRDT_OK(f.a, crd_permit_semaphore_lease_left(f.pa, a, &left));
    cr_assert(left > 8000 && left <= 10000, "left %lld", (long long)left);
    CRDT_OK(f.a, crd_permit_semaphore_lease_left(f.pa, b, &left));
    cr_assert_eq(left, -1);
    CRDT_OK(f.a, crd_permit_semaphore_update_lease(f.pa, a, 20000));
    CRDT_OK(f.a, crd_permit_semaphore_lease_left(f.pa, a, &left));
    cr_assert(left > 18000 && left <= 20000, "left %lld", (long long)left);
    CRDT_OK(f.a, crd_permit_semaphore_release(f.pa, a));
    cr_assert_eq(crdt_permit_score(f.r, f.timeouts, a), -1);
    cr_assert_eq(get_int(f.r, f.name), 1);
    cr_assert_eq(crd_permit_semaphore_release(f.pa, a), CRD_NOT_OWNER, "released twice");
    cr_assert_eq(get_int(f.r, f.name), 1, "nothing changed");
    CRDT_OK(f.a, crd_permit_semaphore_release(f.pa, b));
    cr_assert_eq(crdt_exists(f.r, f.timeouts), 0);
    cr_assert_eq(get_int(f.r, f.name), 2);
}

Test(semaphore, expirable_unknown_and_malformed_ids_are_refused_and_change_nothing,
     .init = permit_semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_permit_semaphore_try_set_permits(f.pa, 3, NULL));
    char ids[2][CRD_PERMIT_ID_SIZE];
    CRDT_OK(f.a, crd_permit_semaphore_acquire_n(f.pa, 2, 0, 60000, ids));
    const char *unknown = "00112233445566778899aabbccddeeff";
    cr_assert_eq(crd_permit_semaphore_release(f.pa, unknown), CRD_NOT_OWNER);
    cr_assert(strstr(crd_client_errmsg(f.a), "not a permit") != NULL, "%s", crd_client_errmsg(f.a));
    cr_assert_eq(crd_permit_semaphore_release(f.pa, "xyz"), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_permit_semaphore_update_lease(f.pa, unknown, 1000), CRD_NOT_OWNER);
    int64_t left = 5;
    cr_assert_eq(crd_permit_semaphore_lease_left(f.pa, unknown, &left), CRD_NOT_OWNER);
    const char *mixed[2] = {ids[0], unknown};
    cr_assert_eq(crd_permit_semaphore_release_n(f.pa, mixed, 2), CRD_NOT_OWNER,
                 "all or nothing");
    cr_assert_neq(crdt_permit_score(f.r, f.timeouts, ids[0]), -1, "the good id was not released");
    const char *twice[2] = {ids[0], ids[0]};
    cr_assert_eq(crd_permit_semaphore_release_n(f.pa, twice, 2), CRD_INVALID_ARGUMENT);
    cr_assert_eq(get_int(f.r, f.name), 1, "nothing changed");
    cr_assert_eq(crd_permit_semaphore_acquire(f.pa, 0, 0, ids[0]), CRD_INVALID_ARGUMENT,
                 "a lease of 0");
    cr_assert_eq(crd_permit_semaphore_set_permits(f.pa, -1), CRD_INVALID_ARGUMENT);
    const char *both[2] = {ids[0], ids[1]};
    CRDT_OK(f.a, crd_permit_semaphore_release_n(f.pa, both, 2));
    cr_assert_eq(get_int(f.r, f.name), 3);
    /* setPermits moves the total; addPermits the available count. */
    CRDT_OK(f.a, crd_permit_semaphore_set_permits(f.pa, 5));
    cr_assert_eq(get_int(f.r, f.name), 5);
    CRDT_OK(f.a, crd_permit_semaphore_add_permits(f.pa, -6));
    cr_assert_eq(get_int(f.r, f.name), -1);
}

Test(semaphore, expirable_a_dead_holders_permit_is_reclaimed_at_its_lease_without_a_message,
     .init = permit_semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_permit_semaphore_try_set_permits(f.pa, 1, NULL));
    char dead[CRD_PERMIT_ID_SIZE];
    int64_t lease = crdt_scaled_ms(600);
    int64_t t0 = crdt_now_ms();
    CRDT_OK(f.a, crd_permit_semaphore_acquire(f.pa, 0, lease, dead)); /* never released */
    crdt_sync_waiter t = {.ps = f.pb, .permits = 1, .wait_ms = 20000, .lease_ms = 30000};
    crdt_sync_waiter_start(&t);
    crdt_sync_waiter_join(&t, 30000, "the acquire never returned");
    cr_assert_eq(t.st, CRD_OK, "%s", crd_strerror(t.st));
    int64_t at = t.t_end - t0;
    cr_assert(at >= lease - 50 && at < lease + 1500, "taken %lld ms after the dead holder's "
              "acquire (lease %lld)", (long long)at, (long long)lease);
    cr_assert_eq(crd_permit_semaphore_release(f.pa, dead), CRD_NOT_OWNER,
                 "the reclaimed permit is gone");
    CRDT_OK(f.b, crd_permit_semaphore_release(f.pb, t.ids[0]));
    cr_assert_eq(get_int(f.r, f.name), 1);
}

Test(semaphore, expirable_a_release_after_the_lease_gives_it_back_and_reports_lock_lost,
     .init = permit_semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_permit_semaphore_try_set_permits(f.pa, 1, NULL));
    char id[CRD_PERMIT_ID_SIZE];
    CRDT_OK(f.a, crd_permit_semaphore_acquire(f.pa, 0, 100, id));
    crdt_sleep_ms(250); /* the lease running out is what is tested */
    cr_assert_eq(crd_permit_semaphore_release(f.pa, id), CRD_LOCK_LOST);
    cr_assert_eq(get_int(f.r, f.name), 1, "given back all the same");
}

Test(semaphore, expirable_a_waiter_for_two_permits_is_woken_when_a_release_makes_two,
     .init = permit_semaphore_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_permit_semaphore_try_set_permits(f.pa, 3, NULL));
    char h1[CRD_PERMIT_ID_SIZE], h2[CRD_PERMIT_ID_SIZE];
    CRDT_OK(f.a, crd_permit_semaphore_acquire(f.pa, 0, 60000, h1));
    CRDT_OK(f.a, crd_permit_semaphore_acquire(f.pa, 0, 60000, h2));
    crdt_sync_waiter t = {.ps = f.pb, .permits = 2, .wait_ms = 20000, .lease_ms = 10000};
    crdt_sync_waiter_start(&t);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000));
    cr_assert_not(crdt_gate_wait(&t.done, 1, 200));
    int64_t released = crdt_now_ms();
    CRDT_OK(f.a, crd_permit_semaphore_release(f.pa, h1));
    crdt_sync_waiter_woken(&t, released, 2000, "the acquire of two");
    cr_assert(is_hex32(t.ids[0]) && is_hex32(t.ids[1]) && strcmp(t.ids[0], t.ids[1]) != 0);
    const char *both[2] = {t.ids[0], t.ids[1]};
    CRDT_OK(f.b, crd_permit_semaphore_release_n(f.pb, both, 2));
    CRDT_OK(f.a, crd_permit_semaphore_release(f.pa, h2));
    cr_assert_eq(get_int(f.r, f.name), 3);
}

Test(semaphore, expirable_an_acquire_whose_reply_is_lost_is_read_back_not_resent)
{
    crdt_lost_permit x;
    crdt_lost_permit_open(&x, "readback");
    char id[CRD_PERMIT_ID_SIZE];
    crd_status st = crd_permit_semaphore_acquire(x.f.pa, 5000, 60000, id);
    crdt_lost_permit_check(&x, st, id);
    crdt_sync_close(&x.f);
}

/* ---- freeing the client under blocked waiters ---------------------------------------- */

/* crd_client_free wakes a semaphore acquire, a permit acquire and a latch await that
 * sleep in it with CRD_CLOSED, and each ends its bookkeeping (metrics, the detail
 * string) before it lets the client go: under ASan and memcheck a touch after that is a
 * use after free. */
Test(semaphore, freeing_a_client_wakes_its_blocked_semaphore_permit_and_latch_waiters_with_closed)
{
    crd_client *c = crdt_client();
    crd_semaphore *sem = crdt_sem_of(c, crdt_key("sem"));
    crd_permit_semaphore *pes = crdt_pes_of(c, crdt_key("pes"));
    crd_latch *latch = crdt_latch_of(c, crdt_key("latch"));
    CRDT_OK(c, crd_semaphore_try_set_permits(sem, 0, 0, NULL));
    CRDT_OK(c, crd_permit_semaphore_try_set_permits(pes, 0, NULL));
    CRDT_OK(c, crd_latch_try_set_count(latch, 1, NULL));
    crdt_sync_waiter w[3] = {
        {.s = sem, .permits = 1, .wait_ms = CRD_WAIT_FOREVER},
        {.ps = pes, .permits = 1, .wait_ms = CRD_WAIT_FOREVER, .lease_ms = 10000},
        {.l = latch, .wait_ms = CRD_WAIT_FOREVER}};
    for (int i = 0; i < 3; i++)
        crdt_sync_waiter_start(&w[i]);
    cr_assert(crdt_await_waiting(c, 3, 10000), "the three waiters never slept");
    crd_client_free(c);
    for (int i = 0; i < 3; i++) {
        crdt_sync_waiter_join(&w[i], 30000, "a waiter did not return on the free");
        cr_assert_eq(w[i].st, CRD_CLOSED, "waiter %d: %s", i, crd_strerror(w[i].st));
    }
    crd_semaphore_free(sem);
    crd_permit_semaphore_free(pes);
    crd_latch_free(latch);
}
