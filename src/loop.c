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
 * crd_latch_await_async) is sync.c's waiter loop cut into steps (OP_SYNC): an attempt
 * the object gives in halves (crd__sync_attempt) goes on the engine, any other is the
 * blocking try function; between them it waits on its subscription's events and its
 * wake time, as a lock's WAIT does.
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

/* A synchronizer's wait (semaphore acquire, latch await): sync.c's waiter loop as steps.
 * An attempt with a crd__sync_attempt goes on the engine where the loop's commands can
 * (standalone, no replica sync): its completion writes the fd. Otherwise it is the
 * blocking try function, run on a helper thread (bounded by command_timeout_ms). The
 * wait between attempts is on the subscription's events and the fd, never on the
 * thread. */
typedef enum sync_phase { SP_FIRST, SP_TRY, SP_WAIT, SP_LAST } sync_phase;

typedef struct sync_wait {
    crd__sync *s;
    crd__sync_try_fn fn;
    const crd__sync_attempt *at; /* fn in halves, for the engine; may be NULL */
    crd__aio *aio;             /* an attempt on the engine */
    void *arg;                 /* fn's, freed when the operation ends */
    crd__sync_end_fn end; /* the object's metrics, when the operation ends */
    int rule;
    bool last_try;
    bool waited;
    bool confirmed;
    sync_phase phase;
    int64_t wait_ms, deadline, wake_at, io_backoff;
    crd__sub *sub;
    uint64_t seen_events;
} sync_wait;

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
    sync_wait sw;     /* a synchronizer's wait */
    int tries;        /* release: sends so far (one retry after CRD_IO, same request id) */
    bool begun;
    bool cancel;
    bool off;         /* the helper owns the operation until job is done */
    bool landed;      /* a job's outcome not yet taken: off_st, off_epoch */
    bool ending;      /* the job is a synchronizer's end hook (sync_finish) */
    crd_status off_st;
    int64_t off_epoch;
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
        if (op->ending)
            st = op->sw.end(op->sw.s, op->sw.arg, op->off_st, op->sw.waited);
        else
            st = op->sw.fn(op->sw.arg, &op->off_epoch);
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
    op->off_epoch = 0;
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

/* ---- synchronizers ------------------------------------------------------------------- */

