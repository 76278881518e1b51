/*
 * wait.h -- the rules every waiter of the library shares (wait.c): how a wait's
 * wait_ms becomes its deadline, and how long a waiter sleeps before its next attempt
 * (the slice). The lock's acquire machine (acquire.c) and the synchronizers' (sync.c)
 * decide with these and nothing else, so a semaphore's wait ends when a lock's would,
 * and a kind that waits another way (a back-off without a channel, a delay the server
 * names) is a value of crd__wait_how, not a flag in either machine.
 *
 * Pure functions; any thread.
 */
#ifndef CRD_WAIT_H
#define CRD_WAIT_H

#include <stdbool.h>
#include <stdint.h>

/* How a kind's waiter learns that it may try again. */
typedef enum crd__wait_how {
    CRD__WAIT_CHANNEL,     /* a message on the object's channel (RLock, RSemaphore, ...) */
    CRD__WAIT_OWN_CHANNEL, /* a message on the waiter's own channel (the fair lock) */
    CRD__WAIT_BACKOFF,     /* no channel: it tries again after a back-off (the spin lock) */
    CRD__WAIT_DELAY        /* no channel: the server says when to try (the rate limiter) */
} crd__wait_how;

/* Why the last attempt did not succeed, as far as the slice is concerned. */
typedef enum crd__busy {
    CRD__BUSY_TTL,     /* taken until hint_ms from now at the latest (a holder's TTL, a
                          permit's lease, the server's delay), or until a message */
    CRD__BUSY_NO_TTL,  /* taken by something that never expires (a lock hash without
                          TTL): a message, or a re-check every poll interval */
    CRD__BUSY_TURN,    /* free, but another waiter's turn (fair): a short back-off */
    CRD__BUSY_MESSAGE  /* only a message frees it (a semaphore's permits, a latch) */
} crd__busy;

/* The inputs of one decision. */
typedef struct crd__slice_in {
    bool failed;        /* the last attempt failed on the connection */
    bool confirmed;     /* the subscription is live (kinds with a channel) */
    crd__busy busy;     /* when it did not fail */
    int64_t hint_ms;    /* CRD__BUSY_TTL's */
    int64_t poll_ms, max_slice_ms; /* the client's options */
    crd__wait_how how;
} crd__slice_in;

/* What a waiter carries between decisions. */
typedef struct crd__backoff {
    int64_t io_ms;   /* after a failure: 25 ms doubling to the poll interval */
    int64_t fair_ms; /* fair, not my turn: 4 ms doubling to the poll interval */
} crd__backoff;

void crd__backoff_init(crd__backoff *b);
/* The slice in ms (>= 1; INT64_MAX: until a message or the deadline) for one decision;
 * updates the back-offs. */
int64_t crd__wait_slice(const crd__slice_in *in, crd__backoff *b);
/* When a slice of slice ms that starts at now ends, by deadline at the latest; one ms
 * over the slice itself: a TTL is read in whole ms, and waking just before it ends would
 * cost a useless attempt. */
int64_t crd__wait_until(int64_t now, int64_t slice, int64_t deadline);
/* The deadline (monotonic ms) of a wait of wait_ms (-1: forever, INT64_MAX) that starts
 * at start: one ms over, since the clock is read in whole ms and a wait never ends before
 * wait_ms has passed. */
int64_t crd__wait_deadline(int64_t start, int64_t wait_ms);

#endif /* CRD_WAIT_H */
