/*
 * credisson/libuv.h -- attach a credisson client to a libuv loop in one call.
 * Header-only, in the manner of hiredis' adapters: include it in the file of a program
 * that links libuv; credisson itself does not depend on libuv.
 *
 *     crd_uv adapter;
 *     if (crd_uv_attach(&adapter, uv_default_loop(), client) != 0) ... (a libuv error, or
 *         -1 when the client has no loop fd: crd_client_errmsg says why)
 *     ... crd_lock_acquire_async(...) from any loop callback ...
 *     crd_uv_detach(&adapter);   (before crd_client_free; the loop closes the handles)
 *
 * What it does: a uv_poll_t on crd_loop_fd() and a uv_timer_t for crd_loop_timeout_ms();
 * whenever either fires it calls crd_loop_dispatch(), which only moves completed
 * operations to their callbacks and hands new ones to the client's I/O thread: the loop
 * never waits on the network. An operation started outside a dispatch makes the fd
 * readable itself, so the program needs no extra call.
 *
 * Threads: everything here, and every crd_op_done_fn callback, runs on the loop's thread.
 * Ownership: *adapter is the caller's; after crd_uv_detach() it must stay valid until the
 * loop has run the handles' close callbacks (the next uv_run turn).
 */
#ifndef CREDISSON_LIBUV_H
#define CREDISSON_LIBUV_H

#include <credisson.h>
#include <uv.h>

typedef struct crd_uv {
    crd_client *client;
    uv_poll_t poll;
    uv_timer_t timer;
} crd_uv;

static void crd_uv__on_timer(uv_timer_t *t);

/* Runs what can progress, then re-arms the timer for the earliest deadline. Call it
 * after starting operations from outside the loop's callbacks if the fd is not enough. */
static inline void crd_uv_dispatch(crd_uv *a)
{
    crd_loop_dispatch(a->client);
    int64_t ms = crd_loop_timeout_ms(a->client);
    if (ms < 0)
        uv_timer_stop(&a->timer);
    else
        uv_timer_start(&a->timer, crd_uv__on_timer, (uint64_t)ms, 0);
}

static void crd_uv__on_timer(uv_timer_t *t) { crd_uv_dispatch((crd_uv *)t->data); }

static void crd_uv__on_fd(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    crd_uv_dispatch((crd_uv *)h->data);
}

/* Attaches client to loop. Returns 0, -1 when the client has no loop fd, or a libuv
 * error code (negative). */
static inline int crd_uv_attach(crd_uv *a, uv_loop_t *loop, crd_client *client)
{
    a->client = client;
    int fd = crd_loop_fd(client);
    if (fd < 0)
        return -1;
    int rc = uv_poll_init(loop, &a->poll, fd);
    if (rc != 0)
        return rc;
    if ((rc = uv_timer_init(loop, &a->timer)) != 0) {
        uv_close((uv_handle_t *)&a->poll, NULL);
        return rc;
    }
    a->poll.data = a->timer.data = a;
    return uv_poll_start(&a->poll, UV_READABLE, crd_uv__on_fd);
}

/* Stops both handles and closes them (their close callbacks run on the loop). */
static inline void crd_uv_detach(crd_uv *a)
{
    uv_poll_stop(&a->poll);
    uv_timer_stop(&a->timer);
    uv_close((uv_handle_t *)&a->poll, NULL);
    uv_close((uv_handle_t *)&a->timer, NULL);
}

#endif
