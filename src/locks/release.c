/*
 * release.c -- giving a hold back: the owner-checked release of one hold (PROTOCOL.md
 * 5.2, 7.2, 8.5), with or without a lock handle.
 *
 * Retry safety (PROTOCOL.md 12): an unlock is retried once, on a fresh connection, with
 * the same request id; its latch key makes the retry a replay of the first outcome. The
 * final release cancels renewal before it is sent, so the watchdog never extends a hold
 * that is being given back.
 *
 * Threads: any caller thread, and the thread-exit hook. Locks: holds->mu around
 * bookkeeping only (never during Redis traffic).
 */
#include "locks.h"

#include <stdlib.h>
#include <string.h>

/* The unlock command of r (its latch: the same request id on every try). */
void crd__release_cmd(crd__rel *r, crd__cmd *cmd)
{
    crd_client *c = r->l->client;
    /* The latch must outlive every retry of this call: two command timeouts plus slack. */
    crd__rel_args args = {r->field, r->flen, r->rearm, r->latch, r->latch_len,
                          2 * c->opts.command_timeout_ms + 1000};
    crd__kinds[r->l->kind].release(r->l, &args, cmd);
    cmd->sync = !r->nosync; /* replica sync: WAIT in the same pipeline */
}

/* Sends the kind's unlock script, with one retry on a fresh connection and the same
 * request id. */
crd_status crd__release_send(crd__rel *r, redisReply **reply)
{
    crd_client *c = r->l->client;
    crd__cmd cmd;
    crd__release_cmd(r, &cmd);
    crd_status st = CRD_IO;
    for (int try_no = 0; try_no < 2 && st == CRD_IO; try_no++)
        st = crd__call(c, &cmd, "release", reply, NULL);
    if (st == CRD_NOT_SYNCED) {
        /* The lock was given back on the primary; a failover now could bring the hold
         * back until its lease ends (nothing renews it any more). Accepted, and said. */
        crd__log(c, CRD_LOG_WARN, "release of \"%.*s\": %s; accepted (a failover could "
                 "bring the hold back until its lease ends)", CRD__NAME_FMT(r->l),
                 crd_client_errmsg(c));
        st = CRD_OK;
    }
    crd__cmd_free(&cmd);
    return st;
}

/* Bounded barging (gate.c): the unlock message reached reached connections; when one of
 * them is not this client's own subscriber, a waiter elsewhere was just woken, and this
 * client's next attempt on the lock waits about one hand-off time so that waiter can
 * take it. */
static long long defer_after_release(crd_lock *l, long long reached)
{
    crd_client *c = l->client;
    if (c->opts.release_defer_ms <= 0)
        return 0;
    long long others = reached - (crd__sub_is_live(c, l->names.channel.p, l->names.channel.len) ? 1 : 0);
    if (others <= 0)
        return 0;
    crd__gate_defer(c, l->name, l->name_len, crd__now_us() + c->opts.release_defer_ms * 1000,
                    others < 1000000 ? (int)others : 1000000);
    return others;
}

/* After a release that kept its channel's subscription (crd__sub_keep_linger): it stays
 * for this client's next counted turn when the release woke a herd again, else it ends. */
static void settle_kept(crd__rel *r, bool released, long long others)
{
    crd_lock *l = r->l;
    crd_client *c = l->client;
    r->kept = false;
    crd__sub_kept_settle(c, l->names.channel.p, l->names.channel.len,
                         others >= CRD__COUNTED_MIN, released,
                         crd__now_ms() + c->opts.release_defer_ms);
}

static crd_status lost_status(crd_client *c, const crd_lock *l)
{
    return crd__fail(c, CRD_LOCK_LOST, "the hold on \"%.*s\" expired or was force-unlocked",
                     CRD__NAME_FMT(l));
}

static crd_status not_owner(crd_client *c, const crd_lock *l, uint64_t owner)
{
    return crd__fail(c, CRD_NOT_OWNER, "owner %llu does not hold \"%.*s\"",
                     (unsigned long long)owner, CRD__NAME_FMT(l));
}

