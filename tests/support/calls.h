/*
 * calls.h -- crdt_call: one blocking library call run on a thread of its own, so that a
 * test goes on while the call waits (the golden suites' async steps: an acquire that
 * blocks until a later step releases).
 *
 * The test starts it with a function and its argument; the function makes the call and
 * writes what it got into that argument. The test then asks whether it has returned, or
 * waits for it with a deadline (a crdt_gate: a condition variable, never a sleep loop), and
 * reads the result only after that; it joins the thread at the end. Start asserts with
 * Criterion (call it from a test); the thread runs the function only.
 */
#ifndef CRDT_CALLS_H
#define CRDT_CALLS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "waiters.h"

typedef struct crdt_call {
    void (*fn)(void *arg);
    void *arg;
    crdt_gate returned; /* 1 once fn has returned */
    pthread_t th;
} crdt_call;

/* Runs fn(arg) on a new thread (its creation asserted). */
void crdt_call_start(crdt_call *c, void (*fn)(void *arg), void *arg);
/* Whether fn has returned (does not wait). */
bool crdt_call_returned(crdt_call *c);
/* Waits up to timeout_ms for fn to return; whether it did. */
bool crdt_call_wait(crdt_call *c, int64_t timeout_ms);
/* Joins the thread (waiting as long as fn runs) and destroys the gate. */
void crdt_call_join(crdt_call *c);

#endif /* CRDT_CALLS_H */
