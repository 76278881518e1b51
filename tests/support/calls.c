/*
 * calls.c -- a blocking call on a thread of its own (see calls.h). What fn writes is
 * published to the test by the gate's mutex: the test reads it after the gate says 1.
 */
#include "calls.h"

#include <criterion/criterion.h>

static void *call_main(void *arg)
{
    crdt_call *c = arg;
    c->fn(c->arg);
    crdt_gate_set(&c->returned, 1);
    return NULL;
}

void crdt_call_start(crdt_call *c, void (*fn)(void *arg), void *arg)
{
    c->fn = fn;
    c->arg = arg;
    crdt_gate_init(&c->returned);
    cr_assert_eq(pthread_create(&c->th, NULL, call_main, c), 0, "cannot start a call's thread");
}

bool crdt_call_returned(crdt_call *c)
{
    return crdt_gate_value(&c->returned) >= 1;
}

bool crdt_call_wait(crdt_call *c, int64_t timeout_ms)
{
    return crdt_gate_wait(&c->returned, 1, timeout_ms);
}

void crdt_call_join(crdt_call *c)
{
    pthread_join(c->th, NULL);
    crdt_gate_destroy(&c->returned);
}
