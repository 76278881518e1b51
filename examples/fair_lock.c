/* fair_lock.c -- a fair lock: waiters, in any process or language, get it in the order
 * they asked; each waiter is woken alone by a message on its own channel.
 * Usage: example_fair_lock [redis://host:port] */
#include <credisson.h>
#include <pthread.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */

static crd_client *client;

static void *worker(void *arg)
{
    long id = (long)arg;
    crd_lock *lock;
    crd_status st = crd_fair_lock_new(client, "example:fair", &lock);
    if (st == CRD_OK)
        st = crd_lock_acquire(lock, 10000, 30000); /* wait <= 10 s (announced to the queue) */
    if (st == CRD_OK) {
        printf("worker %ld has the fair lock\n", id);
        st = crd_lock_release(lock);
    }
    if (st != CRD_OK)
        fprintf(stderr, "worker %ld: %s: %s\n", id, crd_strerror(st), crd_client_errmsg(client));
    crd_lock_free(lock);
    return NULL;
}

int main(int argc, char **argv)
{
    crd_options opts;
    crd_options_init(&opts);
    opts.fair_wait_timeout_ms = 300000; /* must match the Java fleet's fairLockWaitTimeout */
    client = connect_client(argc, argv, &opts);
    if (client == NULL)
        return 1;
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    crd_client_free(client);
    return 0;
}
