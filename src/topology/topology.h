/*
 * topology.h -- the topology layer (src/topology/; base.h lists the layers): where a
 * command goes and how it gets there: Sentinel (where the primary is, replica sync),
 * the cluster's nodes and slot map, the peer for a key, the command builder and the one
 * call path (EVALSHA, NOSCRIPT, MOVED/ASK, READONLY, replica sync's WAIT). Sees
 * transport.h and base.h; what it offers the layers above is this header.
 */
#ifndef CRD_TOPOLOGY_H
#define CRD_TOPOLOGY_H

#include "crd_scripts.h"
#include "transport.h"

/* ---- sentinel.c: where the primary is, and replica sync ------------------------------------- */

/* Replica sync's WAIT timeout when a script on key may be followed by a WAIT (replica
 * sync on, and its node not known to have no replica), else 0: what its round trip may
 * take beyond the command timeout (acquire.c's attempt budget). */
int64_t crd__sync_budget_ms(crd_client *c, const char *key, size_t keylen);

/* Sets up the topology: sentinel mode when cfg is non-NULL (taken over, cleared), and
 * replica sync from the options. No I/O. */
crd_status crd__topology_init(crd_client *c, crd__sentinel_cfg *cfg, const crd_options *o);
/* Sentinel mode: resolves the primary once (the client's start fails when that fails)
 * and starts the +switch-master listener thread. Standalone: nothing. */
crd_status crd__topology_start(crd_client *c);
void crd__topology_stop(crd_client *c); /* joins the listener */
void crd__topology_free(crd_client *c);
bool crd__topology_sentinel(const crd_client *c);
/* Whether replica sync is on (the options' rule: ON, IF_ALLOWED, AUTO on Sentinel/Cluster). */
bool crd__sync_on(const crd_client *c);
/* The primary's generation: it moves whenever the primary's address changes. A
 * connection opened under an older one must be reopened (crd__conn.topo_gen). */
uint64_t crd__topology_gen(crd_client *c);
/* Where to connect now: a copy of the endpoint (standalone: c->ep; sentinel: the resolved
 * primary with the data nodes' credentials, resolving first when needed) and its
 * generation. The caller frees *out with crd__endpoint_clear. */
crd_status crd__endpoint_for_connect(crd_client *c, crd__endpoint *out, uint64_t *gen);
/* The same without ever asking the sentinels (the I/O thread): CRD_IO with why when the
 * primary is not known yet. */
crd_status crd__endpoint_peek(crd_client *c, crd__endpoint *out, uint64_t *gen, char *why,
                              size_t whylen);
/* crd__conn_open to the current primary, setting conn->topo_gen; in sentinel mode a
 * failed connect re-resolves and, when the primary moved, tries the new one once. */
crd_status crd__conn_open_primary(crd_client *c, crd__conn *conn);
/* The hook for "the primary may have moved": a READONLY reply or a failed connection
 * seen on a connection of generation gen_seen (0: whatever the current one). Sentinel
 * mode re-resolves (unless another thread already moved past gen_seen) and returns the
 * resolution's status; standalone returns CRD_OK at once. */
crd_status crd__topology_changed(crd_client *c, uint64_t gen_seen);
/* The same hook for a caller's thread, which must not outlive its deadline: sentinel
 * mode asks the listener thread to ask the sentinels now and returns at once (without
 * the thread, a fork child's before its next connect, it re-resolves itself). */
void crd__topology_suspect(crd_client *c);
/* Replica sync's one rule: how many replicas WAIT waits for after a lock script sent to
 * peer p (a primary), 0 for no WAIT (sync off, or no replicas), and its timeout in
 * *timeout_ms. May send ROLE to p (through the engine, bounded by deadline_ms) to refresh
 * the count. */
int crd__sync_replicas(crd_client *c, crd__pool *p, int64_t *timeout_ms, int64_t deadline_ms);
void crd__topology_after_fork_child(crd_client *c);

/* ---- deploy.c: what the deployment allows (README "Running on managed Redis") ------ */

crd_status crd__deploy_init(crd_client *c); /* no I/O */
void crd__deploy_free(crd_client *c);
/* At start, after the PING: INFO memory (one WARN line and crd_metrics.eviction_warnings
 * when maxmemory-policy can evict lock keys) and, when sync, WAIT 0 0. Refusals and
 * failures are ignored (advice, never a reason not to start). */
void crd__deploy_probe(crd_client *c, bool sync);
/* Whether a maxmemory-policy can evict lock keys (allkeys-*, volatile-*). Pure. */
bool crd__deploy_policy_evicts(const char *policy);
/* Replica sync on a server that may refuse WAIT: send the WAIT, send without it, or (an
 * acquire, unless replica_sync is IF_ALLOWED) refuse before sending: CRD__SYNC_REFUSE with
 * CRD_SYNC_UNAVAILABLE recorded as the detail naming what. May send WAIT 0 0 to p (every
 * 10 s while refused). */
