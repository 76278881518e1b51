/*
 * soak_sentinel.c -- exclusion across failovers (issue 15): a Sentinel topology
 * (tests/support/sentinel.c), WORKERS threads with a client each taking LOCKS locks at
 * random, and a failover every FAILOVER_S seconds (SENTINEL FAILOVER and a killed
 * primary, alternately; the killed node comes back as a replica).
 *
 * Per run, for replica sync on and off:
 *   overlaps   two holders inside one lock at once: a local counter per lock (exact),
 *              and a marker key per lock on the current primary (the detector in Redis:
 *              SET NX with a 2 s expiry; a failover can drop a marker, so it may
 *              undercount)
 *   stale      markers found that name a section which had already ended: the DEL that
 *              ended it was lost by a failover (with replica sync off nothing waits for
 *              the replicas, so a DEL acknowledged by the old primary can be gone on the
 *              new one). Not an overlap: the marker's holder was no longer inside.
 *   lost       holds that ended without their release: a CRD_EVENT_LOCK_LOST, or a
 *              release answering CRD_LOCK_LOST / CRD_NOT_OWNER
 *   acquired, not_synced (acquires undone by replica sync), io (failed calls)
 *
 * Usage: soak_sentinel [seconds-per-mode (default 300)] [on|off|both (default both)]
 * Exit status 0 when no overlap was seen with replica sync on. Plain C, no Criterion.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "credisson.h"
#include "sentinel.h"
#include "../standalone/events.h"

enum { WORKERS = 8, LOCKS = 4, FAILOVER_S = 20 };

static crdt_topo topo;
static atomic_int inside[LOCKS];
static atomic_long overlaps, redis_overlaps, stale, lost, acquired, not_synced, io_fail, released;
static crdt_events events; /* every worker's client's: lock-lost events count as lost */
static atomic_long sections;          /* section ids, from 1 */
static atomic_long live[WORKERS + 1]; /* the section worker k is inside, 0 when none */
static atomic_bool stop;
static char url[256];
static int sync_mode;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Another section's marker was in lock i's place: an overlap when that section is still
 * going on, a stale marker when it ended (a failover lost the DEL that ended it). A
 * section that ends between the SET and this look counts as stale; the local counter
 * sees every real overlap all the same. */
