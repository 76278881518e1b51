/*
 * test_latch.c -- RCountDownLatch (issue 27) against a real redis-server: the key and
 * messages Redisson keeps, waiters across threads and processes released by the last
 * count-down, deadlines, a delete while waiting (credisson's waiters re-check and
 * return; Redisson's sleep on), lost replies and bad input. The last test runs the three
 * synchronizers on a 3-primary cluster: sharded wake-ups on every primary, and the
 * refusal of a latch name whose channel hashes to another slot than its key.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "faultproxy.h"
#include "harness.h"
#include "syncs.h"
#include "waiters.h"

/* The fixture of most tests: a latch named for the test, with two clients (la, lb) and a
 * raw connection, or one client through a fault proxy (a lost reply); closed after the
 * test. */
static crdt_sync_fixture f;
static void latch_open(void) { crdt_sync_open(&f, CRDT_SYNC_LATCH, "cdl"); }
static void proxied_latch_open(void) { crdt_sync_open_proxied(&f, CRDT_SYNC_LATCH, "lost"); }
static void sync_close(void) { crdt_sync_close(&f); }

Test(latch, try_set_count_and_count_down_keep_redissons_key_and_messages,
     .init = latch_open, .fini = sync_close)
{
    crdt_watch w;
    crdt_watch_open(&w, f.channel, false);
    int64_t n = -1;
    CRDT_OK(f.a, crd_latch_count(f.la, &n));
    cr_assert_eq(n, 0);
    CRDT_OK(f.a, crd_latch_await(f.la, 0));
    bool set = false;
    CRDT_OK(f.a, crd_latch_try_set_count(f.la, 2, &set));
    cr_assert(set);
    CRDT_OK(f.a, crd_latch_try_set_count(f.la, 5, &set));
    cr_assert_not(set, "an existing latch keeps its count");
    cr_assert_eq(crdt_reply_int(crdt_cmd(f.r, "GET %s", f.name)), 2, "nothing changed");
    cr_assert_eq(crd_latch_await(f.la, 0), CRD_BUSY);
    CRDT_OK(f.a, crd_latch_count_down(f.la));
    CRDT_OK(f.a, crd_latch_count(f.la, &n));
    cr_assert_eq(n, 1);
    CRDT_OK(f.a, crd_latch_count_down(f.la));
    cr_assert_eq(crdt_exists(f.r, f.name), 0, "deleted at zero");
    CRDT_OK(f.a, crd_latch_await(f.la, 0));
    CRDT_OK(f.a, crd_latch_count_down(f.la)); /* on a missing latch: nothing */
    cr_assert_eq(crdt_exists(f.r, f.name), 0);
    bool deleted = true;
    CRDT_OK(f.a, crd_latch_delete(f.la, &deleted));
    cr_assert_not(deleted);
    crdt_msg m[8];
    int k = crdt_watch_collect(&w, m, 8);
    cr_assert_eq(k, 2, "try-set publishes 1, the count-down to zero 0; got %d", k);
    cr_assert_str_eq(m[0].payload, "1");
    cr_assert_str_eq(m[1].payload, "0");
    crdt_watch_close(&w);
}

Test(latch, an_await_times_out_at_its_deadline_after_one_last_read)
{
    crd_options o;
    crdt_tracelog *tl = crdt_traced_options(&o);
    crdt_sync_fixture t;
    crdt_sync_open_opts(&t, CRDT_SYNC_LATCH, "timeout", 1, &o);
    CRDT_OK(t.a, crd_latch_try_set_count(t.la, 1, NULL));
    size_t from = crdt_tracelog_count(tl);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_latch_await(t.la, 300), CRD_TIMEOUT);
    int64_t took = crdt_now_ms() - t0;
    cr_assert(took >= 300 && took < 2000, "took %lld ms", (long long)took);
    cr_assert_eq(crdt_tracelog_count_cmd(tl, from, "GET", 0), 3,
                 "GET, SUBSCRIBE, GET, (the wait), GET: as Redisson");
    crdt_sync_close(&t);
    crdt_tracelog_free(tl);
}

