/*
 * test_partition.c -- network partitions, the fault Jepsen tests locks with (issue #26,
 * part 3). Loopback fault proxies (support/faultproxy.h) black-hole traffic between real
 * servers and clients: bytes are dropped, connections stay open, as when a switch dies.
 *
 *   1. A holder cut off from Redis for longer than its lease: it knows its hold is gone
 *      (validity 0, a lock-lost event) before anyone else can take the lock, and its
 *      release after the partition heals leaves the next holder's lock alone.
 *   2. A client cut off from one sentinel carries on through the other two, across a
 *      failover; a cluster client cut off from one node keeps working on the other
 *      primaries and fails fast, with a clear status, on the cut one.
 *   3. Split brain: the Sentinel primary cut off from its replicas and sentinels while a
 *      client stays on its side. The sentinels promote a replica; a client on the
 *      majority side locks there. With replica sync on, the isolated side's acquires
 *      get no replica acknowledgement (CRD_NOT_SYNCED) and no two holds overlap
 *      (asserted); with it off the overlaps are counted and printed.
 *      The same on a cluster: a primary cut off from its replica and from the other
 *      nodes' bus (proxies in front of every bus port tell nodes apart by their
 *      bind-source-addr) while a client connected straight to it stays; its replica is
 *      promoted, the majority client follows, and the cut primary refuses everything
 *      (CLUSTERDOWN) once its node timeout has passed.
 *
 * Every hold is recorded by its client (support/holds.h) as [acquire returned,
 * min(release sent, validity deadline)] on CLOCK_MONOTONIC, and the checker counts
 * overlapping holds of one name.
 *
 * Soak: with CRDT_PARTITION_SOAK_SECONDS=n each test repeats its scenario for n seconds
 * (at least once) and prints its figures on stderr as one "[partition]" line; `make
 * soak-partition SOAK_MINUTES=m` runs the suite so and sums them. Without it each test
 * runs its scenario once (the ctest run, well under a minute).
 *
 * Runs its tests one at a time (CRDT_SERIAL_TEST): topologies and failovers load both
 * cores, and the lease arithmetic of scenario 1 wants a quiet machine.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "faultproxy.h"
#include "failover.h"
#include "harness.h"
#include "standalone/events.h"
#include "holds.h"
#include "sentinel.h"

/* ---------------------------------------------------------------------------------- */
/* Helpers                                                                            */
/* ---------------------------------------------------------------------------------- */

#define NS_PER_MS INT64_C(1000000)

/* What one test reports: partitions made, holds recorded, losses the clients were told
 * about (lock-lost events, CRD_LOCK_LOST), overlapping holds the checker found. */
typedef struct figures {
    const char *scenario;
    const char *sync; /* "on", "off", "n/a" (a standalone server has no replicas) */
    int replica_sync; /* the split-brain rounds' clients' (CRD_REPLICA_SYNC_*); 0: AUTO */
    long rounds, partitions, holds, losses, overlaps, refused;
} figures;

static void print_figures(const figures *f)
{
    fprintf(stderr,
            "[partition] scenario=%s sync=%s rounds=%ld partitions=%ld holds=%ld losses=%ld "
            "not_synced=%ld overlaps=%ld\n",
            f->scenario, f->sync, f->rounds, f->partitions, f->holds, f->losses, f->refused,
            f->overlaps);
}

/* The soak budget of one test in ms (CRDT_PARTITION_SOAK_SECONDS), 0 outside a soak. */
static int64_t soak_ms(void)
{
    const char *s = getenv("CRDT_PARTITION_SOAK_SECONDS");
    return s != NULL ? atoll(s) * 1000 : 0;
}

/* Whether another round fits: always the first, then until the budget is spent. */
static bool another_round(int64_t started_ms, long rounds)
{
    return rounds == 0 || crdt_now_ms() - started_ms < soak_ms();
}

/* Runs round until the soak budget is spent (once outside a soak), prints the figures
 * and asserts that no two holds of one name overlapped: always but in a split brain
 * without replica sync, whose overlaps are counted, not asserted. */
static void run_rounds(figures f, void (*round)(figures *, crdt_holds *))
{
    crdt_holds *holds = crdt_holds_new();
    for (int64_t t0 = crdt_now_ms(); another_round(t0, f.rounds); f.rounds++)
        round(&f, holds);
    crdt_hold pair[2];
    f.overlaps = crdt_holds_overlaps(holds, pair);
    print_figures(&f);
    if (f.replica_sync != CRD_REPLICA_SYNC_OFF)
        cr_assert_eq(f.overlaps, 0, "replica sync %s: client %d held %s from %lld to %lld ns "
                     "while client %d held it from %lld to %lld ns", f.sync, pair[0].client,
                     pair[0].name, (long long)pair[0].start_ns, (long long)pair[0].end_ns,
                     pair[1].client, (long long)pair[1].start_ns, (long long)pair[1].end_ns);
    crdt_holds_free(holds);
}

