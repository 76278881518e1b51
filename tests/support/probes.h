/*
 * probes.h -- crdt_wait_until predicates that several suites wait on (the CLI, inspection
 * and lock suites): each takes a crdt_probe (harness.h) and reads only the members its
 * comment names; a file predicate takes the path itself. Then the checks that more than
 * one of those suites asserts in the same words.
 *
 * A read through the library that fails says false (the caller's deadline decides); a
 * command to the server asserts as crdt_cmd does.
 */
#ifndef CRDT_PROBES_H
#define CRDT_PROBES_H

#include <stdbool.h>

#include "harness.h"

/* r, name, n: EXISTS name answers n (0: the key is gone, 1: it is there). */
bool crdt_key_exists_is(void *probe);
/* r, name, n: LLEN name answers n. */
bool crdt_list_len_is(void *probe);
/* r, name: the channel name has a subscriber (PUBSUB NUMSUB). */
bool crdt_channel_subscribed(void *probe);
/* c, name: crd_state_read on c lists name's first holder as known, with the time it
 * acquired (its identity record has the hold). */
bool crdt_holder_since_known(void *probe);
/* c, n: at least n of c's threads are asleep in a blocking wait (crd_metrics.waiting_now). */
bool crdt_client_waiting(void *probe);
/* name (a path), n: the file holds at least n '\n'-terminated lines. */
bool crdt_file_lines_reach(void *probe);

/* path (a const char *): the file exists. */
bool crdt_file_there(void *path);
/* path (a const char *): the file exists and is not empty. */
bool crdt_file_filled(void *path);

/* Extends f->la (held) to lease_ms and asserts it took: the key's PTTL is above floor_ms
 * (the lease before: the extend moved it) and at most lease_ms, and the handle's validity
 * is within a second of lease_ms. */
void crdt_assert_extended(const crdt_fixture *f, int64_t lease_ms, long long floor_ms);

#endif /* CRDT_PROBES_H */
