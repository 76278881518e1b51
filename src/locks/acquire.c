/*
 * acquire.c -- taking a lock: the waiter algorithm of PROTOCOL.md 4.2 as a state machine,
 * and the blocking call that drives it.
 *
 * One crd__acquire holds everything an acquire needs between steps, so nothing lives in
 * stack locals around a blocking call:
 *
 *   TRY        run the kind's acquire script (first resolving a lost reply: an acquire
 *              whose reply was lost is never resent; its owner field is read back, and
 *              if it is one above what this client recorded, the acquire happened)
 *     -> DONE       acquired, refused (wait 0), or failed
 *     -> SUBSCRIBE  held, and the caller will wait (first time only)
 *     -> WAIT       held: sleep for the slice crd__wait_slice() decides
 *   SUBSCRIBE  take the lock's channel (a fair waiter: its own channel), then TRY again:
 *              a release between the first try and the subscription is not missed
 *   WAIT       the driver waits for a wake-up or until wake_at, then reports with
 *              crd__acquire_woken(): back to TRY, or DONE when the wait ran out
 *   QUEUE      behind this client's own waiters of the lock (gate.c), until the head
 *   DEFER      this client's release woke waiters elsewhere a moment ago (gate.c): let
 *              them go first. Timed (release_defer_ms), or, when the release woke
 *              COUNTED_MIN or more and the caller blocks, counted: subscribed, it lets
 *              one release per woken waiter pass and then WAITs for the last one's
 *     -> WAIT       (its attempt goes out with that release's message)
 *     -> TRY        the deferral is over, or no release came for release_defer_ms
 *   DONE       result is the outcome; a fair waiter that gave up has left the queue
 *
 * crd_lock_acquire_owner() is the blocking driver: it runs the steps on the caller's
 * thread and waits on the subscription's condition variable. The event-loop driver
 * (acquire_loop.c) runs the same steps and waits on its loop instead.
 *
 * Threads: any caller thread. Locks: holds->mu around bookkeeping only (never during
 * Redis traffic); the waits are pubsub.c's.
 */
#include "acquire.h"
#include "kinds_ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bookkeeping ------------------------------------------------------------------------ */

/* prompt_loss_detection: the new hold (record id) keeps its lock's channel subscribed,
 * so a force-unlock's message reaches this client while it holds the lock. */
static void watch_hold(crd__acquire *a, uint64_t id)
{
    crd_lock *l = a->l;
    crd__sub *s = crd__sub_watch(a->c, l->names.channel.p, l->names.channel.len);
    if (s == NULL)
        return; /* out of memory: the hold is renewed, just not watched */
    crd__holds *h = a->c->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, a->owner, l->kind);
    if (hold != NULL && hold->id == id && hold->watch_sub == NULL) {
        hold->watch_sub = s;
        s = NULL;
    }
    pthread_mutex_unlock(&h->mu);
    if (s != NULL)
        crd__sub_unwatch(a->c, s); /* released meanwhile */
}

/* A hold taken in a counted turn keeps the hand-off's subscription this long with nobody
 * waiting on it (a critical section's length; a longer one pays a SUBSCRIBE again), so
 * that its release can keep it for the next turn (release.c, crd__sub_keep_linger). */
#define COUNTED_HOLD_LINGER_MS 1000

/* Records a successful acquire sent at sent_ms. */
static crd_status record_acquire(crd__acquire *a, int64_t sent_ms)
{
    crd_lock *l = a->l;
    crd__holds *h = a->c->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, a->owner, l->kind);
    if (hold != NULL && hold->lost) {
        /* The old hold was lost but not yet reported; this acquire starts a new one. */
        crd__holds_remove(h, hold);
        hold = NULL;
    }
    uint64_t fresh = 0;
    /* Its attempt went out with the release it waited for behind a herd. */
    bool counted = a->was_deferred && a->turns >= 0 && !a->defer_timed_out;
    if (hold == NULL) {
        hold = crd__holds_insert(h, l->name, l->name_len, a->owner, l->kind);
        if (hold == NULL) {
            pthread_mutex_unlock(&h->mu);
            /* Redis holds the lock but we cannot track it: it expires after its lease. */
            return crd__fail(a->c, CRD_NO_MEMORY, "acquired, but cannot record the hold");
        }
        hold->since = sent_ms;
        fresh = hold->id;
        hold->counted = counted;
    }
    hold->count++;
    hold->lease_ms = a->lease;
    hold->watchdog = a->watchdog;
    /* Write re-entry adds the lease to the remaining TTL; the validity deadline is the
     * conservative one either way. */
    hold->valid_until = sent_ms + a->lease;
    hold->failing = false;
    pthread_mutex_unlock(&h->mu);
    if (fresh != 0)
        crd__ident_touch(a->c); /* identity: one atomic load unless it sleeps */
    if (fresh != 0 && counted && a->sub != NULL)
        crd__sub_hold_linger(a->c, a->sub, crd__now_ms() + COUNTED_HOLD_LINGER_MS);
    if (a->watchdog)
        crd__watchdog_kick(a->c);
    if (fresh != 0 && a->watchdog && a->c->opts.prompt_loss_detection &&
        crd__kinds[l->kind].wait == CRD__WAIT_CHANNEL)
        watch_hold(a, fresh);
    return CRD_OK;
}

/* Reads the script's reply r to an attempt sent at sent_ms into a->outcome, recording
 * the hold when it was taken. */
static crd_status read_outcome(crd__acquire *a, const redisReply *r, int64_t sent_ms)
{
    if (crd__kinds[a->l->kind].refuses_reentry && crd__reentry_refused(r)) {
        /* Redisson's script refused the holder's reentry and wrote nothing (not even a
         * fair queue entry): the owner holds the lock, and waiting would wait for itself. */
        a->outcome = CRD__ACQ_REFUSED;
        a->queued = false;
        return crd__fail(a->c, CRD_DEADLOCK, "%s \"%.*s\" is already held by owner %llu: it "
                         "is not reentrant (the server refused the reentry; nothing changed)",
                         crd__kinds[a->l->kind].label, CRD__NAME_FMT(a->l),
                         (unsigned long long)a->owner);
    }
    a->outcome = crd__kinds[a->l->kind].acquire_reply(r, a->nowait, &a->hint_ms, &a->token);
    if (a->outcome == CRD__ACQ_BAD)
        return crd__reply_fail(a->c, r, "acquire");
    return a->outcome == CRD__ACQ_TAKEN ? record_acquire(a, sent_ms) : CRD_OK;
}