static crdt_proxy *proxy_to(int port)
{
    const char *why = NULL;
    crdt_proxy *p = crdt_proxy_start(port, &why);
    cr_assert_not_null(p, "cannot start the fault proxy: %s", why ? why : "?");
    return p;
}


/* A client that must notice a cut soon: 500 ms to connect and for each command. */
static void cut_timeouts(crd_options *o)
{
    o->connect_timeout_ms = 500;
    o->command_timeout_ms = 500;
}

/* The end of a hold's trust as its holder sees it now: now + crd_lock_validity_ms. */
static int64_t trusted_until_ns(crd_lock *l)
{
    int64_t v = 0;
    crd_lock_validity_ms(l, &v);
    return crdt_now_ns() + v * NS_PER_MS;
}

/* ---------------------------------------------------------------------------------- */
/* 1. A holder cut off from Redis past its lease                                      */
/* ---------------------------------------------------------------------------------- */

/* One round; adds to f. */
static void cut_holder_round(figures *f, crdt_holds *holds)
{
    const int64_t lease = crdt_scaled_ms(1500);
    crdt_proxy *px = proxy_to(crdt_port());
    crdt_events ev;
    crd_options oa;
    crdt_options(&oa);
    oa.port = crdt_proxy_port(px);
    cut_timeouts(&oa);
    oa.watchdog_timeout_ms = lease;
    crdt_events_attach(&ev, &oa);
    crd_client *a = crdt_client_opts(&oa);
    crd_client *b = crdt_client(); /* direct: on the server's side of the partition */
    const char *name = crdt_key("cut");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    redisContext *r = crdt_redis();

    cr_assert_eq(crd_lock_acquire(la, 2000, CRD_LEASE_WATCHDOG), CRD_OK);
    int64_t a_start = crdt_now_ns();
    int64_t a_end = trusted_until_ns(la);

    crdt_proxy_set_blackhole(px, CRDT_PROXY_BOTH, true);
    f->partitions++;
    /* A renewal may have landed between the acquire and the cut: the trust now. */
    int64_t cut_end = trusted_until_ns(la);
    if (cut_end > a_end)
        a_end = cut_end;

    cr_assert_eq(crd_lock_acquire(lb, crdt_scaled_ms(10000), crdt_scaled_ms(20000)), CRD_OK,
                 "the direct client never got the lock the cut holder could not renew");
    int64_t b_start = crdt_now_ns();
    int64_t b_end = trusted_until_ns(lb);
    int64_t va = -1;
    crd_status vst = crd_lock_validity_ms(la, &va);
    cr_assert_eq(va, 0, "the cut holder still trusts its hold for %lld ms (status %s) when the "
                 "other client has the lock", (long long)va, crd_strerror(vst));
    cr_assert(a_end <= b_start, "the cut holder trusted its hold %.1f ms into the next hold",
              (double)(a_end - b_start) / NS_PER_MS);
    cr_assert(crdt_events_await_lost(&ev, 1, crdt_scaled_ms(5000)),
              "the cut holder was never told it lost the lock");

    crdt_proxy_set_blackhole(px, CRDT_PROXY_BOTH, false);
    int64_t a_release = crdt_now_ns();
    crd_status st = crd_lock_release(la);
    cr_assert(st == CRD_LOCK_LOST || st == CRD_NOT_OWNER,
              "the healed holder's release: %s", crd_strerror(st));
    f->losses += atomic_load(&ev.lost); /* one event per lost hold */
    char field[200];
    crdt_owner_field(b, crd_owner_current(), field, sizeof field);
    cr_assert_eq(crdt_hget_int(r, name, field), 1,
                 "the healed holder's release touched the next holder's lock");

    crdt_holds_add(holds, 1, name, a_start, a_release < a_end ? a_release : a_end);
    int64_t b_release = crdt_now_ns();
    cr_assert_eq(crd_lock_release(lb), CRD_OK);
    crdt_holds_add(holds, 2, name, b_start, b_release < b_end ? b_release : b_end);
    f->holds += 2;

    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    redisFree(r);
    crdt_proxy_stop(px);
}

Test(partition, a_holder_cut_off_past_its_lease_knows_it_lost_the_lock_before_another_takes_it)
{
    run_rounds((figures){.scenario = "cut-holder", .sync = "n/a"}, cut_holder_round);
}

/* ---------------------------------------------------------------------------------- */
/* 3. Split brain: the Sentinel primary cut off from its replicas and sentinels        */
/* ---------------------------------------------------------------------------------- */

/* One client of a split-brain round, run by its own thread: acquire (bounded wait),
 * hold a little, release, record; until told to stop. */
typedef struct side {
    int id;
    crd_lock *lock;
    crdt_holds *holds;
    atomic_bool *stop;
    atomic_bool cut;          /* set once the partition is made */
    atomic_int holds_before;  /* holds that began before the cut */
    atomic_int holds_after;   /* ... and after it */
    atomic_int not_synced;    /* acquires refused for want of a replica's ack */
    atomic_int lost;          /* releases that found the hold gone */
    atomic_int failed;        /* acquires after the cut that failed otherwise (CRD_IO...) */
    _Atomic crd_status last_failure;
} side;

