/*
 * script.c -- the one call path: how a command or an embedded Lua script (lua/, compiled
 * in with the SHA1 of its exact bytes by cmake/embed_lua.cmake) reaches Redis, and what
 * its reply becomes.
 *
 * Commands are built with cmd.c. crd__call picks the peer for the command's first key
 * (route.c) and runs each hop on the engine (engine.c) within the call's deadline: EVALSHA,
 * and on NOSCRIPT (Redis did not run
 * the script: its cache was flushed, or this is a fresh replica) sends it once more as
 * EVAL: nothing runs twice. Every reply is classified here (reply.c); a redirect
 * (MOVED, ASK), a not-primary (READONLY) or a busy reply proves the script did not run,
 * and this is where a cluster client follows it: MOVED resends to the named node and
 * updates the slot map, ASK resends once with ASKING, READONLY and TRYAGAIN/CLUSTERDOWN/
 * LOADING are retried with a backoff bounded by the command timeout, and a connection
 * that could not be opened (nothing sent) is retried at the slot's owner after a map
 * refresh. A standalone or Sentinel client retries the "not now" replies (LOADING, BUSY,
 * MASTERDOWN, TRYAGAIN, CLUSTERDOWN) the same way. A server that refuses WAIT (deploy.c)
 * has an acquire that needs it refused before it is sent, everything else sent without
 * it. A command whose reply was lost after sending is never resent here; an
 * acquire's requests carry undo.c's on_late. The watchdog's pipelined renewals use the
 * same builder and the same NOSCRIPT rule.
 *
 * Runs on the caller's thread, waiting on the engine; no lock of its own.
 */
#include "topology.h"

#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>



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

/* Appends WAIT replicas timeout_ms to rq; false when out of memory. */
static bool add_wait(crd__req *rq, int replicas, int64_t timeout_ms)
{
    char nbuf[24], tbuf[24];
    *crd__put_u64(nbuf, (uint64_t)replicas) = '\0';
    *crd__put_u64(tbuf, (uint64_t)timeout_ms) = '\0';
    const char *wait_v[3] = {"WAIT", nbuf, tbuf};
    size_t wait_l[3] = {4, strlen(nbuf), strlen(tbuf)};
    return crd__req_add(rq, 3, wait_v, wait_l);
}

#define MAX_HOPS 16 /* redirects followed for one command before giving up */

/* The request for one hop of cmd to peer p: [ASKING] + the script (EVALSHA, or EVAL
 * after a NOSCRIPT) or plain command [+ WAIT replicas timeout]. *at: the index of the
 * command's own reply. NULL when out of memory. */
static crd__req *hop_request(crd__pool *p, crd__cmd *cmd, bool eval, bool asking, int replicas,
                             int64_t wait_timeout, int64_t deadline, int *at)
{
    crd__req *rq = crd__req_new(p, 1 + asking + (replicas > 0));
    if (rq == NULL)
        return NULL;
    rq->deadline_ms = deadline;
    rq->intr = cmd->interruptible ? crd__intr_current() : NULL;
    static const char *const ask[1] = {"ASKING"};
    static const size_t asklen[1] = {6};
    bool ok = !asking || crd__req_add(rq, 1, ask, asklen);
    int first = crd__cmd_head(cmd, eval);
    ok = ok && crd__req_add(rq, crd__cmd_argc(cmd, first), cmd->v + first, cmd->len + first);
    if (ok && replicas > 0)
        ok = add_wait(rq, replicas, wait_timeout);
    if (!ok) {
        crd__req_free(rq);
        return NULL;
    }
    *at = asking ? 1 : 0;
    rq->blocks_ms = replicas > 0 ? wait_timeout : 0;
    if (cmd->late != NULL && (rq->arg = cmd->late->job_new(cmd->late_what, *at)) != NULL) {
        rq->on_late = cmd->late->on_late;
        rq->on_abandon = cmd->late->abandoned;
        rq->arg_free = cmd->late->job_free;
    }
    return rq;
}

/* The acks of the WAIT reply w; -1 for a refused WAIT (it counts as none: deploy.c
 * records it, and the next acquire is refused before it is sent). */