/* Applies a release's outcome to this client's record of the hold (holds->mu held). */
static void settle(crd_client *c, crd__holds *h, crd__hold *hold, const crd_lock *l,
                   crd__rel_outcome o)
{
    switch (o) {
    case CRD__REL_READ_ONE:
        /* A read unlock answers for the whole lock, not for this owner: the local count
         * is what tells. */
        if (--hold->count <= 0)
            crd__holds_remove(h, hold);
        else
            hold->releasing = false;
        break;
    case CRD__REL_RELEASED:
        crd__hist_add(&c->metrics.hold, crd__now_ms() - hold->since);
        crd__holds_remove(h, hold);
        break;
    case CRD__REL_STILL_HELD:
        if (--hold->count < 1) {
            /* Redis holds more than this client took: an acquire whose reply was lost ran
             * after all (PROTOCOL.md 12). The caller has released everything it knows
             * of, so stop renewing and let that orphan expire with its lease. */
            crd__log(c, CRD_LOG_WARN, "lock \"%.*s\" is still held in Redis after its last "
                     "known release (an acquire whose reply was lost ran); it expires after "
                     "its lease", CRD__NAME_FMT(l));
            crd__holds_remove(h, hold);
        } else {
            hold->releasing = false;
        }
        break;
    case CRD__REL_GONE:
    case CRD__REL_NOT_HELD:
        crd__holds_remove(h, hold);
        break;
    case CRD__REL_BAD:
        hold->releasing = false;
        break;
    }
}

crd_status crd__release_begin(crd__rel *r, crd_lock *l, uint64_t owner)
{
    crd_client *c = l->client;
    memset(r, 0, sizeof *r);
    r->l = l;
    r->owner = owner;
    r->flen = crd__field(c->uuid, owner, crd__kinds[l->kind].write_field, r->field);
    r->rearm = c->opts.watchdog_timeout_ms;
    crd__holds *h = c->holds;
    bool was_lost = false;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    if (hold != NULL) {
        r->known = true;
        was_lost = hold->lost;
        r->rearm = hold->lease_ms;
        if (was_lost)
            crd__holds_remove(h, hold);
        else if (hold->count <= 1)
            hold->releasing = true; /* cancel renewal before the final release is sent */
    }
    bool final = hold != NULL && !was_lost && hold->count <= 1;
    bool counted = final && hold->counted;
    pthread_mutex_unlock(&h->mu);
    /* Its message must not reach a subscription of ours kept after the hand-off that gave
     * us the lock: nobody here waits (issue #48). Unless the hold was taken behind a
     * herd: then this client's next turn waits on it (crd__sub_keep_linger, below). */
    bool linger = final && crd__kinds[l->kind].counts_receivers;
    if (linger && !counted)
        crd__sub_end_linger(c, l->names.channel.p, l->names.channel.len);
    if (was_lost)
        return lost_status(c, l); /* counted when the watchdog found it lost */
    char rid[33];
    if (crd__random_hex32(rid) != CRD_OK)
        return crd__fail(c, CRD_IO, "cannot read random bytes for the request id");
    /* Latches of ordinary names live inside r: no allocation on the release path. */
    const crd__buf *lp = &l->names.latch_prefix;
    r->latch_len = lp->len + 32;
    r->latch = r->latch_len < sizeof r->latch_inline ? r->latch_inline : malloc(r->latch_len + 1);
    if (r->latch == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the unlock latch");
    memcpy(r->latch, lp->p, lp->len);
    memcpy(r->latch + lp->len, rid, sizeof rid);
    if (linger && counted)
        r->kept = crd__sub_keep_linger(c, l->names.channel.p, l->names.channel.len,
                                       crd__now_ms() + c->opts.command_timeout_ms +
                                           c->opts.release_defer_ms);
    return CRD_OK;
}

void crd__release_clear(crd__rel *r)
{
    if (r->latch != r->latch_inline)
        free(r->latch);
    r->latch = NULL;
}

crd_status crd__release_end(crd__rel *r, crd_status st, redisReply *reply)
{
    crd_lock *l = r->l;
    crd_client *c = l->client;
    crd__holds *h = c->holds;
    crd__rel_outcome o = st == CRD_OK ? crd__kinds[l->kind].release_reply(reply) : CRD__REL_BAD;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, r->owner, l->kind);
    if (hold != NULL)
        settle(c, h, hold, l, o); /* CRD__REL_BAD, or no reply: keep renewing */
    pthread_mutex_unlock(&h->mu);
    crd__release_clear(r);
    if (c->opts.prompt_loss_detection)
        crd__watch_flush(c);
    long long others = 0;
    if (o == CRD__REL_RELEASED && crd__kinds[l->kind].counts_receivers && reply->integer > 1)
        others = defer_after_release(l, reply->integer - 1);
    /* No reply: whether it ran is unknown, and taken as not (a message of ours that does
     * come then wakes a waiter here in vain, which costs one attempt, no more). */
    if (r->kept)
        settle_kept(r, o == CRD__REL_RELEASED, others);
    if (st != CRD_OK)
        return st;
    if (o == CRD__REL_BAD) {
        st = crd__reply_fail(c, reply, "release");
        freeReplyObject(reply);
        return st;
    }
    freeReplyObject(reply);
    switch (o) {
    case CRD__REL_GONE: /* fair: the hash was gone (Redisson reports success here) */
        if (!r->known)
            return not_owner(c, l, r->owner);
        CRD__COUNT(c, locks_lost);
        return lost_status(c, l);
    case CRD__REL_NOT_HELD:
        if (!r->known)
            return not_owner(c, l, r->owner);
        CRD__COUNT(c, locks_lost);
        crd__log(c, CRD_LOG_ERROR, "lock \"%.*s\" was lost before its release (expired or "
                 "force-unlocked)", CRD__NAME_FMT(l));
        return lost_status(c, l);
    case CRD__REL_RELEASED:
    case CRD__REL_STILL_HELD:
    case CRD__REL_READ_ONE:
    case CRD__REL_BAD:
        break;
    }
    CRD__COUNT(c, releases);
    crd__ok(c);
    return CRD_OK;
}