static void *side_run(void *arg)
{
    side *s = arg;
    char name[256];
    size_t len = 0;
    const char *n = crd_lock_name(s->lock, &len);
    snprintf(name, sizeof name, "%.*s", (int)len, n);
    while (!atomic_load(s->stop)) {
        bool after = atomic_load(&s->cut);
        /* The wait outlasts WAIT's timeout (replica_sync_timeout_ms, 1000): a shorter one
         * would end as CRD_TIMEOUT before the primary said no replica acknowledged. */
        crd_status st = crd_lock_acquire(s->lock, 1500, crdt_scaled_ms(2000));
        if (st == CRD_NOT_SYNCED)
            atomic_fetch_add(&s->not_synced, 1);
        else if (st != CRD_OK && st != CRD_TIMEOUT && after) {
            atomic_fetch_add(&s->failed, 1);
            atomic_store(&s->last_failure, st);
        }
        /* A server that refuses at once (a cut cluster primary: CLUSTERDOWN) would have
         * the loop spin: ask it again 10 ms later, as a client backs off. */
        if (st != CRD_OK && st != CRD_TIMEOUT && st != CRD_NOT_SYNCED)
            crdt_sleep_ms(10);
        if (st != CRD_OK)
            continue;
        int64_t start = crdt_now_ns();
        int64_t end = trusted_until_ns(s->lock);
        /* The critical section: time inside the lock is what a split brain shares. */
        crdt_sleep_ms(50);
        int64_t release = crdt_now_ns();
        if (crd_lock_release(s->lock) == CRD_LOCK_LOST)
            atomic_fetch_add(&s->lost, 1);
        crdt_holds_add(s->holds, s->id, name, start, release < end ? release : end);
        atomic_fetch_add(after ? &s->holds_after : &s->holds_before, 1);
    }
    return NULL;
}

typedef struct both_sides {
    side *iso, *maj;
    int need_after;
    bool need_refusal; /* replica sync on: the isolated side's answer must be a refusal */
} both_sides;

static bool both_held_before(void *arg)
{
    both_sides *b = arg;
    return atomic_load(&b->iso->holds_before) > 0 && atomic_load(&b->maj->holds_before) > 0;
}

/* The round has shown what it is for: the majority side locked on the new primary,
 * and the isolated side got an answer from the old one (a hold, or a refusal for want
 * of a replica's acknowledgement), however the failover's timing fell. */
static bool both_sides_answered(void *arg)
{
    both_sides *b = arg;
    int refused = atomic_load(&b->iso->not_synced);
    return atomic_load(&b->maj->holds_after) >= b->need_after &&
           (b->need_refusal ? refused > 0 : refused + atomic_load(&b->iso->holds_after) > 0);
}

/* Adds a round's two sides to f and prints them. */
static void add_sides(figures *f, side *iso, side *maj, const char *where, int sync)
{
    f->holds += atomic_load(&iso->holds_before) + atomic_load(&iso->holds_after) +
                atomic_load(&maj->holds_before) + atomic_load(&maj->holds_after);
    f->losses += atomic_load(&iso->lost) + atomic_load(&maj->lost);
    f->refused += atomic_load(&iso->not_synced) + atomic_load(&maj->not_synced);
    fprintf(stderr, "[partition] split-brain round (%s) sync=%s: isolated holds %d before, %d "
            "after the cut, %d not synced, %d failed (last: %s); majority holds %d before, %d "
            "after\n", where, sync == CRD_REPLICA_SYNC_ON ? "on" : "off",
            atomic_load(&iso->holds_before), atomic_load(&iso->holds_after),
            atomic_load(&iso->not_synced), atomic_load(&iso->failed),
            crd_strerror(atomic_load(&iso->last_failure)), atomic_load(&maj->holds_before),
            atomic_load(&maj->holds_after));
}

/* What a split-brain round saw: the sides' counts (threads joined), whether both held
 * before the cut, whether the other side promoted a replica, whether both sides then
 * answered (both_sides_answered). */
typedef struct split_outcome {
    int iso_after, iso_refused, maj_after;
    bool warm, promoted, answered;
} split_outcome;

/* What every split-brain round must have shown. */
static void assert_sides(const split_outcome *o, int sync)
{
    cr_assert(o->answered, "after the cut the majority client held the lock %d times, the "
              "isolated one %d times, refused %d times", o->maj_after, o->iso_after,
              o->iso_refused);
    if (sync == CRD_REPLICA_SYNC_ON)
        cr_assert(o->iso_refused > 0,
                  "no acquire on the isolated side was refused for want of a replica");
}

/* How one deployment splits: cut(cut_arg) makes the partition; promoted(promoted_arg)
 * waits (with its own deadline) until the majority side has a new primary. */
typedef struct split_ops {
    const char *where;
    void (*cut)(void *arg);
    void *cut_arg;
    bool (*promoted)(void *arg);
    void *promoted_arg;
} split_ops;

