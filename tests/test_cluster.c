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
#include <signal.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "standalone/events.h"
#include "failover.h"
#include "harness.h"
#include "procs.h"
#include "syncs.h"
#include "waiters.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* Measured figures, one line each (the report quotes them). */
#define say(...) (fprintf(stderr, "[cluster] " __VA_ARGS__), fputc('\n', stderr))

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
    say("cluster of 3 primaries + 3 replicas ready in %lld ms",
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
        say("primary %d: RLock waiter woken %lld ms after the release", p, (long long)lat);

        /* fair lock: the waiter listens on its own channel */
        crd_lock *fa, *fb;
        const char *fname = crdt_cluster_name_on(&cl, p, "fair");
        cr_assert_eq(crd_fair_lock_new(a, fname, &fa), CRD_OK);
        cr_assert_eq(crd_fair_lock_new(b, fname, &fb), CRD_OK);
        lat = contend(fa, fb, tla, tlb, NULL);
        say("primary %d: fair waiter woken %lld ms after the release", p, (long long)lat);
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
        say("primary %d: reader woken %lld ms after the writer's release", p,
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

/* ---- resharding and failover while locked ----------------------------------------------------- */

/* A crdt_probe (c, n, r, name): c's watchdog renewed since its count of renewals was n,
 * and name's TTL at node r (its new owner) is fresh. */
static bool renewed_fn(void *probe)
{
    const crdt_probe *p = probe;
    crd_metrics m;
    crd_client_metrics(p->c, &m, sizeof m);
    if (m.renewals <= (uint64_t)p->n)
        return false;
    redisReply *r = redisCommand(p->r, "PTTL %s", p->name);
    bool fresh = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer > 2000;
    if (r != NULL)
        freeReplyObject(r);
    return fresh;
}

typedef struct move_ctx {
    crd_lock *held, *renewed;
    crd_status reentry;
} move_ctx;

/* Called while the slot is half moved (one of the two lock hashes already at the
 * target): the re-entry of that one goes to the old owner, which answers ASK; the
 * client follows with ASKING. Both are re-entered. */
static void reenter_midway(void *arg)
{
    move_ctx *m = arg;
    m->reentry = crd_lock_acquire(m->held, 0, 30000);
    if (m->reentry == CRD_OK)
        m->reentry = crd_lock_acquire(m->renewed, 0, CRD_LEASE_WATCHDOG);
}

typedef struct scenario {
    crdt_cluster cl;
    crdt_events tw;
    crdt_tracelog *tla, *tlb;
    crd_client *a, *b;
    char held[300], renewed[300], channel[400];
    crd_lock *lh, *lr, *lw;
    crdt_waiter w;
    int64_t watchdog_ms; /* client a's watchdog_timeout_ms (0: 3000) */
} scenario;

/* Client a holds `held` (30 s lease) and `renewed` (watchdog, 3 s); client b waits on
 * `held`. Both names share the slot of a name on primary 0. */
static void scenario_start(scenario *sc, int replicas)
{
    crdt_cluster_start(&sc->cl, 3, replicas);
    sc->tla = crdt_tracelog_new();
    sc->tlb = crdt_tracelog_new();
    crd_options o;
    crdt_cluster_options(&sc->cl, &o);
    if (sc->watchdog_ms == 0)
        sc->watchdog_ms = 3000;
    o.watchdog_timeout_ms = sc->watchdog_ms;
    crdt_events_attach(&sc->tw, &o);
    crdt_tracelog_attach(sc->tla, &o);
    sc->a = crdt_client_opts(&o);
    crdt_cluster_options(&sc->cl, &o);
    crdt_tracelog_attach(sc->tlb, &o);
    sc->b = crdt_client_opts(&o);
    const char *base = crdt_cluster_name_on(&sc->cl, 0, "moved");
    snprintf(sc->held, sizeof sc->held, "{%s}:held", base);
    snprintf(sc->renewed, sizeof sc->renewed, "{%s}:renewed", base);
    snprintf(sc->channel, sizeof sc->channel, "redisson_lock__channel:{%s}:held", base);
    sc->lh = crdt_lock(sc->a, sc->held);
    sc->lr = crdt_lock(sc->a, sc->renewed);
    sc->lw = crdt_lock(sc->b, sc->held);
    cr_assert_eq(crd_lock_acquire(sc->lh, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(sc->lr, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    blocked_pred bp = {sc->tlb, crdt_tracelog_count(sc->tlb), sc->channel};
    sc->w = (crdt_waiter){.lock = sc->lw, .wait_ms = 25000, .lease_ms = 30000};
    crdt_waiter_start(&sc->w);
    cr_assert(crdt_wait_until(blocked_fn, &bp, 5000), "the waiter never blocked");
}

/* After the topology change: renewals reach the new owner, the holder's release follows
 * the slot, and the waiter is woken by the message (well inside the 30 s lease). */
static void scenario_finish(scenario *sc, int new_owner, const char *what)
{
    crd_metrics m;
    crd_client_metrics(sc->a, &m, sizeof m);
    redisContext *owner = crdt_cluster_redis(&sc->cl, new_owner);
    crdt_probe rp = {.r = owner, .c = sc->a, .name = sc->renewed, .n = (long long)m.renewals};
    int64_t t_renew = crdt_now_ms();
    /* two renewal periods, and the retries of a failed round */
    cr_assert(crdt_wait_until(renewed_fn, &rp, sc->watchdog_ms / 3 * 2 + 3000),
              "%s: renewals did not reach the new owner", what);
    t_renew = crdt_now_ms() - t_renew;
    cr_expect_eq(crdt_exists(owner, sc->held), 1, "%s: the held lock is not at the new owner",
                 what);
    /* The waiter resubscribed at the new owner (a second SSUBSCRIBE of its channel). */
    size_t subs = 0;
    for (size_t i = 0; i < crdt_tracelog_count(sc->tlb); i++) {
        crdt_trace_entry e;
        if (crdt_tracelog_get(sc->tlb, i, &e)) {
            subs += e.subscriber && strcasecmp(e.argv[0], "SSUBSCRIBE") == 0 &&
                    strcmp(e.argv[1], sc->channel) == 0;
            crdt_trace_entry_free(&e);
        }
    }
    int64_t t0 = crdt_now_ms();
    crd_status st;
    while ((st = crd_lock_release(sc->lh)) == CRD_OK) {
    } /* every hold, the re-entry made during a move included */
    cr_expect_eq(st, CRD_NOT_OWNER);
    if (!crdt_waiter_wait(&sc->w, CRDT_WAITER_DONE, 10000)) {
        /* What both clients sent and heard, for the one who reads the failure. */
        crdt_tracelog_dump(sc->tla, "holder (client a)");
        crdt_tracelog_dump(sc->tlb, "waiter (client b)");
    }
    crdt_waiter_join(&sc->w, 10000, what);
    cr_assert_eq(sc->w.acquire_st, CRD_OK, "%s: the waiter did not get the lock", what);
    int64_t lat = sc->w.t_acq_ms - t0;
    cr_assert_lt(lat, 1500, "%s: the waiter woke %lld ms after the release (not by a message)",
                 what, (long long)lat);
    /* The waiter's side is done (it released at once): its lock, client and trace go. */
    crd_lock_free(sc->lw);
    crd_client_free(sc->b);
    crdt_tracelog_free(sc->tlb);
    cr_assert_eq(crd_lock_release(sc->lr), CRD_OK, "%s: the renewed lock was lost", what);
    while (crd_lock_release(sc->lr) == CRD_OK) {
    }
    cr_expect_eq(atomic_load(&sc->tw.lost), 0, "%s: a lock was reported lost", what);
    say("%s: renewal at the new owner %lld ms after the change, waiter woken %lld ms "
                "after the release, %zu SSUBSCRIBEs of its channel, %d renewal-failing events",
                what, (long long)t_renew, (long long)lat, subs, atomic_load(&sc->tw.failing));
    redisFree(owner);
    crd_lock_free(sc->lh);
    crd_lock_free(sc->lr);
    crd_client_free(sc->a);
    crdt_tracelog_free(sc->tla);
    crdt_cluster_stop(&sc->cl);
}

Test(cluster, a_slot_moved_while_locked_takes_renewals_release_and_wake_ups_along, .timeout = 90)
{
    scenario sc;
    memset(&sc, 0, sizeof sc);
    scenario_start(&sc, 0);
    int slot = crdt_cluster_keyslot(&sc.cl, sc.held);
    move_ctx mc = {sc.lh, sc.lr, CRD_IO};
    int64_t t0 = crdt_now_ms();
    crdt_cluster_move_slot(&sc.cl, slot, 1, reenter_midway, &mc);
    say("resharding: slot %d moved to primary 1 in %lld ms", slot,
                (long long)(crdt_now_ms() - t0));
    cr_expect_eq(mc.reentry, CRD_OK, "the re-entry during the move (ASK) failed");
    cr_expect(crdt_tracelog_has(sc.tla, 0, "ASKING", NULL), "no ASKING was sent");
    scenario_finish(&sc, 1, "resharding");
}

/* A replica takes over from primary 0 (replace: crdt_cluster_failover or
 * crdt_cluster_kill_primary) while client a holds and client b waits; the holds reached
 * the replica before (WAIT), so nothing may be lost. watchdog_ms: 0 for the default. */
static void replaced_while_locked(int (*replace)(crdt_cluster *, int), int64_t watchdog_ms,
                                  const char *what)
{
    scenario sc;
    memset(&sc, 0, sizeof sc);
    sc.watchdog_ms = watchdog_ms;
    scenario_start(&sc, 1);
    redisContext *p0 = crdt_cluster_redis(&sc.cl, 0);
    cr_expect_eq(crdt_cmd_int(p0, "WAIT 1 2000"), 1);
    redisFree(p0);
    int64_t t0 = crdt_now_ms();
    int promoted = replace(&sc.cl, 0);
    say("%s: replica %d took over from primary 0 in %lld ms", what, promoted,
        (long long)(crdt_now_ms() - t0));
    scenario_finish(&sc, promoted, what);
}

Test(cluster, a_failover_while_locked_keeps_renewals_and_wake_ups, .timeout = 90)
{
    replaced_while_locked(crdt_cluster_failover, 0, "failover");
}

/* The cluster's own failover takes the node timeout (2 s) and an election (3.7 s in all
 * in CI): a 10 s lease (renewed every 3.3 s) must outlast it, as 30 s does by default in
 * production. */
Test(cluster, a_killed_primary_is_replaced_by_its_replica_and_renewals_and_wake_ups_follow,
     .timeout = 120)
{
    replaced_while_locked(crdt_cluster_kill_primary, crdt_scaled_ms(10000), "killed primary");
}

typedef struct cluster_nodes {
    crdt_cluster *cl;
    int old, promoted;
} cluster_nodes;

/* failover.h's view of the two primaries; the old one, a replica by now, reads its own
 * data after READONLY. */
static redisContext *cluster_node(void *arg, bool old)
{
    cluster_nodes *n = arg;
    redisContext *r = crdt_cluster_redis(n->cl, old ? n->old : n->promoted);
    if (old)
        freeReplyObject(redisCommand(r, "READONLY"));
    return r;
}

typedef struct loop_count {
    int done, ok;
    int failed; /* CRD_TIMEOUT or CRD_IO: the wait ran out on the stopped node */
    int64_t first_ok_ms;
    uint64_t ok_owner;
    crd_client *c;
    crd_lock *live;   /* the live node's */
    crd_status other; /* the live node's acquire's failure, and its detail */
    char msg[256];
} loop_count;

static void on_loop_done(void *user, crd_op *op, crd_status st)
{
    loop_count *lc = user;
    lc->done++;
    lc->failed += st == CRD_TIMEOUT || st == CRD_IO;
    if (st != CRD_OK && crd_op_lock(op) == lc->live) {
        lc->other = st;
        snprintf(lc->msg, sizeof lc->msg, "%s", crd_client_errmsg(lc->c));
    }
    if (st == CRD_OK && lc->ok++ == 0) {
        lc->first_ok_ms = crdt_now_ms();
        lc->ok_owner = crd_op_owner(op);
    }
}

/* A primary stops (SIGSTOP) and stays stopped until the cluster has promoted its replica.
 * Acquires made during the stall return by their 100 ms deadline (with a map refresh
 * due, which the refresher thread runs); the next one after the promotion follows
 * the slot to the new primary; when the old one resumes and runs what was left in its
 * socket buffers, the cluster turns it into a replica and the hold it took there is
 * gone with its data: nothing of an owner whose caller was told "failed" stays held. The
 * loop API keeps its deadlines too, and no dispatch call waits for the stopped node. */
Test(cluster, a_primary_stalled_until_its_replica_takes_over_keeps_every_deadline_and_no_hold,
     .timeout = 120)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 1);
    crd_options o;
    crdt_cluster_options(&cl, &o);
    o.command_timeout_ms = 5000; /* the health limit: longer than the stall's first part */
    crd_client *a = crdt_client_opts(&o);
    const char *name = crdt_cluster_name_on(&cl, 0, "stalled");
    crd_lock *l = crdt_lock(a, name);
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK); /* warm the cache and the map */
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    const int64_t slack = crdt_scaled_ms(50);
    /* A slot moved behind the client's back: its MOVED leaves the map stale, so the next
     * call finds a refresh due, and a refresh asks node 0 (the first slots') first. The
     * call must not be the one that waits for it (before: 5 s, command_timeout_ms). */
    const char *other = crdt_cluster_name_on(&cl, 1, "moved");
    crdt_cluster_move_slot(&cl, crdt_cluster_keyslot(&cl, other), 2, NULL, NULL);
    crd_lock *lo = crdt_lock(a, other);
    cr_assert_eq(crd_lock_acquire(lo, 0, 30000), CRD_OK, "%s", crd_client_errmsg(a));

    /* A second client, freed during the stall while a helper runs its acquire's step. */
    crd_client *a2 = crdt_client_opts(&o);
    crd_lock *l2 = crdt_lock(a2, name);
    cr_assert_eq(crd_lock_acquire(l2, 0, 30000), CRD_OK, "%s", crd_client_errmsg(a2));
    cr_assert_eq(crd_lock_release(l2), CRD_OK, "%s", crd_client_errmsg(a2));
    enum { N = 8 }; /* the loop's acquires: names taken while node 0 still answers */
    crd_lock *ll[N + 1];
    for (int i = 0; i <= N; i++)
        ll[i] = crdt_lock(a, crdt_cluster_name_on(&cl, i < N ? 0 : 1, "loopstall"));

    cr_assert_eq(kill(cl.node[0].pid, SIGSTOP), 0);
    int64_t t0 = crdt_now_ms(), took = 0;
    /* Three in a row: the second comes after the 100 ms between two refresh attempts. */
    for (int i = 0; i < 3; i++) {
        char what[32];
        snprintf(what, sizeof what, "acquire %d", i);
        int64_t this_one = crdt_stalled_acquire(a, l, slack, what);
        took = this_one > took ? this_one : took;
    }
    /* The loop API, same stall: eight acquires of 500 ms on distinct names of the stopped
     * node and one (of 5 s) on a live node, each through crd__call's hops on the loop's helper
     * threads. No dispatch call waits for the stopped node, the live one is not held up
     * by it, the others end by their deadline. */
    loop_count lc = {0, 0, 0, -1, 0, a, ll[N], CRD_OK, ""};
    int64_t t2 = crdt_now_ms();
    for (int i = 0; i <= N; i++) {
        cr_assert_eq(crd_lock_acquire_async(ll[i], crd_owner_new(), i < N ? 500 : 5000, 30000,
                                            on_loop_done, &lc, NULL), CRD_OK);
    }
    int64_t worst_us = crdt_loop_until(a, &lc.done, N + 1, 10000);
    int64_t loop_ms = crdt_now_ms() - t2;
    cr_assert_eq(lc.done, N + 1, "%d of %d loop acquires completed", lc.done, N + 1);
    cr_assert_eq(lc.ok, 1, "the live node's acquire: %d OK (%s, %s)", lc.ok,
                 crd_strerror(lc.other), lc.msg);
    cr_assert_eq(lc.failed, N, "every acquire on the stopped node ran out of its wait");
    /* Well before the stopped node's 500 ms (thread starts under TSan: 142 ms seen). */
    cr_assert(lc.first_ok_ms >= 0 && lc.first_ok_ms - t2 <= crdt_scaled_ms(250),
              "the live node's acquire completed after %lld ms", (long long)(lc.first_ok_ms - t2));
    cr_assert(loop_ms <= 500 + slack, "the 500 ms loop acquires completed after %lld ms",
              (long long)loop_ms);
    cr_assert_lt(worst_us, slack * 1000, "a dispatch call took %lld us", (long long)worst_us);
    cr_assert_eq(crd_lock_release_owner(ll[N], lc.ok_owner), CRD_OK, "%s",
                 crd_client_errmsg(a));
    /* The free waits for the step on the helper (its 1000 ms deadline) and then ends the
     * operation: its callback runs once, inside the free. */
    crdt_op_rec o2 = {0, CRD_OK};
    cr_assert_eq(crd_lock_acquire_async(l2, crd_owner_new(), 1000, 30000, crdt_op_rec_done, &o2,
                                        NULL),
                 CRD_OK);
    crd_loop_dispatch(a2); /* hands the attempt to a helper */
    int64_t tf = crdt_now_ms();
    crd_client_free(a2);
    int64_t free_ms = crdt_now_ms() - tf;
    cr_assert_eq(o2.done, 1, "the freed client's operation completed %d times", o2.done);
    cr_assert(o2.last == CRD_TIMEOUT || o2.last == CRD_IO || o2.last == CRD_CLOSED, "%s",
              crd_strerror(o2.last));
    cr_assert(free_ms <= 1000 + slack, "the free took %lld ms", (long long)free_ms);
    crd_lock_free(l2);

    int promoted = crdt_cluster_await_takeover(&cl, 0);
    int64_t promoted_ms = crdt_now_ms() - t0;
    /* The next acquire's first attempt may still go to the stopped node (the map read
     * before the takeover) and take one attempt's budget (command timeout + replica sync
     * timeout: 6 s); its 30 s wait covers that under memcheck too. */
    cluster_nodes nodes = {&cl, 0, promoted};
    int64_t found = crdt_failover_check(a, l, name, cl.node[0].pid, cluster_node, &nodes,
                                        "promotion");
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(a, &m, sizeof m), CRD_OK);
    say("stalled primary: three 100 ms acquires, the slowest back after %lld ms; %d loop "
        "acquires of 500 ms done after %lld ms, worst dispatch %lld us; a client freed with "
        "a step on a helper: %lld ms; replica %d promoted "
        "%lld ms after the stop; the next acquire took %lld ms; late holds given back %llu, "
        "outcomes unknown %llu", (long long)took, N + 1, (long long)loop_ms,
        (long long)worst_us, (long long)free_ms, promoted, (long long)promoted_ms, (long long)found,
        (unsigned long long)m.late_holds_released, (unsigned long long)m.outcomes_unknown);
    for (int i = 0; i <= N; i++)
        crd_lock_free(ll[i]);
    cr_assert_eq(crd_lock_release(lo), CRD_OK, "%s", crd_client_errmsg(a));
    crd_lock_free(lo);
    crd_lock_free(l);
    crd_client_free(a);
    crdt_cluster_stop(&cl);
}

/* Runs the loop until the operation is done; its status. The longest dispatch so far is
 * kept in *worst_us. */
static crd_status loop_result(crd_client *c, crdt_op_rec *o, int64_t *worst_us)
{
    int64_t w = crdt_loop_until(c, &o->done, 1, 15000);
    *worst_us = w > *worst_us ? w : *worst_us;
    cr_assert_eq(o->done, 1, "a loop operation did not complete in 15 s");
    return o->last;
}

/* Through a's loop: a semaphore acquire on primary 2's slot that waits for b's release,
 * or a latch await on primary 0's that waits for b's count-down; it completes CRD_OK once
 * woken, and not before. The longest dispatch so far is kept in *worst_us. */
static void loop_sync_woken(crdt_cluster *cl, crd_client *a, crd_client *b, crdt_sync_kind kind,
                            int64_t *worst_us)
{
    bool sem = kind == CRDT_SYNC_SEMAPHORE;
    crdt_sync_fixture f = {.a = a, .b = b,
                           .name = crdt_cluster_name_on(cl, sem ? 2 : 0,
                                                        sem ? "loopsem" : "looplatch")};
    crdt_sync_handles(&f, kind);
    crdt_op_rec o = {0, CRD_OK};
    if (sem) {
        CRDT_OK(b, crd_semaphore_try_set_permits(f.sb, 0, 0, NULL));
        CRDT_OK(a, crd_semaphore_acquire_async(f.sa, 1, 10000, crdt_op_rec_done, &o, NULL));
    } else {
        CRDT_OK(b, crd_latch_try_set_count(f.lb, 1, NULL));
        CRDT_OK(a, crd_latch_await_async(f.la, 10000, crdt_op_rec_done, &o, NULL));
    }
    int64_t w = crdt_loop_until(a, &o.done, 1, crdt_scaled_ms(200));
    *worst_us = w > *worst_us ? w : *worst_us;
    cr_assert_eq(o.done, 0, "the %s completed before its wake-up", sem ? "semaphore acquire" :
                 "latch await");
    if (sem)
        CRDT_OK(b, crd_semaphore_release(f.sb, 1));
    else
        CRDT_OK(b, crd_latch_count_down(f.lb));
    cr_assert_eq(loop_result(a, &o, worst_us), CRD_OK, "%s", crd_client_errmsg(a));
    crdt_sync_handles_free(&f);
}

/* In cluster mode every step of a loop operation goes through crd__call's hops on the
 * loop's helper threads: a wait woken by a release, an extend, a release, a fair waiter
 * cancelled (it leaves the queue from a helper, detached), a semaphore acquire woken by a
 * release, a latch await woken by its count-down. Each completes with the right status
 * and no dispatch call waits on Redis. */
Test(cluster, every_loop_operation_runs_through_the_helper_threads_of_a_cluster_client,
     .timeout = 90)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 0);
    crd_client *a = cluster_client(&cl, NULL), *b = cluster_client(&cl, NULL);
    int64_t worst = 0;
    const char *name = crdt_cluster_name_on(&cl, 0, "loopkinds");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    redisContext *r = crdt_cluster_redis_for_key(&cl, name);

    /* A wait, woken by b's release; then an extend and a release of that hold. */
    cr_assert_eq(crd_lock_acquire(lb, 0, 30000), CRD_OK);
    crdt_op_rec o = {0, CRD_OK};
    uint64_t owner = crd_owner_new();
    cr_assert_eq(crd_lock_acquire_async(la, owner, 10000, 5000, crdt_op_rec_done, &o, NULL),
                 CRD_OK);
    worst = crdt_loop_until(a, &o.done, 1, crdt_scaled_ms(200));
    cr_assert_eq(o.done, 0, "the loop acquire completed while b held the lock: %s",
                 crd_strerror(o.last));
    cr_assert_eq(crd_lock_release(lb), CRD_OK);
    cr_assert_eq(loop_result(a, &o, &worst), CRD_OK, "%s", crd_client_errmsg(a));
    o = (crdt_op_rec){0, CRD_OK};
    cr_assert_eq(crd_lock_extend_async(la, owner, 60000, crdt_op_rec_done, &o, NULL), CRD_OK);
    cr_assert_eq(loop_result(a, &o, &worst), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_gt(crdt_cmd_int(r, "PTTL %s", name), 30000, "the extend did not reach Redis");
    o = (crdt_op_rec){0, CRD_OK};
    cr_assert_eq(crd_lock_release_async(la, owner, crdt_op_rec_done, &o, NULL), CRD_OK);
    cr_assert_eq(loop_result(a, &o, &worst), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_eq(crdt_exists(r, name), 0, "the release did not reach Redis");
    redisFree(r);
    crd_lock_free(la);
    crd_lock_free(lb);

    /* A fair waiter cancelled: the loop hears CRD_CANCELLED, the queue loses it. */
    const char *fname = crdt_cluster_name_on(&cl, 1, "loopfair");
    crd_lock *fa = NULL, *fb = NULL;
    cr_assert_eq(crd_fair_lock_new(a, fname, &fa), CRD_OK);
    cr_assert_eq(crd_fair_lock_new(b, fname, &fb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(fb, 0, 30000), CRD_OK);
    char queue[256];
    snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", fname);
    r = crdt_cluster_redis_for_key(&cl, fname);
    o = (crdt_op_rec){0, CRD_OK};
    crd_op *op = NULL;
    cr_assert_eq(crd_lock_acquire_async(fa, crd_owner_new(), 10000, 5000, crdt_op_rec_done, &o,
                                        &op),
                 CRD_OK);
    for (int64_t t0 = crdt_now_ms();
         crdt_cmd_int(r, "LLEN %s", queue) != 1 && crdt_now_ms() - t0 < 5000;) {
        int64_t w = crdt_loop_until(a, &o.done, 1, 20);
        worst = w > worst ? w : worst;
    }
    cr_assert_eq(crdt_cmd_int(r, "LLEN %s", queue), 1,
                 "the loop's fair waiter never joined the queue");
    cr_assert_eq(crd_op_cancel(op), CRD_OK);
    cr_assert_eq(loop_result(a, &o, &worst), CRD_CANCELLED, "%s", crd_client_errmsg(a));
    cr_assert(crdt_await_llen(r, queue, 0, 0, 5000), "the cancelled waiter is still queued");
    cr_assert_eq(crd_lock_release(fb), CRD_OK);
    redisFree(r);
    crd_lock_free(fa);
    crd_lock_free(fb);

    /* A semaphore acquire woken by a release, a latch await woken by its count-down. */
    loop_sync_woken(&cl, a, b, CRDT_SYNC_SEMAPHORE, &worst);
    loop_sync_woken(&cl, a, b, CRDT_SYNC_LATCH, &worst);

    cr_assert_lt(worst, crdt_scaled_ms(50) * 1000, "a dispatch call took %lld us",
                 (long long)worst);
    say("loop operations through the helpers: worst dispatch %lld us", (long long)worst);
    crd_client_free(a);
    crd_client_free(b);
    crdt_cluster_stop(&cl);
}

Test(cluster, an_acquire_the_replica_never_got_is_reported_lost_after_the_failover,
     .timeout = 120)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 1);
    crdt_events tw;
    crd_options o;
    crdt_cluster_options(&cl, &o);
    o.watchdog_timeout_ms = 15000;
    crdt_events_attach(&tw, &o);
    o.replica_sync = CRD_REPLICA_SYNC_OFF; /* the loss WAIT would have prevented */
    crd_client *a = crdt_client_opts(&o);
    crdt_cluster_options(&cl, &o);
    crd_client *b = crdt_client_opts(&o);
    const char *name = crdt_cluster_name_on(&cl, 0, "unsynced");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    int replica = crdt_cluster_replica_of(&cl, 0);
    /* With replica sync (the default on a cluster, as in Java), an acquire no connected
     * replica acknowledges (the replica is stopped) is undone and refused, never held. */
    crdt_cluster_options(&cl, &o);
    o.replica_sync_timeout_ms = 300;
    crd_client *s = crdt_client_opts(&o);
    crd_lock *ls = crdt_lock(s, name);
    cr_assert_eq(kill(cl.node[replica].pid, SIGSTOP), 0);
    crd_status sst = crd_lock_acquire(ls, 0, CRD_LEASE_WATCHDOG);
    cr_assert_eq(kill(cl.node[replica].pid, SIGCONT), 0);
    cr_assert_eq(sst, CRD_NOT_SYNCED, "%s: %s", crd_strerror(sst), crd_client_errmsg(s));
    bool locked = true;
    cr_assert_eq(crd_lock_is_locked(ls, &locked), CRD_OK);
    cr_assert(!locked, "the unacknowledged acquire was not undone");
    /* Cut off for good (its link down, so not counted by WAIT any more), the replica
     * misses the next acquire, taken without replica sync. */
    crdt_cluster_cut_replication(&cl, replica);
    crd_lock_free(ls);
    crd_client_free(s);
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    /* the acquire is on the primary only */
    redisContext *rr = crdt_cluster_redis(&cl, replica);
    freeReplyObject(redisCommand(rr, "READONLY"));
    cr_assert_eq(crdt_exists(rr, name), 0, "the replica got the acquire after all");
    redisFree(rr);
    int64_t t0 = crdt_now_ms();
    int promoted = crdt_cluster_kill_primary(&cl, 0);
    cr_assert_eq(promoted, replica);
    int64_t t_promoted = crdt_now_ms() - t0;
    /* The next renewal, at the new primary, finds no hold: reported lost, never kept. */
    cr_assert(crdt_wait_until(crdt_events_saw_lost, &tw, 15000), "the lost hold was not reported");
    int64_t t_lost = crdt_now_ms() - t0;
    cr_assert_eq(atomic_load(&tw.lost), 1);
    int64_t valid = -1;
    cr_assert_eq(crd_lock_validity_ms(la, &valid), CRD_LOCK_LOST);
    cr_assert_eq(valid, 0);
    cr_assert_eq(crd_lock_acquire(lb, 0, 30000), CRD_OK, "someone else holds it silently");
    cr_assert_eq(crd_lock_release(la), CRD_LOCK_LOST);
    cr_assert_eq(crd_lock_release(lb), CRD_OK);
    say("unsynced acquire: replica %d promoted %lld ms after SIGKILL, the hold reported lost "
        "%lld ms after SIGKILL", promoted, (long long)t_promoted, (long long)t_lost);
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    crdt_cluster_stop(&cl);
}