static crd_status release_with(crd_lock *l, uint64_t owner, bool nosync)
{
    crd__rel r;
    crd_status st = crd__release_begin(&r, l, owner);
    if (st != CRD_OK) {
        crd__release_clear(&r);
        return st;
    }
    r.nosync = nosync;
    redisReply *reply = NULL;
    st = crd__release_send(&r, &reply);
    return crd__release_end(&r, st, reply);
}

crd_status crd__release(crd_lock *l, uint64_t owner) { return release_with(l, owner, false); }

crd_status crd__release_undo(crd_lock *l, uint64_t owner) { return release_with(l, owner, true); }

crd_status crd_lock_release_owner(crd_lock *l, uint64_t owner)
{
    crd_status st = crd__lock_check(l);
    if (st != CRD_OK)
        return st;
    if (owner == 0)
        return crd__fail(l->client, CRD_INVALID_ARGUMENT, "owner id 0 is not valid");
    return crd__release(l, owner);
}

crd_status crd_lock_release(crd_lock *l) { return crd_lock_release_owner(l, crd_owner_current()); }

crd_status crd__release_by_name(crd_client *c, const char *name, size_t len, uint64_t owner,
                                crd__kind kind)
{
    crd_lock tmp;
    crd_status st = crd__lock_init(&tmp, c, kind, name, len);
    if (st != CRD_OK)
        return st;
    st = crd__release(&tmp, owner);
    crd__lock_clear(&tmp);
    return st;
}

/* ---- the event loop's driver (loop.c) ----------------------------------------------------- */

