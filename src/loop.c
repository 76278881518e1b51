/*
 * loop.c -- the event-loop API: acquires, releases and extends that never block a
 * thread while they wait, stepped by crd_loop_dispatch() on the caller's loop thread.
 *
 * A pending acquire is the acquire state machine (acquire.c) in non-blocking mode: its
 * TRY step puts the acquire on the engine and returns (state IO; the engine's completion
 * writes the loop fd; what a pass submits goes out together when it ends, written by
 * this thread when the I/O thread sleeps: crd__engine_cork), its SUBSCRIBE step does not
 * wait for the confirmation, and where the blocking driver sleeps on a condition variable
 * (WAIT), the loop records the wake time and polls nothing: the subscriber thread makes
 * the client's eventfd readable when a message or a subscription confirmation arrives
 * for a subscription that loop operations watch (pubsub.c), and dispatch then takes the
 * wake-up permit of the oldest waiting operation first. crd_loop_timeout_ms() tells the
 * loop when the earliest slice ends (the holder's TTL, as in the blocking path).
 *
 * A synchronizer's wait (crd_semaphore_acquire_async, crd_permit_semaphore_acquire_async,
 * crd_latch_await_async) is sync.c's waiter machine (crd__swait) in non-blocking mode,
 * stepped here as an acquire is (OP_SYNC): an attempt the object gives in halves goes on
 * the engine, any other runs on the helper thread; between them it waits on its
 * subscription's events and its wake time, with the same check as a lock's WAIT.
 *
 * A step that is more than one command (a cluster's redirects, Sentinel, replica sync, a
 * lost reply's read-back: crd__call) runs on a helper thread (offload.c): the operation
 * is handed over whole (op->off; dispatch does not touch it), its outcome lands
 * (op->landed) with its detail string when the helper is done and has written the fd.
 *
 * Threads: the loop thread only (no lock of its own: the operation list belongs to that
 * thread). Callbacks run inside dispatch, on that thread.
 */
#include "engine.h"
#include "acquire.h"
#include "sync.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum op_type { OP_ACQUIRE, OP_RELEASE, OP_EXTEND, OP_SYNC } op_type;

struct crd_op {
    crd__job job;     /* a step on the helper thread (offload.c): first, op_of() */
    op_type type;
    crd_client *c;
    crd_lock *l;
    uint64_t owner;
    int64_t lease_ms; /* extend */
    crd__acquire a;   /* acquire */
    crd__rel rel;     /* release */
    crd__aio *aio;    /* release, extend: the command in flight */
    crd__swait sw;    /* a synchronizer's wait (sync.c) */
    int tries;        /* release: sends so far (one retry after CRD_IO, same request id) */
    bool begun;
    bool cancel;
    bool off;         /* the helper owns the operation until job is done */
    bool landed;      /* a job's outcome not yet taken: off_st */
    crd_status off_st;
    char off_msg[512]; /* the job's detail string, for the loop thread's */
    crd_op_done_fn done;
    void *user;
    unsigned pass;    /* the dispatch pass that last stepped it (0: none yet) */
    struct crd_op *next;
};

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

/* Adds op at the end of the list and tells the loop to dispatch soon. */
static void enqueue(crd_op *op)
{
    crd__loop *lp = op->c->loop;
    if (lp->tail != NULL)
        lp->tail->next = op;
    else
        lp->head = op;
    lp->tail = op;
    lp->n++;
    if (lp->dispatching)
        return; /* the pass steps it (or, joining behind the pass's end, notifies) */
    crd__pubsub_loop_fd(op->c);
    crd__pubsub_loop_notify(op->c);
}

static crd_op *new_op(crd_lock *l, uint64_t owner, op_type type, crd_op_done_fn done,
                      void *user, crd_status *st)
{
    *st = crd__lock_check(l);
    if (*st != CRD_OK)
        return NULL;
    if (done == NULL || owner == 0) {
        *st = crd__fail(l->client, CRD_INVALID_ARGUMENT, "%s",
                        done == NULL ? "done is NULL" : "owner id 0 is not valid");
        return NULL;
    }
    crd_op *op = calloc(1, sizeof *op);
    if (op == NULL || loop_of(l->client) == NULL) {
        free(op);
        *st = crd__fail(l->client, CRD_NO_MEMORY, "cannot allocate an operation");
        return NULL;
    }
    op->type = type;
    op->c = l->client;
    op->l = l;
    op->owner = owner;
    op->done = done;
    op->user = user;
    return op;
}