static int64_t wait_acks(crd_client *c, const redisReply *w)
{
    if (w->type == REDIS_REPLY_INTEGER)
        return w->integer;
    crd__deploy_wait_answer(c, w);
    return -1;
}

/* The words of a refused WAIT (replies[i] of a pipeline), for the NOT_SYNCED detail. */
static void refusal_words(const redisReply *w, char *buf, size_t cap)
{
    const char *text = "";
    size_t n = 0;
    if (w != NULL && w->type == REDIS_REPLY_ERROR)
        n = crd__reply_error_text(w, &text);
    snprintf(buf, cap, "%.*s", (int)(n > 120 ? 120 : n), text);
}

/* The timeout of a WAIT sent now for a call whose deadline is deadline: at most
 * wait_timeout, and ending by the deadline so that its reply comes in time (no replica
 * acknowledging by then is CRD_NOT_SYNCED, and an acquire is undone). Redis times a
 * blocked WAIT out in its cron, every 1000/hz ms (100 by default), so a WAIT of T
 * answers up to about 100 ms after T: it gets the time left less 200 ms (less half of it
 * when under 400 ms). Asked again for the EVAL that follows a NOSCRIPT: that pipeline
 * starts later, and a WAIT that outlived the deadline made a release that ran (during a
 * failover, fewer replicas than counted) return CRD_IO at its deadline. */
static int64_t wait_budget(int64_t wait_timeout, int64_t deadline)
{
    int64_t left = deadline - crd__now_ms();
    left -= left / 2 < 200 ? left / 2 : 200;
    if (wait_timeout > left)
        wait_timeout = left > 1 ? left : 1;
    return wait_timeout;
}

/* One hop: cmd to peer p through the engine, EVALSHA then EVAL on NOSCRIPT (nothing ran),
 * with ASKING before it and WAIT after it when asked. CRD_OK: the command's reply in *r
 * and the WAIT's acks in *acks. *sent_ms as crd__call's. */
