/*
 * acquire_loop.c -- the acquire machine's event-loop driver: crd_lock_acquire_async() and
 * the operation kind src/wait/loop.c steps (acquire.c holds the machine and its blocking
 * driver). The machine runs with nonblocking set: its TRY step submits the attempt and
 * moves to IO until the engine's completion writes the loop fd, its SUBSCRIBE step does
 * not wait for the confirmation, and a WAIT ends when crd__loop_wait_over() sees the
 * subscription's wake-up counter move or the slice end.
 *
 * Threads: the loop thread (crd_loop_dispatch) and the caller of crd_lock_acquire_async.
 */
#include "acquire.h"

#include <stdlib.h>

/* An acquire on the event loop: the machine in non-blocking mode. */
typedef struct acquire_op {
    crd_op op;
    crd__acquire a;
} acquire_op;

static crd__acquire *machine(crd_op *op) { return &((acquire_op *)(void *)op)->a; }

/* Runs the acquire as far as it can go without waiting: its outcome, or -1. */
static int aop_step(crd_op *op)
{
    crd__acquire *a = machine(op);
    if (op->cancel)
        crd__acquire_cancel(a, CRD_CANCELLED);
    for (int guard = 0; guard < 8 && a->state != CRD__AS_DONE; guard++) {
        if (a->state == CRD__AS_QUEUE || a->state == CRD__AS_DEFER || a->state == CRD__AS_IO) {
            /* the head goes on, the others wait for the fd; a deferral for its time; an
             * attempt in flight for its completion (which writes the fd) */
            crd__acq_state was = a->state;
            crd__acquire_step(a);
            if (a->state == was)
                return -1;
            continue;
        }
        if (a->state != CRD__AS_WAIT) {
            if (crd__acquire_blocks(a) && crd__op_offload(op))
                return -1; /* the helper thread's completion writes the fd */
            crd__acquire_step(a);
            continue;
        }
        bool confirmed = a->confirmed;
        crd_status woke;
        if (!crd__loop_wait_over(a->c, a->sub, &a->seen_events, &confirmed, a->wake_at, &woke))
            return -1; /* nothing happened to its subscription: no lock taken */
        crd__acquire_woken(a, woke, confirmed);
    }
    if (a->state != CRD__AS_DONE)
        return -1;
    op->token = a->token;
    return (int)a->result;
}

static crd_status aop_helper(crd_op *op)
{
    crd__acquire_step(machine(op));
    return machine(op)->result;
}

static int64_t aop_timeout(crd_op *op, int64_t now)
{
    crd__acquire *a = machine(op);
    if (a->aio != NULL && crd__aio_ready(a->aio))
        return 0; /* answered without a wake-up (a fork child's) */
    if (op->cancel)
        return 0;
    /* Queued behind a local waiter, or in flight: the fd says when; its deadline. */
    if (a->state == CRD__AS_QUEUE || a->state == CRD__AS_IO)
        return crd__loop_left(a->deadline, now);
    if (a->state == CRD__AS_WAIT || a->state == CRD__AS_DEFER)
        return crd__loop_left(a->wake_at, now);
    return 0;
}

static crd_status aop_close(crd_op *op)
{
    crd__acquire *a = machine(op);
    a->nonblocking = false; /* a fair waiter leaves its queue now, not later */
    crd__acquire_cancel(a, CRD_CLOSED);
    return a->result;
}

static const crd__op_kind acquire_kind = {aop_step, aop_helper, aop_timeout, aop_close, true};

crd_status crd_lock_acquire_async(crd_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms,
                                  crd_op_done_fn done, void *user, crd_op **out)
{
    crd_status st;
    crd_op *op = crd__lock_op_new(l, owner, &acquire_kind, sizeof(acquire_op), done, user, &st);
    if (op == NULL)
        return st;
    crd__acquire *a = machine(op);
    crd__acquire_begin(a, l, owner, wait_ms, lease_ms);
    if (a->state == CRD__AS_DONE) { /* refused before anything was sent */
        st = a->result;
        free(op);
        return st;
    }
    a->nonblocking = true;
    a->want_token = crd__kinds[l->kind].fenced;
    crd__acquire_enter(a, false);
    crd__acquire_enqueue(a);
    crd__op_start(op, out);
    crd__ok(l->client);
    return CRD_OK;
}
