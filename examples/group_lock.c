/* group_lock.c -- a job that updates 100 rows locks their ids in one round trip: the
 * grouped multi-lock of group "orders" (Java: getMultiLock("orders", ids) with
 * StringCodec, the same values as UTF-8 text). Another job that shares any id waits;
 * one that shares none runs at once. The watchdog renews the whole hold in one call.
 * Usage: example_group_lock [redis://host:port]   (default redis://127.0.0.1:6379) */
#include <credisson.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */

#define NROWS 100

int main(int argc, char **argv)
{
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    static char ids[NROWS][16];
    const char *values[NROWS];
    for (int i = 0; i < NROWS; i++) {
        snprintf(ids[i], sizeof ids[i], "order-%d", 1000 + i);
        values[i] = ids[i];
    }
    crd_lock *rows = NULL;
    crd_status st = crd_group_lock_new(client, "orders", values, NROWS, &rows);
    if (st == CRD_OK) /* wait up to 10 s for all 100 (all or none); watchdog lease */
        st = crd_lock_acquire(rows, 10000, -1);
    if (st == CRD_OK) {
        printf("holding %d rows of group orders\n", NROWS);
        /* ... update the rows ... */
        st = crd_lock_release(rows);
    }
    report_failure("group lock", st, client);
    crd_lock_free(rows);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
