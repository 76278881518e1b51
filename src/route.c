/*
 * route.c -- which connection serves a command on a key: the one place that chooses.
 *
 * A standalone client has one pool (pool.c) and every key maps to it. A cluster client
 * has one pool per node (cluster.c keeps the nodes and the slot map) and gets here the
 * pool of the primary serving the key's slot; a connection that cannot be opened marks
 * the map stale (the node may have failed over). Also here: the client-wide steps over
 * every pool (start, wake on close, free, fork).
 *
 * Threads: any caller. Locks: the pools' (leaves); only the fork handler takes the
 * cluster's mutex and then every pool's.
 */
#include "internal.h"

crd_status crd__pool_init(crd_client *c)
{
    if (c->ep.cluster)
        return crd__cluster_init(c);
    c->pool = crd__pool_new(c, &c->ep);
    if (c->pool == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the connection pool");
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
    crd_status st = crd__pool_take(c, n->pool, out);
    if (st == CRD_IO)
        crd__cluster_stale(c); /* the node may be gone: ask where the slots are */
    return st;
}

static void wake_one(crd_client *c, crd__pool *p, void *arg)
{
    (void)c;
    (void)arg;
    crd__pool_wake1(p);
}

void crd__pool_wake(crd_client *c)
{
    if (c->pool != NULL)
        crd__pool_wake1(c->pool);
    if (c->cluster != NULL)
        crd__cluster_foreach_pool(c, wake_one, NULL, false);
}

void crd__pool_free(crd_client *c)
{
    crd__pool_destroy(c->pool);
    c->pool = NULL;
    crd__cluster_free(c);
}

static void lock_one(crd_client *c, crd__pool *p, void *arg)
{
    (void)c;
    crd__pool_lock1(p, *(bool *)arg);
}

/* Locks: the cluster's mutex (if any), then every pool's; unlocks in the same walk. */
void crd__pool_lock_for_fork(crd_client *c, bool lock)
{
    if (c->pool != NULL)
        crd__pool_lock1(c->pool, lock);
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

static void child_one(crd_client *c, crd__pool *p, void *arg)
{
    (void)c;
    (void)arg;
    crd__pool_child1(p);
}

void crd__pool_after_fork_child(crd_client *c)
{
    if (c->pool != NULL)
        crd__pool_child1(c->pool);
    if (c->cluster != NULL) {
        crd__cluster_foreach_pool(c, child_one, NULL, true);
        crd__cluster_after_fork_child(c);
    }
}
