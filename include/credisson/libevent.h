/*
 * credisson/libevent.h -- attach a credisson client to a libevent event_base in one call.
 * Header-only, in the manner of hiredis' adapters: include it in the file of a program
 * that links libevent; credisson itself does not depend on libevent.
 *
 *     crd_ev adapter;
 *     if (crd_ev_attach(&adapter, base, client) != 0) ... (-1: no loop fd, or libevent
 *         could not make the events)
 *     ... crd_lock_acquire_async(...) from any event callback ...
 *     crd_ev_detach(&adapter);   (before crd_client_free)
 *
 * What it does: a persistent read event on crd_loop_fd() and a timer for
 * crd_loop_timeout_ms(); whenever either fires it calls crd_loop_dispatch(), which only
 * moves completed operations to their callbacks and hands new ones to the client's I/O
 * thread: the base never waits on the network.
 *
 * Threads: everything here, and every crd_op_done_fn callback, runs on the base's thread.
 * Ownership: *adapter is the caller's; crd_ev_detach() frees the two events.
 */
#ifndef CREDISSON_LIBEVENT_H
#define CREDISSON_LIBEVENT_H

#include <credisson.h>
#include <event2/event.h>

typedef struct crd_ev {
    crd_client *client;
    struct event *readable;
    struct event *timer;
} crd_ev;

/* Runs what can progress, then re-arms the timer for the earliest deadline. */
static inline void crd_ev_dispatch(crd_ev *a)
{
    crd_loop_dispatch(a->client);
    int64_t ms = crd_loop_timeout_ms(a->client);
    if (ms < 0) {
        event_del(a->timer);
    } else {
        struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
        event_add(a->timer, &tv);
    }
}

static void crd_ev__on_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    crd_ev_dispatch((crd_ev *)arg);
}

/* Attaches client to base. Returns 0, or -1 (no loop fd, or the events could not be made
 * or added). */
static inline int crd_ev_attach(crd_ev *a, struct event_base *base, crd_client *client)
{
    a->client = client;
    a->readable = a->timer = NULL;
    int fd = crd_loop_fd(client);
    if (fd < 0)
        return -1;
    a->readable = event_new(base, fd, EV_READ | EV_PERSIST, crd_ev__on_event, a);
    a->timer = evtimer_new(base, crd_ev__on_event, a);
    if (a->readable == NULL || a->timer == NULL || event_add(a->readable, NULL) != 0) {
        if (a->readable != NULL)
            event_free(a->readable);
        if (a->timer != NULL)
            event_free(a->timer);
        a->readable = a->timer = NULL;
        return -1;
    }
    return 0;
}

/* Removes and frees both events. */
static inline void crd_ev_detach(crd_ev *a)
{
    if (a->readable != NULL)
        event_free(a->readable);
    if (a->timer != NULL)
        event_free(a->timer);
    a->readable = a->timer = NULL;
}

#endif
