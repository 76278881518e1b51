/* latch.c -- wait until 3 workers (C or Java: getCountDownLatch("batch-ready")) have
 * each counted down once, then go on. Run it, then count down three times, e.g. with
 * `credisson latch count-down batch-ready`.
 * Usage: example_latch [redis://host:port]   (default redis://127.0.0.1:6379) */
#include <credisson.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */

int main(int argc, char **argv)
{
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    crd_latch *latch;
    crd_status st = crd_latch_new(client, "batch-ready", &latch);
    if (st == CRD_OK)
        st = crd_latch_try_set_count(latch, 3, NULL); /* unless someone set it already */
    if (st == CRD_OK)
        st = crd_latch_await(latch, 60000); /* woken by the last count-down */
    if (st == CRD_OK)
        printf("batch-ready reached zero\n");
    report_failure("latch", st, client);
    crd_latch_free(latch);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
