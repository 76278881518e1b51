/*
 * pool.c -- which connection serves a command: a pool of connections to the client's
 * endpoint, handed out for a key.
 *
 * A standalone client has one pool and every key maps to it. A cluster client has one
 * pool per node (cluster.c keeps the nodes and the slot map) and picks here the pool of
 * the primary serving the key's slot; a sentinel client would resolve the primary here
 * when it (re)connects. A connection that saw an I/O error is closed when it comes back, and
 * the pool's epoch moves on so that idle connections opened before the failure (a
 * server restart kills them all at once) are reopened at their next use instead of
 * failing one by one.
 *
 * Threads: any caller. Lock: pool->mu guards the free-slot stack only (a leaf: nothing
 * else is taken under it; no I/O under it). Only the fork handler takes the cluster's
 * mutex and then every pool's.
 */
#include "internal.h"

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

crd_status crd__pool_init(crd_client *c)
{
    if (c->ep.cluster)
        return crd__cluster_init(c);
    c->pool = crd__pool_new(c, &c->ep);
    if (c->pool == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the connection pool");
    return CRD_OK;
}

static void wake_one(crd_client *c, crd__pool *p, void *arg)
{
    (void)c;
    (void)arg;
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void crd__pool_wake(crd_client *c)
{
    if (c->pool != NULL)
        wake_one(c, c->pool, NULL);
    if (c->cluster != NULL)
        crd__cluster_foreach_pool(c, wake_one, NULL, false);
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

void crd__pool_free(crd_client *c)
{
    crd__pool_destroy(c->pool);
    c->pool = NULL;
    crd__cluster_free(c);
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
    crd__conn *conn = &p->conns[idx];
    unsigned epoch = atomic_load(&p->epoch);
    if (conn->ctx != NULL && conn->epoch != epoch)
        crd__conn_close(conn); /* opened before a failure: probably dead too */
    if (conn->ctx == NULL) {
        conn->epoch = epoch;
        crd_status st = crd__conn_open(c, p->ep, conn);
        if (st != CRD_OK) {
            crd__pool_put(c, conn);
            if (c->cluster != NULL && st == CRD_IO)
                crd__cluster_stale(c); /* the node may be gone: ask where the slots are */
            return st;
        }
    }
    *out = conn;
    return CRD_OK;
}

crd_status crd__pool_get(crd_client *c, const char *key, size_t keylen, crd__conn **out)
{
    if (c->cluster == NULL)
        return crd__pool_take(c, c->pool, out); /* one endpoint serves every key */
    crd__node *n = crd__cluster_node_for(c, key, keylen);
    if (n == NULL)
        return crd__fail(c, CRD_IO, "no cluster node serves the slot of this key (the slot map "
                         "could not be read)");
    return crd__pool_take(c, n->pool, out);
}

const crd__endpoint *crd__pool_ep(const crd__pool *p) { return p->ep; }

void crd__pool_put(crd_client *c, crd__conn *conn)
{
    (void)c;
    crd__pool *p = conn->pool;
    if (conn->broken) {
        crd__conn_close(conn);
        atomic_fetch_add(&p->epoch, 1);
    }
    pthread_mutex_lock(&p->mu);
    p->free_slots[p->nfree++] = (int)(conn - p->conns);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void lock_one(crd_client *c, crd__pool *p, void *arg)
{
    (void)c;
    if (*(bool *)arg)
        pthread_mutex_lock(&p->mu);
    else
        pthread_mutex_unlock(&p->mu);
}

/* Locks: the cluster's mutex (if any), then every pool's; unlocks in the same walk. */
void crd__pool_lock_for_fork(crd_client *c, bool lock)
{
    if (c->pool != NULL)
        lock_one(c, c->pool, &lock);
    if (c->cluster == NULL)
        return;
    if (lock) {
        crd__cluster_lock_for_fork(c, true);
        crd__cluster_foreach_pool(c, lock_one, &lock, true);
    } else {
        crd__cluster_foreach_pool(c, lock_one, &lock, true);
        crd__cluster_lock_for_fork(c, false);
    }
}

/* In a forked child, with p->mu held by the fork handler. Idle connections are
 * consistent and can be freed; one checked out by a parent thread may be mid-command:
 * abandon it. */
static void child_one(crd_client *c, crd__pool *p, void *arg)
{
    (void)c;
    (void)arg;
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

void crd__pool_after_fork_child(crd_client *c)
{
    if (c->pool != NULL)
        child_one(c, c->pool, NULL);
    if (c->cluster != NULL) {
        crd__cluster_foreach_pool(c, child_one, NULL, true);
        crd__cluster_after_fork_child(c);
    }
}