/* A side's client options: short timeouts, replica sync as the round says. */
static void side_options(crd_options *o, int sync)
{
    crd_options_init(o);
    o->connect_timeout_ms = 500;
    o->command_timeout_ms = 2000;
    o->replica_sync = sync;
}

/* The body of a split-brain round: an isolated client (oi) and a majority client (om)
 * lock name in a loop; once both held it, the partition is made, the majority side
 * promotes a replica, and the round ends when both sides have answered (or a deadline
 * passed). The sides' figures go to f; the clients are freed. */
static split_outcome run_split(figures *f, crdt_holds *holds, crd_options *oi, crd_options *om,
                               const char *name, int sync, const split_ops *ops)
{
    crd_client *ci = crdt_client_opts(oi);
    crd_client *cm = crdt_client_opts(om);
    atomic_bool stop = false;
    side iso = {.id = 1, .lock = crdt_lock(ci, name), .holds = holds, .stop = &stop};
    side maj = {.id = 2, .lock = crdt_lock(cm, name), .holds = holds, .stop = &stop};
    pthread_t ti, tm;
    cr_assert_eq(pthread_create(&ti, NULL, side_run, &iso), 0);
    cr_assert_eq(pthread_create(&tm, NULL, side_run, &maj), 0);
    both_sides b = {.iso = &iso, .maj = &maj, .need_after = 5,
                    .need_refusal = sync == CRD_REPLICA_SYNC_ON};
    split_outcome o = {0};
    o.warm = crdt_wait_until(both_held_before, &b, crdt_scaled_ms(15000));
    if (o.warm) {
        atomic_store(&iso.cut, true);
        atomic_store(&maj.cut, true);
        ops->cut(ops->cut_arg);
        f->partitions++;
    }
    o.promoted = o.warm && ops->promoted(ops->promoted_arg);
    o.answered = o.promoted && crdt_wait_until(both_sides_answered, &b, crdt_scaled_ms(20000));
    atomic_store(&stop, true);
    pthread_join(ti, NULL);
    pthread_join(tm, NULL);
    add_sides(f, &iso, &maj, ops->where, sync);
    o.iso_after = atomic_load(&iso.holds_after);
    o.iso_refused = atomic_load(&iso.not_synced);
    o.maj_after = atomic_load(&maj.holds_after);
    crd_lock_free(iso.lock);
    crd_lock_free(maj.lock);
    crd_client_free(ci);
    crd_client_free(cm);
    return o;
}

/* One round: a fresh topology whose replicas and sentinels reach the first primary
 * through a proxy; an isolated client connected straight to that primary, a majority
 * client through the sentinels; both lock one name in a loop while the proxy is
 * black-holed and the sentinels fail over. */
static void sentinel_cut(void *arg)
{
    crdt_proxy_set_blackhole(arg, CRDT_PROXY_BOTH, true);
}

static bool sentinel_switched(void *arg)
{
    crdt_topo *topo = arg;
    return crdt_topo_await_switch(topo, topo->front_port, 30000) > 0;
}

/* A split brain's rounds with replica sync on or off (run_rounds). */
static void split_brain(const char *scenario, int sync, void (*round)(figures *, crdt_holds *))
{
    run_rounds((figures){.scenario = scenario, .sync = sync == CRD_REPLICA_SYNC_ON ? "on" : "off",
                         .replica_sync = sync},
               round);
}

static void split_brain_round(figures *f, crdt_holds *holds)
{
    const int sync = f->replica_sync;
    crdt_proxy *front;
    crdt_topo topo;
    crdt_topo_start_fronted(&topo, &front);

    crd_options oi;
    side_options(&oi, sync);
    oi.host = "127.0.0.1";
    oi.port = topo.nodes[0].port; /* no proxy: it stays with the old primary */
    char url[256];
    crd_options om;
    side_options(&om, sync);
    om.url = crdt_topo_url(&topo, url, sizeof url);
    /* The cut: the old primary keeps its clients but hears nothing from its replicas
     * and sentinels, and they nothing from it. */
    split_ops ops = {"sentinel", sentinel_cut, front, sentinel_switched, &topo};
    split_outcome out = run_split(f, holds, &oi, &om, crdt_key("split"), sync, &ops);
    char why[512];
    snprintf(why, sizeof why, "%s", topo.err);
    crdt_topo_stop(&topo);
    crdt_proxy_stop(front);
    cr_assert(out.warm, "both sides never held the lock before the cut");
    cr_assert(out.promoted, "the sentinels did not fail over: %s", why);
    assert_sides(&out, sync);
}


Test(partition, with_replica_sync_a_primary_cut_off_from_replicas_and_sentinels_grants_no_overlapping_hold)
{
    split_brain("split-brain-sentinel", CRD_REPLICA_SYNC_ON, split_brain_round);
}

/* Without replica sync the isolated primary keeps granting holds: counted, not asserted. */
Test(partition, without_replica_sync_the_overlaps_of_a_split_brain_are_counted)
{
    split_brain("split-brain-sentinel", CRD_REPLICA_SYNC_OFF, split_brain_round);
}

