/*
 * script.c -- the one call path: how a command or an embedded Lua script (lua/, compiled
 * in with the SHA1 of its exact bytes by cmake/embed_lua.cmake) reaches Redis, and what
 * its reply becomes.
 *
 * A crd__cmd is built in place (keys, then arguments) with the three EVALSHA slots kept
 * free, so nothing is copied on the way out. crd__call takes the connection for the
 * command's first key from the pool, sends EVALSHA, and on NOSCRIPT (Redis did not run
 * the script: its cache was flushed, or this is a fresh replica) sends it once more as
 * EVAL: nothing runs twice. Every reply is classified here (reply.c); a redirect
 * (MOVED, ASK), a not-primary (READONLY) or a busy reply proves the script did not run,
 * and this is where a cluster client follows it: MOVED resends to the named node and
 * updates the slot map, ASK resends once with ASKING, READONLY and TRYAGAIN/CLUSTERDOWN/
 * LOADING are retried with a backoff bounded by the command timeout, and a connection
 * that could not be opened (nothing sent) is retried at the slot's owner after a map
 * refresh. A command whose reply was lost after sending is never resent here. The watchdog's
 * pipelined renewals use the same builder and the same NOSCRIPT rule.
 *
 * Runs on the caller's thread with the caller's connection; no lock.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void crd__cmd_init(crd__cmd *cmd, int script, int cap)
{
    cmd->script = script;
    cmd->nkeys = cmd->nargs = 0;
    cmd->used = 0;
    cmd->oom = false;
    cmd->sync = false;
    memset(cmd->heap, 0, sizeof cmd->heap);
    cmd->heap_used = cmd->heap_cap = 0;
    cmd->cap = CRD__CMD_INLINE;
    cmd->v = cmd->v_inline;
    cmd->len = cmd->len_inline;
    if (cap > CRD__CMD_INLINE) {
        cmd->v = malloc(sizeof *cmd->v * (size_t)(cap + 3));
        cmd->len = malloc(sizeof *cmd->len * (size_t)(cap + 3));
        cmd->cap = cap;
        if (cmd->v == NULL || cmd->len == NULL) {
            free(cmd->v);
            free(cmd->len);
            cmd->v = cmd->v_inline;
            cmd->len = cmd->len_inline;
            cmd->cap = CRD__CMD_INLINE;
            cmd->oom = true;
        }
    }
}

void crd__cmd_free(crd__cmd *cmd)
{
    if (cmd->v != cmd->v_inline) {
        free(cmd->v);
        free(cmd->len);
    }
    for (size_t i = 0; i < sizeof cmd->heap / sizeof cmd->heap[0]; i++)
        free(cmd->heap[i]);
    cmd->v = cmd->v_inline;
    cmd->len = cmd->len_inline;
    memset(cmd->heap, 0, sizeof cmd->heap);
}

static void put(crd__cmd *cmd, const char *p, size_t len)
{
    int i = cmd->nkeys + cmd->nargs;
    if (i >= cmd->cap) {
        cmd->oom = true;
        return;
    }
    cmd->v[3 + i] = p;
    cmd->len[3 + i] = len;
}

void crd__cmd_key(crd__cmd *cmd, const char *p, size_t len)
{
    put(cmd, p, len);
    cmd->nkeys++;
}

void crd__cmd_arg(crd__cmd *cmd, const char *p, size_t len)
{
    put(cmd, p, len);
    cmd->nargs++;
}

void crd__cmd_arg_str(crd__cmd *cmd, const char *s) { crd__cmd_arg(cmd, s, strlen(s)); }

char *crd__cmd_space(crd__cmd *cmd, size_t n)
{
    if (cmd->used + n <= sizeof cmd->scratch) {
        char *p = cmd->scratch + cmd->used;
        cmd->used += n;
        return p;
    }
    size_t last = 0;
    while (last < sizeof cmd->heap / sizeof cmd->heap[0] && cmd->heap[last] != NULL)
        last++;
    if (last > 0 && cmd->heap_used + n <= cmd->heap_cap) {
        char *p = cmd->heap[last - 1] + cmd->heap_used;
        cmd->heap_used += n;
        return p;
    }
    size_t cap = n > 4096 ? n : 4096;
    if (last == sizeof cmd->heap / sizeof cmd->heap[0] || (cmd->heap[last] = malloc(cap)) == NULL) {
        cmd->oom = true;
        return NULL;
    }
    cmd->heap_used = n;
    cmd->heap_cap = cap;
    return cmd->heap[last];
}

void crd__cmd_arg_i64(crd__cmd *cmd, int64_t v)
{
    char *p = crd__cmd_space(cmd, 21);
    if (p == NULL) {
        crd__cmd_arg(cmd, "", 0);
        return;
    }
    char *end = p;
    if (v < 0)
        *end++ = '-';
    end = crd__put_u64(end, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
    crd__cmd_arg(cmd, p, (size_t)(end - p));
}

/* Fills the three leading slots: EVALSHA sha numkeys. Returns the first word's index. */
static int head(crd__cmd *cmd, bool eval)
{
    if (cmd->script == CRD__PLAIN)
        return 3;
    const crd__script_src *src = &crd__scripts[cmd->script];
    snprintf(cmd->numkeys, sizeof cmd->numkeys, "%d", cmd->nkeys);
    cmd->v[0] = eval ? "EVAL" : "EVALSHA";
    cmd->len[0] = eval ? 4 : 7;
    cmd->v[1] = eval ? src->text : src->sha1;
    cmd->len[1] = eval ? src->len : 40;
    cmd->v[2] = cmd->numkeys;
    cmd->len[2] = strlen(cmd->numkeys);
    return 0;
}