typedef enum crd__sync_mode { CRD__SYNC_WAIT, CRD__SYNC_WITHOUT, CRD__SYNC_REFUSE } crd__sync_mode;
crd__sync_mode crd__deploy_sync_mode(crd_client *c, crd__pool *p, bool acquire,
                                     int64_t deadline, const char *what);
/* A WAIT's reply seen in a pipeline: an error reply records the refusal. */
void crd__deploy_wait_answer(crd_client *c, const redisReply *w);
bool crd__deploy_wait_refused(crd_client *c);
/* Whether r is a CROSSSLOT error; the first one is logged and makes
 * crd__deploy_slot_checked true for the client's life. */
bool crd__deploy_crossslot(crd_client *c, const redisReply *r);
bool crd__deploy_slot_checked(crd_client *c);

/* ---- route.c: which peer serves a key ---------------------------------------------------- */

/* Standalone: the endpoint's peer. Cluster: reads the topology from the seeds and makes
 * one peer per primary (cluster.c). */
crd_status crd__pool_init(crd_client *c);
/* The peer for a command on key: standalone, the one endpoint's; cluster, the primary's
 * serving the key's slot (NULL, with the detail set, when the map has none). The one
 * place a peer is chosen for a key. No I/O. */
crd__pool *crd__pool_for(crd_client *c, const char *key, size_t keylen);
/* Forgets the peers (the engine frees them) and frees the cluster's nodes. */
void crd__pool_free(crd_client *c);

/* ---- cluster.c: the slot map and the nodes of a Redis Cluster ------------------------- */

/* One node the client has heard of (a seed, a primary of the map, a redirect target).
 * Nodes are never freed before the client, so a pointer to one stays valid. */
typedef struct crd__node {
    crd__endpoint ep; /* host owned; username and password borrowed from the client's */
    crd__pool *pool;  /* commands to this node */
    struct crd__node *next;
} crd__node;

typedef struct crd__cluster crd__cluster;

/* Reads the slot map from the first seed that answers CLUSTER SLOTS and creates a pool
 * per primary. CRD_IO when no seed answers, CRD_INVALID_ARGUMENT when a seed is not in
 * cluster mode; the message names the seeds tried. */
crd_status crd__cluster_init(crd_client *c);
/* Frees the nodes and their pools (waiting for connections in use to come back). */
void crd__cluster_free(crd_client *c);
/* The primary serving key's slot (any primary for a NULL key). Refreshes the map first
 * when it is stale or due for its periodic refresh (one refresh in flight at a time;
 * others use the current map). NULL only when no slot map could ever be read. */
crd__node *crd__cluster_node_for(crd_client *c, const char *key, size_t len);
/* The primary serving key's slot in the map as it is now: no refresh, no I/O (for
 * callers holding a mutex). NULL when the map has no owner for it. */
crd__node *crd__cluster_node_peek(crd_client *c, const char *key, size_t len);
/* The node at host:port, added to the known nodes if new (a redirect's target). NULL
 * when out of memory. */
crd__node *crd__cluster_node_at(crd_client *c, const char *host, size_t hostlen, int port);
/* Parses "MOVED <slot> <host>:<port>" or "ASK ..." (host may be empty or [v6]). Pure. */
bool crd__cluster_parse_redirect(const redisReply *r, int *slot, const char **host,
                                 size_t *hostlen, int *port);
/* A MOVED reply: slot is served by n from now on; a full refresh follows at the next
 * chance. */
void crd__cluster_moved(crd_client *c, int slot, crd__node *n);
/* The map may be wrong (a connection failed, READONLY, a pushed SUNSUBSCRIBE): refresh
 * it at the next chance. Returns this mark's number, for crd__cluster_read_after (0 when
 * the client is not a cluster's). */
uint64_t crd__cluster_stale(crd_client *c);
/* Whether the map in use was read by a refresh that began after the given mark (true
 * when the client is not a cluster's). */
bool crd__cluster_read_after(crd_client *c, uint64_t mark);
/* Refreshes the map now unless a refresh is in flight (then returns at once). */
crd_status crd__cluster_refresh(crd_client *c);
/* Calls fn for every known node's pool (fork handlers, wake-ups). Takes the cluster's
 * mutex around the walk unless held says the caller (the fork handler) holds it. */
void crd__cluster_foreach_pool(crd_client *c, void (*fn)(crd_client *, crd__pool *, void *),
                               void *arg, bool held);
