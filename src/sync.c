/*
 * sync.c -- what the semaphore, the permit-expirable semaphore and the count-down latch
 * share: their handles' names and keys (checked as a lock's, and in cluster mode for one
 * slot), the call path's reading of a lost reply, and the waiter loop (PROTOCOL.md 14).
 *
 * The waiter follows the lock waiter's shape (acquire.c) without its local queue: try,
 * subscribe to the object's channel (one reference on the client's shared subscription,
 * with the object's wake rule, pubsub.c), try again, then sleep on the subscription until
 * a message, the retry time the last try gave, or the caller's deadline, and try after
 * each. Without a live subscription it re-tries every poll_interval_ms. Nothing here is
 * resent after a lost reply: the try functions decide what a lost reply means.
 *
 * Threads: any caller thread. Locks: none of its own (pubsub.c takes ps->mu inside its
 * calls); no Redis traffic under any mutex.
 */
#include "sync.h"

#include <stdlib.h>
#include <string.h>

static const char *const labels[] = {"semaphore", "permit semaphore", "latch"};

/* The name checks of a lock (lock.c), worded for this object. */
static crd_status check_name(crd_client *c, const char *label, const char *name, size_t len)
{
    if (name == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "%s name is NULL", label);
    if (len == 0)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "%s name is empty", label);
    if (len > CRD_NAME_MAX)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "%s name is %zu bytes; the maximum is %d",
                         label, len, CRD_NAME_MAX);
    if (crd__name_is_unsafe(name, len) && (c->cluster != NULL || !c->opts.allow_unsafe_names))
        return crd__fail(c, CRD_INVALID_ARGUMENT,
                         "%s name \"%.*s\" has braces that would put its keys in different "
                         "cluster slots ('}' without '{', an unclosed '{' or an empty \"{}\" "
                         "tag)%s", label, (int)(len > 60 ? 60 : len), name,
                         c->cluster != NULL ? "; a cluster refuses its scripts (CROSSSLOT)"
                                            : "; set allow_unsafe_names to accept it");
    return CRD_OK;
}

/* In cluster mode every key a script names must hash to the name's slot: a latch named
 * with its own "{...}" tag fails here, as its channel braces the whole name (golden
 * xs_cluster_semaphore_latch: Redis replies CROSSSLOT to Redisson). */
static crd_status check_slots(crd_client *c, const crd__sync *s)
{
    if (c->cluster == NULL)
        return CRD_OK;
    int slot = crd__key_slot(s->name, s->name_len);
    const crd__buf *other[2] = {&s->channel, &s->timeouts};
    for (int i = 0; i < 2; i++) {
        if (other[i]->p == NULL)
            continue;
        int o = crd__key_slot(other[i]->p, other[i]->len);
        if (o != slot)
            return crd__fail(c, CRD_INVALID_ARGUMENT,
                             "%s name \"%.*s\": its %s %.*s hashes to cluster slot %d and its "
                             "key to slot %d, so Redis Cluster refuses its scripts (CROSSSLOT, "
                             "as it does Redisson's); choose a name without \"{...}\"",
                             s->label, CRD__SYNC_NAME_FMT(s), i == 0 ? "channel" : "permit set",
                             (int)(other[i]->len > 80 ? 80 : other[i]->len), other[i]->p, o,
                             slot);
    }
    return CRD_OK;
}

crd_status crd__sync_init(crd__sync *s, crd_client *c, crd__sync_kind kind, const void *out,
                          const char *name, size_t len)
{
    memset(s, 0, sizeof *s);
    if (out == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "out is NULL");
    crd_status st = crd__client_check(c);
    if (st == CRD_OK)
        st = check_name(c, labels[kind], name, len);
    if (st != CRD_OK)
        return st;
    s->client = c;
    s->kind = kind;
    s->label = labels[kind];
    s->publish = c->publish;
    s->name = malloc(len + 1);
    if (s->name != NULL) {
        memcpy(s->name, name, len);
        s->name[len] = '\0';
        s->name_len = len;
        st = kind == CRD__SYNC_LATCH ? crd__latch_channel_name(name, len, &s->channel)
                                     : crd__derived_name(CRD__SEMAPHORE_CHANNEL, name, len,
                                                         &s->channel);
        if (st == CRD_OK && kind == CRD__SYNC_PERMITS)
            st = crd__timeouts_name(name, len, &s->timeouts);
    }
    if (s->name == NULL || st != CRD_OK) {
        crd__sync_clear(s);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a %s", labels[kind]);
    }
    if ((st = check_slots(c, s)) != CRD_OK) {
        crd__sync_clear(s);
        return st;
    }
    crd__ok(c);
    return CRD_OK;
}