/* ---- mutual exclusion across processes ---------------------------------------------------------- */

enum { EX_PROCS = 4, EX_THREADS = 4, EX_NAMES = 30, EX_ITER = 40 };

typedef struct ex_shared {
    const char *url;
    char names[EX_NAMES][200];
    char inside[EX_NAMES][200];
    char counter[EX_NAMES][200];
    int port; /* the standalone server keeping the overlap detector and the counters */
} ex_shared;

typedef struct ex_worker {
    const ex_shared *sh;
    crd_client *c;
    unsigned seed;
    int done, violations, failures;
} ex_worker;

static void *ex_thread(void *arg)
{
    ex_worker *w = arg;
    redisContext *r = crdt_raw_connect(w->sh->port, 10000);
    if (r == NULL) {
        w->failures = EX_ITER;
        return NULL;
    }
    for (int i = 0; i < EX_ITER; i++) {
        int k = (int)(rand_r(&w->seed) % EX_NAMES);
        crd_lock *l = NULL;
        if (crd_lock_new(w->c, w->sh->names[k], &l) != CRD_OK) {
            w->failures++;
            continue;
        }
        if (crd_lock_acquire(l, 30000, i % 2 ? CRD_LEASE_WATCHDOG : 20000) != CRD_OK) {
            w->failures++;
        } else {
            w->violations += crdt_exclusion_section(r, w->sh->inside[k], w->sh->counter[k]);
            w->done++;
            if (crd_lock_release(l) != CRD_OK)
                w->failures++;
        }
        crd_lock_free(l);
    }
    redisFree(r);
    return NULL;
}