Test(latch, a_delete_while_waiting_ends_the_wait_at_once, .init = latch_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_latch_try_set_count(f.la, 3, NULL));
    crdt_sync_waiter w = {.l = f.lb, .wait_ms = 20000};
    crdt_sync_waiter_start(&w);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000));
    cr_assert_not(crdt_gate_wait(&w.done, 1, 200));
    int64_t t0 = crdt_now_ms();
    bool deleted = false;
    CRDT_OK(f.a, crd_latch_delete(f.la, &deleted));
    cr_assert(deleted);
    crdt_sync_waiter_woken(&w, t0, 2000, "the await, re-checked on the delete's message");
}

/* 8 waiters (4 threads of one client, 4 processes) released by the last count-down. */
typedef struct fleet {
    const char *name, *ready, *go;
    int port;
} fleet;

/* A child process: forked before the test's process starts a thread (ThreadSanitizer
 * cannot follow a fork of a threaded process); it starts when the go list says so (the
 * count is set by then). */
static int fleet_child(void *arg)
{
    const fleet *fl = arg;
    redisContext *r = crdt_raw_connect(fl->port, 10000);
    if (r == NULL)
        return 5;
    if (!crdt_await_go(r, fl->go))
        return 7;
    crd_client *c = crdt_plain_client(fl->port);
    crd_latch *l = NULL;
    if (c == NULL || crd_latch_new(c, fl->name, &l) != CRD_OK)
        return 2;
    crdt_reply_int(redisCommand(r, "INCR %s", fl->ready));
    crd_status st = crd_latch_await(l, 30000);
    crd_latch_free(l);
    crd_client_free(c);
    redisFree(r);
    return st == CRD_OK ? 0 : 3;
}

typedef struct fleet_ready {
    redisContext *r;
    const fleet *f;
    const char *channel;
} fleet_ready;

/* Every process has announced itself and 5 clients (4 children + b) are subscribed. */
static bool fleet_is_ready(void *arg)
{
    fleet_ready *fr = arg;
    return crdt_reply_int(crdt_cmd(fr->r, "GET %s", fr->f->ready)) >= 4 &&
           crdt_numsub(fr->r, fr->channel) >= 5;
}

Test(latch, eight_waiters_across_processes_are_released_by_the_last_count_down, .timeout = 90)
{
    fleet fl = {crdt_key("fleet"), crdt_key("ready"), crdt_key("go"), crdt_port()};
    pid_t kids[4];
    for (int i = 0; i < 4; i++)
        kids[i] = crdt_fork(fleet_child, &fl);
    /* The fleet's name, made before the fork, on a fixture's two clients. */
    crdt_sync_fixture x = {.a = crdt_client(), .b = crdt_client(), .r = crdt_redis(),
                           .name = fl.name};
    crdt_sync_handles(&x, CRDT_SYNC_LATCH);
    CRDT_OK(x.a, crd_latch_try_set_count(x.la, 3, NULL));
    freeReplyObject(crdt_cmd(x.r, "RPUSH %s 1 1 1 1", fl.go));
    crdt_sync_waiter w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (crdt_sync_waiter){.l = x.lb, .wait_ms = 30000};
        crdt_sync_waiter_start(&w[i]);
    }
    fleet_ready ready = {x.r, &fl, x.channel};
    cr_assert(crdt_wait_until(fleet_is_ready, &ready, 20000), "the processes never got ready");
    cr_assert_eq(crdt_numsub(x.r, x.channel), 5, "4 processes and one shared subscription");
    CRDT_OK(x.a, crd_latch_count_down(x.la));
    CRDT_OK(x.a, crd_latch_count_down(x.la));
    for (int i = 0; i < 4; i++)
        cr_assert_not(crdt_gate_wait(&w[i].done, 1, i == 0 ? 200 : 0), "count 1: still waiting");
    int64_t t0 = crdt_now_ms();
    CRDT_OK(x.a, crd_latch_count_down(x.la));
    for (int i = 0; i < 4; i++)
        crdt_sync_waiter_woken(&w[i], t0, 3000, "a local await");
    int codes[4], ok = 0;
    for (int i = 0; i < 4; i++)
        ok += (codes[i] = crdt_wait_child(kids[i], 60000)) == 0;
    cr_assert_eq(ok, 4, "children: %d %d %d %d", codes[0], codes[1], codes[2], codes[3]);
    crdt_sync_close(&x);
}