/* The deadline of one acquire command: the caller's (wait_ms), except that a try
 * without a wait gets one command timeout for its round trip, and an unbounded wait one
 * command timeout per attempt (the attempt after it follows the usual backoff). With
 * replica sync the WAIT's timeout is added to the command timeout: a WAIT that blocks
 * is not a server that stopped answering. */
static int64_t call_deadline(const crd__acquire *a)
{
    int64_t per = a->c->opts.command_timeout_ms +
                  crd__sync_budget_ms(a->c, a->l->name, a->l->route_len);
    int64_t budget = crd__now_ms() + per;
    if (a->wait_ms == 0)
        return a->start + per;
    return a->deadline == INT64_MAX || a->deadline > budget ? budget : a->deadline;
}

/* Whether the node of a's lock cannot be reached now (its last connect failed; the
 * reason in why): a wait that runs out then ends with CRD_IO, not CRD_TIMEOUT. */
static bool node_failing(const crd__acquire *a, char *why, size_t n)
{
    crd__pool *p = crd__pool_for(a->c, a->l->name, a->l->route_len);
    return p != NULL && crd__pool_failing(p, why, n);
}

/* What an acquire of a's took, if it ran (undo.c's view of it). */
static crd__undo undo_of(const crd__acquire *a)
{
    return (crd__undo){a->c, a->l->kind, a->l->name, a->l->name_len, a->owner, a->field,
                       a->flen, a->lease, a->nowait};
}

/* Reads the owner's field back to learn whether an acquire whose reply was lost ran. */
static crd_status resolve_lost_reply(crd__acquire *a, bool *happened)
{
    crd_lock *l = a->l;
    int64_t expected = crd__local_count(l, a->owner, l->kind) + 1;
    crd__cmd cmd;
    crd__hold_count_cmd(l, a->field, a->flen, &cmd);
    /* Bounded by the caller's deadline like the acquire itself: if it runs out, the
     * outcome goes to undo.c when the acquire ends (finish). */
    cmd.deadline_ms = call_deadline(a);
    redisReply *r = NULL;
    crd_status st = crd__call(a->c, &cmd, "reading back an acquire", &r, NULL);
    crd__cmd_free(&cmd);
    if (st == CRD_SERVER || st == CRD_PROTOCOL)
        return st;
    if (st != CRD_OK) {
        char detail[300], why[8];
        snprintf(detail, sizeof detail, "%s", crd_client_errmsg(a->c));
        /* The wait ran out while the node was slow to answer, not unreachable. */
        if (a->wait_ms > 0 && crd__now_ms() >= a->deadline && !node_failing(a, why, sizeof why))
            return crd__fail(a->c, CRD_TIMEOUT, "the wait of %lld ms ran out before the "
                             "outcome of an acquire whose reply was lost could be read back "
                             "(%s); if it ran, the engine gives it back", (long long)a->wait_ms,
                             detail);
        return crd__fail(a->c, CRD_IO, "an acquire's reply was lost and its outcome could not "
                         "be read back: %s", detail);
    }
    int64_t now_count = 0;
    if (!crd__hold_count_of(l->kind, r, a->field, a->flen, &now_count))
        now_count = 0;
    freeReplyObject(r);
    *happened = now_count == expected;
    return CRD_OK;
}

/* The token of an acquire whose reply was lost: the counter now. While this owner holds
 * the lock no other acquire can raise it (only this owner's own re-entry, on this
 * thread), so it is the token that acquire drew. */
static crd_status read_token(crd__acquire *a)
{
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__PLAIN, 2);
    crd__cmd_arg_str(&cmd, "GET");
    crd__cmd_arg(&cmd, a->l->names.token.p, a->l->names.token.len);
    redisReply *r = NULL;
    crd_status st = crd__call(a->c, &cmd, "reading the token back", &r, NULL);
    crd__cmd_free(&cmd);
    if (st != CRD_OK)
        return st;
    if (!crd__reply_int(r, &a->token) || a->token < 1)
        st = crd__reply_fail(a->c, r, "reading the token back");
    freeReplyObject(r);
    return st;
}

/* An acquire command: replica sync (WAIT in the same pipeline), the caller's deadline, and
 * what the engine gives back if the reply comes after the caller was told it failed. */
static void arm(crd__acquire *a, crd__cmd *cmd, crd__undo *u)
{
    cmd->sync = true;
    if (crd__kinds[a->l->kind].refuses_reentry)
        cmd->keep_error = crd__reentry_refused; /* the refusal is read, not a failure */
    cmd->deadline_ms = call_deadline(a);
    *u = undo_of(a);
    cmd->late = &crd__acquire_late;
    cmd->late_what = u;
}

/* The kind's acquire command for this attempt, armed (u lives as long as cmd). */
static void build_acquire(crd__acquire *a, crd__cmd *cmd, crd__undo *u)
{
    const crd__kind_ops *ops = &crd__kinds[a->l->kind];
    crd__acq_args args = {a->field, a->flen, a->lease, a->nowait, a->fair_wait, a->want_token};
    ops->acquire(a->l, &args, cmd);
    if (ops->queued && !a->nowait)
        a->queued = true;
    arm(a, cmd, u);
    /* A blocking wait's attempt ends when its thread's interrupt token is raised (the
     * engine gives a late hold back), except a fair one's: abandoned, it could put the
     * waiter back in the queue after it left. A try (wait_ms 0) is not a wait. */
    cmd->interruptible = !a->nonblocking && !ops->queued && a->wait_ms != 0;
}

