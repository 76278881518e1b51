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
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Sends the kind's unlock script, with one retry on a fresh connection and the same
 * request id. */
static crd_status send_unlock(crd_lock *l, const char *field, size_t flen, int64_t rearm,
                              redisReply **reply)
{
    crd_client *c = l->client;
    char rid[33];
    if (crd__random_hex32(rid) != CRD_OK)
        return crd__fail(c, CRD_IO, "cannot read random bytes for the request id");
    /* Latches of ordinary names live on the stack: no allocation on the release path. */
    const crd__buf *lp = &l->names.latch_prefix;
    size_t latch_len = lp->len + 32;
    char stack[256];
    char *latch = latch_len < sizeof stack ? stack : malloc(latch_len + 1);
    if (latch == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the unlock latch");
    memcpy(latch, lp->p, lp->len);
    memcpy(latch + lp->len, rid, sizeof rid);
    /* The latch must outlive every retry of this call: two command timeouts plus slack. */
    crd__rel_args args = {field, flen, rearm, latch, latch_len,
                          2 * c->opts.command_timeout_ms + 1000};
    crd__cmd cmd;
    crd__kinds[l->kind].release(l, &args, &cmd);
    cmd.sync = true; /* replica sync: WAIT in the same pipeline */
    crd_status st = CRD_IO;
    for (int try_no = 0; try_no < 2 && st == CRD_IO; try_no++)
        st = crd__call(c, &cmd, "release", reply, NULL);
    if (st == CRD_NOT_SYNCED) {
        /* The lock was given back on the primary; a failover now could bring the hold
         * back until its lease ends (nothing renews it any more). Accepted, and said. */
        crd__log(c, CRD_LOG_WARN, "release of \"%.*s\": %s; accepted (a failover could "
                 "bring the hold back until its lease ends)", CRD__NAME_FMT(l),
                 crd_client_errmsg(c));
        st = CRD_OK;
    }
    crd__cmd_free(&cmd);
    if (latch != stack)
        free(latch);
    return st;
}

/* Bounded barging (gate.c): the unlock message reached reached connections; when one of
 * them is not this client's own subscriber, a waiter elsewhere was just woken, and this
 * client's next attempt on the lock waits about one hand-off time so that waiter can
 * take it. */
static void defer_after_release(crd_lock *l, long long reached)
{
    crd_client *c = l->client;
    if (c->opts.release_defer_ms <= 0)
        return;
    if (reached - (crd__sub_is_live(c, l->names.channel.p, l->names.channel.len) ? 1 : 0) <= 0)
        return;
    crd__gate_defer(c, l->name, l->name_len, crd__now_us() + c->opts.release_defer_ms * 1000);
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

crd_status crd__release(crd_lock *l, uint64_t owner)
{
    crd_client *c = l->client;
    char field[CRD__FIELD_MAX];
    size_t flen = crd__field(c->uuid, owner, crd__kinds[l->kind].write_field, field);
    crd__holds *h = c->holds;
    int64_t rearm = c->opts.watchdog_timeout_ms;
    bool known = false, was_lost = false;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    if (hold != NULL) {
        known = true;
        was_lost = hold->lost;
        rearm = hold->lease_ms;
        if (was_lost)
            crd__holds_remove(h, hold);
        else if (hold->count <= 1)
            hold->releasing = true; /* cancel renewal before the final release is sent */
    }
    pthread_mutex_unlock(&h->mu);
    if (was_lost)
        return lost_status(c, l); /* counted when the watchdog found it lost */
    redisReply *r = NULL;
    crd_status st = send_unlock(l, field, flen, rearm, &r);
    crd__rel_outcome o = st == CRD_OK ? crd__kinds[l->kind].release_reply(r) : CRD__REL_BAD;
    pthread_mutex_lock(&h->mu);
    hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    if (hold != NULL)
        settle(c, h, hold, l, o); /* CRD__REL_BAD, or no reply: keep renewing */
    pthread_mutex_unlock(&h->mu);
    if (c->opts.prompt_loss_detection)
        crd__watch_flush(c);
    if (st != CRD_OK)
        return st;
    if (o == CRD__REL_BAD) {
        st = crd__reply_fail(c, r, "release");
        freeReplyObject(r);
        return st;
    }
    if (o == CRD__REL_RELEASED && crd__kinds[l->kind].counts_receivers && r->integer > 1)
        defer_after_release(l, r->integer - 1);
    freeReplyObject(r);
    switch (o) {
    case CRD__REL_GONE: /* fair: the hash was gone (Redisson reports success here) */
        if (!known)
            return not_owner(c, l, owner);
        CRD__COUNT(c, locks_lost);
        return lost_status(c, l);
    case CRD__REL_NOT_HELD:
        if (!known)
            return not_owner(c, l, owner);
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