static int ex_process(int index, void *arg)
{
    const ex_shared *sh = arg;
    crd_client *c = crdt_cluster_child_client(sh->url);
    if (c == NULL)
        return 3;
    ex_worker w[EX_THREADS];
    pthread_t th[EX_THREADS];
    for (int t = 0; t < EX_THREADS; t++) {
        w[t] = (ex_worker){sh, c, (unsigned)(index * 131 + t * 7 + 1), 0, 0, 0};
        pthread_create(&th[t], NULL, ex_thread, &w[t]);
    }
    int done = 0, bad = 0;
    for (int t = 0; t < EX_THREADS; t++) {
        pthread_join(th[t], NULL);
        done += w[t].done;
        bad += w[t].violations * 1000 + w[t].failures;
    }
    crd_client_free(c);
    return bad > 0 ? 1 : done == EX_THREADS * EX_ITER ? 0 : 2;
}

#ifdef CRD_CLI_PATH
/* Starts `credisson watch --count 2 --timeout 20000 name` on the cluster and waits until
 * it SSUBSCRIBEd channel at the primary of name's slot. The caller reads and pcloses it
 * (the test's timeout bounds the reads). */
static FILE *watch_start(crdt_cluster *cl, const char *name, const char *channel)
{
    char line[1200];
    snprintf(line, sizeof line, "%s --url '%s' watch --count 2 --timeout 20000 '%s'",
             CRD_CLI_PATH, cl->url, name);
    FILE *wf = popen(line, "r");
    cr_assert_not_null(wf, "%s", line);
    redisContext *owner = crdt_cluster_redis_for_key(cl, name);
    crdt_probe sub = {.r = owner, .name = channel};
    bool subscribed = crdt_wait_until(crdt_cluster_shard_subscribed, &sub, 10000);
    redisFree(owner);
    cr_assert(subscribed, "watch did not SSUBSCRIBE %s at the slot's primary", channel);
    return wf;
}