/* The nodes serving slots now (the primaries), at most max, in slot order; nodes are
 * never freed before the client. */
int crd__cluster_primaries(crd_client *c, crd__node **out, int max);
void crd__cluster_after_fork_child(crd_client *c);
/* Fork handlers (lifecycle.c): hold the pool's mutex across fork(); in the child, free
 * idle connections and abandon the ones parent threads had checked out. */
void crd__pool_after_fork_child(crd_client *c);

/* ---- script.c: the one call path for scripts and commands ---------------------------- */

#define CRD__PLAIN (-1) /* a crd__cmd that is a plain command, not a script */
#define CRD__CMD_INLINE 16
#define CRD__CMD_SCRATCH 512

/* What becomes of a request whose reply may come after its caller gave up: the lock
 * layer's business (undo.c, for acquires), which the call path knows only through these
 * hooks (crd__cmd.late). */
struct crd__req;
typedef struct crd__late {
    /* A job for one request from late_what (NULL: none); at: the index of the reply that
     * counts. Becomes the request's arg. */
    void *(*job_new)(const void *what, int at);
    void (*abandoned)(void *job); /* the request's on_abandon */
    void (*job_free)(void *job);  /* the request's arg_free */
    void (*on_late)(crd_client *c, struct crd__req *rq);
} crd__late;

/* One command being built: a script's KEYS then ARGV (all keys before any argument), or
 * a plain command's words. Three leading slots are kept for EVALSHA, the SHA1 and the key
 * count, so the call path sends v[] as it is. Numbers and derived keys are formatted into
 * the command's own scratch space. */
typedef struct crd__cmd {
    int script; /* CRD__SCRIPT_* or CRD__PLAIN */
    int nkeys, nargs, cap;
    const char **v;
    size_t *len;
    const char *v_inline[3 + CRD__CMD_INLINE];
    size_t len_inline[3 + CRD__CMD_INLINE];
    char numkeys[12];
    char scratch[CRD__CMD_SCRATCH];
    size_t used;
    char *heap[8]; /* chunks of scratch that did not fit, 4 KiB or more each */
    size_t heap_used, heap_cap; /* of the newest chunk */
    bool oom;
    bool sync;  /* a lock script replica sync follows with WAIT (acquire, release,
                   renewal); crd__call may then return CRD_NOT_SYNCED */
    int64_t deadline_ms; /* monotonic; 0: the command timeout from the call */
    const struct crd__late *late; /* an acquire: what becomes of its reply if it comes
                                     after the caller gave up (undo.c); NULL: nothing */
    const void *late_what;        /* late's argument (an acquire's crd__undo); borrowed */
    int handed;  /* out (crd__call): sent, unanswered by the deadline, and its outcome
                    handed to undo.c (the caller must not read it back): 1 on a connection
                    that had answered before, 2 on one that never had; 0: not so */
    bool unsent; /* out (crd__call): never written, its deadline passed while it waited for
                    a connection (CRD_IO) */
    /* A lock attempt inside a blocking wait: the calling thread's interrupt token ends the
     * wait for its reply as its deadline would (crd__call returns CRD_INTERRUPTED; a late
     * reply goes to late). */
    bool interruptible;
    /* When it says so, an error reply is the caller's to read: crd__call returns CRD_OK
     * with it in *reply (the non-reentrant locks' refusal, crd__reentry_refused). NULL: every
     * error reply becomes a status. */
    bool (*keep_error)(const redisReply *r);
} crd__cmd;

/* ---- cmd.c, script.c: building commands and calling ---------------------------------- */

/* Starts a command; cap > CRD__CMD_INLINE words allocate (the watchdog's batches). */
void crd__cmd_init(crd__cmd *cmd, int script, int cap);
void crd__cmd_free(crd__cmd *cmd);
void crd__cmd_key(crd__cmd *cmd, const char *p, size_t len);
void crd__cmd_arg(crd__cmd *cmd, const char *p, size_t len);
void crd__cmd_arg_str(crd__cmd *cmd, const char *s);
void crd__cmd_arg_i64(crd__cmd *cmd, int64_t v);
/* Room for n bytes that live as long as the command (NULL when out of memory). */
char *crd__cmd_space(crd__cmd *cmd, size_t n);
/* Fills the three leading slots (EVALSHA sha numkeys, or EVAL text numkeys when eval) and
 * returns the index of the command's first word (3 for a plain command); argc from
 * there. (cmd.c) */
int crd__cmd_head(crd__cmd *cmd, bool eval);
int crd__cmd_argc(const crd__cmd *cmd, int first);

