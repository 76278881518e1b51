/* fenced_store.h -- a storage layer that refuses stale writers: the other half of a
 * fenced lock (examples/fenced.c; the test suite uses it too).
 *
 * The store is one small file holding "<token> <value>". A write carries the fencing
 * token its writer drew with crd_lock_acquire_token(); the store accepts it only when
 * the token is at least the largest it has accepted, under an flock() so that two
 * writers cannot interleave. A holder that was paused past its lease (a GC pause,
 * SIGSTOP, a swapped-out VM) while another process took the lock wakes up with an
 * older token, and its write is refused: the lease alone cannot give that guarantee.
 * Header-only, POSIX plus flock() (define _DEFAULT_SOURCE before the first include). */
#ifndef FENCED_STORE_H
#define FENCED_STORE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* 1: written; 0: refused, the store has seen a newer token (*seen is it); -1: I/O error. */
static inline int fenced_store_write(const char *path, int64_t token, const char *value,
                                     int64_t *seen)
{
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        return -1;
    int rc = -1;
    if (flock(fd, LOCK_EX) == 0) {
        char buf[512];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        long long last = 0;
        if (n > 0) {
            buf[n] = '\0';
            sscanf(buf, "%lld", &last);
        }
        *seen = last;
        if (n >= 0 && token < last) {
            rc = 0;
        } else if (n >= 0) {
            int len = snprintf(buf, sizeof buf, "%lld %s\n", (long long)token, value);
            rc = len > 0 && ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)len, 0) == len ? 1
                                                                                          : -1;
        }
        flock(fd, LOCK_UN);
    }
    close(fd);
    return rc;
}

#endif
