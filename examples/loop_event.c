/* loop_event.c -- credisson's event-loop API driven by libevent.
 * Usage: example_loop_event [redis://host:port] [N]     (default 100 requests)
 *
 * Starts N acquisitions of one lock, each for its own owner, all from the loop thread:
 * they queue up on one shared subscription and are served one after the other as each
 * holder gives the lock back, with no thread per waiter. Prints how long the N took.
 *
 * The adapter is <credisson/libevent.h> (installed with the library): a persistent read
 * event on crd_loop_fd() and a timer for crd_loop_timeout_ms(), both calling
 * crd_loop_dispatch(), which never waits on the network. */
#define _DEFAULT_SOURCE /* POSIX 2008 for the loop libraries' headers, clock_gettime */
#include <credisson.h>
#include <credisson/libevent.h> /* the adapter: one call attaches the client */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "example.h" /* connect_client, report_failure */

static crd_ev ADAPTER;
static struct event_base *BASE;
static int LEFT, FAILED;

static void on_released(void *user, crd_op *op, crd_status st)
{
    (void)user;
    (void)op;
    FAILED += st != CRD_OK;
    if (--LEFT == 0)
        event_base_loopbreak(BASE);
}

static void on_acquired(void *user, crd_op *op, crd_status st)
{
    (void)user;
    if (st != CRD_OK) {
        fprintf(stderr, "acquire: %s\n", crd_strerror(st));
        FAILED++;
        if (--LEFT == 0)
            event_base_loopbreak(BASE);
        return;
    }
    /* ... the work under the lock; then give it back, which wakes the next waiter ... */
    crd_lock_release_async(crd_op_lock(op), crd_op_owner(op), on_released, NULL, NULL);
}

int main(int argc, char **argv)
{
    int n = argc > 2 ? atoi(argv[2]) : 100;
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    BASE = event_base_new();
    crd_lock *lock;
    if (BASE == NULL || crd_ev_attach(&ADAPTER, BASE, client) != 0 ||
        crd_lock_new(client, "loop-event-example", &lock) != CRD_OK) {
        fprintf(stderr, "setup failed: %s\n", crd_client_errmsg(client));
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    LEFT = n;
    for (int i = 0; i < n; i++)
        if (crd_lock_acquire_async(lock, crd_owner_new(), 30000, 10000, on_acquired, NULL,
                                   NULL) != CRD_OK) {
            fprintf(stderr, "acquire: %s\n", crd_client_errmsg(client));
            return 1;
        }
    crd_ev_dispatch(&ADAPTER);
    event_base_dispatch(BASE);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("%d acquisitions of one lock from one libevent loop in %.1f ms, %d failed\n", n, ms,
           FAILED);
    crd_ev_detach(&ADAPTER);
    event_base_free(BASE);
    crd_lock_free(lock);
    crd_client_free(client);
    return FAILED == 0 ? 0 : 1;
}