/* Runs cmd on a connection from the pool chosen by its first key (a plain command by its
 * second word, which is the key of every plain command this library sends): a script
 * with EVALSHA, and on NOSCRIPT (nothing ran) once more with EVAL. The reply is
 * classified here and only here: CRD_OK leaves a reply that is not an error in *reply
 * (the caller frees it); an error reply becomes a status with the server's words
 * (crd__reply_fail). In cluster mode redirects, READONLY and busy replies (all proofs
 * that nothing ran) are followed or retried here within the command timeout; in
 * standalone mode redirects are errors and the "not now" replies (LOADING, BUSY,
 * MASTERDOWN, TRYAGAIN, CLUSTERDOWN) are retried within the deadline too. CRD_IO: no
 * reply; *sent_ms (may be NULL) is 0 when
 * nothing was sent, else the time of the last send, so a caller knows whether the
 * command may have run. what names the operation for messages. */
crd_status crd__call(crd_client *c, crd__cmd *cmd, const char *what, redisReply **reply,
                     int64_t *sent_ms);
/* crd__call of a plain command of n words (C strings, n <= 4) without a key: PING, CLIENT
 * LIST, PUBSUB SHARDNUMSUB. reply may be NULL: the reply is then freed here. */
crd_status crd__call_words(crd_client *c, const char *what, redisReply **reply, int n, ...);
/* (crd__call, continued) Sentinel mode: a READONLY reply (nothing ran) re-resolves the
 * primary and sends the command again there, up to twice. Replica sync: a cmd marked
 * sync goes out in one pipeline with WAIT (crd__sync_replicas); when no replica
 * acknowledged, the status is CRD_NOT_SYNCED and *reply still holds the script's reply
 * (the caller frees it and decides: acquire.c undoes, release.c accepts). */
/* Pipelined form for the watchdog: every command of cmds (scripts) in one round trip on
 * conn; on NOSCRIPT the script is loaded once (SCRIPT LOAD) and the round resent,
 * which is safe for renewals (idempotent in effect). *sent_ms: when the round that
 * produced the replies was sent. */
crd_status crd__script_pipeline(crd_client *c, crd__pool *p, crd__cmd *cmds, int ncmd,
                                redisReply **replies, int64_t *sent_ms);
/* (pipeline, continued) When cmds[0].sync, one WAIT ends the round; no replica
 * acknowledging gives CRD_NOT_SYNCED with every reply in place. */

/* The hand-off (acquire.c, pubsub.c): a blocked waiter prepares its acquire on a spare
 * pool connection and lends both to the subscriber thread, which sends the acquire the
 * moment it reads the unlock message, before waking the waiter; the waiter then reads
 * the reply. The wake-up of the waiter overlaps the script's round trip instead of
 * preceding it. Standalone and Sentinel without replica sync only. */
typedef struct crd__handoff {
    crd__cmd cmd;        /* the acquire, built in place by the caller */
    struct crd__req *rq; /* its request, awaited by the waiter (engine.h) */
    int sent;            /* 0 not sent, 1 submitted, -1 refused (subscriber, ps->mu) */
    int64_t sent_ms;
    int64_t until;       /* the waiter's own deadline (monotonic ms) */
    uint64_t gen;        /* Sentinel mode: the primary's generation when it was sent */
} crd__handoff;
/* Encodes h->cmd into a request the waiter will await; false: no hand-off. */
bool crd__handoff_prepare(crd_client *c, crd__handoff *h);
/* The subscriber thread: submits the prepared request (never blocks). */
void crd__handoff_send(crd_client *c, crd__handoff *h);
/* The waiter, once the subscriber can no longer send: whether the acquire went out, with
 * its outcome as crd__call gives it (*st, *reply, *sent_ms); gives the connection back.
 * A NOSCRIPT or READONLY reply counts as not sent (nothing ran). */
bool crd__handoff_finish(crd_client *c, crd__handoff *h, crd_status *st, redisReply **reply,
                         int64_t *sent_ms);
/* In a forked child (pubsub.c): frees what a parent's waiter lent and the child cannot
 * reach otherwise (its stack is not here): the command and, when never sent, the request
 * (a sent one is in the engine's queues, which its fork handler frees). */
void crd__handoff_forget(crd__handoff *h);

/* script.c: whether the event loop's commands can go out as single requests (a standalone
 * client without replica sync); otherwise they step through crd__call, bounded by their
 * deadlines. */
bool crd__call_async_ok(crd_client *c);
/* script.c: the request of one plain attempt of cmd (EVALSHA, or EVAL when eval) to the
 * peer of its key, with cmd's deadline and undo; NULL when out of memory or no peer. */
crd__req *crd__call_request(crd_client *c, crd__cmd *cmd, bool eval);

#endif /* CRD_TOPOLOGY_H */
