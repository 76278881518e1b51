/* basic_lock.c -- take a Redisson-compatible lock, do the work, release it.
 * Usage: example_basic_lock [redis://host:port]   (default redis://127.0.0.1:6379) */
#include <credisson.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */

int main(int argc, char **argv)
{
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    crd_lock *lock;
    crd_status st = crd_lock_new(client, "nightly-report", &lock);
    if (st == CRD_OK)
        st = crd_lock_acquire(lock, 10000, CRD_LEASE_WATCHDOG); /* wait up to 10 s */
    if (st == CRD_OK) {
        printf("holding nightly-report as %s\n", crd_client_id(client));
        /* ... the critical section: Java Redisson clients calling
         * getLock("nightly-report").lock() wait here too ... */
        st = crd_lock_release(lock);
    }
    report_failure("lock", st, client);
    crd_lock_free(lock);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