/* ---------------------------------------------------------------------------------- */
/* 3b. Split brain on a cluster: a primary cut off from its replica and the other nodes */
/* ---------------------------------------------------------------------------------- */

/* The source address node i's outgoing connections (cluster bus, replication) come
 * from: bind-source-addr, so that one proxy can cut one peer and keep the others. */
static void node_source(int i, char *buf, size_t cap) { snprintf(buf, cap, "127.0.0.%d", 40 + i); }

/* What a split cluster is made of: a proxy in front of every node's bus port (the
 * port each node announces for it) and one in front of primary 0's client port (which
 * it announces to clients and to its replica). */
typedef struct split_cluster {
    crdt_cluster cl;
    crdt_proxy *bus[CRDT_CLUSTER_MAX];
    crdt_proxy *front;
    int replica; /* primary 0's replica */
    char err[256];
} split_cluster;

static void config_set(crdt_cluster *cl, int i, const char *key, const char *value)
{
    redisContext *r = crdt_cluster_redis(cl, i);
    char reply[128];
    crdt_cmd_str(r, reply, sizeof reply, "CONFIG SET %s %s", key, value);
    redisFree(r);
    cr_assert_str_eq(reply, "OK", "node %d: CONFIG SET %s %s", i, key, value);
}

/* The line of CLUSTER NODES text that describes node id (a replica's line names its
 * primary's id too, later on). */
static const char *node_line(const char *text, const char *id)
{
    size_t n = strlen(id);
    for (const char *l = text; l != NULL && *l != '\0'; l = strchr(l, '\n'), l = l ? l + 1 : l)
        if (strncmp(l, id, n) == 0 && l[n] == ' ')
            return l;
    return NULL;
}

/* The reply to cmd (a command without arguments to format) on a fresh connection to
 * port, or NULL when nothing answers there within 500 ms; the connection is closed. */
static redisReply *ask_node(int port, const char *cmd)
{
    redisContext *r = crdt_raw_connect(port, 500);
    if (r == NULL)
        return NULL;
    redisReply *rep = redisCommand(r, cmd);
    redisFree(r);
    return rep;
}

/* Whether every node lists every node at its announced ports, connected, every bus
 * proxy carries a link from every other node, and the replica of primary 0 replicates
 * through the front proxy: the links all cross the proxies now. */
static bool routed_through_proxies(void *arg)
{
    split_cluster *s = arg;
    for (int i = 0; i < s->cl.nnodes; i++) {
        crdt_proxy_stats st;
        crdt_proxy_get_stats(s->bus[i], &st);
        if (st.open < (uint64_t)(s->cl.nnodes - 1)) {
            snprintf(s->err, sizeof s->err, "node %d's bus proxy carries %llu links", i,
                     (unsigned long long)st.open);
            return false;
        }
    }
    bool ok = true;
    for (int n = 0; ok && n < s->cl.nnodes; n++) {
        redisReply *rep = ask_node(s->cl.node[n].port, "CLUSTER NODES");
        ok = rep != NULL && rep->type == REDIS_REPLY_STRING;
        for (int i = 0; ok && i < s->cl.nnodes; i++) {
            const char *line = node_line(rep->str, s->cl.id[i]);
            char want[64];
            snprintf(want, sizeof want, " 127.0.0.1:%d@%d ",
                     i == 0 ? crdt_proxy_port(s->front) : s->cl.node[i].port,
                     crdt_proxy_port(s->bus[i]));
            const char *eol = line != NULL ? strchr(line, '\n') : NULL;
            const char *at = line != NULL ? strstr(line, want) : NULL;
            const char *conn = line != NULL ? strstr(line, " connected") : NULL;
            ok = at != NULL && conn != NULL && (eol == NULL || (at < eol && conn < eol));
            if (!ok)
                snprintf(s->err, sizeof s->err, "node %d lists node %d as %.*s", n, i,
                         line == NULL ? 0 : eol == NULL ? 120 : (int)(eol - line),
                         line == NULL ? "" : line);
        }
        if (rep != NULL)
            freeReplyObject(rep);
    }
    if (ok) {
        redisReply *rep = ask_node(s->cl.node[s->replica].port, "INFO replication");
        char want[64];
        snprintf(want, sizeof want, "master_port:%d\r", crdt_proxy_port(s->front));
        ok = rep != NULL && rep->type == REDIS_REPLY_STRING && strstr(rep->str, want) &&
             strstr(rep->str, "master_link_status:up");
        if (!ok)
            snprintf(s->err, sizeof s->err, "the replica does not replicate through the proxy");
        if (rep != NULL)
            freeReplyObject(rep);
    }
    if (ok) { /* ...and primary 0 counts it again (ROLE, what WAIT waits for) */
        redisReply *rep = ask_node(s->cl.node[0].port, "ROLE");
        ok = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3 &&
             rep->element[2]->type == REDIS_REPLY_ARRAY && rep->element[2]->elements == 1;
        if (!ok)
            snprintf(s->err, sizeof s->err, "primary 0 does not list its replica");
        if (rep != NULL)
            freeReplyObject(rep);
    }
    return ok;
}