/* Sends the kind's acquire script once. */
static crd_status send_acquire(crd__acquire *a, redisReply **r, int64_t *sent)
{
    crd__cmd cmd;
    crd__undo u;
    build_acquire(a, &cmd, &u);
    crd_status st = crd__call(a->c, &cmd, "acquire", r, sent);
    a->unanswered = st == CRD_IO ? cmd.handed : 0;
    a->unsent = st == CRD_IO && cmd.unsent;
    crd__cmd_free(&cmd);
    return st;
}

/* Resolves the pending acquire by reading its field back; when it ran, records it.
 * *happened tells which. */
static crd_status settle_pending(crd__acquire *a, bool *happened)
{
    crd_status st = resolve_lost_reply(a, happened);
    if (st != CRD_OK)
        return st;
    a->pending = false;
    if (!*happened)
        return CRD_OK;
    a->outcome = CRD__ACQ_TAKEN;
    /* The lease started when Redis ran the acquire, at the earliest when it was sent:
     * count the validity from that send, never from later. */
    st = record_acquire(a, a->pending_sent);
    if (st == CRD_OK && a->want_token)
        st = read_token(a);
    return st;
}

/* Replica sync (PROTOCOL.md 11): an acquire no replica acknowledged would be lost by a
 * failover now, so it is given back at once with the owner-checked unlock (one hold
 * less: a re-entry undoes only itself) and the caller is told CRD_NOT_SYNCED. The
 * outcome becomes "not taken" so the machine ends there. */
static crd_status undo_unsynced(crd__acquire *a, const char *why)
{
    crd_status rs = crd__release_undo(a->l, a->owner);
    a->outcome = CRD__ACQ_REFUSED;
    return crd__fail(a->c, CRD_NOT_SYNCED, "%s; the acquire was undone (%s)", why,
                     rs == CRD_OK ? "released again" : crd_strerror(rs));
}

/* One attempt: sets a->outcome (and a->hint_ms). a->pending carries an unresolved lost
 * reply across attempts: while it is set, the field is read back before anything is
 * sent again. */
static crd_status attempt(crd__acquire *a)
{
    a->unanswered = 0;
    a->unsent = false;
    a->outcome = CRD__ACQ_BAD;
    a->hint_ms = 0;
    bool happened = false;
    crd_status st;
    if (a->pending && ((st = settle_pending(a, &happened)) != CRD_OK || happened))
        return st;
    redisReply *r = NULL;
    int64_t sent = 0;
    st = CRD_IO;
    /* The subscriber thread already sent this attempt (the hand-off): its outcome. */
    bool pre = a->have_pre;
    if (pre) {
        a->have_pre = false;
        st = a->pre_st;
        r = a->pre_reply;
        sent = a->pre_sent;
        a->pre_reply = NULL;
    }
    /* A second send only after the read-back proved the first did not run: a pooled
     * connection cut while idle (a server restart, CLIENT KILL) fails the first try. */
    for (int try_no = 0; try_no < 2 && st == CRD_IO; try_no++) {
        if (try_no > 0 || !pre)
            st = send_acquire(a, &r, &sent);
        if (st != CRD_IO || sent == 0)
            break; /* a reply, or nothing was sent: nothing to resolve */
        a->pending = true;
        a->pending_sent = sent;
        if ((st = settle_pending(a, &happened)) != CRD_OK || happened)
            return st;
        st = crd__fail(a->c, CRD_IO, "acquire failed on the connection and did not happen");
    }
    /* Replica sync: the script ran, but no replica has it. */
    bool unsynced = st == CRD_NOT_SYNCED;
    char why[512] = "";
    if (unsynced) {
        snprintf(why, sizeof why, "%s", crd_client_errmsg(a->c));
        st = CRD_OK;
    }
    if (st != CRD_OK)
        return st;
    st = read_outcome(a, r, sent);
    freeReplyObject(r);
    if (st == CRD_OK && unsynced && a->outcome == CRD__ACQ_TAKEN)
        st = undo_unsynced(a, why);
    return st;
}

/* Fair waiter gives up: leave the queue, move the others up, pass on a turn. The caller's
 * detail message is kept. */
static void give_up(crd__acquire *a)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", crd_client_errmsg(a->c));
    crd__cmd cmd;
    crd__fair_give_up_cmd(a->l, a->field, a->flen, a->fair_wait, &cmd);
    /* On failure the entry expires at its deadline; the next acquire purges it. On an
     * event loop the helper thread sends it (never a wait on the loop thread). */
    if (!a->nonblocking || !crd__offload_call(a->c, &cmd, "leaving the queue")) {
        redisReply *r = NULL;
        if (crd__call(a->c, &cmd, "leaving the queue", &r, NULL) == CRD_OK)
            freeReplyObject(r);
    }
    crd__cmd_free(&cmd);
    crd__fail(a->c, CRD_OK, "%s", msg);
}

/* ---- the machine ------------------------------------------------------------------------- */

static void drop_aio(crd__acquire *a);

static void finish(crd__acquire *a, crd_status st)
{
    crd_client *c = a->c;
    drop_aio(a);
    /* Out of the identity record first: once the subscription reference below is dropped
     * a client being freed may free the record too (crd_client_free waits for that
     * reference only). */
    crd__ident_wait_end(c, &a->iw);
    if (a->pending) {
        /* A lost reply whose read-back got no answer in time: undo.c reads it back once
         * the node answers (after this machine has left the registry below). */
        a->pending = false;
        crd__undo u = undo_of(a);
        crd__undo_unknown(&u);
    }
    /* Leaves undo.c's registry while this waiter still holds its subscription reference
     * (or its place in the local queue): a client being freed waits for those, and frees
     * the registry after. */
    if (a->entered) {
        a->entered = false;
        crd__settle_leave(c, a->l->name, a->l->name_len, a->owner, a->l->kind);
    }
    if (a->pre_reply != NULL)
        freeReplyObject(a->pre_reply);
    a->pre_reply = NULL;
    a->have_pre = false;
    /* Only the head of a local queue watches its subscription on a loop (and a queued
     * acquire's a->sub may be written by the head that hands it down until it has left
     * the queue: it is read only after crd__gate_leave). */
    if (a->watching)
        crd__sub_loop_watch(c, a->sub, false);
    a->watching = false;
    if (st != CRD_OK && a->queued)
        /* Leave the queue while still holding the subscription reference: a client being
         * freed waits for that reference, so the pool is still there for the cleanup. */
        give_up(a);
    /* The next local waiter inherits the subscription (no UNSUBSCRIBE). */
    crd__gate_leave(a, st == CRD_OK);
    bool waited = a->sub != NULL || a->sub_handed;
    if (a->has_cv)
        pthread_cond_destroy(&a->gate_cv);
    a->has_cv = false;
    /* Counted while the subscription reference is still held: a client being freed
     * waits for it, and nothing of the client is touched after it is dropped. */
    if (st == CRD_OK) {
        CRD__COUNT(c, acquisitions);
        if (waited) {
            CRD__COUNT(c, contended);
            crd__hist_add(&c->metrics.wait, crd__now_ms() - a->start);
        }
    } else if (st == CRD_TIMEOUT || st == CRD_BUSY) {
        CRD__COUNT(c, acquire_busy);
    }
    if (a->sub != NULL)
        crd__sub_release(c, a->sub);
    a->sub = NULL;
    free(a->own_channel);
    a->own_channel = NULL;
    if (st == CRD_OK)
        crd__ok(c); /* this thread's message slot only */
    a->result = st;
    a->state = CRD__AS_DONE;
}

