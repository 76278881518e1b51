/*
 * locked.h -- one read of an int that other threads change under a mutex: the hold
 * recorder's count (holds.c), a gate's value (waiters.c) and test_watchdog's event count
 * are read by test threads while worker or callback threads write them.
 *
 * Header-only, with no Criterion, so that holds.c stays linkable from a soak program.
 */
#ifndef CRDT_LOCKED_H
#define CRDT_LOCKED_H

#include <pthread.h>

/* *v as it stands between a lock and an unlock of mu. */
static inline int crdt_locked_int(pthread_mutex_t *mu, const int *v)
{
    pthread_mutex_lock(mu);
    int value = *v;
    pthread_mutex_unlock(mu);
    return value;
}

#endif /* CRDT_LOCKED_H */