/* Three primaries with a replica each, and a name (*name) on primary 0's slots. Then
 * (split_cluster_route) every link between nodes moves onto the proxies (source
 * addresses, announced bus ports, primary 0's announced client port). The node
 * timeout is 6 s: the cut primary answers its clients for that long before it sees the
 * cluster down, long enough for the lease of a hold it granted just before the
 * cut (2 s) to run out and its isolated client to ask again. */
static void split_cluster_start(split_cluster *s, const char **name)
{
    memset(s, 0, sizeof *s);
    crdt_cluster_start(&s->cl, 3, 1);
    s->replica = crdt_cluster_replica_of(&s->cl, 0);
    /* A name on primary 0 (crdt_cluster_name_on knows nodes by the ports CLUSTER SLOTS
     * gives: before primary 0 announces its proxy's). */
    *name = crdt_cluster_name_on(&s->cl, 0, "split");
}

/* Moves every link between nodes onto the proxies. */
static void split_cluster_route(split_cluster *s)
{
    char v[32];
    for (int i = 0; i < s->cl.nnodes; i++) {
        config_set(&s->cl, i, "cluster-node-timeout", "6000");
        /* Without an announced address a node takes its peers' from their sockets:
         * the source addresses below would become their addresses. */
        config_set(&s->cl, i, "cluster-announce-ip", "127.0.0.1");
        node_source(i, v, sizeof v);
        config_set(&s->cl, i, "bind-source-addr", v);
    }
    for (int i = 0; i < s->cl.nnodes; i++) {
        s->bus[i] = proxy_to(s->cl.node[i].port + 10000);
        snprintf(v, sizeof v, "%d", crdt_proxy_port(s->bus[i]));
        /* Peers see the new port in this node's next ping, drop their link and
         * reconnect through the proxy, from their new source address. */
        config_set(&s->cl, i, "cluster-announce-bus-port", v);
    }
    s->front = proxy_to(s->cl.node[0].port);
    snprintf(v, sizeof v, "%d", crdt_proxy_port(s->front));
    config_set(&s->cl, 0, "cluster-announce-port", v);
    cr_assert(crdt_wait_until(routed_through_proxies, s, crdt_scaled_ms(30000)),
              "the cluster's links never moved onto the proxies: %s", s->err);
}

static void split_cluster_stop(split_cluster *s)
{
    crdt_cluster_stop(&s->cl);
    for (int i = 0; i < CRDT_CLUSTER_MAX; i++)
        if (s->bus[i] != NULL)
            crdt_proxy_stop(s->bus[i]);
    if (s->front != NULL)
        crdt_proxy_stop(s->front);
}

/* The cut: nobody reaches primary 0 through its proxies (bus, client port) and primary
 * 0 reaches no other node's bus; a client connected straight to its port keeps it. */
static void split_cluster_cut(split_cluster *s)
{
    char from[32];
    node_source(0, from, sizeof from);
    crdt_proxy_set_blackhole(s->front, CRDT_PROXY_BOTH, true);
    crdt_proxy_set_blackhole(s->bus[0], CRDT_PROXY_BOTH, true);
    for (int i = 1; i < s->cl.nnodes; i++)
        cr_assert(crdt_proxy_set_blackhole_from(s->bus[i], from, true));
}

static bool is_primary(void *arg)
{
    int *port = arg;
    redisReply *rep = ask_node(*port, "ROLE");
    bool ok = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
              rep->element[0]->type == REDIS_REPLY_STRING &&
              strcmp(rep->element[0]->str, "master") == 0;
    if (rep != NULL)
        freeReplyObject(rep);
    return ok;
}

/* One round: a fresh cluster; an isolated client connected straight to primary 0 (as
 * the Sentinel round's), a majority client through the other nodes; both lock
 * one name of primary 0's slots in a loop while primary 0 is cut off and its replica
 * takes over. */
static void cluster_cut(void *arg) { split_cluster_cut(arg); }

static bool cluster_promoted(void *arg)
{
    split_cluster *sc = arg;
    int port = sc->cl.node[sc->replica].port;
    return crdt_wait_until(is_primary, &port, crdt_scaled_ms(30000));
}