static crd_status ran_out(crd__acquire *a)
{
    if (a->last_failed)
        return crd__fail(a->c, CRD_IO, "wait ended with the connection failing: %s",
                         crd_client_errmsg(a->c));
    return crd__fail(a->c, CRD_TIMEOUT, "lock \"%.*s\" still held after %lld ms",
                     CRD__NAME_FMT(a->l), (long long)(crd__now_ms() - a->start));
}

static crd_status interrupted(crd__acquire *a)
{
    return crd__fail(a->c, CRD_INTERRUPTED, "the wait for %s \"%.*s\" was interrupted after %lld "
                     "ms (crd_interrupt_raise); nothing is held", crd__kinds[a->l->kind].label,
                     CRD__NAME_FMT(a->l), (long long)(crd__now_ms() - a->start));
}

static bool check_ms(int64_t v) { return v == -1 || (v >= 0 && v <= CRD_DURATION_MAX_MS); }

void crd__acquire_begin(crd__acquire *a, crd_lock *l, uint64_t owner, int64_t wait_ms,
                        int64_t lease_ms)
{
    memset(a, 0, sizeof *a);
    a->state = CRD__AS_DONE;
    a->l = l;
    a->result = crd__lock_check(l);
    if (a->result != CRD_OK)
        return;
    crd_client *c = a->c = l->client;
    if (owner == 0)
        a->result = crd__fail(c, CRD_INVALID_ARGUMENT, "owner id 0 is not valid");
    else if (!check_ms(wait_ms))
        a->result = crd__fail(c, CRD_INVALID_ARGUMENT, "wait_ms must be -1 or 0..%lld (got %lld)",
                              (long long)CRD_DURATION_MAX_MS, (long long)wait_ms);
    else if (!check_ms(lease_ms))
        a->result = crd__fail(c, CRD_INVALID_ARGUMENT,
                              "lease_ms must be -1, 0 or 1..%lld (got %lld)",
                              (long long)CRD_DURATION_MAX_MS, (long long)lease_ms);
    /* A write acquire by an owner holding only the read lock would wait for itself
     * (Redisson does not upgrade). */
    else if (l->kind == CRD__WRITE && crd__local_count(l, owner, CRD__READ) > 0 &&
             crd__local_count(l, owner, CRD__WRITE) == 0)
        a->result = crd__fail(c, CRD_DEADLOCK, "owner %llu holds the read lock of \"%.*s\": a "
                              "write acquire would wait for itself (read-to-write upgrade is "
                              "not supported)", (unsigned long long)owner, CRD__NAME_FMT(l));
    if (a->result != CRD_OK)
        return;
    a->owner = owner;
    a->flen = crd__field(c->uuid, owner, crd__kinds[l->kind].write_field, a->field);
    a->watchdog = lease_ms <= 0;
    a->lease = a->watchdog ? c->opts.watchdog_timeout_ms : lease_ms;
    a->nowait = crd__kinds[l->kind].try_form && wait_ms == 0;
    a->fair_wait = wait_ms > 0 ? wait_ms : c->opts.fair_wait_timeout_ms;
    a->wait_ms = wait_ms;
    a->start = a->wake_at = crd__now_ms();
    a->deadline = crd__wait_deadline(a->start, wait_ms);
    crd__backoff_init(&a->backoff);
    a->backoff.spin = l->spin; /* a spin lock's back-off (wait.c), new for each acquire */
    a->state = CRD__AS_TRY;
}

void crd__acquire_enter(crd__acquire *a, bool park)
{
    if (a->state == CRD__AS_DONE)
        return;
    crd_lock *l = a->l;
    /* A try waits for a read-back no longer than one command timeout. */
    int64_t until = !park ? 0 : a->wait_ms == 0 ? a->start + a->c->opts.command_timeout_ms
                                                : a->deadline;
    crd_status st = crd__settle_enter(a->c, l->name, l->name_len, a->owner, l->kind, until,
                                      &a->entered);
    if (st == CRD_OK)
        return;
    if (st == CRD_INTERRUPTED) {
        a->result = interrupted(a);
        a->state = CRD__AS_DONE;
        return;
    }
    /* The read-back is waiting for the node: a try is told so as one that got no answer
     * (CRD_IO), a wait that it ran out (CRD_TIMEOUT), unless the node cannot be reached
     * (its last connect failed: CRD_IO, as an attempt of its own would have heard). */
    char why[300] = "";
    bool failing = node_failing(a, why, sizeof why);
    a->result = crd__fail(a->c, a->wait_ms == 0 || failing ? CRD_IO : CRD_TIMEOUT,
                          "lock \"%.*s\": an earlier acquire of this owner whose reply was lost "
                          "is still being read back, the node has not answered (%lld ms)%s%s",
                          CRD__NAME_FMT(l), (long long)(crd__now_ms() - a->start),
                          failing ? "; the last connect failed: " : "", why);
    a->state = CRD__AS_DONE;
}

