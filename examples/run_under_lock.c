/* run_under_lock.c -- crd_lock_run(): acquire, call a function, release, report both.
 * Usage: example_run_under_lock [redis://host:port] */
#include <credisson.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */

static int job(void *arg)
{
    int *runs = arg;
    ++*runs;
    printf("job ran under the lock (%d)\n", *runs);
    return 0;
}

int main(int argc, char **argv)
{
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    crd_lock *lock = NULL;
    int runs = 0, rc = -1;
    crd_status st = crd_lock_new(client, "example:run", &lock);
    if (st == CRD_OK)
        st = crd_lock_run(lock, 5000, 60000, job, &runs, &rc); /* 60 s lease, no watchdog */
    report_failure("lock", st, client);
    crd_lock_free(lock);
    crd_client_free(client);
    return st == CRD_OK && rc == 0 ? 0 : 1;
}
