/* read_write_lock.c -- many readers or one writer, on the same keys as Redisson's
 * getReadWriteLock(name). A writer may downgrade to a reader; a reader cannot upgrade
 * (CRD_DEADLOCK). Usage: example_read_write_lock [redis://host:port] */
#include <credisson.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */

int main(int argc, char **argv)
{
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    crd_rwlock *rw = NULL;
    crd_status st = crd_rwlock_new(client, "example:config", &rw);
    crd_lock *rd = crd_rwlock_read(rw), *wr = crd_rwlock_write(rw);

    if (st == CRD_OK)
        st = crd_lock_acquire(wr, 5000, CRD_LEASE_WATCHDOG); /* exclusive: rewrite config */
    if (st == CRD_OK)
        st = crd_lock_acquire(rd, 0, CRD_LEASE_WATCHDOG); /* downgrade: keep reading... */
    if (st == CRD_OK)
        st = crd_lock_release(wr); /* ...while other readers get in */
    if (st == CRD_OK) {
        printf("reading the config with other readers\n");
        crd_status up = crd_lock_acquire(wr, 0, CRD_LEASE_WATCHDOG);
        printf("upgrade attempt while reading: %s\n", crd_strerror(up)); /* CRD_DEADLOCK */
        st = crd_lock_release(rd);
    }
    report_failure("rwlock", st, client);
    crd_rwlock_free(rw);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