void crd__acquire_enqueue(crd__acquire *a)
{
    crd_lock *l = a->l;
    /* Re-entry and a try without wait neither queue nor defer: the first cannot wait for
     * anyone (it holds the lock), the second does not wait at all. */
    if (a->state != CRD__AS_TRY || !crd__kinds[l->kind].local_fifo || a->wait_ms == 0 ||
        crd__local_count(l, a->owner, l->kind) > 0)
        return;
    if (!a->nonblocking) {
        if (crd__cond_init(&a->gate_cv) != 0)
            return; /* neither queued nor deferred, but the acquire still works */
        a->has_cv = true;
    }
    a->deferrable = true;
    if (a->c->opts.local_fifo && !crd__gate_join(a)) {
        a->state = CRD__AS_QUEUE;
        CRD__COUNT(a->c, local_queued);
    }
}

/* This client released the lock to waiters elsewhere a moment ago (gate.c): instead of
 * an attempt, wait out the rest of the deferral (then TRY as Redisson would: nothing on
 * the wire changes but the time). True when that is what happens. */
static bool deferred(crd__acquire *a)
{
    int others = 0;
    int64_t until_us = crd__gate_deferred_until(a, &others);
    if (until_us <= crd__now_us())
        return false;
    a->was_deferred = true;
    a->defer_timed_out = false;
    CRD__COUNT(a->c, deferred);
    if (!a->nonblocking && others >= CRD__COUNTED_MIN && crd__kinds[a->l->kind].wait == CRD__WAIT_CHANNEL) {
        /* Counted: the release woke others waiters elsewhere; they go first, one release
         * each, and this one's attempt goes out with the last one's release message. */
        a->turns = others - 1;
        a->wake_at = crd__wait_until(crd__now_ms(), a->c->opts.release_defer_ms, a->deadline);
        a->defer_sub = a->sub == NULL;
        a->state = a->defer_sub ? CRD__AS_SUBSCRIBE : CRD__AS_DEFER;
        return true;
    }
    a->turns = -1;
    int64_t until_ms = until_us / 1000 + 1;
    a->wake_at = until_ms < a->deadline ? until_ms : a->deadline;
    a->state = CRD__AS_DEFER;
    return true;
}

/* DEFER: the deferral is over (or the client closed). Timed: TRY, as Redisson would
 * (its first attempt comes before it subscribes; the golden replays hold us to that).
 * Counted (turns >= 0): w is the subscription's wait for the releases of those woken
 * first, got how many came; after the last one's the attempt waits for its release
 * (WAIT: it goes out with that message); no release within release_defer_ms: TRY. */
static void step_defer(crd__acquire *a, crd_status w, int64_t got)
{
    if (w == CRD_CLOSED || atomic_load(&a->c->closed)) {
        finish(a, crd__fail(a->c, CRD_CLOSED, "client closed while waiting"));
    } else if (w == CRD_INTERRUPTED) {
        finish(a, interrupted(a));
    } else if (a->turns >= 0) {
        int64_t now = crd__now_ms();
        if (got > 0) {
            a->turns -= got < a->turns ? got : a->turns; /* they have had their turns */
        } else if (w != CRD_OK) {
            a->turns = 0;
            a->defer_timed_out = true;
        }
        if (a->turns > 0 && now < a->deadline) {
            a->wake_at = crd__wait_until(now, a->c->opts.release_defer_ms, a->deadline);
        } else if (a->defer_timed_out || now >= a->deadline) {
            a->state = CRD__AS_TRY; /* nobody released in time: try as Redisson would */
        } else {
            /* The lock is the last one's now: wait for its release, attempt lent. */
            a->wake_at = crd__wait_until(now, a->c->opts.release_defer_ms, a->deadline);
            a->state = CRD__AS_WAIT;
        }
    } else if (crd__now_ms() >= a->wake_at) {
        a->state = CRD__AS_TRY;
    }
}

static void wait_slice(crd__acquire *a);

/* QUEUE: the head of the local queue goes on to TRY, or, on an event loop, when the head
 * before it left with the lock and its live subscription came down to this one, straight
 * to WAIT: that holder's release publishes on the channel it already hears, and an
 * attempt in the same dispatch pass would only find the lock held (64 chains on 16 names
 * wasted 0.8 acquire scripts per acquisition so). Its slice is that holder's lease, as the
 * attempt's TTL would have said. A blocking head wakes on its thread after the holder's
 * caller has usually released already (its attempt failed 0.08 times per acquisition in
 * the same test, and waiting for the message instead cost it ~30 % of its rate). */
static void step_queue(crd__acquire *a, crd_status w)
{
    if (w == CRD_CLOSED || atomic_load(&a->c->closed)) {
        finish(a, crd__fail(a->c, CRD_CLOSED, "client closed while waiting"));
        return;
    }
    if (w == CRD_INTERRUPTED) {
        finish(a, interrupted(a));
        return;
    }
    if (w == CRD_OK && crd__gate_is_head(a)) {
        if (a->nonblocking && a->sub != NULL && !a->watching) {
            crd__sub_loop_watch(a->c, a->sub, true); /* inherited from the previous head */
            a->watching = true;
        }
        int64_t behind = a->behind_ms;
        a->behind_ms = 0;
        if (behind > 0 && a->nonblocking && a->sub != NULL && a->confirmed) {
            a->outcome = CRD__ACQ_HELD;
            a->hint_ms = behind;
            a->last_failed = false;
            wait_slice(a);
            return;
        }
        a->state = CRD__AS_TRY;
        return;
    }
    if (crd__now_ms() >= a->deadline)
        finish(a, ran_out(a));
}