/* `runs` runs of `credisson run --permits <permits> sem` at once on the cluster, each
 * command taking one of `permits` places inside dir (an atomic mkdir each): none finds
 * every place taken or fails, each ran with a permit id, and the semaphore at its slot's
 * primary has all its permits back. */
static void permit_runs(crdt_cluster *cl, const char *sem, int runs, int permits,
                        const char *dir)
{
    char line[2400];
    snprintf(line, sizeof line,
             "for i in $(seq %d); do ('%s' --url '%s' run --permits %d '%s' -- sh -c "
             "'got=; for s in $(seq %d); do if mkdir \"$0/$s\" 2>/dev/null; then got=$s; "
             "break; fi; done; [ -n \"$got\" ] || echo overlap >> \"$0/bad\"; "
             "echo $CREDISSON_PERMIT >> \"$0/ran\"; sleep 0.1; "
             "[ -z \"$got\" ] || rmdir \"$0/$got\"' '%s' || echo fail >> '%s/bad') & done; wait",
             runs, CRD_CLI_PATH, cl->url, permits, sem, permits, dir, dir);
    cr_assert_eq(system(line), 0, "%s", line);
    char path[400];
    snprintf(path, sizeof path, "%s/bad", dir);
    cr_assert(access(path, F_OK) != 0, "a run failed or one too many got in");
    snprintf(path, sizeof path, "%s/ran", dir);
    FILE *rf = fopen(path, "r");
    cr_assert_not_null(rf, "no run ran");
    int with_id = 0;
    char id[64];
    while (fgets(id, sizeof id, rf) != NULL)
        with_id += strlen(id) == 33; /* 32 hex characters and the newline */
    fclose(rf);
    cr_assert_eq(with_id, runs, "%d runs with a permit id, not %d", with_id, runs);
    redisContext *owner = crdt_cluster_redis_for_key(cl, sem);
    char v[32], want[32];
    snprintf(want, sizeof want, "%d", permits);
    cr_assert_str_eq(crdt_cmd_str(owner, v, sizeof v, "GET %s", sem), want);
    redisFree(owner);
}
#endif