static void cluster_split_brain_round(figures *f, crdt_holds *holds)
{
    const int sync = f->replica_sync;
    split_cluster sc;
    const char *name = NULL;
    split_cluster_start(&sc, &name);

    /* The isolated client is connected straight to primary 0 (a cluster client would
     * re-read the map and be sent to the proxy) and takes its messages as the cluster
     * client does (sharded); the majority client, its replica and the other nodes reach
     * primary 0 only through its proxies. */
    crd_options oi;
    side_options(&oi, sync);
    oi.host = "127.0.0.1";
    oi.port = sc.cl.node[0].port;
    oi.sharded_pubsub = CRD_SHARDED_ON;
    split_cluster_route(&sc);
    char url[CRDT_CLUSTER_MAX * 24 + 32];
    size_t at = (size_t)snprintf(url, sizeof url, "redis-cluster://");
    for (int i = 1; i < sc.cl.nnodes; i++) /* every seed but the primary to be cut */
        at += (size_t)snprintf(url + at, sizeof url - at, "%s127.0.0.1:%d", i > 1 ? "," : "",
                               sc.cl.node[i].port);
    crd_options om;
    side_options(&om, sync);
    om.url = url;
    split_ops ops = {"cluster", cluster_cut, &sc, cluster_promoted, &sc};
    split_outcome out = run_split(f, holds, &oi, &om, name, sync, &ops);
    split_cluster_stop(&sc);
    cr_assert(out.warm, "both sides never held the lock before the cut");
    cr_assert(out.promoted, "the cut primary's replica was never promoted");
    assert_sides(&out, sync);
}

Test(partition, with_replica_sync_a_cluster_primary_cut_off_from_its_replica_and_the_cluster_grants_no_overlapping_hold)
{
    split_brain("split-brain-cluster", CRD_REPLICA_SYNC_ON, cluster_split_brain_round);
}

/* The cut primary grants holds until it sees the cluster down (node timeout): counted.
 * Soak only (make soak-partition): it asserts nothing the test above does not, and CI's
 * hour has no room for another 25 s cluster round in each of its four runs. */
Test(partition, without_replica_sync_the_overlaps_of_a_cluster_split_brain_are_counted)
{
    if (soak_ms() == 0)
        cr_skip_test("a soak scenario: make soak-partition runs it");
    split_brain("split-brain-cluster", CRD_REPLICA_SYNC_OFF, cluster_split_brain_round);
}

/* ---------------------------------------------------------------------------------- */
/* 2. A client cut off from one sentinel, or from one cluster node                    */
/* ---------------------------------------------------------------------------------- */

/* Acquire and release name on c once, recording the hold as client id. Returns the
 * acquire's status. */
static crd_status hold_once(crd_client *c, int id, const char *name, int64_t wait_ms,
                            crdt_holds *holds, figures *f)
{
    crd_lock *l = crdt_lock(c, name);
    crd_status st = crd_lock_acquire(l, wait_ms, crdt_scaled_ms(3000));
    if (st == CRD_OK) {
        int64_t start = crdt_now_ns(), end = trusted_until_ns(l);
        int64_t release = crdt_now_ns();
        crd_status rs = crd_lock_release(l);
        cr_assert_eq(rs, CRD_OK, "release of %s: %s", name, crd_strerror(rs));
        crdt_holds_add(holds, id, name, start, release < end ? release : end);
        f->holds++;
    }
    crd_lock_free(l);
    return st;
}

static void sentinel_cut_round(figures *f, crdt_holds *holds)
{
    crdt_topo topo;
    cr_assert(crdt_topo_start(&topo, NULL), "topology: %s", topo.err);
    crdt_proxy *px = proxy_to(topo.sentinels[0].port);
    /* The cut sentinel comes first: the client asks it first. */
    char addrs[128];
    snprintf(addrs, sizeof addrs, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", crdt_proxy_port(px),
             topo.sentinels[1].port, topo.sentinels[2].port);
    crd_options o;
    crd_options_init(&o);
    o.sentinel_addrs = addrs;
    o.sentinel_master = topo.name;
    cut_timeouts(&o);
    crd_client *c = crdt_client_opts(&o);
    const char *name = crdt_key("sentinel-cut");
    cr_assert_eq(hold_once(c, 1, name, 2000, holds, f), CRD_OK);

    crdt_proxy_set_blackhole(px, CRDT_PROXY_BOTH, true);
    f->partitions++;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(hold_once(c, 1, name, 2000, holds, f), CRD_OK, "hold %d after the cut", i);
    /* A client started during the cut finds the primary through the other two. */
    int64_t t0 = crdt_now_ms();
    crd_client *late = crdt_client_opts(&o);
    cr_assert_lt(crdt_now_ms() - t0, 3000, "a client took %lld ms to start",
                 (long long)(crdt_now_ms() - t0));
    cr_assert_eq(hold_once(late, 2, name, 2000, holds, f), CRD_OK);

    /* And both follow a failover the cut sentinel never hears of. */
    int old = crdt_topo_primary_port(&topo);
    int promoted = crdt_topo_failover(&topo, 30000);
    cr_assert(promoted > 0 && promoted != old, "failover: %s", topo.err);
    cr_assert_eq(hold_once(c, 1, name, crdt_scaled_ms(10000), holds, f), CRD_OK);
    cr_assert_eq(hold_once(late, 2, name, crdt_scaled_ms(10000), holds, f), CRD_OK);

    crd_client_free(late);
    crd_client_free(c);
    crdt_proxy_stop(px);
    crdt_topo_stop(&topo);
}

Test(partition, a_client_cut_off_from_one_sentinel_carries_on_through_the_other_two)
{
    run_rounds((figures){.scenario = "sentinel-cut", .sync = "on"}, sentinel_cut_round);
}

