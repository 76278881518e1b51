/*
 * failover.h -- the failover checks shared by the Cluster and Sentinel suites
 * (test_cluster.c, test_sentinel.c): what must hold once a stalled primary has been
 * replaced, whichever topology replaced it.
 *
 * What it provides
 *   - crdt_stalled_acquire: one blocking acquire against a stopped primary returns by its
 *     own deadline (CRD_TIMEOUT or CRD_IO), not by the command timeout.
 *   - crdt_failover_check: after the switch, the next acquire finds the new primary and
 *     releases there; the old primary, resumed (SIGCONT), is demoted to a replica with
 *     its link up and keeps no copy of the hold; the new primary keeps none either
 *     (nothing of an owner whose caller was told "failed" stays held anywhere).
 *   - crdt_linked_replica: whether a node says it is a replica with its link up.
 *   - crdt_topo_start_fronted: the split-brain set-up of the partition and doctor suites,
 *     a Sentinel topology whose replicas and sentinels reach its first primary through a
 *     fault proxy (black-holed, it cuts that primary off while its direct clients stay).
 *
 * The topology is the caller's: it passes a function that connects to the old or the
 * new primary (a cluster node, a Sentinel topology's port). Everything asserts with
 * Criterion, so it runs in a test.
 */
#ifndef CRDT_FAILOVER_H
#define CRDT_FAILOVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* A new connection to the old primary (old true) or the new one, able to read that
 * node's own data (a cluster replica after READONLY); NULL when it cannot connect yet. */
typedef redisContext *(*crdt_node_fn)(void *arg, bool old);

/* Acquires l with a 100 ms wait while its primary is stopped: asserts CRD_TIMEOUT or
 * CRD_IO within 100 ms + slack_ms ("what" names it); returns the ms it took. */
int64_t crdt_stalled_acquire(crd_client *c, crd_lock *l, int64_t slack_ms, const char *what);

/* Once the topology has replaced the stopped primary (pid old_pid): l's acquire (30 s
 * wait, 30 s lease) is CRD_OK and its release too ("acquire after the <what>"); then the
 * old primary is resumed and must become, within 30 s, a linked replica without key, and
 * the new primary must not hold key. Returns the ms the acquire took. */
int64_t crdt_failover_check(crd_client *c, crd_lock *l, const char *key, pid_t old_pid,
                            crdt_node_fn node, void *arg, const char *what);

/* INFO replication of r says role:slave and master_link_status:up. */
bool crdt_linked_replica(redisContext *r);

/* sentinel.h's topology and faultproxy.h's proxy, declared here only: sentinel.h's
 * crdt_proc is not procs.h's, and a cluster suite includes this header with procs.h. */
typedef struct crdt_topo crdt_topo;
typedef struct crdt_proxy crdt_proxy;

/* Starts topo (crdt_topo_start) with a fault proxy, *front, in front of nodes[0] for its
 * replicas and sentinels (topo->front_port names it). Asserts it came up; when it did
 * not, the proxy is stopped too. Stop the proxy after the topology. */
void crdt_topo_start_fronted(crdt_topo *topo, crdt_proxy **front);

#endif /* CRDT_FAILOVER_H */