static void marker_found(redisContext *r, int i)
{
    redisReply *x = redisCommand(r, "GET soak:inside:%d", i);
    long other = x != NULL && x->type == REDIS_REPLY_STRING ? atol(x->str) : 0;
    freeReplyObject(x);
    bool going_on = false;
    for (int k = 1; k <= WORKERS; k++)
        going_on = going_on || (other != 0 && atomic_load(&live[k]) == other);
    atomic_fetch_add(going_on ? &redis_overlaps : &stale, 1);
}

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + (unsigned)time(NULL);
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 2000;
    /* A lease longer than a failover takes (about 2-5 s here): a lock that is lost was
     * lost by the failover, not by renewals failing past the lease meanwhile. */
    o.watchdog_timeout_ms = 10000;
    o.replica_sync = sync_mode;
    o.on_event = crdt_events_count;
    o.event_user_data = &events;
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) != CRD_OK) {
        fprintf(stderr, "soak: client: %s\n", crd_client_errmsg(c));
        crd_client_free(c);
        return NULL;
    }
    crd_lock *locks[LOCKS];
    char name[64];
    for (int i = 0; i < LOCKS; i++) {
        snprintf(name, sizeof name, "soak:lock:%d", i);
        crd_lock_new(c, name, &locks[i]);
    }
    redisContext *r = NULL;
    int r_port = 0;
    while (!atomic_load(&stop)) {
        int i = (int)(rand_r(&seed) % LOCKS);
        crd_status st = crd_lock_acquire(locks[i], 5000, CRD_LEASE_WATCHDOG);
        if (st == CRD_NOT_SYNCED) {
            atomic_fetch_add(&not_synced, 1);
            continue;
        }
        if (st == CRD_IO || st == CRD_SERVER) {
            atomic_fetch_add(&io_fail, 1);
            usleep(50000);
            continue;
        }
        if (st != CRD_OK)
            continue;
        atomic_fetch_add(&acquired, 1);
        if (atomic_fetch_add(&inside[i], 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        /* The detector in Redis, on whatever the sentinels name now. */
        int port = crdt_topo_primary_port(&topo);
        if (port != r_port) {
            redisFree(r);
            r = port > 0 ? crdt_topo_connect(&topo, port, 500) : NULL;
            r_port = r ? port : 0;
        }
        /* A marker with this worker's value: finding another's means two are inside. A
         * marker whose DEL a failover swallowed expires after 2 s (sections last at
         * most 100 ms). */
        long section = atomic_fetch_add(&sections, 1) + 1;
        atomic_store(&live[(uintptr_t)arg], section);
        char me[32];
        snprintf(me, sizeof me, "%ld", section);
        if (r != NULL) {
            redisReply *x = redisCommand(r, "SET soak:inside:%d %s NX PX 2000", i, me);
            if (x != NULL && x->type == REDIS_REPLY_NIL)
                marker_found(r, i);
            freeReplyObject(x);
        }
        usleep(1000 * (20 + rand_r(&seed) % 80)); /* the critical section */
        if (r != NULL) {
            redisReply *x = redisCommand(r, "GET soak:inside:%d", i);
            if (x != NULL && x->type == REDIS_REPLY_STRING && strcmp(x->str, me) == 0) {
                freeReplyObject(x);
                x = redisCommand(r, "DEL soak:inside:%d", i);
            }
            if (x == NULL) {
                redisFree(r);
                r = NULL;
                r_port = 0;
            }
            freeReplyObject(x);
        }
        atomic_store(&live[(uintptr_t)arg], 0);
        atomic_fetch_sub(&inside[i], 1);
        st = crd_lock_release(locks[i]);
        if (st == CRD_LOCK_LOST || st == CRD_NOT_OWNER)
            atomic_fetch_add(&lost, 1);
        else if (st == CRD_OK)
            atomic_fetch_add(&released, 1);
        else
            atomic_fetch_add(&io_fail, 1);
    }
    redisFree(r);
    for (int i = 0; i < LOCKS; i++)
        crd_lock_free(locks[i]);
    crd_client_free(c);
    return NULL;
}

static bool run_mode(int mode, int seconds)
{
    sync_mode = mode;
    atomic_store(&stop, false);
    overlaps = redis_overlaps = stale = lost = acquired = not_synced = io_fail = released = 0;
    memset(&events, 0, sizeof events);
    if (!crdt_topo_start(&topo, NULL)) {
        fprintf(stderr, "soak: topology: %s\n", topo.err);
        return false;
    }
    crdt_topo_url(&topo, url, sizeof url);
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    int64_t end = now_ms() + (int64_t)seconds * 1000;
    int failovers = 0, failed = 0;
    while (now_ms() < end) {
        int64_t next = now_ms() + FAILOVER_S * 1000;
        while (now_ms() < next && now_ms() < end)
            usleep(100000); /* the schedule: a failover every FAILOVER_S seconds */
        if (now_ms() >= end)
            break;
        int p;
        if (failovers % 2 == 0) {
            p = crdt_topo_failover(&topo, 30000);
        } else {
            int old = crdt_topo_primary_port(&topo);
            p = crdt_topo_kill_primary(&topo, 30000);
            if (p > 0)
                crdt_topo_restart(&topo, crdt_topo_node_index(&topo, old), 30000);
        }
        if (p > 0)
            failovers++;
        else
            failed++, fprintf(stderr, "soak: failover failed: %s\n", topo.err);
        crdt_topo_settle(&topo, 20000);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    crdt_topo_stop(&topo);
    printf("soak: replica sync %-3s %d s, %d failovers (%d refused): acquired %ld, released %ld, "
           "overlaps %ld (Redis detector %ld, stale markers %ld), lost %ld, not_synced %ld, io %ld\n",
           mode == CRD_REPLICA_SYNC_ON ? "on" : "off", seconds, failovers, failed,
           atomic_load(&acquired), atomic_load(&released), atomic_load(&overlaps),
           atomic_load(&redis_overlaps), atomic_load(&stale),
           atomic_load(&lost) + atomic_load(&events.lost), atomic_load(&not_synced),
           atomic_load(&io_fail));
    fflush(stdout);
    return true;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 300;
    const char *which = argc > 2 ? argv[2] : "both";
    int rc = 0;
    if (strcmp(which, "off") != 0) {
        if (!run_mode(CRD_REPLICA_SYNC_ON, seconds))
            return 2;
        rc = atomic_load(&overlaps) > 0;
    }
    if (strcmp(which, "on") != 0 && !run_mode(CRD_REPLICA_SYNC_OFF, seconds))
        return 2;
    return rc;
}