crd_status crd__sync_new(crd_client *c, crd__sync_kind kind, const void *out, const char *name,
                         size_t len, size_t size, crd__sync **s)
{
    *s = NULL;
    crd__sync *n = calloc(1, size);
    if (n == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a %s", labels[kind]);
    crd_status st = crd__sync_init(n, c, kind, out, name, len);
    if (st != CRD_OK) {
        free(n);
        return st;
    }
    *s = n;
    return CRD_OK;
}

void crd__sync_free(crd__sync *s)
{
    if (s == NULL)
        return;
    crd__sync_clear(s);
    free(s);
}

const char *crd__sync_name(const crd__sync *s, size_t *len)
{
    if (len != NULL)
        *len = s != NULL ? s->name_len : 0;
    return s != NULL ? s->name : NULL;
}

void crd__sync_clear(crd__sync *s)
{
    free(s->name);
    free(s->channel.p);
    free(s->timeouts.p);
    memset(s, 0, sizeof *s);
}

crd_status (crd__sync_check)(const crd__sync *s)
{
    if (s == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "handle is NULL");
    return crd__client_check(s->client);
}

crd_status (crd__sync_check_ptr)(const crd__sync *s, const void *p, const char *p_name)
{
    crd_status st = crd__sync_check(s);
    if (st == CRD_OK && p == NULL)
        st = crd__fail(s->client, CRD_INVALID_ARGUMENT, "%s is NULL", p_name);
    return st;
}

crd_status crd__sync_lost(crd__sync *s, crd_status st, bool sent, bool idempotent,
                          const char *what)
{
    crd_client *c = s->client;
    if (st == CRD_IO && sent && !idempotent)
        return crd__fail(c, CRD_OUTCOME_UNKNOWN,
                         "%s on %s \"%.*s\": sent, but the reply was lost (%s); it may or may "
                         "not have run, and it was not resent", what, s->label,
                         CRD__SYNC_NAME_FMT(s), crd_client_errmsg(c));
    return st;
}

crd_status crd__sync_call(crd__sync *s, crd__cmd *cmd, const char *what, bool idempotent,
                          redisReply **reply, bool *sent)
{
    crd_client *c = s->client;
    int64_t sent_ms = 0;
    crd_status st = crd__call(c, cmd, what, reply, &sent_ms);
    crd__cmd_free(cmd);
    if (sent != NULL)
        *sent = sent_ms != 0;
    return crd__sync_lost(s, st, sent_ms != 0, idempotent, what);
}

crd_status crd__sync_int(crd__sync *s, const redisReply *r, const char *what, int64_t *out)
{
    if (crd__reply_int(r, out))
        return CRD_OK;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        return crd__fail(s->client, CRD_PROTOCOL, "%s: %s \"%.*s\" holds \"%.*s\", not a number",
                         what, s->label, CRD__SYNC_NAME_FMT(s), (int)(r->len > 40 ? 40 : r->len),
                         r->str);
    return crd__reply_fail(s->client, r, what);
}

crd_status crd__sync_run_int(crd__sync *s, crd__cmd *cmd, const char *what, bool idempotent,
                             int64_t *out)
{
    redisReply *r = NULL;
    crd_status st = crd__sync_call(s, cmd, what, idempotent, &r, NULL);
    if (st != CRD_OK)
        return st;
    int64_t v = 0;
    st = crd__sync_int(s, r, what, &v);
    freeReplyObject(r);
    if (st == CRD_OK && out != NULL)
        *out = v;
    return st;
}

crd_status crd__sync_get(crd__sync *s, const char *what, int64_t *out)
{
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__PLAIN, 2);
    crd__cmd_arg_str(&cmd, "GET");
    crd__cmd_arg(&cmd, s->name, s->name_len);
    return crd__sync_run_int(s, &cmd, what, true, out);
}