static crd_status run_hop(crd_client *c, crd__pool *p, crd__cmd *cmd, bool asking, int replicas,
                          int64_t wait_timeout, int64_t deadline, uint64_t gen, redisReply **r,
                          int64_t *acks, char *refusal, size_t refusal_cap, int64_t *sent_ms,
                          int *handed)
{
    *r = NULL;
    *acks = 0;
    if (cmd->oom)
        return crd__fail(c, CRD_NO_MEMORY, "cannot build a command");
    for (int round = 0; round < 2; round++) {
        int at = 0;
        crd__req *rq = hop_request(p, cmd, round == 1, asking, replicas,
                                   replicas > 0 ? wait_budget(wait_timeout, deadline) : 0,
                                   deadline, &at);
        if (rq == NULL)
            return crd__fail(c, CRD_NO_MEMORY, "cannot build a command");
        rq->want_gen = replicas > 0 ? gen : 0;
        int n = rq->nreply;
        redisReply *all[3] = {NULL, NULL, NULL};
        crd_status st = crd__engine_call(c, rq, all, sent_ms, handed);
        if (st != CRD_OK)
            return st;
        *r = all[at];
        if (replicas > 0 && (*acks = wait_acks(c, all[n - 1])) < 0)
            refusal_words(all[n - 1], refusal, refusal_cap);
        for (int i = 0; i < n; i++)
            if (i != at)
                freeReplyObject(all[i]);
        if (round == 0 && cmd->script != CRD__PLAIN &&
            crd__reply_classify(*r) == CRD__REPLY_NOSCRIPT) {
            freeReplyObject(*r);
            *r = NULL;
            continue;
        }
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
static crd_status final_status(crd_client *c, const crd__cmd *cmd, redisReply *r,
                               const char *what, redisReply **reply)
{
    bool cluster = c->cluster != NULL;
    crd_status st = CRD_OK;
    if (r == NULL) /* no reply (crd__reply_classify's NONE), first: clang's analyzer cannot see
                    * that the redirect cases below always have one */
        return crd__reply_fail(c, NULL, what);
    if (cmd->keep_error != NULL && r->type == REDIS_REPLY_ERROR &&
        cmd->keep_error(r)) {
        *reply = r;
        return CRD_OK;
    }
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

/* Sentinel mode: a failed connection to the primary may mean a failover. The listener
 * thread asks the sentinels; this caller returns by its deadline (asking here, ROLE at a
 * stalled primary held a 100 ms acquire for command_timeout_ms). */
static void primary_failed(crd_client *c, crd__pool *p)
{
    if (p != c->pool || !crd__topology_sentinel(c))
        return;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", crd_client_errmsg(c));
    crd__topology_suspect(c);
    crd__fail(c, CRD_IO, "%s", msg); /* the caller's detail, whatever the asking said */
}

/* One call's state across its hops (crd__call). */
typedef struct call_state {
    crd_client *c;
    crd__cmd *cmd;
    const char *what;
    int64_t deadline, backoff;
    crd__node *target; /* the node a redirect named */
    bool asking, cluster;
    int hop;
    int64_t *sent_ms;
    char busy[120]; /* standalone: the last "not now" reply retried (LOADING, BUSY...) */
} call_state;

typedef enum hop_next { HOP_AGAIN, HOP_RETURN, HOP_FINAL } hop_next;

/* A hop that failed (st, not CRD_OK) on p: another hop when nothing was sent and the slot
 * may have a new owner, else the call ends with st. */
static hop_next hop_failed(call_state *cs, crd__pool *p, crd_status st, int handed)
{
    crd_client *c = cs->c;
    if (cs->cluster && st == CRD_IO)
        crd__cluster_stale(c);
    /* Nothing was sent (a connection that could not be opened): a node that went away
     * (failover) may be retried at the slot's new owner. */
    if (cs->cluster && st == CRD_IO && *cs->sent_ms == 0 && !handed && cs->hop < MAX_HOPS &&
        pause_before_retry(c, &cs->backoff, cs->deadline))
        return HOP_AGAIN;
    if (st == CRD_IO)
        primary_failed(c, p);
    if (st == CRD_IO && cs->busy[0] != '\0') {
        /* Retried after "not now": say what the server had answered. */
        char msg[400];
        snprintf(msg, sizeof msg, "%s", crd_client_errmsg(c));
        crd__fail(c, CRD_IO, "%s (before that the server answered %s)", msg, cs->busy);
    }
    /* Handed over: the engine resolves what it did (undo.c); the caller must not read it
     * back, so it is told nothing was sent. */
    cs->cmd->handed = handed;
    if (handed)
        *cs->sent_ms = 0;
    return HOP_RETURN;
}

/* A hop that got its reply *r from the node at from: another hop (a redirect, READONLY,
 * TRYAGAIN and the like: nothing ran; *r freed), the reply is final (HOP_FINAL), or the
 * call ends with *st (replica sync: no replica acknowledged; *r handed to the caller). */
static hop_next hop_answered(call_state *cs, redisReply **r, const crd__endpoint *from,
                             int replicas, int64_t acks, const char *refusal,
                             int64_t wait_timeout, crd_status *st)
{
    crd_client *c = cs->c;
    crd__reply_class cls = crd__reply_classify(*r);
    bool again = false;
    if (cls == CRD__REPLY_READONLY && cs->hop < 2 && crd__topology_sentinel(c)) {
        /* A READONLY reply proves nothing ran: after a re-resolution the command is sent
         * again, to the new primary (Sentinel mode; at most twice). */
        *cs->sent_ms = 0;
        freeReplyObject(*r);
        *r = NULL;
        return (*st = crd__topology_changed(c, 0)) == CRD_OK ? HOP_AGAIN : HOP_RETURN;
    }
    if (cls == CRD__REPLY_OK && replicas > 0 && acks < 0) {
        /* The script ran, but the server refused the WAIT behind it (an ACL changed, a
         * failover to a primary configured otherwise): nothing says a replica has it. */
        *st = crd__fail(c, CRD_NOT_SYNCED, "%s: the primary ran it, but it refused the WAIT "
                        "behind it (%s), so no replica is known to have it", cs->what, refusal);
        return HOP_RETURN;
    }
    if (cls == CRD__REPLY_OK && replicas > 0 && acks == 0) {
        *st = crd__fail(c, CRD_NOT_SYNCED, "%s: the primary ran it, but none of its %d "
                        "replicas acknowledged it within %lld ms", cs->what, replicas,
                        (long long)wait_timeout);
        return HOP_RETURN;
    }
    /* A standalone or Sentinel client retries what proves nothing ran and says "not now"
     * (LOADING after a restart, BUSY behind a long script, MASTERDOWN, TRYAGAIN,
     * CLUSTERDOWN from a cluster node reached with redis://) within the call's deadline,
     * as a cluster client does; the last such reply is the call's error. */
    if (!cs->cluster && cls == CRD__REPLY_BUSY && cs->hop < MAX_HOPS * 8 &&
        cs->deadline - crd__now_ms() - cs->backoff >= 50 &&
        pause_before_retry(c, &cs->backoff, cs->deadline)) {
        /* At least 50 ms left for the next answer: a slow one must not turn the server's
         * words into a timeout of ours. */
        const char *text;
        size_t n = crd__reply_error_text(*r, &text);
        snprintf(cs->busy, sizeof cs->busy, "%.*s", (int)(n > 100 ? 100 : n), text);
        freeReplyObject(*r);
        *r = NULL;
        return HOP_AGAIN;
    }
    if (!cs->cluster || cs->hop >= MAX_HOPS)
        return HOP_FINAL;
    if ((cs->target = redirect_target(c, *r, cls, from)) != NULL) {
        cs->asking = cls == CRD__REPLY_ASK;
        again = true;
    } else if ((cls == CRD__REPLY_READONLY || cls == CRD__REPLY_BUSY) &&
               pause_before_retry(c, &cs->backoff, cs->deadline)) {
        /* A replica (a failover moved the primary), a slot being migrated (TRYAGAIN), a
         * cluster not yet agreed (CLUSTERDOWN) or a node loading: nothing ran. */
        if (cls == CRD__REPLY_READONLY)
            crd__cluster_stale(c);
        again = true;
    }
    if (!again)
        return HOP_FINAL;
    freeReplyObject(*r);
    *r = NULL;
    return HOP_AGAIN;
}

crd_status crd__call(crd_client *c, crd__cmd *cmd, const char *what, redisReply **reply,
                     int64_t *sent_ms)
{
    *reply = NULL;
    int64_t sent_dummy = 0;
    if (sent_ms == NULL)
        sent_ms = &sent_dummy;
    *sent_ms = 0;
    size_t keylen = 0;
    const char *key = routing_key(cmd, &keylen);
    call_state cs = {c, cmd, what,
                     cmd->deadline_ms != 0 ? cmd->deadline_ms
                                           : crd__now_ms() + c->opts.command_timeout_ms,
                     10, NULL, false, c->cluster != NULL, 0, sent_ms, ""};
    redisReply *r = NULL;
    crd_status st;
    for (;; cs.hop++) {
        crd__pool *p = cs.target != NULL ? cs.target->pool : crd__pool_for(c, key, keylen);
        bool ask_now = cs.asking;
        cs.target = NULL;
        cs.asking = false;
        if (p == NULL) {
            /* The map has no node for the slot: nothing was sent; ask again. */
            crd__cluster_stale(c);
            if (cs.hop < MAX_HOPS && pause_before_retry(c, &cs.backoff, cs.deadline))
                continue;
            return CRD_IO;
        }
        /* Replica sync (Sentinel, Cluster, or asked for): the script and WAIT in one
         * pipeline, to the node that runs it. A command sent after ASKING goes alone. */
        /* Sentinel mode: the primary's generation when this was built and sent (read
         * before the replica count, which is that primary's or a newer one's). */
        uint64_t gen = p == c->pool && crd__topology_sentinel(c) ? crd__topology_gen(c) : 0;
        int64_t wait_timeout = 0;
        int replicas = cmd->sync && !ask_now ? crd__sync_replicas(c, p, &wait_timeout,
                                                                  cs.deadline) : 0;
        if (replicas > 0) {
            /* A server that refuses WAIT (deploy.c): an acquire (it carries undo.c's
             * on_late) is refused before anything is sent, unless the user chose to go
             * without WAIT; everything else goes without it. */
            crd__sync_mode m = crd__deploy_sync_mode(c, p, cmd->late != NULL, cs.deadline, what);
            if (m == CRD__SYNC_REFUSE) {
                *sent_ms = 0;
                return CRD_SYNC_UNAVAILABLE;
            }
            if (m == CRD__SYNC_WITHOUT)
                replicas = 0;
        }
        int64_t acks = 0;
        char refusal[160] = "";
        int handed = 0;
        st = run_hop(c, p, cmd, ask_now, replicas, wait_timeout, cs.deadline, gen, &r, &acks,
                     refusal, sizeof refusal, sent_ms, &handed);
        cmd->unsent = handed < 0;
        if (handed < 0)
            handed = 0;
        if (st == CRD_IO && *sent_ms == 0 && gen != 0 && crd__topology_gen(c) != gen &&
            cs.hop < MAX_HOPS) {
            /* Not sent: built for the replicas of the primary just replaced (or its link
             * failed before a byte went out). Built again for the new one. */
            cmd->unsent = false;
            continue;
        }
        if (st == CRD_OK && gen != 0 && crd__topology_gen(c) != gen) {
            /* The sentinels named a new primary while this was in flight: the reply may be
             * the old primary's, whose writes the new one may never see. A read is asked
             * again there; a script's caller re-checks there (an acquire reads its hold
             * back, a release is sent again with its request id). */
            freeReplyObject(r);
            r = NULL;
            if (cmd->script == CRD__PLAIN && cs.hop < MAX_HOPS) {
                *sent_ms = 0;
                continue;
            }
            return crd__fail(c, CRD_IO, "%s: the sentinels named a new primary while it was in "
                             "flight; its outcome is re-checked there", what);
        }
        if (st != CRD_OK) {
            if (hop_failed(&cs, p, st, handed) == HOP_AGAIN)
                continue;
            return st;
        }
        hop_next next = hop_answered(&cs, &r, crd__pool_ep(p), replicas, acks, refusal,
                                     wait_timeout, &st);
        if (next == HOP_AGAIN)
            continue;
        if (next == HOP_RETURN) {
            *reply = r; /* NULL, or the reply of a script no replica acknowledged */
            return st;
        }
        break;
    }
    return final_status(c, cmd, r, what, reply);
}

crd_status crd__call_words(crd_client *c, const char *what, redisReply **reply, int n, ...)
{
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__PLAIN, n);
    va_list ap;
    va_start(ap, n);
    for (int k = 0; k < n; k++)
        crd__cmd_arg_str(&cmd, va_arg(ap, const char *));
    va_end(ap);
    redisReply *r = NULL;
    crd_status st = crd__call(c, &cmd, what, &r, NULL);
    crd__cmd_free(&cmd);
    if (reply != NULL)
        *reply = r;
    else if (r != NULL)
        freeReplyObject(r);
    return st;
}

/* The WAIT at all[n] (when replicas > 0): freed here; CRD_NOT_SYNCED when none
 * acknowledged. */
static crd_status synced(crd_client *c, redisReply **all, int n, int replicas, int64_t timeout)
{
    if (replicas == 0)
        return CRD_OK;
    bool none = all[n]->type != REDIS_REPLY_INTEGER || all[n]->integer == 0;
    char refusal[160] = "";
    if (all[n]->type != REDIS_REPLY_INTEGER) {
        crd__deploy_wait_answer(c, all[n]);
        refusal_words(all[n], refusal, sizeof refusal);
    }
    freeReplyObject(all[n]);
    all[n] = NULL;
    if (!none)
        return CRD_OK;
    if (refusal[0] != '\0')
        return crd__fail(c, CRD_NOT_SYNCED, "renewal: the primary ran it, but it refused the "
                         "WAIT behind it (%s)", refusal);
    return crd__fail(c, CRD_NOT_SYNCED, "renewal: the primary ran it, but none of its %d "
                     "replicas acknowledged it within %lld ms", replicas, (long long)timeout);
}

/* One round of the pipeline: every command of cmds (+ WAIT) in one request to p. */
static crd_status round_trip(crd_client *c, crd__pool *p, crd__cmd *cmds, int ncmd, int replicas,
                             int64_t wait_timeout, uint64_t gen, bool eval, redisReply **all,
                             int64_t *sent_ms)
{
    int total = ncmd + (replicas > 0);
    crd__req *rq = crd__req_new(p, total);
    if (rq == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot build a pipeline");
    bool ok = true;
    for (int k = 0; k < ncmd && ok; k++) {
        crd__cmd_head(&cmds[k], eval);
        ok = crd__req_add(rq, crd__cmd_argc(&cmds[k], 0), cmds[k].v, cmds[k].len);
    }
    if (ok && replicas > 0)
        ok = add_wait(rq, replicas, wait_timeout);
    if (!ok) {
        crd__req_free(rq);
        return crd__fail(c, CRD_NO_MEMORY, "cannot build a pipeline");
    }
    rq->want_gen = replicas > 0 ? gen : 0;
    CRD__COUNT(c, watchdog_round_trips);
    int handed;
    return crd__engine_call(c, rq, all, sent_ms, &handed);
}

#define PIPELINE_MAX 64 /* the watchdog's round: 64 script calls */

crd_status crd__script_pipeline(crd_client *c, crd__pool *p, crd__cmd *cmds, int ncmd,
                                redisReply **replies, int64_t *sent_ms)
{
    if (ncmd < 1 || ncmd > PIPELINE_MAX)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "a pipeline of %d commands", ncmd);
    for (int k = 0; k < ncmd; k++)
        if (cmds[k].oom)
            return crd__fail(c, CRD_NO_MEMORY, "cannot build a pipeline");
    int64_t deadline = crd__now_ms() + c->opts.command_timeout_ms;
    int64_t wait_timeout = 0;
    int replicas = 0;
    uint64_t gen = 0;
    redisReply *all[PIPELINE_MAX + 1];
    crd_status st;
    for (int round = 0;; round++) {
        /* Sentinel mode: the primary's generation, then its replica count (as crd__call). */
        gen = p == c->pool && crd__topology_sentinel(c) ? crd__topology_gen(c) : 0;
        replicas = ncmd > 0 && cmds[0].sync ? crd__sync_replicas(c, p, &wait_timeout, deadline) : 0;
        /* A server refusing WAIT (deploy.c): renewals go without it (never refused). */
        if (replicas > 0 &&
            crd__deploy_sync_mode(c, p, false, deadline, "renewal") != CRD__SYNC_WAIT)
            replicas = 0;
        st = round_trip(c, p, cmds, ncmd, replicas, wait_budget(wait_timeout, deadline), gen,
                        false, all, sent_ms);
        /* Not sent, built for the replicas of a primary just replaced: once more. */
        if (st == CRD_IO && *sent_ms == 0 && gen != 0 && crd__topology_gen(c) != gen && round == 0)
            continue;
        break;
    }
    if (st != CRD_OK)
        return st;
    int total = ncmd + (replicas > 0);
    int script = -1;
    for (int k = 0; k < ncmd; k++)
        if (crd__reply_classify(all[k]) == CRD__REPLY_NOSCRIPT)
            script = cmds[k].script;
    if (script >= 0) {
        /* The cache was flushed: load the script once and resend the round (64 EVALs
         * would carry its text 64 times). */
        for (int k = 0; k < total; k++)
            freeReplyObject(all[k]);
        const crd__script_src *src = &crd__scripts[script];
        const char *la[3] = {"SCRIPT", "LOAD", src->text};
        size_t ll[3] = {6, 4, src->len};
        redisReply *lr;
        st = crd__engine_call_argv(c, p, 3, la, ll, 0, &lr);
        /* A proxy that forwards scripts but not SCRIPT LOAD (twemproxy closes the
         * connection on it) or an ACL without script|load: the round goes as EVAL, which
         * caches the script for the next round's EVALSHA. */
        bool loaded = st == CRD_OK && lr->type != REDIS_REPLY_ERROR;
        if (st == CRD_OK)
            freeReplyObject(lr);
        if (st == CRD_CLOSED || st == CRD_NO_MEMORY)
            return st;
        if ((st = round_trip(c, p, cmds, ncmd, replicas, wait_budget(wait_timeout, deadline), gen,
                             !loaded, all, sent_ms)) != CRD_OK)
            return st;
    }
    for (int k = 0; k < ncmd; k++)
        replies[k] = all[k];
    return synced(c, all, ncmd, replicas, wait_timeout);
}

/* ---- the hand-off: a waiter's acquire sent by the thread that reads the message --------- */

bool crd__handoff_prepare(crd_client *c, crd__handoff *h)
{
    h->rq = NULL;
    h->sent = 0;
    h->sent_ms = 0;
    h->gen = 0;
    /* A cluster routes and redirects per node; replica sync pipelines WAIT: both keep the
     * usual path. */
    if (c->cluster != NULL || h->cmd.oom || h->cmd.script == CRD__PLAIN)
        return false;
    int64_t deadline = h->cmd.deadline_ms != 0 ? h->cmd.deadline_ms
                                               : crd__now_ms() + c->opts.command_timeout_ms;
    int64_t wait_timeout = 0;
    if (h->cmd.sync && crd__sync_replicas(c, c->pool, &wait_timeout, deadline) > 0)
        return false;
    int at = 0;
    h->rq = hop_request(c->pool, &h->cmd, false, false, 0, 0, deadline, &at);
    if (h->rq == NULL)
        return false;
    crd__engine_prepare_wait(h->rq);
    return true;
}

void crd__handoff_send(crd_client *c, crd__handoff *h)
{
    h->sent_ms = crd__now_ms();
    h->gen = crd__topology_sentinel(c) ? crd__topology_gen(c) : 0;
    /* The command's own budget starts now, within the waiter's deadline. */
    int64_t budget = h->sent_ms + c->opts.command_timeout_ms;
    h->rq->deadline_ms = h->until < budget ? h->until : budget;
    h->sent = crd__engine_submit_lent(c, h->rq) == CRD_OK ? 1 : -1;
}

bool crd__handoff_finish(crd_client *c, crd__handoff *h, crd_status *st, redisReply **reply,
                         int64_t *sent_ms)
{
    *reply = NULL;
    *st = CRD_OK;
    if (h->sent == 0) {
        crd__req_free(h->rq); /* never submitted */
        return false;
    }
    if (h->sent == -1)
        return false; /* refused (the client is closing): freed by the engine, never sent */
    int handed = 0;
    *st = crd__engine_await(c, h->rq, reply, sent_ms, &handed);
    if (handed)
        *sent_ms = 0;
    crd__reply_class cls = *st == CRD_OK ? crd__reply_classify(*reply) : CRD__REPLY_OK;
    if (cls == CRD__REPLY_NOSCRIPT || cls == CRD__REPLY_READONLY) {
        /* Nothing ran: the usual path follows (EVAL, or a re-resolution). */
        freeReplyObject(*reply);
        *reply = NULL;
        return false;
    }
    if (*st == CRD_OK && h->gen != 0 && crd__topology_gen(c) != h->gen) {
        /* As crd__call: the sentinels named a new primary while it was in flight, so the
         * reply may be the old primary's. The acquire reads its hold back there. */
        freeReplyObject(*reply);
        *reply = NULL;
        *st = crd__fail(c, CRD_IO, "the lock's acquire: the sentinels named a new primary "
                        "while it was in flight; its outcome is re-checked there");
    }
    return true;
}

void crd__handoff_forget(crd__handoff *h)
{
    if (h->sent == 0)
        crd__req_free(h->rq);
    h->rq = NULL;
    crd__cmd_free(&h->cmd);
}

crd__req *crd__call_request(crd_client *c, crd__cmd *cmd, bool eval)
{
    size_t keylen = 0;
    const char *key = routing_key(cmd, &keylen);
    crd__pool *p = crd__pool_for(c, key, keylen);
    if (p == NULL || cmd->oom)
        return NULL;
    int at = 0;
    int64_t deadline = cmd->deadline_ms != 0 ? cmd->deadline_ms
                                             : crd__now_ms() + c->opts.command_timeout_ms;
    return hop_request(p, cmd, eval, false, 0, 0, deadline, &at);
}

bool crd__call_async_ok(crd_client *c)
{
    return c->cluster == NULL && !crd__topology_sentinel(c) &&
           c->opts.replica_sync != CRD_REPLICA_SYNC_ON;
}