static int argc_of(const crd__cmd *cmd, int first) { return 3 - first + cmd->nkeys + cmd->nargs; }

crd_status crd__script_run(crd_client *c, crd__conn *conn, crd__cmd *cmd, redisReply **reply)
{
    *reply = NULL;
    if (cmd->oom)
        return crd__fail(c, CRD_NO_MEMORY, "cannot build a command");
    int first = head(cmd, false);
    crd_status st = crd__conn_command(c, conn, argc_of(cmd, first), cmd->v + first,
                                      cmd->len + first, reply);
    if (st == CRD_OK && cmd->script != CRD__PLAIN &&
        crd__reply_classify(*reply) == CRD__REPLY_NOSCRIPT) {
        freeReplyObject(*reply);
        *reply = NULL;
        head(cmd, true);
        st = crd__conn_command(c, conn, argc_of(cmd, 0), cmd->v, cmd->len, reply);
    }
    return st;
}

/* Sends cmd on conn, with ASKING before it when asked to: ASKING covers the one command
 * after it, so it goes again before the EVAL that follows a NOSCRIPT. */
static crd_status run_on(crd_client *c, crd__conn *conn, crd__cmd *cmd, bool asking,
                         redisReply **reply)
{
    if (!asking)
        return crd__script_run(c, conn, cmd, reply);
    *reply = NULL;
    if (cmd->oom)
        return crd__fail(c, CRD_NO_MEMORY, "cannot build a command");
    static const char *const ask[1] = {"ASKING"};
    static const size_t asklen[1] = {6};
    for (int round = 0; round < 2; round++) {
        redisReply *ok = NULL;
        crd_status st = crd__conn_command(c, conn, 1, (const char **)ask, asklen, &ok);
        if (ok != NULL)
            freeReplyObject(ok);
        if (st != CRD_OK)
            return st;
        int first = head(cmd, round == 1);
        st = crd__conn_command(c, conn, argc_of(cmd, first), cmd->v + first, cmd->len + first,
                               reply);
        if (st != CRD_OK || round == 1 || cmd->script == CRD__PLAIN ||
            crd__reply_classify(*reply) != CRD__REPLY_NOSCRIPT)
            return st;
        freeReplyObject(*reply);
        *reply = NULL;
    }
    return CRD_OK;
}

/* Waits ms before a retry (a cluster redirect loop, a failover in progress); false when
 * the deadline would pass first or the client is closing. */
