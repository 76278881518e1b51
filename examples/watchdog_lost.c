/* watchdog_lost.c -- hold a lock for as long as the work takes (the watchdog renews it),
 * and stop the work if the lock is lost. The callback runs on the watchdog thread, so it
 * only sets a flag; the worker checks it (and crd_lock_validity_ms) between steps.
 * Usage: example_watchdog_lost [redis://host:port] */
#define _POSIX_C_SOURCE 200809L
#include <credisson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "example.h" /* connect_client, report_failure */

static atomic_bool lost;

static void on_event(void *user_data, const crd_event *ev)
{
    (void)user_data;
    if (ev->kind == CRD_EVENT_LOCK_LOST)
        atomic_store(&lost, true); /* no calls into the client from here */
}

int main(int argc, char **argv)
{
    crd_options opts;
    crd_options_init(&opts);
    opts.watchdog_timeout_ms = 3000; /* renewed every second */
    opts.on_event = on_event;
    crd_client *client = connect_client(argc, argv, &opts);
    if (client == NULL)
        return 1;
    crd_lock *lock = NULL;
    crd_status st = crd_lock_new(client, "example:long-job", &lock);
    if (st == CRD_OK)
        st = crd_lock_acquire(lock, CRD_WAIT_FOREVER, CRD_LEASE_WATCHDOG);
    for (int step = 0; st == CRD_OK && step < 5 && !atomic_load(&lost); step++) {
        int64_t valid = 0;
        crd_lock_validity_ms(lock, &valid);
        printf("step %d, lock valid for another %lld ms\n", step, (long long)valid);
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL); /* the work: longer than the lease in total */
    }
    if (st == CRD_OK)
        st = crd_lock_release(lock); /* CRD_LOCK_LOST if it was lost meanwhile */
    report_failure("lock", st, client);
    crd_lock_free(lock);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