/* Whether every node's CLUSTER SLOTS names the primaries by their proxies' ports. */
typedef struct announced {
    crdt_cluster *cl;
    int ports[3];
} announced;

static bool is_proxy_port(const announced *a, long long port)
{
    for (int i = 0; i < 3; i++)
        if (a->ports[i] == port)
            return true;
    return false;
}

static bool announced_through_proxies(void *arg)
{
    announced *a = arg;
    for (int n = 0; n < a->cl->nnodes; n++) {
        redisContext *r = crdt_raw_connect(a->cl->node[n].port, 500);
        if (r == NULL)
            return false;
        redisReply *s = redisCommand(r, "CLUSTER SLOTS");
        bool ok = s != NULL && s->type == REDIS_REPLY_ARRAY && s->elements > 0;
        for (size_t k = 0; ok && k < s->elements; k++) {
            redisReply *e = s->element[k];
            ok = e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
                 e->element[2]->type == REDIS_REPLY_ARRAY && e->element[2]->elements >= 2 &&
                 e->element[2]->element[1]->type == REDIS_REPLY_INTEGER &&
                 is_proxy_port(a, e->element[2]->element[1]->integer);
        }
        freeReplyObject(s);
        redisFree(r);
        if (!ok)
            return false;
    }
    return true;
}

static void cluster_cut_round(figures *f, crdt_holds *holds)
{
    /* No replicas: a replica reaches its primary at the address the primary announces,
     * so its replication stream would cross the proxy too, and a black hole drops bytes
     * of that stream (TCP would have resent them): after the heal the replica never
     * acknowledges again and every WAIT of replica sync runs out. */
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 0);
    /* Names first: crdt_cluster_name_on maps the ports CLUSTER SLOTS gives to nodes. */
    const char *names[3];
    for (int i = 0; i < 3; i++)
        names[i] = crdt_cluster_name_on(&cl, i, "cluster-cut");
    /* Each primary announces its proxy's port to clients (CLUSTER SLOTS, MOVED), while
     * the cluster bus keeps the direct ports: the cut separates the client from one
     * node, not the node from the cluster (no failover follows). */
    crdt_proxy *px[3];
    announced a = {.cl = &cl};
    for (int i = 0; i < 3; i++) {
        px[i] = proxy_to(cl.node[i].port);
        a.ports[i] = crdt_proxy_port(px[i]);
        redisContext *r = crdt_cluster_redis(&cl, i);
        char reply[64];
        crdt_cmd_str(r, reply, sizeof reply, "CONFIG SET cluster-announce-port %d", a.ports[i]);
        cr_assert_str_eq(reply, "OK");
        redisFree(r);
    }
    cr_assert(crdt_wait_until(announced_through_proxies, &a, 15000),
              "the nodes never announced the proxies' ports");

    crd_options o;
    crdt_cluster_options(&cl, &o);
    cut_timeouts(&o);
    crd_client *c = crdt_client_opts(&o);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(hold_once(c, 1, names[i], 2000, holds, f), CRD_OK, "node %d", i);

    crdt_proxy_set_blackhole(px[0], CRDT_PROXY_BOTH, true);
    f->partitions++;
    for (int round = 0; round < 2; round++) {
        for (int i = 1; i < 3; i++)
            cr_assert_eq(hold_once(c, 1, names[i], 2000, holds, f), CRD_OK,
                         "a lock on node %d, not cut", i);
        const int64_t wait = round == 0 ? 1000 : 0;
        int64_t t0 = crdt_now_ms();
        crd_status st = hold_once(c, 1, names[0], wait, holds, f);
        int64_t took = crdt_now_ms() - t0;
        fprintf(stderr, "[partition] cluster: an acquire on the cut node, wait %lld ms: %s "
                "after %lld ms\n", (long long)wait, crd_strerror(st), (long long)took);
        cr_assert(st == CRD_IO || st == CRD_TIMEOUT, "an acquire on the cut node: %s",
                  crd_strerror(st));
        /* A try (wait 0) gets command_timeout_ms for its answer. */
        int64_t bound = (wait > 0 ? wait : o.command_timeout_ms) + 250;
        cr_assert_leq(took, bound, "an acquire on the cut node (wait %lld ms) took %lld ms",
                      (long long)wait, (long long)took);
    }

    crdt_proxy_set_blackhole(px[0], CRDT_PROXY_BOTH, false);
    cr_assert_eq(hold_once(c, 1, names[0], crdt_scaled_ms(5000), holds, f), CRD_OK,
                 "a lock on the healed node");
    crd_client_free(c);
    for (int i = 0; i < 3; i++)
        crdt_proxy_stop(px[i]);
    crdt_cluster_stop(&cl);
}

Test(partition, a_cluster_client_cut_off_from_one_node_keeps_the_others_and_fails_fast_on_it)
{
    run_rounds((figures){.scenario = "cluster-node-cut", .sync = "n/a"}, cluster_cut_round);
}
