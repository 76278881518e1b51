/*
 * pool.c -- a pool of connections to one endpoint (the server, or one cluster node).
 * Which pool serves a key is route.c's choice.
 *
 * A connection that saw an I/O error is closed when it comes back, and the pool's epoch
 * moves on so that idle connections opened before the failure (a server restart kills
 * them all at once) are reopened at their next use instead of failing one by one. The
 * client's own pool follows the primary in Sentinel mode (crd__conn_open_primary): a
 * connection of an older primary generation is reopened, and a failed one asks
 * sentinel.c to re-resolve.
 *
 * Threads: any caller. Lock: pool->mu guards the free-slot stack only (a leaf: nothing
 * else is taken under it; no I/O under it).
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct crd__pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const crd__endpoint *ep; /* where its connections go (borrowed) */
    int size;
    crd__conn *conns;
    int *free_slots; /* stack of free slot indexes */
    int nfree;
    atomic_uint epoch;
};

crd__pool *crd__pool_new(crd_client *c, const crd__endpoint *ep)
{
    int n = c->opts.pool_size;
    crd__pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->conns = calloc((size_t)n, sizeof *p->conns);
    p->free_slots = calloc((size_t)n, sizeof *p->free_slots);
    if (p->conns == NULL || p->free_slots == NULL) {
        free(p->conns);
        free(p->free_slots);
        free(p);
        return NULL;
    }
    p->ep = ep;
    p->size = n;
    for (int i = 0; i < n; i++) {
        p->free_slots[i] = n - 1 - i;
        p->conns[i].pool = p;
    }
    p->nfree = n;
    pthread_mutex_init(&p->mu, NULL);
    crd__cond_init(&p->cv);
    atomic_init(&p->epoch, 0);
    return p;
}

void crd__pool_destroy(crd__pool *p)
{
    if (p == NULL)
        return;
    /* Woken waiters may still be finishing a command (a fair waiter leaving its queue):
     * wait for every connection to come back before closing them. Bounded by the
     * command timeouts of what is in flight. */
    pthread_mutex_lock(&p->mu);
    while (p->nfree < p->size) {
        struct timespec ts = crd__abstime(crd__now_ms() + 100);
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->size; i++)
        crd__conn_close(&p->conns[i]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->conns);
    free(p->free_slots);
    free(p);
}

/* Readies the connection of slot idx (reopened when stale or closed). */
static crd_status ready(crd_client *c, crd__pool *p, int idx, crd__conn **out)
{
    crd__conn *conn = &p->conns[idx];
    unsigned epoch = atomic_load(&p->epoch);
    /* Opened before a failure (probably dead too), or to a primary that is no more. */
    if (conn->ctx != NULL &&
        (conn->epoch != epoch || (p->ep == &c->ep && conn->topo_gen != crd__topology_gen(c))))
        crd__conn_close(conn);
    if (conn->ctx == NULL) {
        conn->epoch = epoch;
        /* The client's own pool goes to the primary (resolved through the sentinels in
         * Sentinel mode); a cluster node's pool to its node. */
        crd_status st = p->ep == &c->ep ? crd__conn_open_primary(c, conn)
                                        : crd__conn_open(c, p->ep, conn);
        if (st != CRD_OK) {
            crd__pool_put(c, conn);
            return st;
        }
    }
    *out = conn;
    return CRD_OK;
}

bool crd__pool_take_spare(crd_client *c, crd__pool *p, crd__conn **out)
{
    pthread_mutex_lock(&p->mu);
    bool spare = p->nfree >= 2; /* one stays free for everyone else */
    int idx = spare ? p->free_slots[--p->nfree] : -1;
    pthread_mutex_unlock(&p->mu);
    return spare && ready(c, p, idx, out) == CRD_OK;
}

crd_status crd__pool_take(crd_client *c, crd__pool *p, crd__conn **out)
{
    int64_t deadline = crd__now_ms() + c->opts.connect_timeout_ms + c->opts.command_timeout_ms;
    pthread_mutex_lock(&p->mu);
    while (p->nfree == 0) {
        if (atomic_load(&c->closed)) {
            pthread_mutex_unlock(&p->mu);
            return crd__fail(c, CRD_CLOSED, "client is closed");
        }
        if (crd__now_ms() >= deadline) {
            pthread_mutex_unlock(&p->mu);
            return crd__fail(c, CRD_IO, "all %d pool connections stayed busy", p->size);
        }
        struct timespec ts = crd__abstime(deadline);
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    int idx = p->free_slots[--p->nfree];
    pthread_mutex_unlock(&p->mu);
    return ready(c, p, idx, out);
}

const crd__endpoint *crd__pool_ep(const crd__pool *p) { return p->ep; }

void crd__pool_put(crd_client *c, crd__conn *conn)
{
    crd__pool *p = conn->pool;
    bool broken = conn->broken;
    uint64_t gen = conn->topo_gen;
    if (broken) {
        crd__conn_close(conn);
        atomic_fetch_add(&p->epoch, 1);
    }
    pthread_mutex_lock(&p->mu);
    p->free_slots[p->nfree++] = (int)(conn - p->conns);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    /* Sentinel mode: a failed primary connection may mean a failover (the detail message
     * of the failure is kept for the caller). */
    if (broken && crd__topology_sentinel(c)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", crd_client_errmsg(c));
        crd__topology_changed(c, gen);
        crd__fail(c, CRD_IO, "%s", msg);
    }
}

void crd__pool_wake1(crd__pool *p)
{
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void crd__pool_lock1(crd__pool *p, bool lock)
{
    if (lock)
        pthread_mutex_lock(&p->mu);
    else
        pthread_mutex_unlock(&p->mu);
}

/* In a forked child, with p->mu held by the fork handler. Idle connections are
 * consistent and can be freed; one checked out by a parent thread may be mid-command:
 * abandon it. */
void crd__pool_child1(crd__pool *p)
{
    bool *idle = calloc((size_t)p->size, sizeof *idle);
    for (int i = 0; idle != NULL && i < p->nfree; i++)
        idle[p->free_slots[i]] = true;
    for (int i = 0; i < p->size; i++) {
        if (idle != NULL && idle[i])
            crd__conn_close(&p->conns[i]);
        else
            crd__conn_abandon(&p->conns[i]);
        p->free_slots[i] = i;
    }
    free(idle);
    p->nfree = p->size;
    /* Waiters recorded on the parent's condition variable do not exist here. */
    memset(&p->cv, 0, sizeof p->cv);
    crd__cond_init(&p->cv);
}