crd_status crd_lock_acquire_async(crd_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms,
                                  crd_op_done_fn done, void *user, crd_op **out)
{
    crd_status st;
    crd_op *op = new_op(l, owner, OP_ACQUIRE, done, user, &st);
    if (op == NULL)
        return st;
    crd__acquire_begin(&op->a, l, owner, wait_ms, lease_ms);
    if (op->a.state == CRD__AS_DONE) { /* refused before anything was sent */
        st = op->a.result;
        free(op);
        return st;
    }
    op->a.nonblocking = true;
    op->a.want_token = crd__kinds[l->kind].fenced;
    crd__acquire_enter(&op->a, false);
    crd__acquire_enqueue(&op->a);
    enqueue(op);
    if (out != NULL)
        *out = op;
    crd__ok(l->client);
    return CRD_OK;
}

static crd_status start_simple(crd_lock *l, uint64_t owner, op_type type, int64_t lease_ms,
                               crd_op_done_fn done, void *user, crd_op **out)
{
    crd_status st;
    crd_op *op = new_op(l, owner, type, done, user, &st);
    if (op == NULL)
        return st;
    op->lease_ms = lease_ms;
    enqueue(op);
    if (out != NULL)
        *out = op;
    return CRD_OK;
}

crd_status crd_lock_release_async(crd_lock *l, uint64_t owner, crd_op_done_fn done, void *user,
                                  crd_op **out)
{
    return start_simple(l, owner, OP_RELEASE, 0, done, user, out);
}

crd_status crd_lock_extend_async(crd_lock *l, uint64_t owner, int64_t lease_ms,
                                 crd_op_done_fn done, void *user, crd_op **out)
{
    return start_simple(l, owner, OP_EXTEND, lease_ms, done, user, out);
}

/* ---- steps on the helper thread (offload.c) ----------------------------------------------- */

static crd_op *op_of(crd__job *j) { return (crd_op *)(void *)j; }

/* Whether a step may go to the helper (not while the client is being freed). */
static bool c_live(const crd_op *op) { return !op->c->loop->freeing; }

/* The helper thread's side: one step of the operation, as it would have run inside
 * dispatch; the detail string goes with it to the loop thread. */
static void run_step(crd__job *j, bool run)
{
    crd_op *op = op_of(j);
    crd_status st = CRD_CLOSED;
    if (!run)
        return; /* never: only detached jobs are skipped */
    switch (op->type) {
    case OP_ACQUIRE:
        crd__acquire_step(&op->a);
        st = op->a.result;
        break;
    case OP_RELEASE: {
        redisReply *r = NULL;
        st = crd__release_send(&op->rel, &r);
        st = crd__release_end(&op->rel, st, r);
        break;
    }
    case OP_EXTEND:
        st = crd_lock_extend_owner(op->l, op->owner, op->lease_ms);
        break;
    case OP_SYNC:
        crd__swait_step(&op->sw);
        st = op->sw.result;
        break;
    }
    op->off_st = st;
    snprintf(op->off_msg, sizeof op->off_msg, "%s", crd_client_errmsg(op->c));
}

/* Hands the operation's next step to the helper thread; false when it cannot (the
 * caller runs the step itself, as before the helper existed). */