void crd__sync_count_acquire(crd__sync *s, crd_status st, int64_t permits, bool waited)
{
    if (st == CRD_OK) {
        CRD__COUNT_N(s->client, permits_acquired, permits);
        if (waited)
            CRD__COUNT(s->client, permit_acquires_contended);
    } else if (st == CRD_BUSY || st == CRD_TIMEOUT) {
        CRD__COUNT(s->client, permit_acquire_busy);
    }
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* A wait's end: the object's hook, then a success clears the detail string. */
static crd_status end_wait(crd__sync *s, void *arg, crd_status st, bool waited,
                           crd__sync_end_fn end)
{
    if (end != NULL)
        st = end(s, arg, st, waited);
    if (st == CRD_OK)
        crd__ok(s->client);
    return st;
}

crd_status crd__sync_wait(crd__sync *s, int64_t wait_ms, int rule, bool last_try,
                          crd__sync_try_fn fn, void *arg, crd__sync_end_fn end)
{
    crd_client *c = s->client;
    int64_t start = crd__now_ms();
    int64_t deadline = wait_ms < 0 ? INT64_MAX : start + wait_ms;
    int64_t retry_epoch = 0;
    crd_status st = fn(arg, &retry_epoch);
    if (st != CRD_BUSY && !(st == CRD_IO && wait_ms != 0))
        return end_wait(s, arg, st, false, end);
    if (wait_ms == 0)
        return end_wait(s, arg, crd__fail(c, CRD_BUSY, "%s \"%.*s\": not now", s->label,
                                          CRD__SYNC_NAME_FMT(s)),
                        false, end);
    bool waited = st == CRD_BUSY;

    crd__sub *sub = NULL;
    bool confirmed = false;
    int64_t sub_deadline = min64(deadline, crd__now_ms() + c->opts.subscription_timeout_ms);
    crd_status sst = crd__sub_acquire_rule(c, s->channel.p, s->channel.len, rule, sub_deadline,
                                           &sub, &confirmed);
    if (sst != CRD_OK) {
        if (sst == CRD_CLOSED)
            sst = crd__fail(c, CRD_CLOSED, "client is closed");
        sst = end_wait(s, arg, sst, waited, end);
        if (sub != NULL)
            crd__sub_release(c, sub);
        return sst;
    }
    int64_t io_backoff = 25;
    for (;;) {
        /* A try after the subscription is live: a release between the first try and the
         * subscription is not missed. */
        retry_epoch = 0;
        st = fn(arg, &retry_epoch);
        bool failed = st == CRD_IO;
        if (st != CRD_BUSY && !failed)
            break;
        int64_t now = crd__now_ms();
        if (now >= deadline) {
            st = failed ? st : crd__fail(c, CRD_TIMEOUT, "%s \"%.*s\": the wait ran out",
                                         s->label, CRD__SYNC_NAME_FMT(s));
            break;
        }
        int64_t wake_at = deadline;
        if (failed) {
            wake_at = min64(wake_at, now + io_backoff);
            io_backoff = min64(io_backoff * 2, c->opts.poll_interval_ms);
        } else {
            io_backoff = 25;
        }
        if (retry_epoch > 0) {
            /* The wall clock says when a permit's lease ends; sleep that long on ours
             * (at least 1 ms: the retry comes once it has passed). */
            int64_t in = retry_epoch - crd__epoch_ms();
            wake_at = min64(wake_at, now + (in > 0 ? in : 0) + 1);
        }
        if (!confirmed)
            wake_at = min64(wake_at, now + c->opts.poll_interval_ms);
        if (c->opts.max_wait_slice_ms > 0)
            wake_at = min64(wake_at, now + c->opts.max_wait_slice_ms);
        crd_status w = crd__sub_wait(c, sub, wake_at, NULL, &confirmed);
        if (w == CRD_CLOSED) {
            st = crd__fail(c, CRD_CLOSED, "client is closed");
            break;
        }
        if (w == CRD_TIMEOUT && crd__now_ms() >= deadline) {
            st = last_try ? fn(arg, &retry_epoch) : failed ? CRD_IO : CRD_BUSY;
            if (st == CRD_BUSY)
                st = crd__fail(c, CRD_TIMEOUT, "%s \"%.*s\": the wait ran out", s->label,
                               CRD__SYNC_NAME_FMT(s));
            break;
        }
    }
    st = end_wait(s, arg, st, waited, end);
    crd__sub_release(c, sub); /* the client may be gone from here on (crd_client_free) */
    return st;
}