Test(cluster, four_processes_of_four_threads_never_overlap_on_thirty_names_over_three_shards,
     .timeout = 120)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 0);
    static ex_shared sh;
    sh.url = cl.url;
    sh.port = crdt_port();
    int per[3] = {0};
    for (int k = 0; k < EX_NAMES; k++) {
        const char *n = crdt_cluster_name_on(&cl, k % 3, "ex");
        snprintf(sh.names[k], sizeof sh.names[k], "%s", n);
        snprintf(sh.inside[k], sizeof sh.inside[k], "%s:inside", n);
        snprintf(sh.counter[k], sizeof sh.counter[k], "%s:counter", n);
        per[k % 3]++;
    }
    int64_t t0 = crdt_now_ms();
    int codes[EX_PROCS];
    int ok = crdt_run_children(EX_PROCS, ex_process, &sh, 100000, codes);
    int64_t took = crdt_now_ms() - t0;
    for (int i = 0; i < EX_PROCS; i++)
        cr_expect_eq(codes[i], 0, "process %d exited %d (1: overlap or failure, 2: missing, "
                     "3: no client)", i, codes[i]);
    cr_assert_eq(ok, EX_PROCS);
    redisContext *r = crdt_redis();
    long long total = 0;
    for (int k = 0; k < EX_NAMES; k++) {
        char buf[32];
        total += atoll(crdt_cmd_str(r, buf, sizeof buf, "GET %s", sh.counter[k]));
        cr_expect_eq(crdt_cmd_int(r, "EXISTS %s", sh.inside[k]) == 0 ||
                         atoll(crdt_cmd_str(r, buf, sizeof buf, "GET %s", sh.inside[k])) == 0,
                     1);
    }
    cr_expect_eq(total, EX_PROCS * EX_THREADS * EX_ITER, "lost updates: %lld", total);
    say("exclusion: %d acquisitions of %d names (%d/%d/%d per primary) by %d processes "
                "x %d threads in %lld ms", EX_PROCS * EX_THREADS * EX_ITER, EX_NAMES, per[0],
                per[1], per[2], EX_PROCS, EX_THREADS, (long long)took);
    redisFree(r);

    /* Bad input on a cluster: a name whose keys would span slots is refused before any
     * command, even with allow_unsafe_names; a standalone client aimed at a cluster node
     * is told to use redis-cluster://. */
    crd_options o;
    crdt_cluster_options(&cl, &o);
    o.allow_unsafe_names = true;
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = NULL;
    cr_expect_eq(crd_lock_new(c, "a}b", &l), CRD_INVALID_ARGUMENT);
    cr_expect(strstr(crd_client_errmsg(c), "CROSSSLOT") != NULL, "%s", crd_client_errmsg(c));
    crd_client_free(c);
    crdt_options(&o);
    o.port = cl.node[0].port;
    c = crdt_client_opts(&o);
    l = crdt_lock(c, crdt_cluster_name_on(&cl, 1, "standalone"));
    cr_expect_eq(crd_lock_acquire(l, 0, 1000), CRD_SERVER);
    cr_expect(strstr(crd_client_errmsg(c), "redis-cluster://") != NULL, "%s",
              crd_client_errmsg(c));
    crd_lock_free(l);
    crd_client_free(c);

#ifdef CRD_CLI_PATH
    /* The CLI on the cluster: run and unlock through the library, status routed to the
     * primary of the name's slot. */
    const char *name = crdt_cluster_name_on(&cl, 2, "cli");
    char line[1200];
    snprintf(line, sizeof line, "%s --url '%s' run '%s' -- true", CRD_CLI_PATH, cl.url, name);
    cr_expect_eq(system(line), 0, "%s", line);
    crdt_cluster_options(&cl, &o);
    c = crdt_client_opts(&o);
    l = crdt_lock(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK);
    const char *status[] = {"--url", cl.url, "status", name, NULL};
    char *out = NULL;
    cr_expect_eq(crdt_cli_run(status, 30000, &out, NULL), 0, "status: %s", out);
    cr_expect(strstr(out, crd_client_id(c)) != NULL, "status does not show the holder: %s", out);
    free(out);
    /* watch on a sharded cluster: SSUBSCRIBEd at the slot's primary, it sees the
     * SPUBLISHed unlock as an unlock (cause=unlock), then the next acquire. */
    char wch[400];
    snprintf(wch, sizeof wch, "redisson_lock__channel:{%s}", name);
    FILE *wf = watch_start(&cl, name, wch);
    char held[1024] = "", rel[1024] = "", acq[1024] = "";
    cr_assert_not_null(fgets(held, sizeof held, wf), "watch printed nothing");
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_not_null(fgets(rel, sizeof rel, wf), "watch did not see the release");
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK);
    cr_assert_not_null(fgets(acq, sizeof acq, wf), "watch did not see the acquire");
    cr_expect_eq(pclose(wf), 0, "watch on %s", name);
    cr_expect(strstr(held, " held ") != NULL, "%s", held);
    cr_expect(strstr(rel, " release ") != NULL && strstr(rel, "cause=unlock") != NULL,
              "watch did not see the sharded unlock as one: %s", rel);
    cr_expect(strstr(acq, " acquire ") != NULL, "%s", acq);
    /* list scans every primary, not just the first seed: one held lock per primary. */
    crd_lock *listed[3];
    for (int i = 0; i < 3; i++) {
        listed[i] = crdt_lock(c, crdt_cluster_name_on(&cl, i, "listed"));
        cr_assert_eq(crd_lock_acquire(listed[i], 0, 30000), CRD_OK);
    }
    char pattern[300];
    snprintf(pattern, sizeof pattern, "%s*listed*", crdt_key_prefix());
    const char *list[] = {"--url", cl.url, "list", pattern, NULL};
    char *lout = NULL;
    cr_expect_eq(crdt_cli_run(list, 30000, &lout, NULL), 0, "list: %s", lout);
    for (int i = 0; i < 3; i++) {
        cr_expect(strstr(lout, crd_lock_name(listed[i], NULL)) != NULL,
                  "list misses the lock on primary %d: %s", i, lout);
        cr_assert_eq(crd_lock_release(listed[i]), CRD_OK);
        crd_lock_free(listed[i]);
    }
    free(lout);
    snprintf(line, sizeof line, "%s --url '%s' unlock --force '%s' >/dev/null", CRD_CLI_PATH,
             cl.url, name);
    cr_expect_eq(system(line), 0, "%s", line);
    bool locked = true;
    cr_expect_eq(crd_lock_is_locked(l, &locked), CRD_OK);
    cr_expect(!locked, "the CLI's force-unlock did not reach the slot's primary");
    crd_lock_free(l);
    crd_client_free(c);

    /* run --permits on the cluster: four runs, one permit, never two inside at once (an
     * atomic mkdir is the overlap detector); the semaphore lives at its slot's primary. */
    const char *sem = crdt_cluster_name_on(&cl, 1, "permits");
    char dir[] = "/tmp/crdt-cluster-permits-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    permit_runs(&cl, sem, 4, 1, dir);
    snprintf(line, sizeof line, "rm -rf '%s'", dir);
    cr_expect_eq(system(line), 0);
