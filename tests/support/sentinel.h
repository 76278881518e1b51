/*
 * sentinel.h -- a Sentinel topology for tests: one primary, two replicas and three
 * redis-sentinel processes on free 127.0.0.1 ports, each in a temporary directory of its
 * own, started by the calling process and stopped by crdt_topo_stop() (and, should the
 * process die first, by PR_SET_PDEATHSIG in every server: nothing outlives it).
 *
 * Sentinels monitor the primary as crdt_topo.name with quorum 2, down-after-milliseconds
 * 1000 and failover-timeout 3000, so a killed primary is replaced within a few seconds.
 * Readiness is awaited with deadlines: the primary reports two connected replicas with
 * their links up, and every sentinel names the primary and knows both replicas and the
 * two other sentinels (so a quorum can form at once).
 *
 * No Criterion here: the soak program (tests/soak/soak_sentinel.c) links this file too.
 * Every function that can fail returns false (or -1) with the reason in err (a buffer
 * of the topology); tests assert on it. One thread drives a topology; the functions are
 * not thread-safe among themselves (the soak's failover thread is the only driver).
 */
#ifndef CRDT_SENTINEL_H
#define CRDT_SENTINEL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CRDT_TOPO_NODES 3
#define CRDT_TOPO_SENTINELS 3

typedef struct crdt_proc {
    pid_t pid;       /* 0 when not running */
    int port;
    int tls_port;    /* a TLS sentinel's TLS port (crdt_tls_sentinel_start), else 0 */
    char dir[256];   /* its temporary directory (config, log) */
} crdt_proc;

typedef struct crdt_topo_opts {
    const char *name;              /* master name; default "crdtmaster" */
    const char *data_password;     /* requirepass/masterauth of the data nodes, or NULL */
    const char *sentinel_password; /* requirepass of the sentinels, or NULL */
    /* Where the replicas and the sentinels reach nodes[0]: front(front_arg, its port)
     * returns the port they use instead (a fault proxy in front of it, so that a test can
     * cut the first primary off from its replicas and sentinels: a split brain), or -1
     * on failure. NULL: its own port. */
    int (*front)(void *front_arg, int primary_port);
    void *front_arg;
} crdt_topo_opts;

typedef struct crdt_topo {
    char name[64];
    char data_password[64];
    char sentinel_password[64];
    crdt_proc nodes[CRDT_TOPO_NODES];         /* nodes[0] starts as the primary */
    crdt_proc sentinels[CRDT_TOPO_SENTINELS];
    char err[512];
    int front_port; /* the port front() gave for nodes[0] (sentinels name it), or 0 */
} crdt_topo;

/* Starts the whole topology and waits (deadline 20 s) until it is ready as described
 * above. On failure everything started is stopped again. */
bool crdt_topo_start(crdt_topo *t, const crdt_topo_opts *o);
/* Stops every process (SIGTERM, SIGKILL after 3 s) and removes the directories. */
void crdt_topo_stop(crdt_topo *t);

/* "redis-sentinel://[:datapw@]127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3#name" into buf
 * (a sentinel password goes in crd_options.sentinel_password). */
const char *crdt_topo_url(const crdt_topo *t, char *buf, size_t cap);
/* "127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3" into buf (crd_options.sentinel_addrs). */
const char *crdt_topo_addrs(const crdt_topo *t, char *buf, size_t cap);

/* The primary's port as the first sentinel that answers names it, or -1. */
int crdt_topo_primary_port(crdt_topo *t);
/* Index in nodes[] of a port, or -1. */
int crdt_topo_node_index(const crdt_topo *t, int port);
/* A hiredis connection to a data node's port (AUTH with the data password), timeout
 * timeout_ms, or NULL. */
struct redisContext *crdt_topo_connect(const crdt_topo *t, int port, int64_t timeout_ms);

/* SENTINEL FAILOVER (retried while a sentinel says INPROG or NOGOODSLAVE) and waits,
 * within timeout_ms, until every sentinel names a new primary that says ROLE master.
 * Returns the new primary's port, or -1 with err set. */
int crdt_topo_failover(crdt_topo *t, int64_t timeout_ms);
/* Waits, within timeout_ms, until every sentinel names a primary other than port `old`
 * that says ROLE master (a failover the sentinels started themselves, e.g. after the
 * primary was cut off). Returns its port, or -1 with err set. */
int crdt_topo_await_switch(crdt_topo *t, int old, int64_t timeout_ms);
/* SIGKILLs the current primary and waits, within timeout_ms, until every sentinel names
 * another node that says ROLE master. Returns the new primary's port, or -1. The killed
 * node stays down until crdt_topo_restart(). */
int crdt_topo_kill_primary(crdt_topo *t, int64_t timeout_ms);
/* Restarts a stopped node on its port as a replica of the current primary and waits,
 * within timeout_ms, until the primary counts it as connected. */
bool crdt_topo_restart(crdt_topo *t, int index, int64_t timeout_ms);
/* Waits, within timeout_ms, until the primary reports every running node but itself as
 * a connected replica with its link up, and every sentinel names it and lists them. */
bool crdt_topo_settle(crdt_topo *t, int64_t timeout_ms);

/* Starts one more sentinel (into *out) monitoring 127.0.0.1:port as name, quorum 1,
 * with an optional requirepass; waits until it answers. For the bad-input tests: a
 * sentinel that names a replica as the primary, or one that wants a password. */
bool crdt_topo_extra_sentinel(crdt_topo *t, const char *name, int port, const char *password,
                              crdt_proc *out);
/* One sentinel serving TLS too (out->tls_port, certificates of certs: crdt_tls_certs())
 * and talking TLS to the data nodes, monitoring 127.0.0.1:primary_tls_port as name with
 * quorum 1; waits until it answers on its plain port. For rediss-sentinel:// tests. */
bool crdt_tls_sentinel_start(const char *certs, const char *name, int primary_tls_port,
                             crdt_proc *out, char *err, size_t errlen);
void crdt_proc_stop(crdt_proc *p);

#endif /* CRDT_SENTINEL_H */