static bool offload(crd_op *op)
{
    if (!c_live(op))
        return false;
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

/* ---- waiting on a subscription (acquires and synchronizers) ------------------------------ */

/* Whether a loop operation's WAIT on sub, until wake_at, is over: a wake-up permit, the
 * subscription going live (a release may have come before it), the wake time, or the
 * client closing (*woke: CRD_OK, CRD_TIMEOUT, CRD_CLOSED); *confirmed is brought up to
 * date. Nothing happened to the subscription since *seen: no mutex taken. */
static bool wait_over(crd_client *c, crd__sub *sub, uint64_t *seen, bool *confirmed,
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

/* ---- synchronizers ------------------------------------------------------------------- */

crd_status crd__loop_sync_start(const crd__sync_op *sop, int64_t wait_ms, crd_op_done_fn done,
                                void *user, crd_op **out)
{
    crd_client *c = sop->s->client;
    if (done == NULL) {
        free(sop->arg);
        return crd__fail(c, CRD_INVALID_ARGUMENT, "done is NULL");
    }
    crd_op *op = calloc(1, sizeof *op);
    if (op == NULL || loop_of(c) == NULL) {
        free(op);
        free(sop->arg);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate an operation");
    }
    op->type = OP_SYNC;
    op->c = c;
    op->done = done;
    op->user = user;
    crd__swait_begin(&op->sw, sop, wait_ms, true);
    enqueue(op);
    if (out != NULL)
        *out = op;
    crd__ok(c);
    return CRD_OK;
}

/* A synchronizer's wait as far as it can go without waiting: its outcome, or -1 while
 * it waits (for its subscription, its wake time, its attempt on the engine, or the
 * helper thread). An attempt on the engine is seen through first: a cancel then has no
 * effect if it took the permits, as for a lock's acquire. */
static int step_sync(crd_op *op)
{
    crd__swait *w = &op->sw;
    crd_client *c = op->c;
    for (int guard = 0; guard < 8 && w->state != CRD__SW_DONE; guard++) {
        if (w->state != CRD__SW_IO && (op->cancel || atomic_load(&c->closed)))
            crd__swait_cancel(w, op->cancel ? CRD_CANCELLED : CRD_CLOSED);
        if (w->state == CRD__SW_WAIT) {
            crd_status woke;
            if (!wait_over(c, w->sub, &w->seen_events, &w->confirmed, w->wake_at, &woke))
                return -1;
            crd__swait_woken(w, woke, w->confirmed);
        } else if (w->state == CRD__SW_IO) {
            crd__swait_step(w);
            if (w->state == CRD__SW_IO)
                return -1; /* its completion writes the fd */
        } else if (crd__swait_blocks(w) && offload(op)) {
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

crd_status crd_op_cancel(crd_op *op)
{
    if (op == NULL || (op->type != OP_ACQUIRE && op->type != OP_SYNC))
        return crd__fail(op != NULL ? op->c : NULL, CRD_INVALID_ARGUMENT,
                         "only a pending acquire can be cancelled");
    op->cancel = true;
    crd__pubsub_loop_notify(op->c);
    return CRD_OK;
}

crd_lock *crd_op_lock(const crd_op *op) { return op != NULL ? op->l : NULL; }
uint64_t crd_op_owner(const crd_op *op) { return op != NULL ? op->owner : 0; }
int64_t crd_op_token(const crd_op *op) { return op != NULL ? op->a.token : 0; }

/* ---- stepping -------------------------------------------------------------------------- */

/* Runs an acquire as far as it can go without waiting. */
static void step_acquire(crd_op *op)
{
    crd__acquire *a = &op->a;
    if (op->cancel)
        crd__acquire_cancel(a, CRD_CANCELLED);
    for (int guard = 0; guard < 8 && a->state != CRD__AS_DONE; guard++) {
        if (a->state == CRD__AS_QUEUE || a->state == CRD__AS_DEFER || a->state == CRD__AS_IO) {
            /* the head goes on, the others wait for the fd; a deferral for its time; an
             * attempt in flight for its completion (which writes the fd) */
            crd__acq_state was = a->state;
            crd__acquire_step(a);
            if (a->state == was)
                return;
            continue;
        }
        if (a->state != CRD__AS_WAIT) {
            if (crd__acquire_blocks(a) && offload(op))
                return; /* the helper thread's completion writes the fd */
            crd__acquire_step(a);
            continue;
        }
        bool confirmed = a->confirmed;
        crd_status woke;
        if (!wait_over(a->c, a->sub, &a->seen_events, &confirmed, a->wake_at, &woke))
            return; /* nothing happened to its subscription: no lock taken */
        crd__acquire_woken(a, woke, confirmed);
    }
}

/* Puts the release's unlock on the engine (EVAL after a NOSCRIPT); false when refused. */
static bool send_release(crd_op *op, bool eval)
{
    crd__cmd cmd;
    crd__release_cmd(&op->rel, &cmd);
    cmd.sync = false; /* the async path runs only without replica sync */
    crd__req *rq = crd__call_request(op->c, &cmd, eval);
    crd__cmd_free(&cmd);
    op->aio = rq != NULL ? crd__aio_submit(op->c, rq, eval) : NULL;
    op->tries++;
    return op->aio != NULL;
}

/* A release: begun at the first step, then on the engine; the outcome when answered. */
static int step_release(crd_op *op)
{
    crd_client *c = op->c;
    if (!op->begun) {
        op->begun = true;
        crd_status st = crd__release_begin(&op->rel, op->l, op->owner);
        if (st != CRD_OK) {
            crd__release_clear(&op->rel);
            return (int)st;
        }
        if (!crd__call_async_ok(c)) { /* through crd__call, bounded by its deadline */
            if (offload(op))
                return -1; /* on the helper thread: its outcome lands in step() */
            redisReply *r = NULL;
            st = crd__release_send(&op->rel, &r);
            return (int)crd__release_end(&op->rel, st, r);
        }
        if (!send_release(op, false))
            return (int)crd__release_end(&op->rel, crd__fail(c, CRD_CLOSED, "client is closed"),
                                         NULL);
        return -1;
    }
    if (!crd__aio_ready(op->aio))
        return -1;
    redisReply *r = NULL;
    int64_t sent;
    bool eval;
    crd_status st = crd__aio_take(c, op->aio, &r, &sent, &eval);
    op->aio = NULL;
    if (st == CRD_OK && !eval && crd__reply_classify(r) == CRD__REPLY_NOSCRIPT) {
        freeReplyObject(r);
        if (send_release(op, true)) /* nothing ran */
            return -1;
        st = crd__fail(c, CRD_CLOSED, "client is closed");
        r = NULL;
    } else if (st == CRD_IO && op->tries < 2) {
        if (send_release(op, eval)) /* the same request id: a replay if the first ran */
            return -1;
        st = crd__fail(c, CRD_CLOSED, "client is closed");
    }
    return (int)crd__release_end(&op->rel, st, r);
}

/* Puts the extend on the engine (EVAL after a NOSCRIPT); false when refused or unbuilt. */
static bool send_extend(crd_op *op, bool eval, crd_status *st)
{
    crd__cmd cmd;
    char field[CRD__FIELD_MAX];
    if ((*st = crd__extend_begin(op->l, op->owner, op->lease_ms, field, &cmd)) != CRD_OK)
        return false;
    crd__req *rq = crd__call_request(op->c, &cmd, eval);
    crd__cmd_free(&cmd);
    op->aio = rq != NULL ? crd__aio_submit(op->c, rq, eval) : NULL;
    if (op->aio == NULL)
        *st = crd__fail(op->c, CRD_CLOSED, "client is closed");
    return op->aio != NULL;
}

/* An extend: on the engine (never resent after CRD_IO: a second extend is harmless, but
 * the caller hears what happened); the outcome when answered. */
static int step_extend(crd_op *op)
{
    crd_client *c = op->c;
    crd_status st;
    if (!op->begun) {
        op->begun = true;
        if (!crd__call_async_ok(c))
            return offload(op) ? -1 : (int)crd_lock_extend_owner(op->l, op->owner, op->lease_ms);
        return send_extend(op, false, &st) ? -1 : (int)st;
    }
    if (!crd__aio_ready(op->aio))
        return -1;
    redisReply *r = NULL;
    int64_t sent;
    bool eval;
    st = crd__aio_take(c, op->aio, &r, &sent, &eval);
    op->aio = NULL;
    if (st == CRD_OK && !eval && crd__reply_classify(r) == CRD__REPLY_NOSCRIPT) {
        freeReplyObject(r);
        return send_extend(op, true, &st) ? -1 : (int)st; /* nothing ran */
    }
    return (int)crd__extend_end(op->l, op->owner, op->lease_ms, st, r, sent);
}

/* The operation's outcome once it is done, or -1 while it is pending. */
static int step(crd_op *op)
{
    if (in_helper(op))
        return -1;
    if (op->landed) {
        op->landed = false;
        /* A release or an extend ran whole there; an acquire's or a wait's machine moved. */
        if (op->type == OP_RELEASE || op->type == OP_EXTEND)
            return (int)op->off_st;
    }
    switch (op->type) {
    case OP_ACQUIRE:
        step_acquire(op);
        if (op->off)
            return -1; /* the helper's now */
        return op->a.state == CRD__AS_DONE ? (int)op->a.result : -1;
    case OP_RELEASE:
        return step_release(op);
    case OP_EXTEND:
        return step_extend(op);
    case OP_SYNC:
        return step_sync(op);
    }
    return -1;
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
    if (c->opts.events_on_loop)
        crd__watchdog_loop_events(c);
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
        if (op->type == OP_SYNC) {
            const crd__swait *w = &op->sw;
            if (w->state == CRD__SW_IO) {
                if (crd__aio_ready(w->aio))
                    return 0;
                continue; /* its completion writes the fd */
            }
            /* Waiting: until its wake time (the fd brings a message sooner). */
            if (op->cancel || w->state != CRD__SW_WAIT)
                return 0;
            if (w->wake_at == INT64_MAX)
                continue;
            int64_t left = w->wake_at - now;
            left = left > 0 ? left : 0;
            if (best < 0 || left < best)
                best = left;
            continue;
        }
        crd__aio *io = op->aio != NULL ? op->aio : op->type == OP_ACQUIRE ? op->a.aio : NULL;
        if (io != NULL && crd__aio_ready(io))
            return 0; /* answered without a wake-up (a fork child's) */
        bool queued = (op->type == OP_ACQUIRE && !op->cancel &&
                       (op->a.state == CRD__AS_QUEUE || op->a.state == CRD__AS_IO)) ||
                      op->aio != NULL;
        bool timed = op->type == OP_ACQUIRE && !op->cancel &&
                     (op->a.state == CRD__AS_WAIT || op->a.state == CRD__AS_DEFER);
        if (!queued && !timed)
            return 0;
        /* Queued behind a local waiter: the fd says when it becomes the head. */
        int64_t until = op->aio != NULL ? INT64_MAX : queued ? op->a.deadline : op->a.wake_at;
        if (until == INT64_MAX)
            continue;
        int64_t left = until - now;
        left = left > 0 ? left : 0;
        if (best < 0 || left < best)
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
        lp->n--;
        crd_status st = CRD_CLOSED;
        if (op->off) { /* the helper's step ends first (bounded by its deadline) */
            crd__job_wait(c, &op->job);
            in_helper(op);
        }
        if (op->landed && (op->type == OP_RELEASE || op->type == OP_EXTEND)) {
            st = op->off_st; /* a release or an extend ran whole there */
        } else if (op->type == OP_SYNC) {
            /* What a landed attempt took is kept (its machine is at its end: CRD_OK). */
            crd__swait *w = &op->sw;
            crd__swait_cancel(w, CRD_CLOSED);
            while (w->state != CRD__SW_DONE)
                crd__swait_step(w); /* the end hook, on this thread */
            free(w->op.arg);
            st = w->result;
        } else if (op->type == OP_ACQUIRE) {
            op->a.nonblocking = false; /* a fair waiter leaves its queue now, not later */
            crd__acquire_cancel(&op->a, CRD_CLOSED);
            st = op->a.result;
        } else if (op->aio != NULL) {
            redisReply *r = crd__aio_drop(op->aio);
            op->aio = NULL;
            if (op->type == OP_RELEASE)
                st = crd__release_end(&op->rel, r != NULL ? CRD_OK : CRD_CLOSED, r);
            else if (r != NULL)
                freeReplyObject(r);
        }
        op->done(op->user, op, st);
        free(op);
    }
    free(lp);
    c->loop = NULL;
}
