/*
 * loop.c -- the event-loop API's operations: a list stepped by crd_loop_dispatch() on the
 * caller's loop thread, each operation a small record of a kind (crd__op_kind) that says
 * how it steps, what it runs on the helper thread, when it must be looked at though the
 * fd stays quiet, and how it ends when the client is freed. The kinds live with what
 * they drive: an acquire is acquire.c's machine in non-blocking mode, a release
 * release.c's, an extend lock.c's, a synchronizer's wait sync.c's machine. None of them
 * waits inside a step: what is in flight on the engine, what runs on the helper thread
 * and what waits on a subscription is left until the fd says it may progress.
 *
 * What a pass submits goes out together when it ends (crd__engine_cork). A step that is
 * more than one command (a cluster's redirects, Sentinel, replica sync, a lost reply's
 * read-back: crd__call) runs on a helper thread (offload.c): the operation is handed over
 * whole (op->off; dispatch does not touch it), its outcome lands (op->landed) with its
 * detail string when the helper is done and has written the fd. A waiting operation asks
 * crd__loop_wait_over() whether its subscription brought news: the subscriber thread
 * makes the client's eventfd readable when a message or a confirmation arrives for a
 * subscription that loop operations watch (pubsub.c).
 *
 * Threads: the loop thread only (no lock of its own: the operation list belongs to that
 * thread). Callbacks run inside dispatch, on that thread.
 */
