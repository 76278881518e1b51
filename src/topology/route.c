/*
 * route.c -- which peer serves a command on a key: the one place that chooses.
 *
 * A standalone (or Sentinel) client has one peer (engine.c's crd__pool: the server, or
 * whichever node the sentinels name as primary) and every key maps to it. A cluster
 * client has one peer per node (cluster.c keeps the nodes and the slot map) and gets here
 * the peer of the primary serving the key's slot.
 *
 * Threads: any. No I/O, no lock of its own (the cluster's map lock is cluster.c's).
 */
#include "topology.h"

crd_status crd__pool_init(crd_client *c)
{
    if (c->ep.cluster)
        return crd__cluster_init(c);
    c->pool = crd__pool_new(c, &c->ep);
    if (c->pool == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the connection pool");
    return CRD_OK;
}

crd__pool *crd__pool_for(crd_client *c, const char *key, size_t keylen)
{
    if (c->cluster == NULL)
        return c->pool; /* one endpoint serves every key */
    crd__node *n = crd__cluster_node_for(c, key, keylen);
    if (n == NULL)
        crd__fail(c, CRD_IO, "no cluster node serves the slot of this key (the slot map "
                  "could not be read)");
    return n != NULL ? n->pool : NULL;
}

void crd__pool_free(crd_client *c)
{
    c->pool = NULL;
    crd__cluster_free(c);
}

void crd__pool_after_fork_child(crd_client *c)
{
    crd__engine_after_fork_child(c);
    if (c->cluster != NULL)
        crd__cluster_after_fork_child(c);
}