/* TRY: one attempt, then what follows from it. */
/* What follows an attempt whose status is st (a->outcome set when st is CRD_OK). */
static void after_attempt(crd__acquire *a, crd_status st)
{
    if (a->was_deferred && st == CRD_OK) {
        /* Used: someone else took the lock meanwhile (it was held, or its release let
         * this attempt go); unused: nobody came (a listener that does not want it). */
        a->was_deferred = false;
        crd__gate_deferral_used(a, a->outcome != CRD__ACQ_TAKEN ||
                                   (a->turns >= 0 && !a->defer_timed_out));
    }
    if (st == CRD_OK && a->outcome == CRD__ACQ_TAKEN) {
        finish(a, CRD_OK);
        return;
    }
    if (st == CRD_IO && (a->unanswered == 1 || (a->unanswered == 2 && !a->last_failed)) &&
        a->wait_ms > 0 && crd__now_ms() >= a->deadline) {
        /* The wait ran out before Redis answered (a slow or stalled server, or a connection
         * still answering its set-up; not one that never answered after this wait saw the
         * connection fail): the lock was not taken within wait_ms, as the caller asked; if
         * the acquire ran after all, the engine gives that hold back (undo.c). */
        char why[300];
        snprintf(why, sizeof why, "%s", crd_client_errmsg(a->c));
        finish(a, crd__fail(a->c, CRD_TIMEOUT, "the wait of %lld ms ran out before Redis "
                            "answered (%s)", (long long)a->wait_ms, why));
        return;
    }
    if (st == CRD_IO && a->unsent && a->wait_ms > 0 && crd__now_ms() >= a->deadline) {
        /* The wait ran out while the attempt waited for a connection being set up (a
         * slow connect or TLS handshake): not taken within wait_ms, nothing failed. */
        finish(a, crd__fail(a->c, CRD_TIMEOUT, "the wait of %lld ms ran out before the "
                            "acquire could be sent (no connection was ready yet)",
                            (long long)a->wait_ms));
        return;
    }
    /* A failed connection is worth waiting out; anything else ends the acquire. */
    if (st != CRD_OK && (st != CRD_IO || a->wait_ms == 0)) {
        finish(a, st);
        return;
    }
    if (a->wait_ms == 0) {
        finish(a, crd__fail(a->c, CRD_BUSY, "lock \"%.*s\" is held by another owner",
                            CRD__NAME_FMT(a->l)));
        return;
    }
    /* A pooled connection cut while idle (a restart, CLIENT KILL) fails an event-loop
     * attempt sent on it before the cut was seen: the first such cut is retried at once,
     * not counted as a failing connection, as a blocking attempt retries it itself. */
    bool forgive = st == CRD_IO && a->cut && !a->forgave;
    a->forgave = a->forgave || forgive;
    a->cut = false;
    a->last_failed = st != CRD_OK && !forgive;
    wait_slice(a);
}

/* After an attempt that found the lock held (or failed on the connection): SUBSCRIBE
 * first, or WAIT for the slice crd__wait_slice() gives (the deadline if sooner). */
static void wait_slice(crd__acquire *a)
{
    crd_client *c = a->c;
    crd__wait_how how = crd__kinds[a->l->kind].wait;
    if (a->sub == NULL && (how == CRD__WAIT_CHANNEL || how == CRD__WAIT_OWN_CHANNEL)) {
        a->state = CRD__AS_SUBSCRIBE;
        return;
    }
    if (a->sub == NULL) {
        /* No channel (the spin lock's back-off): a wait of its own that only the client's
         * end or an interrupt cuts short. No re-try first: no message could be missed. */
        crd_status st = crd__sub_quiet(c, &a->sub);
        if (st != CRD_OK) {
            finish(a, st);
            return;
        }
        a->confirmed = false;
        if (a->nonblocking) {
            crd__sub_loop_watch(c, a->sub, true);
            a->watching = true;
            a->seen_events = crd__sub_events(a->sub);
        }
    }
    int64_t now = crd__now_ms();
    if (now >= a->deadline) {
        finish(a, ran_out(a));
        return;
    }
    crd__busy busy = a->outcome == CRD__ACQ_HELD_NO_TTL   ? CRD__BUSY_NO_TTL
                     : a->outcome == CRD__ACQ_NOT_MY_TURN ? CRD__BUSY_TURN
                                                          : CRD__BUSY_TTL;
    /* The back-off's jitter: any bits will do (Redisson's is a ThreadLocalRandom's). */
    uint32_t random = (uint32_t)((uint64_t)crd__now_us() * 2654435761u >> 7) ^ (uint32_t)a->owner;
    crd__slice_in in = {a->last_failed, a->confirmed, busy, a->hint_ms, c->opts.poll_interval_ms,
                        c->opts.max_wait_slice_ms, how, random};
    a->wake_at = crd__wait_until(now, crd__wait_slice(&in, &a->backoff), a->deadline);
    a->state = CRD__AS_WAIT;
}

/* ---- the event loop's attempt: in flight on the engine, never waited for ---------------- */

/* Whether an event-loop attempt can go out without waiting: a standalone client without
 * replica sync, nothing to resolve first (a cluster's redirects, replica sync's ROLE and a
 * lost reply's read-back run on the loop's helper thread: crd__acquire_blocks). */
static bool async_ok(const crd__acquire *a)
{
    return a->nonblocking && !a->pending && !a->have_pre && crd__call_async_ok(a->c);
}

bool crd__acquire_blocks(const crd__acquire *a)
{
    if (a->state != CRD__AS_TRY || async_ok(a))
        return false;
    /* The subscriber thread's attempt (the hand-off) is read without a round trip unless
     * it failed (a read-back) or no replica has it (the undo). */
    if (a->have_pre && !a->pending)
        return a->pre_st == CRD_IO || a->pre_st == CRD_NOT_SYNCED;
    return true;
}

/* Sends the attempt (EVAL after a NOSCRIPT); state CRD__AS_IO until its completion. */
static void start_async(crd__acquire *a, bool eval)
{
    crd__cmd cmd;
    crd__undo u;
    build_acquire(a, &cmd, &u);
    crd__req *rq = crd__call_request(a->c, &cmd, eval);
    crd__cmd_free(&cmd);
    if (rq == NULL) {
        after_attempt(a, crd__fail(a->c, CRD_NO_MEMORY, "cannot build the acquire"));
        return;
    }
    /* The operation may end with this in flight (cancel, close): its job counts as under
     * way from now on (undo.c). */
    if (rq->on_abandon != NULL && rq->arg != NULL)
        rq->on_abandon(rq->arg);
    a->aio = crd__aio_submit(a->c, rq, eval);
    if (a->aio == NULL) {
        after_attempt(a, crd__fail(a->c, CRD_CLOSED, "client is closed"));
        return;
    }
    a->state = CRD__AS_IO;
}

