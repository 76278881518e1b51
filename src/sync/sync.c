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

static const char *const labels[] = {"semaphore", "permit semaphore", "latch", "rate limiter"};

/* The name checks of a lock (lock.c), worded for this object. */
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
    crd_status st = crd__check_call(c, out, labels[kind], name, len, true);
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
        /* The rate limiter has no channel: its waits are the server's delays. */
        st = kind == CRD__SYNC_LATCH     ? crd__latch_channel_name(name, len, &s->channel)
             : kind == CRD__SYNC_LIMITER ? CRD_OK
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

crd_status crd__sync_attempt_call(crd__sync *s, const crd__sync_attempt *at, void *arg,
                                  const char *what, int64_t *retry_epoch_ms)
{
    crd_status st;
    if (at->resolve != NULL && at->run_inline(arg) && (st = at->resolve(arg)) != CRD_BUSY)
        return st;
    crd__cmd cmd;
    st = at->build(arg, &cmd);
    if (st != CRD_OK)
        return st;
    redisReply *r = NULL;
    bool sent = false;
    st = crd__sync_call(s, &cmd, what, true, &r, &sent);
    return at->read(arg, st, st == CRD_OK ? r : NULL, sent, retry_epoch_ms);
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

crd_status crd__sync_run_ok(crd__sync *s, crd__cmd *cmd, const char *what, bool idempotent,
                            int64_t *out)
{
    crd_status st = crd__sync_run_int(s, cmd, what, idempotent, out);
    if (st == CRD_OK)
        crd__ok(s->client);
    return st;
}

crd_status crd__sync_amount(crd__sync *s, int64_t n, int64_t min, const char *what)
{
    crd_status st = crd__sync_check(s);
    if (st != CRD_OK || (n >= min && n <= INT64_MAX / 2 && n >= INT64_MIN / 2))
        return st;
    return crd__fail(s->client, CRD_INVALID_ARGUMENT,
                     "%s \"%.*s\": %s of %lld permits; nothing was changed", s->label,
                     CRD__SYNC_NAME_FMT(s), what, (long long)n);
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

/* ---- the waiter ------------------------------------------------------------------------ */

static void finish(crd__swait *w, crd_status st);

static crd_status ran_out(crd__swait *w)
{
    crd__sync *s = w->op.s;
    return crd__fail(s->client, CRD_TIMEOUT, "%s \"%.*s\": the wait ran out", s->label,
                     CRD__SYNC_NAME_FMT(s));
}

static crd_status interrupted(crd__swait *w)
{
    crd__sync *s = w->op.s;
    return crd__fail(s->client, CRD_INTERRUPTED, "%s \"%.*s\": the wait was interrupted "
                     "(crd_interrupt_raise); nothing was taken", s->label, CRD__SYNC_NAME_FMT(s));
}

/* A channel-less wait's own entry (a rate limiter's delays: crd__sub_quiet); false when
 * the wait ended instead. */
static bool quiet_entry(crd__swait *w)
{
    crd_client *c = w->op.s->client;
    crd_status st = crd__sub_quiet(c, &w->sub);
    if (st != CRD_OK) {
        finish(w, st);
        return false;
    }
    if (w->nonblocking) {
        crd__sub_loop_watch(c, w->sub, true);
        w->seen_events = crd__sub_events(w->sub);
    }
    return true;
}

void crd__swait_begin(crd__swait *w, const crd__sync_op *op, int64_t wait_ms, bool nonblocking)
{
    memset(w, 0, sizeof *w);
    w->op = *op;
    w->nonblocking = nonblocking;
    w->wait_ms = wait_ms;
    w->deadline = crd__wait_deadline(crd__now_ms(), wait_ms);
    crd__backoff_init(&w->backoff);
    w->state = CRD__SW_TRY;
}

/* The outcome is st: the end hook next (CRD__SW_END), then DONE. */
static void finish(crd__swait *w, crd_status st)
{
    w->ending = st;
    w->state = CRD__SW_END;
}

/* Whether the end hook must read a lost reply back (a blocking call). */
static bool end_reads_back(const crd__swait *w)
{
    const crd__sync_attempt *at = w->op.at;
    return w->ending != CRD_OK && w->op.end != NULL && at != NULL && at->run_inline != NULL &&
           at->run_inline(w->op.arg);
}

/* END: the object's last word, then the subscription goes back. */
static void step_end(crd__swait *w)
{
    crd__sync *s = w->op.s;
    crd_client *c = s->client;
    crd_status st = w->ending;
    if (w->op.end != NULL)
        st = w->op.end(s, w->op.arg, st, w->waited);
    if (st == CRD_OK)
        crd__ok(c);
    w->result = st;
    w->state = CRD__SW_DONE;
    if (w->sub != NULL) {
        if (w->nonblocking)
            crd__sub_loop_watch(c, w->sub, false);
        crd__sub_release(c, w->sub); /* the client may be gone from here on (crd_client_free) */
        w->sub = NULL;
    }
}

static void slice(crd__swait *w, crd_status st);

/* What follows an attempt whose outcome is st (retry_epoch its retry time). */
static void after_attempt(crd__swait *w, crd_status st)
{
    crd__sync *s = w->op.s;
    crd_client *c = s->client;
    if (w->last) {
        finish(w, st == CRD_BUSY ? ran_out(w) : st);
        return;
    }
    bool failed = st == CRD_IO;
    if (!w->tried) {
        w->tried = true;
        if (st != CRD_BUSY && !(failed && w->wait_ms != 0)) {
            finish(w, st);
        } else if (w->wait_ms == 0) {
            finish(w, crd__fail(c, CRD_BUSY, "%s \"%.*s\": not now", s->label,
                                CRD__SYNC_NAME_FMT(s)));
        } else {
            w->waited = st == CRD_BUSY;
            if (w->op.how == CRD__WAIT_CHANNEL || w->op.how == CRD__WAIT_OWN_CHANNEL) {
                w->state = CRD__SW_SUBSCRIBE;
                return;
            }
            /* No channel: no re-try first (nothing could be missed), straight to the
             * slice the attempt named. */
            if (quiet_entry(w))
                slice(w, st);
        }
        return;
    }
    if (st != CRD_BUSY && !failed) {
        finish(w, st);
        return;
    }
    slice(w, st);
}

/* After a busy or failed attempt (st): sleep for the slice, or end when the wait is over. */
static void slice(crd__swait *w, crd_status st)
{
    crd_client *c = w->op.s->client;
    bool failed = st == CRD_IO;
    w->failed = failed;
    int64_t now = crd__now_ms();
    if (now >= w->deadline) {
        finish(w, failed ? st : ran_out(w));
        return;
    }
    /* A permit's lease, or a rate limiter's delay, ends at a wall-clock time: sleep that
     * long on our clock. */
    int64_t in = w->retry_epoch > 0 ? w->retry_epoch - crd__epoch_ms() : 0;
    crd__slice_in si = {failed, w->confirmed, w->retry_epoch > 0 ? CRD__BUSY_TTL : CRD__BUSY_MESSAGE,
                        in > 0 ? in : 0, c->opts.poll_interval_ms, c->opts.max_wait_slice_ms,
                        w->op.how, 0};
    int64_t sl = crd__wait_slice(&si, &w->backoff);
    if (crd__wait_futile(&si, sl, now, w->deadline)) {
        /* The server's delay ends after the deadline and nothing else can come sooner:
         * the wait is over now rather than at its deadline. */
        finish(w, ran_out(w));
        return;
    }
    w->wake_at = crd__wait_until(now, sl, w->deadline);
    w->state = CRD__SW_WAIT;
}

/* Whether the attempt can go on the engine (an event loop's, standalone, nothing to read
 * back first). */
static bool async_ok(const crd__swait *w)
{
    const crd__sync_attempt *at = w->op.at;
    return w->nonblocking && at != NULL && crd__call_async_ok(w->op.s->client) &&
           (at->run_inline == NULL || !at->run_inline(w->op.arg));
}

/* Puts the attempt's command on the engine (EVAL after a NOSCRIPT): state IO, or the
 * outcome of a command that cannot be built or sent. */
static void submit(crd__swait *w, bool eval)
{
    crd_client *c = w->op.s->client;
    crd__cmd cmd;
    crd_status st = w->op.at->build(w->op.arg, &cmd);
    if (st != CRD_OK) {
        after_attempt(w, st);
        return;
    }
    crd__req *rq = crd__call_request(c, &cmd, eval);
    crd__cmd_free(&cmd);
    w->aio = rq != NULL ? crd__aio_submit(c, rq, eval) : NULL;
    if (w->aio == NULL) {
        finish(w, crd__fail(c, CRD_CLOSED, "client is closed"));
        return;
    }
    w->state = CRD__SW_IO;
}

/* IO: the attempt in flight answered (or not yet: nothing happens). */
static void step_io(crd__swait *w)
{
    crd_client *c = w->op.s->client;
    if (!crd__aio_ready(w->aio))
        return;
    redisReply *r = NULL;
    int64_t sent = 0;
    bool eval = false;
    crd_status st = crd__aio_take(c, w->aio, &r, &sent, &eval);
    w->aio = NULL;
    w->state = CRD__SW_TRY;
    if (st == CRD_OK && !eval && crd__reply_classify(r) == CRD__REPLY_NOSCRIPT) {
        freeReplyObject(r); /* nothing ran */
        submit(w, true);
        return;
    }
    if (st == CRD_OK && r->type == REDIS_REPLY_ERROR &&
        (w->op.at->keep_error == NULL || !w->op.at->keep_error(r))) {
        st = crd__reply_fail(c, r, w->op.s->label);
        freeReplyObject(r);
        r = NULL;
    }
    w->retry_epoch = 0;
    after_attempt(w, w->op.at->read(w->op.arg, st, r, sent != 0, &w->retry_epoch));
}

/* SUBSCRIBE: the object's channel, then TRY again (a release between the first try and
 * the subscription is not missed). A blocking wait waits for the confirmation (up to
 * subscription_timeout_ms); an event loop's learns of it from its fd. */
static void step_subscribe(crd__swait *w)
{
    crd__sync *s = w->op.s;
    crd_client *c = s->client;
    int64_t until = crd__now_ms() + c->opts.subscription_timeout_ms;
    if (until > w->deadline)
        until = w->deadline;
    crd_status st = crd__sub_acquire_rule(c, s->channel.p, s->channel.len, w->op.rule,
                                          w->nonblocking ? 0 : until, &w->sub, &w->confirmed);
    if (st != CRD_OK || w->sub == NULL) {
        bool closed = st == CRD_CLOSED || st == CRD_OK;
        finish(w, closed ? crd__fail(c, CRD_CLOSED, "client is closed") : st);
        return;
    }
    if (w->nonblocking) {
        crd__sub_loop_watch(c, w->sub, true);
        w->seen_events = crd__sub_events(w->sub);
    }
    w->state = CRD__SW_TRY;
}

void crd__swait_step(crd__swait *w)
{
    switch (w->state) {
    case CRD__SW_TRY:
        if (async_ok(w)) {
            submit(w, false);
        } else {
            w->retry_epoch = 0;
            after_attempt(w, w->op.fn(w->op.arg, &w->retry_epoch));
        }
        break;
    case CRD__SW_IO: step_io(w); break;
    case CRD__SW_SUBSCRIBE: step_subscribe(w); break;
    case CRD__SW_END: step_end(w); break;
    case CRD__SW_WAIT: /* the driver's turn: crd__swait_woken() */
    case CRD__SW_DONE: break;
    }
}

void crd__swait_woken(crd__swait *w, crd_status woke, bool confirmed)
{
    if (w->state != CRD__SW_WAIT)
        return;
    w->confirmed = confirmed;
    crd_client *c = w->op.s->client;
    if (woke == CRD_CLOSED) {
        finish(w, crd__fail(c, CRD_CLOSED, "client is closed"));
    } else if (woke == CRD_INTERRUPTED) {
        finish(w, interrupted(w));
    } else if (woke == CRD_TIMEOUT && crd__now_ms() >= w->deadline) {
        if (w->op.last_try) {
            w->last = true;
            w->state = CRD__SW_TRY;
        } else {
            /* The last attempt's own words stay when it failed on the connection. */
            finish(w, w->failed ? CRD_IO : ran_out(w));
        }
    } else {
        w->state = CRD__SW_TRY;
    }
}

bool crd__swait_blocks(const crd__swait *w)
{
    if (w->state == CRD__SW_TRY)
        return !async_ok(w);
    return w->state == CRD__SW_END && end_reads_back(w);
}

void crd__swait_cancel(crd__swait *w, crd_status st)
{
    if (w->state == CRD__SW_DONE || w->state == CRD__SW_END)
        return;
    crd_client *c = w->op.s->client;
    if (w->aio != NULL) { /* only when the client is freed: its answer is not waited for */
        redisReply *r = crd__aio_drop(w->aio);
        if (r != NULL)
            freeReplyObject(r);
        w->aio = NULL;
    }
    finish(w, st == CRD_CANCELLED ? crd__fail(c, CRD_CANCELLED, "%s \"%.*s\": cancelled",
                                              w->op.s->label, CRD__SYNC_NAME_FMT(w->op.s))
                                  : crd__fail(c, st, "client is closed"));
}

crd_status crd__sync_wait(const crd__sync_op *op, int64_t wait_ms)
{
    crd__swait w;
    crd__swait_begin(&w, op, wait_ms, false);
    /* A wait that starts interrupted sends nothing. */
    if (wait_ms != 0 && crd__intr_raised(crd__intr_current()))
        finish(&w, interrupted(&w));
    while (w.state != CRD__SW_DONE) {
        if (w.state == CRD__SW_WAIT) {
            bool confirmed = w.confirmed;
            crd_status woke = crd__sub_wait(op->s->client, w.sub, w.wake_at, NULL, &confirmed);
            crd__swait_woken(&w, woke, confirmed);
        } else {
            crd__swait_step(&w);
        }
    }
    return w.result;
}

/* ---- the event loop's driver (loop.c) ----------------------------------------------------- */

/* A synchronizer's wait on the event loop: the machine in non-blocking mode. */
typedef struct sync_op {
    crd_op op;
    crd__swait w;
} sync_op;

static crd__swait *swait_of(crd_op *op) { return &((sync_op *)(void *)op)->w; }

/* As far as the wait goes without waiting: its outcome, or -1 while it waits (for its
 * subscription, its wake time, its attempt on the engine, or the helper thread). An
 * attempt on the engine is seen through first: a cancel then has no effect if it took
 * the permits, as for a lock's acquire. */
static int sop_step(crd_op *op)
{
    crd__swait *w = swait_of(op);
    crd_client *c = op->c;
    for (int guard = 0; guard < 8 && w->state != CRD__SW_DONE; guard++) {
        if (w->state != CRD__SW_IO && (op->cancel || atomic_load(&c->closed)))
            crd__swait_cancel(w, op->cancel ? CRD_CANCELLED : CRD_CLOSED);
        if (w->state == CRD__SW_WAIT) {
            crd_status woke;
            if (!crd__loop_wait_over(c, w->sub, &w->seen_events, &w->confirmed, w->wake_at,
                                     &woke))
                return -1;
            crd__swait_woken(w, woke, w->confirmed);
        } else if (w->state == CRD__SW_IO) {
            crd__swait_step(w);
            if (w->state == CRD__SW_IO)
                return -1; /* its completion writes the fd */
        } else if (crd__swait_blocks(w) && crd__op_offload(op)) {
            return -1; /* the helper thread's completion writes the fd */
        } else {
            crd__swait_step(w);
        }
    }
    if (w->state != CRD__SW_DONE)
        return -1;
    free(w->op.arg);
    w->op.arg = NULL;
    return (int)w->result;
}

static crd_status sop_helper(crd_op *op)
{
    crd__swait_step(swait_of(op));
    return swait_of(op)->result;
}

static int64_t sop_timeout(crd_op *op, int64_t now)
{
    const crd__swait *w = swait_of(op);
    if (w->state == CRD__SW_IO)
        return crd__aio_ready(w->aio) ? 0 : -1; /* its completion writes the fd */
    if (op->cancel || w->state != CRD__SW_WAIT)
        return 0;
    return crd__loop_left(w->wake_at, now); /* the fd brings a message sooner */
}

/* The client is freed: what a landed attempt took is kept (its machine is at its end,
 * CRD_OK); else CRD_CLOSED, through the end hook, on this thread. */
static crd_status sop_close(crd_op *op)
{
    crd__swait *w = swait_of(op);
    crd__swait_cancel(w, CRD_CLOSED);
    while (w->state != CRD__SW_DONE)
        crd__swait_step(w);
    free(w->op.arg);
    w->op.arg = NULL;
    return w->result;
}

static const crd__op_kind sync_kind = {sop_step, sop_helper, sop_timeout, sop_close, true};

crd_status crd__sync_start(const crd__sync_op *sop, int64_t wait_ms, crd_op_done_fn done,
                           void *user, crd_op **out)
{
    crd_status st = CRD_OK;
    crd_op *op = crd__op_new(sop->s->client, &sync_kind, sizeof(sync_op), done, user, &st);
    if (op == NULL) {
        free(sop->arg);
        return st;
    }
    crd__swait_begin(swait_of(op), sop, wait_ms, true);
    crd__op_start(op, out);
    crd__ok(sop->s->client);
    return CRD_OK;
}

crd_status crd__sync_go(const crd__sync_op *op, size_t arg_size, int64_t wait_ms,
                        const crd__sync_async *as)
{
    if (as == NULL)
        return crd__sync_wait(op, wait_ms);
    crd__sync_op sop = *op;
    sop.arg = malloc(arg_size);
    if (sop.arg == NULL)
        return crd__fail(op->s->client, CRD_NO_MEMORY, "cannot allocate an operation");
    memcpy(sop.arg, op->arg, arg_size);
    return crd__sync_start(&sop, wait_ms, as->done, as->user, as->op);
}
