/* explicit_owner.c -- take a lock on one thread and release it on another, with an
 * owner id from crd_owner_new() (thread ids would not match across threads).
 * Usage: example_explicit_owner [redis://host:port] */
#include <credisson.h>
#include <pthread.h>
#include <stdio.h>

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
    crd_options opts;
    crd_options_init(&opts);
    opts.url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    crd_client *client;
    crd_status st = crd_client_new(&opts, &client);
    struct handoff h = {NULL, crd_owner_new(), CRD_OK};
    if (st == CRD_OK)
        st = crd_lock_new(client, "example:handoff", &h.lock);
    if (st == CRD_OK)
        st = crd_lock_acquire_owner(h.lock, h.owner, 5000, 30000);
    if (st == CRD_OK) {
        pthread_t t;
        pthread_create(&t, NULL, releaser, &h);
        pthread_join(t, NULL);
        st = h.status;
        printf("acquired on main, released on another thread: %s\n", crd_strerror(st));
    }
    if (st != CRD_OK)
        fprintf(stderr, "%s: %s\n", crd_strerror(st), crd_client_errmsg(client));
    crd_lock_free(h.lock);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