crd_status crd__loop_sync_start(crd__sync *s, int64_t wait_ms, int rule, bool last_try,
                                crd__sync_try_fn fn, const crd__sync_attempt *at, void *arg,
                                crd__sync_end_fn end, crd_op_done_fn done, void *user,
                                crd_op **out)
{
    crd_client *c = s->client;
    if (done == NULL) {
        free(arg);
        return crd__fail(c, CRD_INVALID_ARGUMENT, "done is NULL");
    }
    crd_op *op = calloc(1, sizeof *op);
    if (op == NULL || loop_of(c) == NULL) {
        free(op);
        free(arg);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate an operation");
    }
    op->type = OP_SYNC;
    op->c = c;
    op->done = done;
    op->user = user;
    sync_wait *w = &op->sw;
    w->s = s;
    w->fn = fn;
    w->at = at;
    w->arg = arg;
    w->end = end;
    w->rule = rule;
    w->last_try = last_try;
    w->wait_ms = wait_ms;
    w->deadline = wait_ms < 0 ? INT64_MAX : crd__now_ms() + wait_ms;
    w->io_backoff = 25;
    w->phase = SP_FIRST;
    enqueue(op);
    if (out != NULL)
        *out = op;
    crd__ok(c);
    return CRD_OK;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* What is left of a synchronizer's wait once its end hook gave st: its subscription
 * given back, its argument freed. */
static int sync_end(crd_op *op, crd_status st)
{
    sync_wait *w = &op->sw;
    if (w->sub != NULL) {
        crd__sub_loop_watch(op->c, w->sub, false);
        crd__sub_release(op->c, w->sub);
        w->sub = NULL;
    }
    free(w->arg);
    w->arg = NULL;
    return (int)st;
}

/* The end of a synchronizer's wait: its end hook (metrics; a lost reply's read-back,
 * which runs on the helper thread: -1 until it has), then sync_end. */
static int sync_finish(crd_op *op, crd_status st)
{
    sync_wait *w = &op->sw;
    if (w->aio != NULL) { /* only when the client is freed */
        redisReply *r = crd__aio_drop(w->aio);
        freeReplyObject(r);
        w->aio = NULL;
    }
    if (w->end == NULL)
        return sync_end(op, st);
    bool reads_back = st != CRD_OK && w->at != NULL && w->at->run_inline != NULL &&
                      w->at->run_inline(w->arg);
    if (reads_back) {
        op->ending = true;
        op->off_st = st;
        if (offload(op))
            return -1;
        op->ending = false;
    }
    return sync_end(op, w->end(w->s, w->arg, st, w->waited));
}

static crd_status sync_ran_out(crd__sync *s)
{
    return crd__fail(s->client, CRD_TIMEOUT, "%s \"%.*s\": the wait ran out", s->label,
                     CRD__SYNC_NAME_FMT(s));
}

/* Puts the attempt's command on the engine (EVAL after a NOSCRIPT). False with *st when
 * it cannot: the command's own refusal, or a client that is closing. */
static bool sync_submit(crd_op *op, bool eval, crd_status *st)
{
    sync_wait *w = &op->sw;
    crd__cmd cmd;
    if ((*st = w->at->build(w->arg, &cmd)) != CRD_OK)
        return false;
    crd__req *rq = crd__call_request(op->c, &cmd, eval);
    crd__cmd_free(&cmd);
    w->aio = rq != NULL ? crd__aio_submit(op->c, rq, eval) : NULL;
    if (w->aio == NULL)
        *st = crd__fail(op->c, CRD_CLOSED, "client is closed");
    return w->aio != NULL;
}

/* One attempt: true with its outcome in *st, or false while it is on the engine (its
 * completion writes the fd). */
static bool sync_attempt(crd_op *op, crd_status *st, int64_t *retry_epoch)
{
    sync_wait *w = &op->sw;
    if (op->landed) { /* the helper's attempt */
        op->landed = false;
        *st = op->off_st;
        *retry_epoch = op->off_epoch;
        return true;
    }
    if (w->aio == NULL) {
        if (w->at == NULL || !crd__call_async_ok(op->c) ||
            (w->at->run_inline != NULL && w->at->run_inline(w->arg))) {
            if (offload(op))
                return false;
            *st = w->fn(w->arg, retry_epoch);
            return true;
        }
        return !sync_submit(op, false, st);
    }
    if (!crd__aio_ready(w->aio))
        return false;
    redisReply *r = NULL;
    int64_t sent = 0;
    bool eval = false;
    crd_status got = crd__aio_take(op->c, w->aio, &r, &sent, &eval);
    w->aio = NULL;
    if (got == CRD_OK && !eval && crd__reply_classify(r) == CRD__REPLY_NOSCRIPT) {
        freeReplyObject(r); /* nothing ran */
        return !sync_submit(op, true, st);
    }
    if (got == CRD_OK && r->type == REDIS_REPLY_ERROR) {
        got = crd__reply_fail(op->c, r, w->s->label);
        freeReplyObject(r);
        r = NULL;
    }
    *st = w->at->read(w->arg, got, r, sent != 0, retry_epoch);
    return true;
}

/* A synchronizer's wait, as far as it can go without waiting; its outcome or -1. */
static int step_sync(crd_op *op)
{
    sync_wait *w = &op->sw;
    crd__sync *s = w->s;
    crd_client *c = op->c;
    for (int guard = 0; guard < 8; guard++) {
        /* An attempt on the engine is seen through (a cancel then has no effect if it
         * took the permits, as for a lock's acquire). */
        if (op->cancel && w->aio == NULL && !op->landed)
            return sync_finish(op, crd__fail(c, CRD_CANCELLED, "%s \"%.*s\": cancelled",
                                             s->label, CRD__SYNC_NAME_FMT(s)));
        if (atomic_load(&c->closed) && w->aio == NULL && !op->landed)
            return sync_finish(op, crd__fail(c, CRD_CLOSED, "client is closed"));
        int64_t retry_epoch = 0;
        crd_status st = CRD_OK;
        if (w->phase == SP_LAST) {
            if (!sync_attempt(op, &st, &retry_epoch))
                return -1;
            return sync_finish(op, st == CRD_BUSY ? sync_ran_out(s) : st);
        }
        if (w->phase == SP_FIRST) {
            if (!sync_attempt(op, &st, &retry_epoch))
                return -1;
            if (op->cancel && st != CRD_OK)
                continue;
            if (st != CRD_BUSY && !(st == CRD_IO && w->wait_ms != 0))
                return sync_finish(op, st);
            if (w->wait_ms == 0)
                return sync_finish(op, crd__fail(c, CRD_BUSY, "%s \"%.*s\": not now", s->label,
                                                 CRD__SYNC_NAME_FMT(s)));
            w->waited = st == CRD_BUSY;
            /* No wait for the confirmation: the fd tells (as a lock's loop acquire). */
            st = crd__sub_acquire_rule(c, s->channel.p, s->channel.len, w->rule, 0, &w->sub,
                                       &w->confirmed);
            if (w->sub == NULL)
                return sync_finish(op, st == CRD_CLOSED ? crd__fail(c, CRD_CLOSED,
                                                                    "client is closed")
                                                        : st);
            crd__sub_loop_watch(c, w->sub, true);
            w->seen_events = crd__sub_events(w->sub);
            w->phase = SP_TRY;
            continue;
        }
        if (w->phase == SP_TRY) {
            if (!sync_attempt(op, &st, &retry_epoch))
                return -1;
            if (op->cancel && st != CRD_OK)
                continue;
            bool failed = st == CRD_IO;
            if (st != CRD_BUSY && !failed)
                return sync_finish(op, st);
            int64_t now = crd__now_ms();
            if (now >= w->deadline)
                return sync_finish(op, failed ? st : sync_ran_out(s));
            int64_t wake_at = w->deadline;
            if (failed) {
                wake_at = min64(wake_at, now + w->io_backoff);
                w->io_backoff = min64(w->io_backoff * 2, c->opts.poll_interval_ms);
            } else {
                w->io_backoff = 25;
            }
            if (retry_epoch > 0) {
                int64_t in = retry_epoch - crd__epoch_ms();
                wake_at = min64(wake_at, now + (in > 0 ? in : 0) + 1);
            }
            if (!w->confirmed)
                wake_at = min64(wake_at, now + c->opts.poll_interval_ms);
            if (c->opts.max_wait_slice_ms > 0)
                wake_at = min64(wake_at, now + c->opts.max_wait_slice_ms);
            w->wake_at = wake_at;
            w->phase = SP_WAIT;
        }
        /* SP_WAIT: a wake-up permit, the subscription going live, or the wake time. */
        uint64_t events = crd__sub_events(w->sub);
        bool news = events != w->seen_events;
        w->seen_events = events;
        int64_t now = crd__now_ms();
        if (!news && now < w->wake_at)
            return -1;
        bool was_confirmed = w->confirmed;
        if (crd__sub_try_take(c, w->sub, &w->confirmed) ||
            (w->confirmed && !was_confirmed)) {
            w->phase = SP_TRY;
            continue;
        }
        if (now < w->wake_at)
            return -1;
        if (now >= w->deadline) {
            if (!w->last_try)
                return sync_finish(op, sync_ran_out(s));
            w->phase = SP_LAST;
            continue;
        }
        w->phase = SP_TRY;
    }
    return -1;
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
        uint64_t events = crd__sub_events(a->sub);
        bool news = events != a->seen_events;
        a->seen_events = events;
        if (!news && !atomic_load(&a->c->closed) && crd__now_ms() < a->wake_at)
            return; /* nothing happened to its subscription: no lock taken */
        if (atomic_load(&a->c->closed)) {
            crd__acquire_woken(a, CRD_CLOSED, confirmed);
        } else if (crd__sub_try_take(a->c, a->sub, &confirmed)) {
            crd__acquire_woken(a, CRD_OK, confirmed);
        } else if (confirmed && !a->confirmed) {
            /* The subscription became live: re-check, a release may have come before. */
            crd__acquire_woken(a, CRD_OK, confirmed);
        } else if (crd__now_ms() >= a->wake_at) {
            crd__acquire_woken(a, CRD_TIMEOUT, confirmed);
        } else {
            return; /* nothing yet: the fd or the timeout brings it back */
        }
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
    if (op->landed && op->type != OP_SYNC) {
        op->landed = false;
        if (op->type != OP_ACQUIRE) /* a release or an extend ran whole there */
            return (int)op->off_st;
    }
    if (op->landed && op->ending) { /* a synchronizer's end hook ran there */
        op->landed = op->ending = false;
        return sync_end(op, op->off_st);
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
            if (op->sw.aio != NULL) {
                if (crd__aio_ready(op->sw.aio))
                    return 0;
                continue; /* its completion writes the fd */
            }
            /* Waiting: until its wake time (the fd brings a message sooner). */
            if (op->cancel || op->sw.phase != SP_WAIT)
                return 0;
            int64_t left = op->sw.wake_at - now;
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
        if (op->landed && op->type == OP_SYNC) {
            /* Its end hook ran there, or its attempt (what it took is kept: CRD_OK). */
            st = (crd_status)(op->ending ? sync_end(op, op->off_st)
                                         : sync_finish(op, op->off_st == CRD_OK ? CRD_OK
                                                                                : CRD_CLOSED));
        } else if (op->landed && op->type != OP_ACQUIRE) {
            st = op->off_st; /* a release or an extend ran whole there */
        } else if (op->type == OP_SYNC) {
            st = (crd_status)sync_finish(op, CRD_CLOSED);
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