/* The attempt in flight answered: its outcome, as attempt() would give it. */
static void step_io(crd__acquire *a)
{
    if (!crd__aio_ready(a->aio))
        return;
    redisReply *r = NULL;
    int64_t sent = 0;
    bool eval = false;
    a->unanswered = crd__aio_unanswered(a->aio);
    a->unsent = crd__aio_unsent(a->aio);
    a->cut = crd__aio_cut(a->aio);
    crd_status st = crd__aio_take(a->c, a->aio, &r, &sent, &eval);
    a->aio = NULL;
    a->state = CRD__AS_TRY;
    a->outcome = CRD__ACQ_BAD;
    a->hint_ms = 0;
    if (st == CRD_OK) {
        crd__reply_class cls = crd__reply_classify(r);
        if (cls == CRD__REPLY_NOSCRIPT && !eval) {
            freeReplyObject(r);
            start_async(a, true); /* nothing ran */
            return;
        }
        bool refusal = crd__kinds[a->l->kind].refuses_reentry && crd__reentry_refused(r);
        st = cls != CRD__REPLY_OK && !refusal ? crd__reply_fail(a->c, r, "acquire")
                                              : read_outcome(a, r, sent);
        freeReplyObject(r);
    }
    after_attempt(a, st);
}

/* The acquire ends while its attempt is in flight (cancel, close): whoever comes second
 * gives back what the attempt took. */
static void drop_aio(crd__acquire *a)
{
    if (a->aio == NULL)
        return;
    redisReply *r = crd__aio_drop(a->aio); /* NULL: still in flight (undo.c takes it) */
    a->aio = NULL;
    if (r == NULL)
        return;
    int64_t hint = 0, token = 0;
    if (crd__reply_classify(r) == CRD__REPLY_OK &&
        crd__kinds[a->l->kind].acquire_reply(r, a->nowait, &hint, &token) == CRD__ACQ_TAKEN) {
        crd__undo u = undo_of(a);
        crd__undo_give_back(&u);
    }
    freeReplyObject(r);
}

static void step_try(crd__acquire *a)
{
    /* An attempt the subscriber thread already sent is settled first, whatever else
     * happened: it may have taken the lock. */
    if (!a->have_pre && a->sub != NULL && atomic_load(&a->c->closed)) {
        finish(a, crd__fail(a->c, CRD_CLOSED, "client closed while waiting"));
        return;
    }
    if (!a->have_pre && a->deferrable && deferred(a))
        return;
    if (async_ok(a)) {
        if (a->wait_ms != 0 && crd__now_ms() >= a->deadline)
            finish(a, ran_out(a)); /* no attempt after the deadline */
        else
            start_async(a, false);
        return;
    }
    after_attempt(a, attempt(a));
}

/* SUBSCRIBE: the lock's channel, or the fair waiter's own, so a release wakes only the
 * queue head. Then TRY again. */
static void step_subscribe(crd__acquire *a)
{
    crd_lock *l = a->l;
    crd_client *c = a->c;
    const crd__buf *base = &l->names.channel;
    const char *chan = base->p;
    size_t chan_len = base->len;
    if (crd__kinds[l->kind].wait == CRD__WAIT_OWN_CHANNEL) {
        chan_len = base->len + 1 + a->flen;
        a->own_channel = malloc(chan_len + 1);
        if (a->own_channel == NULL) {
            finish(a, crd__fail(c, CRD_NO_MEMORY, "cannot allocate the waiter channel"));
            return;
        }
        memcpy(a->own_channel, base->p, base->len);
        a->own_channel[base->len] = ':';
        memcpy(a->own_channel + base->len + 1, a->field, a->flen + 1);
        chan = a->own_channel;
    }
    int64_t sub_deadline = crd__now_ms() + c->opts.subscription_timeout_ms;
    if (sub_deadline > a->deadline)
        sub_deadline = a->deadline;
    if (a->nonblocking)
        sub_deadline = 0; /* an event loop learns of the confirmation from its fd */
    /* A counted turn joins the subscription its hold's release kept as it is. */
    crd_status st = a->defer_sub
                        ? crd__sub_acquire_turn(c, chan, chan_len, sub_deadline, &a->sub, &a->confirmed)
                        : crd__sub_acquire(c, chan, chan_len, sub_deadline, &a->sub, &a->confirmed);
    if (a->sub == NULL) {
        finish(a, st);
        return;
    }
    if (a->nonblocking) {
        crd__sub_loop_watch(c, a->sub, true);
        a->watching = true;
    }
    a->state = a->defer_sub ? CRD__AS_DEFER : CRD__AS_TRY;
    a->defer_sub = false;
}

void crd__acquire_step(crd__acquire *a)
{
    switch (a->state) {
    case CRD__AS_QUEUE: step_queue(a, CRD_OK); break;
    case CRD__AS_TRY: step_try(a); break;
    case CRD__AS_DEFER: step_defer(a, CRD_OK, 1); break;
    case CRD__AS_SUBSCRIBE: step_subscribe(a); break;
    case CRD__AS_IO: step_io(a); break;
    case CRD__AS_WAIT: /* the driver's turn: crd__acquire_woken() */
    case CRD__AS_DONE: break;
    }
}

void crd__acquire_woken(crd__acquire *a, crd_status w, bool confirmed)
{
    if (a->state != CRD__AS_WAIT)
        return;
    a->confirmed = confirmed;
    if (w == CRD_TIMEOUT && a->was_deferred)
        a->defer_timed_out = true; /* the counted deferral's last release never came */
    if (w == CRD_CLOSED)
        finish(a, crd__fail(a->c, CRD_CLOSED, "client closed while waiting"));
    else if (w == CRD_INTERRUPTED)
        finish(a, interrupted(a));
    else if (w == CRD_TIMEOUT && crd__now_ms() >= a->deadline)
        /* The wait ran out with no release seen: give up without another attempt
         * (PROTOCOL.md 4.2 step 5). */
        finish(a, ran_out(a));
    else
        a->state = CRD__AS_TRY;
}

