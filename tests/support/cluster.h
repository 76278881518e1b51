/*
 * cluster.h -- a private Redis Cluster for a test: primaries (and replicas) on free
 * loopback ports, each redis-server in its own temporary directory with its own
 * nodes.conf, joined by `redis-cli --cluster create` (or, for one primary, which
 * redis-cli refuses, by CLUSTER ADDSLOTSRANGE), and torn down at the end of the test.
 *
 * Every node is started through crdt_server_start(), so it carries PR_SET_PDEATHSIG and
 * dies with the test process even when the test crashes; crdt_cluster_stop() stops them
 * in order and removes their directories.
 *
 * The helpers assert with Criterion, so they run inside a test (a worker), not in the
 * runner. They also drive the topology changes the cluster tests need: moving one slot
 * to another primary (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE on every node) and a
 * manual failover (CLUSTER FAILOVER on a replica). And what a test waits for on a
 * node: the sharded subscribers of a channel (a blocked waiter's SSUBSCRIBE); and, for a
 * test's forked child processes, a client that asserts nothing.
 */
#ifndef CRDT_CLUSTER_H
#define CRDT_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "harness.h"

#define CRDT_CLUSTER_MAX 9

typedef struct crdt_cluster {
    int nnodes;                          /* primaries + replicas as started */
    int nprimaries;                      /* primaries at creation */
    crdt_server node[CRDT_CLUSTER_MAX];  /* node[i < nprimaries] started as primaries */
    char id[CRDT_CLUSTER_MAX][41];       /* CLUSTER MYID of each node */
    char seeds[CRDT_CLUSTER_MAX * 24];   /* "127.0.0.1:p1,127.0.0.1:p2,..." (every node) */
    char url[CRDT_CLUSTER_MAX * 24 + 32]; /* "redis-cluster://" + seeds */
    char tls_seeds[CRDT_CLUSTER_MAX * 24];  /* the nodes' TLS ports (TLS clusters only) */
    char tls_url[CRDT_CLUSTER_MAX * 24 + 32]; /* "rediss-cluster://" + tls_seeds */
} crdt_cluster;

/* Starts primaries (1..3+) and replicas_per replicas per primary, creates the cluster
 * and waits (deadline 30 s) until every node reports cluster_state:ok, agrees on the
 * slot map, and every replica's link to its primary is up. Asserts on failure. */
void crdt_cluster_start(crdt_cluster *cl, int primaries, int replicas_per);
/* The same with every node also serving TLS with the certificates of certs_dir
 * (crdt_tls_certs()), the cluster bus and replication over TLS (tls-cluster,
 * tls-replication); cl->tls_url names the TLS ports. certs_dir NULL: crdt_cluster_start. */
void crdt_cluster_start_tls(crdt_cluster *cl, int primaries, int replicas_per,
                            const char *certs_dir);
/* Stops every node and removes their directories. Accepts a zeroed struct. */
void crdt_cluster_stop(crdt_cluster *cl);

/* Index (into cl->node) of the node serving slot as primary now, as the first node that
 * answers CLUSTER SLOTS sees it; -1 if none does. */
int crdt_cluster_owner(crdt_cluster *cl, int slot);
/* A hiredis connection to node i (asserts). */
redisContext *crdt_cluster_redis(crdt_cluster *cl, int i);
/* A connection to the primary of the key's slot (CLUSTER KEYSLOT asked of any node). */
redisContext *crdt_cluster_redis_for_key(crdt_cluster *cl, const char *key);
/* CLUSTER KEYSLOT of key, asked of a node. */
int crdt_cluster_keyslot(crdt_cluster *cl, const char *key);

/* Moves slot (with its keys) from its current primary to primary `to` the way
 * redis-cli's resharding does: IMPORTING on the target, MIGRATING on the source,
 * MIGRATE of every key in batches, then SETSLOT NODE on every primary. Between
 * SETSLOT MIGRATING and the end, `midway` (may be NULL) is called once, after the
 * first key has moved, so a test can act while ASK redirects are live. */
void crdt_cluster_move_slot(crdt_cluster *cl, int slot, int to, void (*midway)(void *),
                            void *arg);
/* CLUSTER FAILOVER on a replica of primary `primary`; waits (deadline 20 s) until the
 * replica is primary and every node agrees. Returns the new primary's index. */
int crdt_cluster_failover(crdt_cluster *cl, int primary);
/* Index of a running replica of primary `primary` (asserts there is one). */
int crdt_cluster_replica_of(crdt_cluster *cl, int primary);
/* SIGKILLs primary `primary` and waits (deadline 30 s) until its replica has been
 * promoted by the cluster itself (node timeout 2 s) and the running nodes agree. Returns
 * the new primary's index; the killed node stays down. */
int crdt_cluster_kill_primary(crdt_cluster *cl, int primary);
/* For a primary the caller stopped (SIGSTOP of cl->node[primary].pid): waits (deadline
 * 30 s) until the cluster has promoted its replica (node timeout 2 s) and returns the
 * new primary's index. The map is not waited for (the stopped node answers nothing). */
int crdt_cluster_await_takeover(crdt_cluster *cl, int primary);
/* Cuts a replica off its primary: its link is killed and every reconnection fails its
 * AUTH (masteruser/masterauth of a user the primary does not know), so writes made on
 * the primary from now on never reach it. Waits until the link is down. */
void crdt_cluster_cut_replication(crdt_cluster *cl, int replica);
/* Waits until every running node says cluster_state:ok and all agree on which node
 * serves each slot's primary. Returns whether that happened within timeout_ms. */
bool crdt_cluster_wait_stable(crdt_cluster *cl, int64_t timeout_ms);

/* A client options struct for the cluster: crdt_options() with url = cl->url. */
void crdt_cluster_options(crdt_cluster *cl, crd_options *o);

/* A new name (the test's key prefix, suffix and a number; never the same twice in a
 * process) whose slot the node at index `primary` serves now. The returned storage
 * lives until process exit. */
const char *crdt_cluster_name_on(crdt_cluster *cl, int primary, const char *suffix);

/* For a forked child, which must not assert: a client of the cluster named by url (its
 * redis-cluster:// URL, e.g. a copy of cl->url), or NULL when none can be made. */
crd_client *crdt_cluster_child_client(const char *url);

/* How many clients SSUBSCRIBEd channel at node r (PUBSUB SHARDNUMSUB); -1 when r does
 * not answer as a node does (during a move or a failover a node may not). */
long long crdt_cluster_shard_subscribers(redisContext *r, const char *channel);
/* A crdt_wait_until predicate on a crdt_probe (r, name, n): at least n clients (n 0: one)
 * SSUBSCRIBEd the channel name at node r: a waiter listens on its slot's primary. */
bool crdt_cluster_shard_subscribed(void *probe);

#endif /* CRDT_CLUSTER_H */
