/*
 * loop.c -- the event-loop API: acquires, releases and extends that never block a
 * thread while they wait, stepped by crd_loop_dispatch() on the caller's loop thread.
 *
 * A pending acquire is the acquire state machine (acquire.c) in non-blocking mode: its
 * TRY and SUBSCRIBE steps run inside dispatch (one script round trip each, bounded by
 * the command timeout), and where the blocking driver sleeps on a condition variable
 * (WAIT), the loop records the wake time and polls nothing: the subscriber thread makes
 * the client's eventfd readable when a message or a subscription confirmation arrives
 * for a subscription that loop operations watch (pubsub.c), and dispatch then takes the
 * wake-up permit of the oldest waiting operation first. crd_loop_timeout_ms() tells the
 * loop when the earliest slice ends (the holder's TTL, as in the blocking path).
 *
 * Threads: the loop thread only (no lock of its own: the operation list belongs to that
 * thread). Callbacks run inside dispatch, on that thread.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum op_type { OP_ACQUIRE, OP_RELEASE, OP_EXTEND } op_type;

struct crd_op {
    op_type type;
    crd_client *c;
    crd_lock *l;
    uint64_t owner;
    int64_t lease_ms; /* extend */
    crd__acquire a;   /* acquire */
    bool cancel;
    crd_op_done_fn done;
    void *user;
    struct crd_op *next;
};

struct crd__loop {
    crd_op *head, *tail;
    int n;
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
        *st = crd__fail(l->client, CRD_INVALID_ARGUMENT, "%s", done == NULL ? "done is NULL"
                                                                            : "owner id 0 is not valid");
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

crd_status crd_op_cancel(crd_op *op)
{
    if (op == NULL || op->type != OP_ACQUIRE)
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
        if (a->state == CRD__AS_QUEUE || a->state == CRD__AS_DEFER) {
            /* the head goes on, the others wait for the fd; a deferral for its time */
            crd__acq_state was = a->state;
            crd__acquire_step(a);
            if (a->state == was)
                return;
            continue;
        }
        if (a->state != CRD__AS_WAIT) {
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

/* The operation's outcome once it is done, or -1 while it is pending. */
static int step(crd_op *op)
{
    switch (op->type) {
    case OP_ACQUIRE:
        step_acquire(op);
        return op->a.state == CRD__AS_DONE ? (int)op->a.result : -1;
    case OP_RELEASE:
        return (int)crd_lock_release_owner(op->l, op->owner);
    case OP_EXTEND:
        return (int)crd_lock_extend_owner(op->l, op->owner, op->lease_ms);
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
    uint64_t drained;
    while (fd >= 0 && read(fd, &drained, sizeof drained) == (ssize_t)sizeof drained) {
    }
    if (c->opts.events_on_loop)
        crd__watchdog_loop_events(c);
    crd__loop *lp = c->loop;
    /* Operations started by callbacks join at the tail and are stepped in this pass. */
    crd_op *prev = NULL, *op = lp->head;
    while (op != NULL) {
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
        /* Operations a callback started joined the tail (and notified the fd): those
         * after a completed tail wait for the next dispatch. */
        op = next;
    }
    return lp->n;
}

int64_t crd_loop_timeout_ms(crd_client *c)
{
    if (c == NULL || c->loop == NULL || c->loop->head == NULL)
        return -1;
    int64_t now = crd__now_ms(), best = -1;
    for (crd_op *op = c->loop->head; op != NULL; op = op->next) {
        bool queued = op->type == OP_ACQUIRE && !op->cancel && op->a.state == CRD__AS_QUEUE;
        bool timed = op->type == OP_ACQUIRE && !op->cancel &&
                     (op->a.state == CRD__AS_WAIT || op->a.state == CRD__AS_DEFER);
        if (!queued && !timed)
            return 0;
        /* Queued behind a local waiter: the fd says when it becomes the head. */
        int64_t until = queued ? op->a.deadline : op->a.wake_at;
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
    while (lp->head != NULL) {
        crd_op *op = lp->head;
        lp->head = op->next;
        lp->n--;
        crd_status st = CRD_CLOSED;
        if (op->type == OP_ACQUIRE) {
            crd__acquire_cancel(&op->a, CRD_CLOSED);
            st = op->a.result;
        }
        op->done(op->user, op, st);
        free(op);
    }
    free(lp);
    c->loop = NULL;
}