void crd__acquire_cancel(crd__acquire *a, crd_status st)
{
    if (a->state == CRD__AS_DONE)
        return;
    finish(a, crd__fail(a->c, st, st == CRD_CANCELLED ? "the acquire was cancelled"
                                                      : "client closed while waiting"));
}

/* ---- the blocking driver ------------------------------------------------------------------- */

/* Before sleeping: the next attempt, prepared on a spare connection and lent to the
 * subscriber thread, which sends it as soon as the unlock message arrives (script.c,
 * crd__handoff). Only a lone waiter of an exclusive kind with nothing to resolve. */
static bool lend_attempt(crd__acquire *a, crd__handoff *h)
{
    const crd__kind_ops *ops = &crd__kinds[a->l->kind];
    /* A clocked acquire prepared now would write now + lease when it is sent later: the
     * lease would start at the wait's start. */
    if (!a->deferrable || a->pending || !a->confirmed || ops->clocked)
        return false;
    crd__acq_args args = {a->field, a->flen, a->lease, a->nowait, a->fair_wait, a->want_token};
    ops->acquire(a->l, &args, &h->cmd);
    crd__undo u;
    arm(a, &h->cmd, &u);
    h->until = a->deadline;
    if (crd__handoff_prepare(a->c, h)) {
        if (crd__sub_arm(a->c, a->sub, h))
            return true;
        crd_status st;
        redisReply *r;
        int64_t sent;
        crd__handoff_finish(a->c, h, &st, &r, &sent); /* never sent: gives it back */
    }
    crd__cmd_free(&h->cmd);
    return false;
}

/* After the wait: takes the lent attempt back; true when it went out (its outcome is
 * then the next attempt's, a->have_pre). */
static bool take_back(crd__acquire *a, crd__handoff *h)
{
    crd__sub_disarm(a->c, a->sub);
    bool used = crd__handoff_finish(a->c, h, &a->pre_st, &a->pre_reply, &a->pre_sent);
    crd__cmd_free(&h->cmd);
    a->have_pre = used;
    return used;
}

/* Runs the machine to its end on the calling thread, sleeping on the subscription. */
static void drive(crd__acquire *a)
{
    /* A wait that starts interrupted sends nothing (Java's lockInterruptibly). */
    if (a->state != CRD__AS_DONE && a->wait_ms != 0 && crd__intr_raised(crd__intr_current()))
        finish(a, interrupted(a));
    /* Identity: this acquire waits (listed after 250 ms); finish() ends it. */
    while (a->state != CRD__AS_DONE) {
        if (!a->iw.on && a->state != CRD__AS_TRY && a->state != CRD__AS_SUBSCRIBE)
            crd__ident_wait_begin(a->c, &a->iw, a->l->name, a->l->route_len, a->owner);
        if (a->state == CRD__AS_QUEUE) {
            step_queue(a, crd__gate_wait(a, a->deadline));
        } else if (a->state == CRD__AS_DEFER && a->turns >= 0) {
            /* One wake-up for all the turns left, not one per release (issue #48). */
            bool confirmed = a->confirmed;
            int64_t got = 0;
            crd_status w = crd__sub_wait_turns(a->c, a->sub, a->turns, a->wake_at, &got, &confirmed);
            step_defer(a, w, got);
            a->confirmed = confirmed;
        } else if (a->state == CRD__AS_DEFER) {
            step_defer(a, crd__gate_sleep(a, a->wake_at), 0);
        } else if (a->state == CRD__AS_WAIT) {
            bool confirmed = a->confirmed;
            crd__handoff h;
            bool lent = lend_attempt(a, &h);
            crd_status w = crd__sub_wait(a->c, a->sub, a->wake_at, lent ? &h : NULL, &confirmed);
            if (lent && take_back(a, &h))
                w = CRD_OK; /* the attempt went out: settle it */
            crd__acquire_woken(a, w, confirmed);
        } else {
            crd__acquire_step(a);
        }
    }
}

crd_status crd_lock_acquire_owner(crd_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms)
{
    crd__acquire a;
    crd__acquire_begin(&a, l, owner, wait_ms, lease_ms);
    crd__acquire_enter(&a, true);
    crd__acquire_enqueue(&a);
    drive(&a);
    return a.result;
}

crd_status crd_lock_acquire(crd_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return crd_lock_acquire_owner(l, crd_owner_current(), wait_ms, lease_ms);
}

crd_status crd_lock_acquire_token_owner(crd_lock *l, uint64_t owner, int64_t wait_ms,
                                        int64_t lease_ms, int64_t *token)
{
    crd_status st = crd__lock_check_fenced(l, token, ": it draws no token");
    if (st != CRD_OK)
        return st;
    crd__acquire a;
    crd__acquire_begin(&a, l, owner, wait_ms, lease_ms);
    crd__acquire_enter(&a, true);
    crd__acquire_enqueue(&a);
    a.want_token = true;
    drive(&a);
    if (a.result == CRD_OK)
        *token = a.token;
    return a.result;
}

crd_status crd_lock_acquire_token(crd_lock *l, int64_t wait_ms, int64_t lease_ms, int64_t *token)
{
    return crd_lock_acquire_token_owner(l, crd_owner_current(), wait_ms, lease_ms, token);
}

crd_status crd_lock_run(crd_lock *l, int64_t wait_ms, int64_t lease_ms, int (*fn)(void *arg),
                        void *arg, int *fn_result)
{
    if (fn == NULL)
        return crd__fail(l ? l->client : NULL, CRD_INVALID_ARGUMENT, "fn is NULL");
    crd_status st = crd_lock_acquire(l, wait_ms, lease_ms);
    if (st != CRD_OK)
        return st;
    int rc = fn(arg);
    if (fn_result != NULL)
        *fn_result = rc;
    return crd_lock_release(l);
}
