/* semaphore.c -- at most 2 holders of "report-workers" at once, across processes and
 * languages (Java's getPermitExpirableSemaphore("report-workers") shares the permits).
 * Usage: example_semaphore [redis://host:port]   (default redis://127.0.0.1:6379) */
#include <credisson.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */

int main(int argc, char **argv)
{
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    crd_permit_semaphore *sem;
    crd_status st = crd_permit_semaphore_new(client, "report-workers", &sem);
    if (st == CRD_OK)
        st = crd_permit_semaphore_try_set_permits(sem, 2, NULL); /* first one sets it */
    char permit[CRD_PERMIT_ID_SIZE];
    if (st == CRD_OK) /* wait up to 10 s; the permit expires after 60 s if we die */
        st = crd_permit_semaphore_acquire(sem, 10000, 60000, permit);
    if (st == CRD_OK) {
        printf("holding permit %s of report-workers\n", permit);
        /* ... the work; a long one calls crd_permit_semaphore_update_lease ... */
        st = crd_permit_semaphore_release(sem, permit);
    }
    report_failure("semaphore", st, client);
    crd_permit_semaphore_free(sem);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