#endif
    crdt_cluster_stop(&cl);
}

/* ---- rediss-cluster:// ---------------------------------------------------------------------- */

/* On primary i's slot: a holds a lock, b's waiter SSUBSCRIBEs at that primary, and a's
 * release wakes it by the sharded message. */
static void tls_wake_on(crdt_cluster *cl, int i, crd_client *a, crd_client *b)
{
    const char *name = crdt_cluster_name_on(cl, i, "tls");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s",
                 crd_client_errmsg(a));
    crdt_waiter w = {.lock = lb, .wait_ms = 20000, .lease_ms = 30000};
    crdt_waiter_start(&w);
    char ch[400];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
    redisContext *owner = crdt_cluster_redis(cl, i);
    crdt_probe sub = {.r = owner, .name = ch};
    bool subscribed = crdt_wait_until(crdt_cluster_shard_subscribed, &sub, 10000);
    redisFree(owner);
    cr_assert(subscribed, "primary %d: the waiter never subscribed", i);
    crdt_release_wakes(la, &w, "tls waiter");
    crd_lock_free(la);
    crd_lock_free(lb);
}

Test(cluster, rediss_cluster_locks_wake_ups_and_refusals_work_over_tls, .timeout = 120)
{
    crdt_cluster cl;
    crdt_cluster_start_tls(&cl, 3, 0, crdt_tls_certs());
    crd_options o;
    crdt_options(&o);
    o.url = cl.tls_url;
    o.tls_ca_file = crdt_tls_file("ca.crt");
    crd_client *a = crdt_client_opts(&o), *b = crdt_client_opts(&o);
    for (int i = 0; i < 3; i++)
        tls_wake_on(&cl, i, a, b);
    crd_client_free(a);
    crd_client_free(b);
    /* A CA that did not sign the nodes' certificates: refused, with the reason. */
    crdt_expect_untrusted_ca_refused(&o);
    crdt_cluster_stop(&cl);
}

/* ---- bad seeds ------------------------------------------------------------------------------------ */

Test(cluster, seeds_that_answer_nothing_or_are_not_cluster_nodes_are_refused_clearly)
{
    crd_options o;
    crdt_options(&o);
    o.url = "redis-cluster://127.0.0.1:1,127.0.0.1:2";
    o.connect_timeout_ms = 500;
    crd_client *c = NULL;
    cr_expect_eq(crd_client_new(&o, &c), CRD_IO);
    cr_expect(strstr(crd_client_errmsg(c), "no cluster node") != NULL &&
                  strstr(crd_client_errmsg(c), "127.0.0.1:2") != NULL,
              "%s", crd_client_errmsg(c));
    crd_client_free(c);
    /* The test's own server is a standalone redis-server. */
    crdt_options(&o);
    o.deployment = CRD_DEPLOYMENT_CLUSTER;
    c = NULL;
    cr_expect_eq(crd_client_new(&o, &c), CRD_INVALID_ARGUMENT);
    cr_expect(strstr(crd_client_errmsg(c), "is not a cluster node") != NULL, "%s",
              crd_client_errmsg(c));
    crd_client_free(c);
    crdt_options(&o);
    o.url = "redis-cluster://127.0.0.1:1/2";
    c = NULL;
    cr_expect_eq(crd_client_new(&o, &c), CRD_INVALID_ARGUMENT);
    cr_expect(strstr(crd_client_errmsg(c), "database 0") != NULL, "%s", crd_client_errmsg(c));
    crd_client_free(c);
}

/* ---- parity with Redisson's cluster recordings ---------------------------------------------------- */

/* Whether some script entry of tl from `from` has exactly these KEYS then ARGV ("#": any
 * number, a word ending in '*': that prefix). */
static bool has_script(crdt_tracelog *tl, size_t from, int nkeys, const char *const *words, int n)
{
    bool found = false;
    for (size_t i = from; i < crdt_tracelog_count(tl) && !found; i++) {
        crdt_trace_entry e;
        if (!crdt_tracelog_get(tl, i, &e))
            continue;
        bool ok = (strcasecmp(e.argv[0], "EVALSHA") == 0 || strcasecmp(e.argv[0], "EVAL") == 0) &&
                  e.argc == 3 + n && atoi(e.argv[2]) == nkeys;
        for (int k = 0; ok && k < n; k++) {
            const char *got = e.argv[3 + k], *want = words[k];
            size_t wl = strlen(want);
            if (strcmp(want, "#") == 0)
                ok = got[0] != '\0' && strspn(got, "0123456789") == strlen(got);
            else if (wl > 0 && want[wl - 1] == '*')
                ok = strncmp(got, want, wl - 1) == 0;
            else
                ok = strcmp(got, want) == 0;
        }
        found = ok;
        crdt_trace_entry_free(&e);
    }
    return found;
}

typedef blocked_pred unsub_pred;

static bool unsub_fn(void *arg)
{
    unsub_pred *p = arg;
    return crdt_tracelog_has(p->tl, p->from, "SUNSUBSCRIBE", p->channel);
}

/* Reads one sharded message from a raw subscriber: its channel and payload. */
static bool next_smessage(redisContext *sub, char *channel, size_t cap, char *payload, size_t pcap)
{
    for (;;) {
        void *v = NULL;
        if (redisGetReply(sub, &v) != REDIS_OK || v == NULL)
            return false;
        redisReply *r = v;
        bool msg = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                   strcmp(r->element[0]->str, "smessage") == 0;
        if (msg) {
            snprintf(channel, cap, "%s", r->element[1]->str);
            snprintf(payload, pcap, "%s", r->element[2]->str);
        }
        freeReplyObject(r);
        if (msg)
            return true;
    }
}

/* The next smessage on the raw subscriber watch is payload on channel, and the waiter w
 * (woken by it) got the lock. */
static void smessage_wakes(redisContext *watch, const char *channel, const char *payload,
                           crdt_waiter *w, const char *what)
{
    char ch[400], pl[32];
    cr_assert(next_smessage(watch, ch, sizeof ch, pl, sizeof pl), "%s: no smessage", what);
    cr_expect_str_eq(ch, channel, "%s", what);
    cr_expect_str_eq(pl, payload, "%s", what);
    crdt_waiter_join(w, 10000, what);
    cr_assert_eq(w->acquire_st, CRD_OK, "%s: %s", what, crd_strerror(w->acquire_st));
}

