/* run_under_lock.c -- crd_lock_run(): acquire, call a function, release, report both.
 * Usage: example_run_under_lock [redis://host:port] */
#include <credisson.h>
#include <stdio.h>

static int job(void *arg)
{
    int *runs = arg;
    ++*runs;
    printf("job ran under the lock (%d)\n", *runs);
    return 0;
}

int main(int argc, char **argv)
{
    crd_options opts;
    crd_options_init(&opts);
    opts.url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    crd_client *client;
    crd_status st = crd_client_new(&opts, &client);
    crd_lock *lock = NULL;
    int runs = 0, rc = -1;
    if (st == CRD_OK)
        st = crd_lock_new(client, "example:run", &lock);
    if (st == CRD_OK)
        st = crd_lock_run(lock, 5000, 60000, job, &runs, &rc); /* 60 s lease, no watchdog */
    if (st != CRD_OK)
        fprintf(stderr, "%s: %s\n", crd_strerror(st), crd_client_errmsg(client));
    crd_lock_free(lock);
    crd_client_free(client);
    return st == CRD_OK && rc == 0 ? 0 : 1;
}