/* A release on the event loop: begun at its first step, then on the engine. */
typedef struct release_op {
    crd_op op;
    crd__rel rel;
    crd__aio *aio; /* the unlock in flight */
    int tries;     /* sends so far (one retry after CRD_IO, same request id) */
    bool begun;
} release_op;

static release_op *rop(crd_op *op) { return (release_op *)(void *)op; }

/* Puts the unlock on the engine (EVAL after a NOSCRIPT); false when refused. */
static bool send_release(release_op *o, bool eval)
{
    crd__cmd cmd;
    crd__release_cmd(&o->rel, &cmd);
    cmd.sync = false; /* the async path runs only without replica sync */
    crd__req *rq = crd__call_request(o->op.c, &cmd, eval);
    crd__cmd_free(&cmd);
    o->aio = rq != NULL ? crd__aio_submit(o->op.c, rq, eval) : NULL;
    o->tries++;
    return o->aio != NULL;
}

static int rop_step(crd_op *op)
{
    release_op *o = rop(op);
    crd_client *c = op->c;
    if (op->landed)
        return (int)op->off_st; /* it ran whole on the helper thread */
    if (!o->begun) {
        o->begun = true;
        crd_status st = crd__release_begin(&o->rel, op->l, op->owner);
        if (st != CRD_OK) {
            crd__release_clear(&o->rel);
            return (int)st;
        }
        if (!crd__call_async_ok(c)) { /* through crd__call, bounded by its deadline */
            if (crd__op_offload(op))
                return -1;
            redisReply *r = NULL;
            st = crd__release_send(&o->rel, &r);
            return (int)crd__release_end(&o->rel, st, r);
        }
        if (!send_release(o, false))
            return (int)crd__release_end(&o->rel, crd__fail(c, CRD_CLOSED, "client is closed"),
                                         NULL);
        return -1;
    }
    if (!crd__aio_ready(o->aio))
        return -1;
    redisReply *r = NULL;
    int64_t sent;
    bool eval;
    crd_status st = crd__aio_take(c, o->aio, &r, &sent, &eval);
    o->aio = NULL;
    if (st == CRD_OK && !eval && crd__reply_classify(r) == CRD__REPLY_NOSCRIPT) {
        freeReplyObject(r);
        if (send_release(o, true)) /* nothing ran */
            return -1;
        st = crd__fail(c, CRD_CLOSED, "client is closed");
        r = NULL;
    } else if (st == CRD_IO && o->tries < 2) {
        if (send_release(o, eval)) /* the same request id: a replay if the first ran */
            return -1;
        st = crd__fail(c, CRD_CLOSED, "client is closed");
    }
    return (int)crd__release_end(&o->rel, st, r);
}

static crd_status rop_helper(crd_op *op)
{
    redisReply *r = NULL;
    crd_status st = crd__release_send(&rop(op)->rel, &r);
    return crd__release_end(&rop(op)->rel, st, r);
}

static int64_t rop_timeout(crd_op *op, int64_t now)
{
    (void)now;
    crd__aio *io = rop(op)->aio;
    if (io == NULL)
        return 0; /* not begun */
    return crd__aio_ready(io) ? 0 : -1; /* its completion writes the fd */
}

static crd_status rop_close(crd_op *op)
{
    release_op *o = rop(op);
    if (op->landed)
        return op->off_st;
    if (o->aio == NULL)
        return CRD_CLOSED;
    redisReply *r = crd__aio_drop(o->aio);
    o->aio = NULL;
    return crd__release_end(&o->rel, r != NULL ? CRD_OK : CRD_CLOSED, r);
}

static const crd__op_kind release_kind = {rop_step, rop_helper, rop_timeout, rop_close, false};

crd_status crd_lock_release_async(crd_lock *l, uint64_t owner, crd_op_done_fn done, void *user,
                                  crd_op **out)
{
    crd_status st;
    crd_op *op = crd__lock_op_new(l, owner, &release_kind, sizeof(release_op), done, user, &st);
    if (op == NULL)
        return st;
    crd__op_start(op, out);
    return CRD_OK;
}