Test(cluster, golden_x_cluster_contention_and_fair_rw_keys_channels_and_messages_match_redisson,
     .timeout = 60)
{
    /* The recordings ran on a cluster whose one primary owned every slot. */
    crdt_cluster cl;
    crdt_cluster_start(&cl, 1, 0);
    crdt_tracelog *tla = crdt_tracelog_new(), *tlb = crdt_tracelog_new();
    crd_client *a = cluster_client(&cl, tla);
    crd_client *b = cluster_client(&cl, tlb);
    redisContext *watch = crdt_cluster_redis(&cl, 0);
    struct timeval tv = {5, 0};
    redisSetTimeout(watch, tv);
    /* One SSUBSCRIBE per slot: shard channels of two slots in one command are CROSSSLOT. */
    freeReplyObject(crdt_cmd(watch, "SSUBSCRIBE redisson_lock__channel:{s1}"));
    freeReplyObject(crdt_cmd(watch, "SSUBSCRIBE redisson_rwlock:{rw1}"));
    char fa[128], fb[128], ch[400], pl[32];

    /* x_cluster_contention: s1 */
    crd_lock *la = crdt_lock(a, "s1"), *lb = crdt_lock(b, "s1");
    cr_assert_eq(crd_lock_acquire(la, -1, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_owner_field(a, crd_owner_current(), fa, sizeof fa);
    const char *acq_a[] = {"s1", "30000", fa};
    cr_expect(has_script(tla, 0, 1, acq_a, 3), "rlock acquire of s1");
    size_t from_b = crdt_tracelog_count(tlb);
    blocked_pred bp = {tlb, from_b, "redisson_lock__channel:{s1}"};
    crdt_waiter w = {.lock = lb, .wait_ms = -1, .lease_ms = CRD_LEASE_WATCHDOG, .client = b};
    crdt_waiter_start(&w);
    cr_assert(crdt_wait_until(blocked_fn, &bp, 5000), "B never sent SSUBSCRIBE on the channel");
    snprintf(fb, sizeof fb, "%s", w.field);
    const char *acq_b[] = {"s1", "30000", fb};
    cr_expect(has_script(tlb, from_b, 1, acq_b, 3), "B's rlock acquire of s1");
    size_t from_a = crdt_tracelog_count(tla);
    cr_assert_eq(crd_lock_release(la), CRD_OK);
    const char *unl_a[] = {"s1", "redisson_lock__channel:{s1}", "redisson_unlock_latch:{s1}:*",
                           "0", "30000", fa, "SPUBLISH", "#"};
    cr_expect(has_script(tla, from_a, 3, unl_a, 8), "rlock unlock of s1 with SPUBLISH");
    smessage_wakes(watch, "redisson_lock__channel:{s1}", "0", &w, "s1");
    unsub_pred up = {tlb, from_b, "redisson_lock__channel:{s1}"};
    cr_expect(crdt_wait_until(unsub_fn, &up, 2000), "B never sent SUNSUBSCRIBE");
    cr_assert(next_smessage(watch, ch, sizeof ch, pl, sizeof pl)); /* B's own unlock */
    cr_expect_str_eq(pl, "0");

    /* x_cluster_fair_rw: f1 */
    crd_lock *fla, *flb;
    cr_assert_eq(crd_fair_lock_new(a, "f1", &fla), CRD_OK);
    cr_assert_eq(crd_fair_lock_new(b, "f1", &flb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(fla, -1, CRD_LEASE_WATCHDOG), CRD_OK);
    const char *facq[] = {"f1", "redisson_lock_queue:{f1}", "redisson_lock_timeout:{f1}", "30000",
                          fa, "300000", "#"};
    cr_expect(has_script(tla, from_a, 3, facq, 7), "fair acquire of f1");
    from_b = crdt_tracelog_count(tlb);
    w = (crdt_waiter){.lock = flb, .wait_ms = -1, .lease_ms = CRD_LEASE_WATCHDOG, .client = b};
    crdt_waiter_start(&w);
    char fch[400];
    snprintf(fch, sizeof fch, "redisson_lock__channel:{f1}:%s", w.field);
    bp = (blocked_pred){tlb, from_b, fch};
    cr_assert(crdt_wait_until(blocked_fn, &bp, 5000), "B never sent SSUBSCRIBE on %s", fch);
    freeReplyObject(crdt_cmd(watch, "SSUBSCRIBE %s", fch));
    from_a = crdt_tracelog_count(tla);
    cr_assert_eq(crd_lock_release(fla), CRD_OK);
    const char *funl[] = {"f1", "redisson_lock_queue:{f1}", "redisson_lock_timeout:{f1}",
                          "redisson_lock__channel:{f1}", "redisson_unlock_latch:{f1}:*", "0",
                          "30000", fa, "#", "SPUBLISH", "#"};
    cr_expect(has_script(tla, from_a, 5, funl, 11), "fair unlock of f1 with SPUBLISH");
    smessage_wakes(watch, fch, "0", &w, "f1");

    /* x_cluster_fair_rw: rw1, a writer then a waiting reader woken by "1" */
    crd_rwlock *rwa, *rwb;
    cr_assert_eq(crd_rwlock_new(a, "rw1", &rwa), CRD_OK);
    cr_assert_eq(crd_rwlock_new(b, "rw1", &rwb), CRD_OK);
    from_a = crdt_tracelog_count(tla);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rwa), -1, CRD_LEASE_WATCHDOG), CRD_OK);
    char waf[160];
    snprintf(waf, sizeof waf, "%s:write", fa);
    const char *wacq[] = {"rw1", "30000", waf};
    cr_expect(has_script(tla, from_a, 1, wacq, 3), "write acquire of rw1");
    from_b = crdt_tracelog_count(tlb);
    w = (crdt_waiter){.lock = crd_rwlock_read(rwb), .wait_ms = -1,
                      .lease_ms = CRD_LEASE_WATCHDOG, .client = b};
    crdt_waiter_start(&w);
    bp = (blocked_pred){tlb, from_b, "redisson_rwlock:{rw1}"};
    cr_assert(crdt_wait_until(blocked_fn, &bp, 5000), "the reader never sent SSUBSCRIBE");
    char rto[300], rwf[160];
    snprintf(rto, sizeof rto, "{rw1}:%s:rwlock_timeout", w.field);
    snprintf(rwf, sizeof rwf, "%s:write", w.field);
    const char *racq[] = {"rw1", rto, "30000", w.field, rwf};
    cr_expect(has_script(tlb, from_b, 2, racq, 5), "read acquire of rw1");
    from_a = crdt_tracelog_count(tla);
    cr_assert_eq(crd_lock_release(crd_rwlock_write(rwa)), CRD_OK);
    const char *wunl[] = {"rw1", "redisson_rwlock:{rw1}", "redisson_unlock_latch:{rw1}:*", "1",
                          "30000", waf, "SPUBLISH", "#"};
    cr_expect(has_script(tla, from_a, 3, wunl, 8), "write unlock of rw1 with SPUBLISH");
    smessage_wakes(watch, "redisson_rwlock:{rw1}", "1", &w, "rw1");
    /* the reader's own unlock: the read unlock's KEYS and SPUBLISH */
    const char *runl[] = {"rw1", "redisson_rwlock:{rw1}", rto, "{rw1}",
                          "redisson_unlock_latch:{rw1}:*", "0", w.field, "SPUBLISH", "#"};
    cr_expect(has_script(tlb, from_b, 5, runl, 9), "read unlock of rw1 with SPUBLISH");

    crd_lock_free(la);
    crd_lock_free(lb);
    crd_lock_free(fla);
    crd_lock_free(flb);
    crd_rwlock_free(rwa);
    crd_rwlock_free(rwb);
    crd_client_free(a);
    crd_client_free(b);
    crdt_tracelog_free(tla);
    crdt_tracelog_free(tlb);
    redisFree(watch);
    crdt_cluster_stop(&cl);
}

#ifdef CRD_CLI_PATH
/* One line of a watch started with popen (the test's timeout bounds the read). */
static void watch_line(FILE *wf, const char *what, const char *want1, const char *want2)
{
    char line[1024] = "";
    cr_assert_not_null(fgets(line, sizeof line, wf), "watch printed no %s line", what);
    cr_expect(strstr(line, want1) != NULL && strstr(line, want2) != NULL, "%s: %s", what, line);
}

/* watch on a sharded cluster follows a semaphore's permits and a latch's count (issue
 * #27): SSUBSCRIBEd at the slot's primary with the locks' channels, it sees the
 * SPUBLISHed release and the count-down to zero, and a sharded waiter marks the latch. */
