/* fenced.c -- a fenced lock and a store that refuses stale writers (examples/fenced_store.h).
 * Usage: example_fenced [redis://host:port] [STORE_FILE]
 *
 * Takes the fenced lock "ledger" (Redisson getFencedLock("ledger")), draws a token, and
 * writes through the store with it. Run two copies and SIGSTOP one while it holds the
 * lock past its lease: the other takes the lock with a larger token, and the stopped
 * one's write is refused when it wakes. */
#define _DEFAULT_SOURCE /* flock, pread, pwrite, ftruncate */
#include <credisson.h>
#include <stdio.h>

#include "example.h" /* connect_client, report_failure */
#include "fenced_store.h"

int main(int argc, char **argv)
{
    const char *store = argc > 2 ? argv[2] : "/tmp/credisson-ledger.txt";
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    crd_lock *lock;
    int64_t token = 0;
    crd_status st = crd_fenced_lock_new(client, "ledger", &lock);
    if (st == CRD_OK)
        st = crd_lock_acquire_token(lock, 10000, 5000, &token); /* a 5 s lease */
    int rc = 1;
    if (st == CRD_OK) {
        /* ... work; if this process stalls past the lease, another may hold the lock ... */
        int64_t seen = 0;
        int w = fenced_store_write(store, token, "hello from C", &seen);
        if (w == 1)
            printf("wrote with token %lld\n", (long long)token);
        else if (w == 0)
            printf("refused: token %lld is older than %lld\n", (long long)token,
                   (long long)seen);
        rc = w == 1 ? 0 : 2;
        st = crd_lock_release(lock);
    }
    report_failure("lock", st, client);
    crd_lock_free(lock);
    crd_client_free(client);
    return st == CRD_OK ? rc : 1;
}