Test(latch, bad_input_is_refused_with_a_status_and_changes_nothing,
     .init = latch_open, .fini = sync_close)
{
    freeReplyObject(crdt_cmd(f.r, "HSET %s f v", f.name));
    crd_status st = crd_latch_count_down(f.la);
    cr_assert_eq(st, CRD_SERVER, "%s", crd_strerror(st));
    cr_assert(strstr(crd_client_errmsg(f.a), "WRONGTYPE") != NULL, "%s", crd_client_errmsg(f.a));
    cr_assert_eq(crd_latch_await(f.la, 0), CRD_SERVER);
    int64_t n;
    cr_assert_eq(crd_latch_count(f.la, &n), CRD_SERVER);
    bool set = true;
    CRDT_OK(f.a, crd_latch_try_set_count(f.la, 2, &set));
    cr_assert_not(set, "the name exists: not set");
    cr_assert_eq(crdt_cmd_int(f.r, "HLEN %s", f.name), 1, "the hash is untouched");
    cr_assert_eq(crd_latch_try_set_count(f.la, 0, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_latch_try_set_count(f.la, -3, NULL), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_latch_await(f.la, -2), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_latch_count_down(NULL), CRD_INVALID_ARGUMENT);
    crd_latch *x = NULL;
    cr_assert_eq(crd_latch_new(f.a, NULL, &x), CRD_INVALID_ARGUMENT);
    cr_assert_null(x);
    /* A braced name works on a single server (golden cdl_d). */
    crd_latch *braced = crdt_latch_of(f.a, "crdt-latch{1}");
    CRDT_OK(f.a, crd_latch_try_set_count(braced, 1, NULL));
    CRDT_OK(f.a, crd_latch_count_down(braced));
    crd_latch_free(braced);
}

Test(latch, a_count_down_whose_reply_is_lost_is_an_unknown_outcome_and_is_not_resent,
     .init = proxied_latch_open, .fini = sync_close)
{
    CRDT_OK(f.a, crd_latch_try_set_count(f.la, 6, NULL));
    CRDT_OK(f.a, crd_latch_count_down(f.la)); /* the script is cached: the lost one runs at once */
    int rule = crdt_proxy_arm(f.p, f.name, NULL, CRDT_PROXY_EXECUTE_THEN_CLOSE, 0);
    crd_status st = crd_latch_count_down(f.la);
    cr_assert(crdt_proxy_fired(f.p, rule));
    cr_assert_eq(st, CRD_OUTCOME_UNKNOWN, "%s: %s", crd_strerror(st), crd_client_errmsg(f.a));
    cr_assert_eq(crdt_reply_int(crdt_cmd(f.r, "GET %s", f.name)), 4, "counted once");
}

/* ---- cluster --------------------------------------------------------------------------- */

static void wait_for(crdt_sync_waiter *w, redisContext *owner, const char *channel)
{
    crdt_sync_waiter_start(w);
    crdt_probe sub = {.r = owner, .name = channel};
    cr_assert(crdt_wait_until(crdt_cluster_shard_subscribed, &sub, 10000),
              "never SSUBSCRIBEd at the slot's primary: %s", channel);
    cr_assert_eq(crdt_cluster_shard_subscribers(owner, channel), 1,
                 "one subscriber at the slot's primary: %s", channel);
}

static void woken(crdt_sync_waiter *w)
{
    crdt_sync_waiter_join(w, 5000, "woken by the smessage");
    cr_assert_eq(w->st, CRD_OK, "%s", crd_strerror(w->st));
}

/* A synchronizer of kind on primary p's slot (named "sem", "pes" or "cdl" there): b's
 * thread blocks on it, SSUBSCRIBEd at that primary, and a's release or count-down wakes
 * it by the sharded message. */
static void sharded_wake(crdt_cluster *on, int p, redisContext *owner, crd_client *a,
                         crd_client *b, crdt_sync_kind kind)
{
    static const char *const tags[] = {"sem", "pes", "cdl"};
    crdt_sync_fixture s = {.a = a, .b = b, .name = crdt_cluster_name_on(on, p, tags[kind])};
    crdt_sync_handles(&s, kind);
    char id[CRD_PERMIT_ID_SIZE];
    /* One permit (a latch's await takes none); the lease is the permit semaphore's. */
    crdt_sync_waiter w = {.permits = 1, .wait_ms = 20000, .lease_ms = 5000};
    switch (kind) {
    case CRDT_SYNC_SEMAPHORE:
        CRDT_OK(a, crd_semaphore_try_set_permits(s.sa, 0, 0, NULL));
        w.s = s.sb;
        break;
    case CRDT_SYNC_PERMIT_SEMAPHORE:
        CRDT_OK(a, crd_permit_semaphore_try_set_permits(s.pa, 1, NULL));
        CRDT_OK(a, crd_permit_semaphore_acquire(s.pa, 0, 60000, id));
        w.ps = s.pb;
        break;
    case CRDT_SYNC_LATCH:
        CRDT_OK(a, crd_latch_try_set_count(s.la, 1, NULL));
        w.l = s.lb;
        break;
    }
    wait_for(&w, owner, s.channel);
    switch (kind) {
    case CRDT_SYNC_SEMAPHORE:
        CRDT_OK(a, crd_semaphore_release(s.sa, 1));
        break;
    case CRDT_SYNC_PERMIT_SEMAPHORE:
        CRDT_OK(a, crd_permit_semaphore_release(s.pa, id));
        break;
    case CRDT_SYNC_LATCH:
        CRDT_OK(a, crd_latch_count_down(s.la));
        break;
    }
    woken(&w);
    crdt_sync_handles_free(&s);
}

/* The last test's cluster: 3 primaries, started before it and stopped after it. */
static crdt_cluster cl;
static void cluster_up(void) { crdt_cluster_start(&cl, 3, 0); }
static void cluster_down(void) { crdt_cluster_stop(&cl); }

Test(latch, on_a_cluster_all_three_wake_by_sharded_messages_and_a_cross_slot_latch_is_refused,
     .init = cluster_up, .fini = cluster_down, .timeout = 120)
{
    crd_options o;
    crdt_cluster_options(&cl, &o);
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    crd_client *a = crdt_client_opts(&o), *b = crdt_client_opts(&o);
    for (int p = 0; p < 3; p++) {
        redisContext *owner = crdt_cluster_redis(&cl, p);
        for (int k = CRDT_SYNC_SEMAPHORE; k <= CRDT_SYNC_LATCH; k++)
            sharded_wake(&cl, p, owner, a, b, (crdt_sync_kind)k);
        redisFree(owner);
    }
    cr_assert_not(crdt_tracelog_has(tl, 0, "SUBSCRIBE", NULL), "sharded only");
    cr_assert(crdt_tracelog_has(tl, 0, "EVALSHA", "SPUBLISH"));

    /* cdl{2}: key tag "2", channel tag "cdl{2": Redis would say CROSSSLOT. */
    crd_latch *bad = NULL;
    crd_status st = crd_latch_new(a, "cdl{2}", &bad);
    cr_assert_eq(st, CRD_INVALID_ARGUMENT, "%s", crd_strerror(st));
    cr_assert_null(bad);
    cr_assert(strstr(crd_client_errmsg(a), "CROSSSLOT") != NULL, "%s", crd_client_errmsg(a));
    crd_semaphore *braced = NULL;
    CRDT_OK(a, crd_semaphore_new(a, "sem{2}", &braced)); /* key and channel share the tag */
    CRDT_OK(a, crd_semaphore_try_set_permits(braced, 1, 0, NULL));
    CRDT_OK(a, crd_semaphore_acquire(braced, 1, 0));
    crd_semaphore_free(braced);
    crd_client_free(a);
    crd_client_free(b);
    crdt_tracelog_free(tl);
}
