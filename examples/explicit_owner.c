/* explicit_owner.c -- take a lock on one thread and release it on another, with an
 * owner id from crd_owner_new() (thread ids would not match across threads).
 * Usage: example_explicit_owner [redis://host:port] */
#include <credisson.h>
#include <pthread.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */

struct handoff {
    crd_lock *lock;
    uint64_t owner;
    crd_status status;
};

static void *releaser(void *arg)
{
    struct handoff *h = arg;
    h->status = crd_lock_release_owner(h->lock, h->owner);
    return NULL;
}

int main(int argc, char **argv)
{
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    struct handoff h = {NULL, crd_owner_new(), CRD_OK};
    crd_status st = crd_lock_new(client, "example:handoff", &h.lock);
    if (st == CRD_OK)
        st = crd_lock_acquire_owner(h.lock, h.owner, 5000, 30000);
    if (st == CRD_OK) {
        pthread_t t;
        pthread_create(&t, NULL, releaser, &h);
        pthread_join(t, NULL);
        st = h.status;
        printf("acquired on main, released on another thread: %s\n", crd_strerror(st));
    }
    report_failure("lock", st, client);
    crd_lock_free(h.lock);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
