/*
 * test_cluster.c -- credisson on a real Redis Cluster (3 primaries + 3 replicas on
 * loopback, started by tests/support/cluster.c for each test that needs one): routing
 * to every primary, sharded pub/sub wake-ups, fair and read-write locks, mutual
 * exclusion across processes, resharding and failover while locked, bad input, and
 * parity with Redisson's cluster recordings.
 *
 * CRDT_SERIAL_TEST: each test starts its own six servers; one test at a time.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "harness.h"
#include "waiters.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static crd_client *cluster_client(crdt_cluster *cl, crdt_tracelog *tl)
{
    crd_options o;
    crdt_cluster_options(cl, &o);
    if (tl != NULL)
        crdt_tracelog_attach(tl, &o);
    return crdt_client_opts(&o);
}

typedef struct blocked_pred {
    crdt_tracelog *tl;
    size_t from;
    const char *channel;
} blocked_pred;

/* The waiter subscribed (SSUBSCRIBE on the subscriber connection, on the expected
 * channel when given) and tried at least twice: it is blocked. */
static bool blocked_fn(void *arg)
{
    blocked_pred *p = arg;
    return crdt_tracelog_has(p->tl, p->from, "SSUBSCRIBE", p->channel) &&
           crdt_tracelog_count_scripts(p->tl, p->from) >= 2;
}

/* One holder (client a, lease 30 s) and one blocked waiter (client b, a waiter thread
 * that releases at once); the holder releases and the waiter must have it within ~1 s:
 * woken by an smessage, never by the 30 s TTL. Returns the wake-up latency in ms. */
static int64_t contend(crd_lock *held, crd_lock *waiting, crdt_tracelog *tla, crdt_tracelog *tlb,
                       const char *channel)
{
    cr_assert_eq(crd_lock_acquire(held, 0, 30000), CRD_OK);
    size_t from_a = crdt_tracelog_count(tla);
    blocked_pred bp = {tlb, crdt_tracelog_count(tlb), channel};
    crdt_waiter w = {.lock = waiting, .wait_ms = 20000, .lease_ms = 30000};
    crdt_waiter_start(&w);
    cr_assert(crdt_wait_until(blocked_fn, &bp, 5000), "the waiter never blocked on %s",
              channel != NULL ? channel : "its channel");
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(held), CRD_OK);
    cr_assert(crdt_tracelog_has(tla, from_a, "EVALSHA", "SPUBLISH") ||
                  crdt_tracelog_has(tla, from_a, "EVAL", "SPUBLISH"),
              "the unlock script was not given SPUBLISH");
    crdt_waiter_join(&w, 10000, "contention");
    cr_assert_eq(w.acquire_st, CRD_OK);
    int64_t lat = w.t_acq_ms - t0;
    cr_assert_lt(lat, 1000, "woken after %lld ms: not by the message", (long long)lat);
    return lat;
}

/* ---- routing, wake-ups and lock kinds on every primary --------------------------------------- */

Test(cluster, locks_on_every_primary_are_routed_reentered_and_woken_by_sharded_messages,
     .timeout = 90)
{
    crdt_cluster cl;
    int64_t t0 = crdt_now_ms();
    crdt_cluster_start(&cl, 3, 1);
    cr_log_info("cluster of 3 primaries + 3 replicas ready in %lld ms",
                (long long)(crdt_now_ms() - t0));
    /* The topology the harness built. */
    int served[CRDT_CLUSTER_MAX] = {0};
    for (int s = 0; s < 16384; s += 97)
        served[crdt_cluster_owner(&cl, s)]++;
    for (int i = 0; i < 6; i++)
        cr_expect((served[i] > 0) == (i < 3), "node %d serves %d sampled slots", i, served[i]);
    cr_expect_eq(crdt_cluster_keyslot(&cl, "foo"), 12182);

    crdt_tracelog *tla = crdt_tracelog_new(), *tlb = crdt_tracelog_new();
    crd_client *a = cluster_client(&cl, tla);
    crd_client *b = cluster_client(&cl, tlb);
    for (int p = 0; p < 3; p++) {
        const char *name = crdt_cluster_name_on(&cl, p, "rlock");
        redisContext *owner = crdt_cluster_redis(&cl, p);
        redisContext *other = crdt_cluster_redis(&cl, (p + 1) % 3);
        crd_lock *la = crdt_lock(a, name);
        crd_lock *lb = crdt_lock(b, name);
        /* acquire, re-enter, the hash lives on the slot's primary only */
        cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
        cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
        char field[128];
        crdt_owner_field(a, crd_owner_current(), field, sizeof field);
        cr_expect_eq(crdt_hget_int(owner, name, field), 2, "primary %d", p);
        redisReply *r = crdt_cmd(other, "EXISTS %s", name);
        cr_expect(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED", 5) == 0,
                  "another primary holds %s", name);
        freeReplyObject(r);
        cr_expect_eq(crd_lock_acquire(lb, 0, 30000), CRD_BUSY);
        cr_assert_eq(crd_lock_release(la), CRD_OK);
        cr_assert_eq(crd_lock_release(la), CRD_OK);
        cr_expect_eq(crdt_exists(owner, name), 0);
        /* contention: the waiter is woken by the unlock's smessage */
        char channel[400];
        snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
        int64_t lat = contend(la, lb, tla, tlb, channel);
        cr_log_info("primary %d: RLock waiter woken %lld ms after the release", p, (long long)lat);

        /* fair lock: the waiter listens on its own channel */
        crd_lock *fa, *fb;
        const char *fname = crdt_cluster_name_on(&cl, p, "fair");
        cr_assert_eq(crd_fair_lock_new(a, fname, &fa), CRD_OK);
        cr_assert_eq(crd_fair_lock_new(b, fname, &fb), CRD_OK);
        lat = contend(fa, fb, tla, tlb, NULL);
        cr_log_info("primary %d: fair waiter woken %lld ms after the release", p, (long long)lat);
        cr_expect_eq(crdt_exists(owner, fname), 0);
        crd_lock_free(fa);
        crd_lock_free(fb);

        /* read-write lock: a reader waits for the writer, woken by "1" */
        crd_rwlock *rwa, *rwb;
        const char *rwname = crdt_cluster_name_on(&cl, p, "rw");
        cr_assert_eq(crd_rwlock_new(a, rwname, &rwa), CRD_OK);
        cr_assert_eq(crd_rwlock_new(b, rwname, &rwb), CRD_OK);
        snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", rwname);
        lat = contend(crd_rwlock_write(rwa), crd_rwlock_read(rwb), tla, tlb, channel);
        cr_log_info("primary %d: reader woken %lld ms after the writer's release", p,
                    (long long)lat);
        crd_rwlock_free(rwa);
        crd_rwlock_free(rwb);

        crd_lock_free(la);
        crd_lock_free(lb);
        redisFree(owner);
        redisFree(other);
    }
    /* No classic SUBSCRIBE or PUBLISH anywhere: sharded only. */
    cr_expect(!crdt_tracelog_has(tlb, 0, "SUBSCRIBE", NULL));
    cr_expect(!crdt_tracelog_has(tla, 0, "EVALSHA", "PUBLISH"));
    crd_client_free(a);
    crd_client_free(b);
    crdt_tracelog_free(tla);
    crdt_tracelog_free(tlb);
    crdt_cluster_stop(&cl);
}