static bool pause_before_retry(crd_client *c, int64_t *backoff_ms, int64_t deadline)
{
    if (atomic_load(&c->closed) || crd__now_ms() + *backoff_ms >= deadline)
        return false;
    struct timespec ts = {(time_t)(*backoff_ms / 1000), (long)(*backoff_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    *backoff_ms = *backoff_ms * 2 > 200 ? 200 : *backoff_ms * 2;
    return true;
}

#define MAX_HOPS 16 /* redirects followed for one command before giving up */

/* A script and WAIT in one pipeline on conn: EVALSHA + WAIT, and on NOSCRIPT (the
 * script did not run) EVAL + WAIT. *acks: the replicas that acknowledged. */
static crd_status run_synced(crd_client *c, crd__conn *conn, crd__cmd *cmd, int replicas,
                             int64_t timeout_ms, redisReply **reply, int64_t *acks)
{
    *reply = NULL;
    *acks = 0;
    if (cmd->oom)
        return crd__fail(c, CRD_NO_MEMORY, "cannot build a command");
    char nbuf[24], tbuf[24];
    *crd__put_u64(nbuf, (uint64_t)replicas) = '\0';
    *crd__put_u64(tbuf, (uint64_t)timeout_ms) = '\0';
    const char *wait_v[3] = {"WAIT", nbuf, tbuf};
    size_t wait_l[3] = {4, strlen(nbuf), strlen(tbuf)};
    for (int round = 0; round < 2; round++) {
        int first = head(cmd, round == 1);
        int argcs[2] = {argc_of(cmd, first), 3};
        const char *const *argvs[2] = {cmd->v + first, wait_v};
        const size_t *lens[2] = {cmd->len + first, wait_l};
        redisReply *r[2] = {NULL, NULL};
        crd_status st = crd__conn_pipeline(c, conn, 2, argcs, argvs, lens, r);
        if (st != CRD_OK)
            return st;
        if (round == 0 && cmd->script != CRD__PLAIN &&
            crd__reply_classify(r[0]) == CRD__REPLY_NOSCRIPT) {
            freeReplyObject(r[0]);
            freeReplyObject(r[1]);
            continue;
        }
        *reply = r[0];
        if (r[1]->type == REDIS_REPLY_INTEGER)
            *acks = r[1]->integer;
        else /* WAIT refused (a provider that forbids it): say so, count it as none */
            crd__log(c, CRD_LOG_WARN, "replica sync: WAIT was refused (%.*s); set "
                     "replica_sync to CRD_REPLICA_SYNC_OFF where WAIT is not allowed",
                     r[1]->type == REDIS_REPLY_ERROR ? (int)(r[1]->len > 100 ? 100 : r[1]->len) : 0,
                     r[1]->type == REDIS_REPLY_ERROR ? r[1]->str : "");
        freeReplyObject(r[1]);
        return CRD_OK;
    }
    return crd__fail(c, CRD_PROTOCOL, "the server answered NOSCRIPT to EVAL");
}

/* The key a command is routed by: a script's first key; a plain command's second word
 * (HGET N F, EXISTS N, GET K: every plain command sent here names its key there); none for
 * PING. */
static const char *routing_key(const crd__cmd *cmd, size_t *keylen)
{
    *keylen = 0;
    int at = cmd->nkeys > 0 ? 3 : cmd->script == CRD__PLAIN && cmd->nargs >= 2 ? 4 : -1;
    if (at < 0)
        return NULL;
    *keylen = cmd->len[at];
    return cmd->v[at];
}

/* The node a MOVED or ASK reply r sends the command to (the command did not run), or NULL
 * when r is neither or names no node this client can reach. MOVED changes the map for its
 * slot; ASK is for this one command (the caller sends ASKING before it). from: the node
 * that answered, for a redirect that names no host. */
static crd__node *redirect_target(crd_client *c, const redisReply *r, crd__reply_class cls,
                                  const crd__endpoint *from)
{
    int slot, port;
    const char *host;
    size_t hostlen;
    if ((cls != CRD__REPLY_MOVED && cls != CRD__REPLY_ASK) ||
        !crd__cluster_parse_redirect(r, &slot, &host, &hostlen, &port))
        return NULL;
    if (hostlen == 0) {
        host = from->host;
        hostlen = strlen(from->host);
    }
    crd__node *n = crd__cluster_node_at(c, host, hostlen, port);
    if (n != NULL && cls == CRD__REPLY_MOVED)
        crd__cluster_moved(c, slot, n);
    return n;
}

/* What crd__call returns for the last reply r: CRD_OK with *reply = r, or a status and
 * message naming what (r freed). */
static crd_status final_status(crd_client *c, redisReply *r, const char *what, redisReply **reply)
{
    bool cluster = c->cluster != NULL;
    crd_status st = CRD_OK;
    switch (crd__reply_classify(r)) {
    case CRD__REPLY_OK:
        *reply = r;
        return CRD_OK;
    case CRD__REPLY_MOVED:
    case CRD__REPLY_ASK:
        /* A standalone client has no other node to ask: the server is a cluster node and
         * the URL should say redis-cluster://. A cluster client gets here only after too
         * many redirects. */
        if (cluster)
            st = crd__fail(c, CRD_SERVER, "%s: still redirected after %d hops (%.*s)", what,
                           MAX_HOPS, (int)(r->len > 80 ? 80 : r->len), r->str);
        else
            st = crd__fail(c, CRD_SERVER, "%s: the server redirected the command (%.*s): it "
                           "is a cluster node, and this client is not in cluster mode (use a "
                           "redis-cluster:// URL)", what, (int)(r->len > 80 ? 80 : r->len), r->str);
        break;
    case CRD__REPLY_READONLY:
        st = crd__fail(c, CRD_SERVER, "%s: the server is a read-only replica (%.*s); "
                       "connect to the primary%s", what, (int)(r->len > 80 ? 80 : r->len), r->str,
                       crd__topology_sentinel(c) ? " (the sentinels keep naming a replica)" : "");
        break;
    case CRD__REPLY_BUSY:
    case CRD__REPLY_NOSCRIPT:
    case CRD__REPLY_ERROR:
    case CRD__REPLY_NONE:
        st = crd__reply_fail(c, r, what);
        break;
    }
    freeReplyObject(r);
    return st;
}

crd_status crd__call(crd_client *c, crd__cmd *cmd, const char *what, redisReply **reply,
                     int64_t *sent_ms)
{
    *reply = NULL;
    if (sent_ms != NULL)
        *sent_ms = 0;
    size_t keylen = 0;
    const char *key = routing_key(cmd, &keylen);
    bool cluster = c->cluster != NULL;
    int64_t deadline = crd__now_ms() + c->opts.command_timeout_ms;
    int64_t backoff = 10;
    crd__node *target = NULL; /* the node a redirect named */
    bool asking = false;
    redisReply *r = NULL;
    crd_status st;
    for (int hop = 0;; hop++) {
        crd__conn *conn;
        st = target != NULL ? crd__pool_take(c, target->pool, &conn)
                            : crd__pool_get(c, key, keylen, &conn);
        bool ask_now = asking;
        target = NULL;
        asking = false;
        if (st != CRD_OK) {
            /* Nothing was sent: a node that went away (failover) may be retried at the
             * slot's new owner once the map is refreshed. */
            if (cluster && st == CRD_IO)
                crd__cluster_stale(c);
            if (cluster && st == CRD_IO && hop < MAX_HOPS &&
                pause_before_retry(c, &backoff, deadline))
                continue;
            return st;
        }
        const crd__endpoint *from = crd__pool_ep(conn->pool);
        /* Replica sync (Sentinel, Cluster, or asked for): the script and WAIT in one
         * pipeline, to the node that runs it. A command sent after ASKING goes alone. */
        int64_t wait_timeout = 0;
        int replicas = cmd->sync && !ask_now ? crd__sync_replicas(c, conn, &wait_timeout) : 0;
        if (sent_ms != NULL)
            *sent_ms = crd__now_ms();
        int64_t acks = 0;
        if (replicas > 0)
            st = run_synced(c, conn, cmd, replicas, wait_timeout, &r, &acks);
        else
            st = run_on(c, conn, cmd, ask_now, &r);
        uint64_t gen = conn->topo_gen;
        crd__pool_put(c, conn);
        if (st != CRD_OK) {
            if (cluster && st == CRD_IO)
                crd__cluster_stale(c); /* the outcome is unknown: never resent here */
            return st;
        }
        crd__reply_class cls = crd__reply_classify(r);
        if (cls == CRD__REPLY_READONLY && hop < 2 && crd__topology_sentinel(c)) {
            /* A READONLY reply proves nothing ran: after a re-resolution the command is
             * sent again, to the new primary (Sentinel mode; at most twice). */
            freeReplyObject(r);
            r = NULL;
            if (sent_ms != NULL)
                *sent_ms = 0;
            if ((st = crd__topology_changed(c, gen)) != CRD_OK)
                return st;
            continue;
        }
        if (cls == CRD__REPLY_OK && replicas > 0 && acks == 0) {
            *reply = r;
            return crd__fail(c, CRD_NOT_SYNCED, "%s: the primary ran it, but none of its %d "
                             "replicas acknowledged it within %lld ms", what, replicas,
                             (long long)wait_timeout);
        }
        if (!cluster || hop >= MAX_HOPS)
            break;
        if ((target = redirect_target(c, r, cls, from)) != NULL) {
            asking = cls == CRD__REPLY_ASK;
            freeReplyObject(r);
            r = NULL;
            continue;
        }
        if ((cls == CRD__REPLY_READONLY || cls == CRD__REPLY_BUSY) &&
            pause_before_retry(c, &backoff, deadline)) {
            /* A replica (a failover moved the primary), a slot being migrated (TRYAGAIN),
             * a cluster not yet agreed (CLUSTERDOWN) or a node loading: nothing ran. */
            if (cls == CRD__REPLY_READONLY)
                crd__cluster_stale(c);
            freeReplyObject(r);
            r = NULL;
            continue;
        }
        break;
    }
    return final_status(c, r, what, reply);
}

/* The WAIT at all[n] (when replicas > 0): freed here; CRD_NOT_SYNCED when none
 * acknowledged. */
static crd_status synced(crd_client *c, redisReply **all, int n, int replicas, int64_t timeout)
{
    if (replicas == 0)
        return CRD_OK;
    bool none = all[n]->type != REDIS_REPLY_INTEGER || all[n]->integer == 0;
    freeReplyObject(all[n]);
    all[n] = NULL;
    if (!none)
        return CRD_OK;
    return crd__fail(c, CRD_NOT_SYNCED, "renewal: the primary ran it, but none of its %d "
                     "replicas acknowledged it within %lld ms", replicas, (long long)timeout);
}

crd_status crd__script_pipeline(crd_client *c, crd__conn *conn, crd__cmd *cmds, int ncmd,
                                redisReply **replies, int64_t *sent_ms)
{
    /* One slot more for the WAIT of replica sync. */
    int argcs[ncmd + 1];
    const char *const *argvs[ncmd + 1];
    const size_t *lens[ncmd + 1];
    redisReply *all[ncmd + 1];
    int64_t wait_timeout = 0;
    int replicas = ncmd > 0 && cmds[0].sync ? crd__sync_replicas(c, conn, &wait_timeout) : 0;
    char nbuf[24], tbuf[24];
    *crd__put_u64(nbuf, (uint64_t)replicas) = '\0';
    *crd__put_u64(tbuf, (uint64_t)wait_timeout) = '\0';
    const char *wait_v[3] = {"WAIT", nbuf, tbuf};
    size_t wait_l[3] = {4, strlen(nbuf), strlen(tbuf)};
    int total = ncmd + (replicas > 0);
    if (replicas > 0) {
        argcs[ncmd] = 3;
        argvs[ncmd] = wait_v;
        lens[ncmd] = wait_l;
    }
    for (int k = 0; k < ncmd; k++) {
        if (cmds[k].oom)
            return crd__fail(c, CRD_NO_MEMORY, "cannot build a pipeline");
        head(&cmds[k], false);
        argcs[k] = argc_of(&cmds[k], 0);
        argvs[k] = cmds[k].v;
        lens[k] = cmds[k].len;
    }
    *sent_ms = crd__now_ms();
    CRD__COUNT(c, watchdog_round_trips);
    crd_status st = crd__conn_pipeline(c, conn, total, argcs, argvs, lens, all);
    if (st != CRD_OK)
        return st;
    for (int k = 0; k < ncmd; k++)
        replies[k] = all[k];
    int script = -1;
    for (int k = 0; k < ncmd; k++)
        if (crd__reply_classify(replies[k]) == CRD__REPLY_NOSCRIPT)
            script = cmds[k].script;
    if (script < 0)
        return synced(c, all, ncmd, replicas, wait_timeout);
    /* The cache was flushed: load the script once and resend the round (64 EVALs would
     * carry its text 64 times). */
    for (int k = 0; k < total; k++) {
        freeReplyObject(all[k]);
        all[k] = NULL;
    }
    for (int k = 0; k < ncmd; k++)
        replies[k] = NULL;
    const crd__script_src *src = &crd__scripts[script];
    const char *la[3] = {"SCRIPT", "LOAD", src->text};
    size_t ll[3] = {6, 4, src->len};
    redisReply *lr = NULL;
    st = crd__conn_command(c, conn, 3, la, ll, &lr);
    if (lr != NULL)
        freeReplyObject(lr);
    if (st != CRD_OK)
        return st;
    *sent_ms = crd__now_ms();
    CRD__COUNT(c, watchdog_round_trips);
    if ((st = crd__conn_pipeline(c, conn, total, argcs, argvs, lens, all)) != CRD_OK)
        return st;
    for (int k = 0; k < ncmd; k++)
        replies[k] = all[k];
    return synced(c, all, ncmd, replicas, wait_timeout);
}

/* ---- the hand-off: a waiter's acquire sent by the thread that reads the message --------- */

bool crd__handoff_prepare(crd_client *c, crd__handoff *h)
{
    h->conn = NULL;
    h->buf = NULL;
    h->len = h->cap = 0;
    h->sent = 0;
    h->why = NULL;
    h->sent_ms = 0;
    /* A cluster routes and redirects per node; replica sync pipelines WAIT: both keep the
     * usual path. */
    if (c->cluster != NULL || h->cmd.oom || h->cmd.script == CRD__PLAIN ||
        !crd__pool_take_spare(c, c->pool, &h->conn))
        return false;
    int64_t wait_timeout = 0;
    h->first = head(&h->cmd, false);
    if ((h->cmd.sync && crd__sync_replicas(c, h->conn, &wait_timeout) > 0) ||
        !crd__resp_append(&h->buf, &h->len, &h->cap, argc_of(&h->cmd, h->first),
                          h->cmd.v + h->first, h->cmd.len + h->first)) {
        crd__pool_put(c, h->conn);
        free(h->buf);
        return false;
    }
    return true;
}

void crd__handoff_send(crd__handoff *h)
{
    const char *why = NULL;
    h->sent_ms = crd__now_ms();
    h->sent = crd__conn_send(h->conn, h->buf, h->len, &why) ? 1 : -1;
    h->why = why;
}

bool crd__handoff_finish(crd_client *c, crd__handoff *h, crd_status *st, redisReply **reply,
                         int64_t *sent_ms)
{
    bool used = false;
    *reply = NULL;
    *st = CRD_OK;
    if (h->sent == 1) {
        used = true;
        *sent_ms = h->sent_ms;
        *st = crd__conn_reply(c, h->conn, argc_of(&h->cmd, h->first), h->cmd.v + h->first,
                              h->cmd.len + h->first, true, NULL, reply);
        crd__reply_class cls = *st == CRD_OK ? crd__reply_classify(*reply) : CRD__REPLY_OK;
        if (cls == CRD__REPLY_NOSCRIPT || cls == CRD__REPLY_READONLY) {
            /* Nothing ran: the usual path follows (EVAL, or a re-resolution). */
            freeReplyObject(*reply);
            *reply = NULL;
            used = false;
        }
    } else if (h->sent == -1) {
        h->conn->broken = true; /* a part may have gone out: it never runs once closed */
    }
    crd__pool_put(c, h->conn);
    free(h->buf);
    return used;
}