#include "wait.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What one crd_loop_dispatch() does at most before it returns (credisson.h): this many
 * completions (their callbacks included), and no new step once this much time has
 * passed since it began. The pass's commands are written after its steps (the uncork),
 * which costs about as much again as the steps that built them: 1 ms of steps makes a
 * call of 2-3 ms. bench dispatch-2000 (issue #48): 2 000 ready acquisitions took 17 ms
 * in one call before. */
#define DISPATCH_COMPLETIONS 128
#define DISPATCH_BUDGET_US 1000

struct crd__loop {
    crd_op *head, *tail;
    int n;
    bool cut;         /* the last dispatch stopped at its budget with operations unstepped */
    bool freeing;     /* crd__loop_free: every step runs on the calling thread */
    bool dispatching; /* inside crd_loop_dispatch: a new operation joins its pass */
    unsigned pass;    /* dispatch passes so far */
};

static crd__loop *loop_of(crd_client *c)
{
    if (c->loop == NULL)
        c->loop = calloc(1, sizeof *c->loop);
    return c->loop;
}

int crd_loop_fd(crd_client *c)
{
    if (crd__client_check(c) != CRD_OK)
        return -1;
    int fd = crd__pubsub_loop_fd(c);
    if (fd < 0)
        crd__fail(c, CRD_IO, "cannot create the event loop's eventfd");
    return fd;
}

crd_op *crd__op_new(crd_client *c, const crd__op_kind *kind, size_t size, crd_op_done_fn done,
                    void *user, crd_status *st)
{
    if (done == NULL) {
        *st = crd__fail(c, CRD_INVALID_ARGUMENT, "done is NULL");
        return NULL;
    }
    if (c->loop != NULL && c->loop->freeing) {
        /* A callback crd_client_free() runs (its operations end with CRD_CLOSED) starts
         * no other: the client is going. */
        *st = crd__fail(c, CRD_CLOSED, "the client is being freed");
        return NULL;
    }
    crd_op *op = calloc(1, size);
    if (op == NULL || loop_of(c) == NULL) {
        free(op);
        *st = crd__fail(c, CRD_NO_MEMORY, "cannot allocate an operation");
        return NULL;
    }
    op->kind = kind;
    op->c = c;
    op->done = done;
    op->user = user;
    return op;
}

void crd__op_start(crd_op *op, crd_op **out)
{
    crd__loop *lp = op->c->loop;
    CRD__APPEND(lp->head, lp->tail, op, next);
    lp->n++;
    if (out != NULL)
        *out = op;
    if (lp->dispatching)
        return; /* the pass steps it (or, joining behind the pass's end, notifies) */
    crd__pubsub_loop_fd(op->c);
    crd__pubsub_loop_notify(op->c);
}

/* ---- steps on the helper thread (offload.c) ----------------------------------------------- */

static crd_op *op_of(crd__job *j) { return (crd_op *)(void *)j; }

/* The helper thread's side: the kind's blocking step, as it would have run inside
 * dispatch; the detail string goes with it to the loop thread. */
static void run_step(crd__job *j, bool run)
{
    crd_op *op = op_of(j);
    if (!run)
        return; /* never: only detached jobs are skipped */
    op->off_st = op->kind->helper(op);
    snprintf(op->off_msg, sizeof op->off_msg, "%s", crd_client_errmsg(op->c));
}

bool crd__op_offload(crd_op *op)
{
    if (op->c->loop->freeing)
        return false; /* the client is being freed: the caller runs the step itself */
    op->job.fn = run_step;
    op->job.detached = false;
    op->off = crd__offload_run(op->c, &op->job);
    return op->off;
}

/* Whether the helper still owns op; when its job has just ended, its outcome lands
 * (op->landed) with its detail string on this thread. */
static bool in_helper(crd_op *op)
{
    if (!op->off)
        return false;
    if (!crd__job_done(op->c, &op->job))
        return true;
    op->off = false;
    op->landed = true;
    crd__fail(op->c, op->off_st, "%s", op->off_msg);
    return false;
}

/* ---- waiting on a subscription -------------------------------------------------------- */

bool crd__loop_wait_over(crd_client *c, crd__sub *sub, uint64_t *seen, bool *confirmed,
                         int64_t wake_at, crd_status *woke)
{
    uint64_t events = crd__sub_events(sub);
    bool news = events != *seen;
    *seen = events;
    bool closed = atomic_load(&c->closed);
    if (!news && !closed && crd__now_ms() < wake_at)
        return false;
    bool was = *confirmed;
    if (closed)
        *woke = CRD_CLOSED;
    else if (crd__sub_try_take(c, sub, confirmed) || (*confirmed && !was))
        *woke = CRD_OK;
    else if (crd__now_ms() >= wake_at)
        *woke = CRD_TIMEOUT;
    else
        return false; /* nothing yet: the fd or the timeout brings it back */
    return true;
}

int64_t crd__loop_left(int64_t until, int64_t now)
{
    if (until == INT64_MAX)
        return -1;
    return until > now ? until - now : 0;
}

crd_status crd_op_cancel(crd_op *op)
{
    if (op == NULL || !op->kind->cancellable)
        return crd__fail(op != NULL ? op->c : NULL, CRD_INVALID_ARGUMENT,
                         "only a pending acquire can be cancelled");
    op->cancel = true;
    crd__pubsub_loop_notify(op->c);
    return CRD_OK;
}

crd_lock *crd_op_lock(const crd_op *op) { return op != NULL ? op->l : NULL; }
uint64_t crd_op_owner(const crd_op *op) { return op != NULL ? op->owner : 0; }
int64_t crd_op_token(const crd_op *op) { return op != NULL ? op->token : 0; }

/* ---- dispatch ------------------------------------------------------------------------- */

/* The operation's outcome once it is done, or -1 while it is pending. */
static int step(crd_op *op)
{
    if (in_helper(op))
        return -1;
    int outcome = op->kind->step(op);
    op->landed = false;
    return outcome;
}

/* Unlinks op (prev is the one before it, or NULL). */
static void unlink_op(crd__loop *lp, crd_op *prev, crd_op *op)
{
    if (prev != NULL)
        prev->next = op->next;
    else
        lp->head = op->next;
    if (lp->tail == op)
        lp->tail = prev;
    lp->n--;
}

int crd_loop_dispatch(crd_client *c)
{
    if (c == NULL || c->failed)
        return 0;
    if (c->loop == NULL && loop_of(c) == NULL)
        return 0;
    int fd = crd__pubsub_loop_fd(c);
    if (fd >= 0)
        crd__pubsub_loop_drain(c, fd);
    if (c->on_loop_dispatch != NULL)
        c->on_loop_dispatch(c); /* the watchdog's events, with events_on_loop */
    crd__loop *lp = c->loop;
    bool nested = lp->dispatching;
    lp->dispatching = true;
    crd__engine_cork(c); /* the pass's commands go out together, from this thread */
    unsigned pass = ++lp->pass != 0 ? lp->pass : ++lp->pass;
    /* Operations started by callbacks join at the tail and are stepped in this pass,
     * within its budget: the operations left unstepped go first in the next call. */
    int64_t until_us = crd__now_us() + DISPATCH_BUDGET_US;
    int completed = 0, steps = 0;
    bool cut = false;
    crd_op *prev = NULL, *op = lp->head;
    while (op != NULL) {
        if (completed >= DISPATCH_COMPLETIONS ||
            (++steps % 16 == 0 && crd__now_us() >= until_us)) {
            cut = true;
            break;
        }
        op->pass = pass;
        int outcome = step(op);
        if (outcome < 0) {
            prev = op;
            op = op->next;
            continue;
        }
        crd_op *next = op->next;
        unlink_op(lp, prev, op);
        op->done(op->user, op, (crd_status)outcome);
        free(op);
        completed++;
        /* Operations a callback started joined the tail: those behind a completed tail
         * are left for the next pass, which the notice below asks for. */
        op = next;
    }
    crd__engine_uncork(c);
    lp->dispatching = nested;
    if (cut && prev != NULL) {
        /* The unstepped rest goes first next time: the stepped part moves behind it. */
        lp->tail->next = lp->head;
        lp->head = op;
        prev->next = NULL;
        lp->tail = prev;
    }
    lp->cut = cut;
    if (!nested && lp->tail != NULL && (cut || lp->tail->pass != pass))
        crd__pubsub_loop_notify(c);
    return lp->n;
}

int64_t crd_loop_timeout_ms(crd_client *c)
{
    if (c == NULL || c->loop == NULL || c->loop->head == NULL)
        return -1;
    if (c->loop->cut)
        return 0; /* the last dispatch stopped at its budget */
    int64_t now = crd__now_ms(), best = -1;
    for (crd_op *op = c->loop->head; op != NULL; op = op->next) {
        if (op->off) {
            if (crd__job_done(c, &op->job))
                return 0;
            continue; /* the helper writes the fd when it is done */
        }
        if (op->landed)
            return 0;
        int64_t left = op->kind->timeout(op, now);
        if (left == 0)
            return 0;
        if (left > 0 && (best < 0 || left < best))
            best = left;
    }
    return best;
}

void crd__loop_free(crd_client *c)
{
    crd__loop *lp = c->loop;
    if (lp == NULL)
        return;
    lp->freeing = true;
    while (lp->head != NULL) {
        crd_op *op = lp->head;
        lp->head = op->next;
        if (lp->head == NULL)
            lp->tail = NULL;
        lp->n--;
        if (op->off) { /* the helper's step ends first (bounded by its deadline) */
            crd__job_wait(c, &op->job);
            in_helper(op);
        }
        crd_status st = op->kind->close(op);
        op->done(op->user, op, st);
        free(op);
    }
    free(lp);
    c->loop = NULL;
}