Test(cluster, watch_follows_a_semaphore_and_a_latch_through_sharded_messages, .timeout = 90)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 0);
    crd_options o;
    crdt_cluster_options(&cl, &o);
    crd_client *c = crdt_client_opts(&o);
    char sname[200], lname[200], ch[400], line[1200];
    snprintf(sname, sizeof sname, "%s", crdt_cluster_name_on(&cl, 1, "wsem"));
    snprintf(lname, sizeof lname, "%s", crdt_cluster_name_on(&cl, 2, "wlatch"));

    crd_semaphore *s = crdt_sem_of(c, sname);
    CRDT_OK(c, crd_semaphore_try_set_permits(s, 2, 0, NULL));
    snprintf(ch, sizeof ch, "redisson_sc:{%s}", sname);
    FILE *wf = watch_start(&cl, sname, ch);
    watch_line(wf, "found", " found ", "kind=semaphore available=2");
    CRDT_OK(c, crd_semaphore_acquire(s, 1, 0));
    watch_line(wf, "acquire", " permits ", "available=1");
    CRDT_OK(c, crd_semaphore_release(s, 1));
    watch_line(wf, "release", " permits ", "available=2");
    cr_expect_eq(pclose(wf), 0, "watch on %s", sname);

    crd_latch *l = crdt_latch_of(c, lname);
    CRDT_OK(c, crd_latch_try_set_count(l, 2, NULL));
    crdt_sync_waiter w = {.l = l, .wait_ms = 30000};
    crdt_sync_waiter_start(&w);
    snprintf(ch, sizeof ch, "redisson_countdownlatch__channel__{%s}", lname);
    redisContext *owner = crdt_cluster_redis_for_key(&cl, lname);
    crdt_probe sub = {.r = owner, .name = ch};
    cr_assert(crdt_wait_until(crdt_cluster_shard_subscribed, &sub, 10000),
              "the latch waiter did not SSUBSCRIBE");
    redisFree(owner);
    snprintf(line, sizeof line, "%s --url '%s' watch --count 2 --timeout 20000 '%s'",
             CRD_CLI_PATH, cl.url, lname);
    wf = popen(line, "r");
    cr_assert_not_null(wf);
    watch_line(wf, "found", " found ", "kind=latch count=2");
    CRDT_OK(c, crd_latch_count_down(l));
    watch_line(wf, "count-down", " latch ", "count=1");
    int64_t opened = crdt_now_ms();
    CRDT_OK(c, crd_latch_count_down(l));
    watch_line(wf, "opening", " latch ", "count=0");
    cr_expect_eq(pclose(wf), 0, "%s", line);
    crdt_sync_waiter_woken(&w, opened, 2000, "the sharded await");
    crd_latch_free(l);
    crd_semaphore_free(s);
    crd_client_free(c);
    crdt_cluster_stop(&cl);
}
#endif

/* ---- the synchronizers across processes on the cluster (issue #27) ------------------------ */

#ifdef CRD_CLI_PATH
typedef struct latch_proc_arg {
    const char *url, *name;
} latch_proc_arg;

/* A child: `credisson latch wait` on the cluster (exec: no thread of the test's copied). */
static int latch_wait_proc(void *arg)
{
    const latch_proc_arg *a = arg;
    execl(CRD_CLI_PATH, CRD_CLI_PATH, "--url", a->url, "latch", "wait", "--wait", "30000",
          a->name, (char *)NULL);
    return 127;
}

static bool file_exists(void *arg) { return access((const char *)arg, F_OK) == 0; }

/* The issue's exclusion tests on the 3-primary cluster: six `run --permits 2` never more
 * than two inside at once; a SIGKILLed holder's permit passes on when its lease ends; a
 * latch awaited by 8 processes is opened by the last count-down and not before. */
Test(cluster, permits_and_a_latch_hold_across_processes_on_the_cluster, .timeout = 120)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 0);
    char line[2400], dir[] = "/tmp/crdt-cluster-sync-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));

    /* Six runs, two permits: "a" and "b" are the two places inside (atomic mkdir); a
     * third at once finds both taken. */
    char sem[300];
    snprintf(sem, sizeof sem, "%s", crdt_cluster_name_on(&cl, 0, "permits2"));
    permit_runs(&cl, sem, 6, 2, dir);

    /* A holder killed with SIGKILL: its permit passes on when its 1.5 s lease ends. */
    char sem1[300], pidf[400], cmdpidf[400];
    snprintf(sem1, sizeof sem1, "%s", crdt_cluster_name_on(&cl, 1, "killed"));
    snprintf(pidf, sizeof pidf, "%s/run.pid", dir);
    snprintf(cmdpidf, sizeof cmdpidf, "%s/cmd.pid", dir);
    snprintf(line, sizeof line,
             "'%s' --url '%s' --watchdog-ms 1500 run --permits 1 '%s' -- sh -c "
             "'echo $$ > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; exec sleep 30' '%s' "
             ">/dev/null 2>&1 & echo $! > '%s'",
             CRD_CLI_PATH, cl.url, sem1, cmdpidf, pidf);
    cr_assert_eq(system(line), 0, "%s", line);
    cr_assert(crdt_wait_until(file_exists, cmdpidf, 10000), "the holder's CMD never started");
    FILE *pf = fopen(pidf, "r");
    cr_assert_not_null(pf);
    long run_pid = 0, cmd_pid = 0;
    cr_assert_eq(fscanf(pf, "%ld", &run_pid), 1);
    fclose(pf);
    pf = fopen(cmdpidf, "r");
    cr_assert_not_null(pf);
    cr_assert_eq(fscanf(pf, "%ld", &cmd_pid), 1);
    fclose(pf);
    cr_assert_eq(kill((pid_t)run_pid, SIGKILL), 0);
    int64_t t_kill = crdt_now_ms();
    kill((pid_t)cmd_pid, SIGKILL);
    snprintf(line, sizeof line, "'%s' --url '%s' run --permits 1 --wait 10000 '%s' -- true",
             CRD_CLI_PATH, cl.url, sem1);
    cr_assert_eq(system(line), 0, "%s", line);
    int64_t took = crdt_now_ms() - t_kill;
    cr_assert_geq(took, 700, "the permit was free before its lease ended (%lld ms)",
                  (long long)took);
    cr_assert_lt(took, 1500 + crdt_scaled_ms(2000), "passed on only after %lld ms",
                 (long long)took);

    /* Eight processes await a latch of 3; two count-downs leave them waiting, the third
     * opens it for all. */
    char latch[300], channel[400];
    snprintf(latch, sizeof latch, "%s", crdt_cluster_name_on(&cl, 2, "latch8"));
    snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", latch);
    snprintf(line, sizeof line, "'%s' --url '%s' latch set '%s' 3", CRD_CLI_PATH, cl.url, latch);
    cr_assert_eq(system(line), 0, "%s", line);
    latch_proc_arg la = {cl.url, latch};
    pid_t kids[8];
    for (int i = 0; i < 8; i++)
        kids[i] = crdt_fork(latch_wait_proc, &la);
    redisContext *lr = crdt_cluster_redis_for_key(&cl, latch);
    crdt_probe sp = {.r = lr, .name = channel, .n = 8};
    cr_assert(crdt_wait_until(crdt_cluster_shard_subscribed, &sp, 20000),
              "the 8 waiting processes never all SSUBSCRIBEd at the latch's primary");
    snprintf(line, sizeof line, "'%s' --url '%s' latch count-down '%s' >/dev/null", CRD_CLI_PATH,
             cl.url, latch);
    cr_assert_eq(system(line), 0, "%s", line);
    cr_assert_eq(system(line), 0, "%s", line);
    crdt_sleep_ms(200); /* an observation window: no waiter may leave at count 1 */
    for (int i = 0; i < 8; i++)
        cr_assert_eq(waitpid(kids[i], NULL, WNOHANG), 0, "a waiter left at count 1");
    int64_t t_open = crdt_now_ms();
    cr_assert_eq(system(line), 0, "%s", line);
    int ok = 0;
    for (int i = 0; i < 8; i++)
        ok += crdt_wait_child(kids[i], 10000) == 0;
    int64_t opened = crdt_now_ms() - t_open;
    cr_assert_eq(ok, 8, "%d of 8 waiting processes saw the latch open", ok);
    fprintf(stderr, "[cluster] synchronizers: 6 runs under --permits 2, a killed holder's permit "
            "passed on after %lld ms (lease 1500), 8 latch waiters out %lld ms after the last "
            "count-down\n", (long long)took, (long long)opened);
    redisFree(lr);
    snprintf(line, sizeof line, "rm -rf '%s'", dir);
    cr_expect_eq(system(line), 0);
    crdt_cluster_stop(&cl);
}
#endif
