/*
 * holds.h -- a hold recorder and overlap checker for the partition suite
 * (tests/test_partition.c), in the manner of a Jepsen lock checker.
 *
 * Every client of a scenario records each hold it had as an interval on
 * CLOCK_MONOTONIC: [the time crd_lock_acquire returned CRD_OK, the end of its trust],
 * the end being the earlier of the time its release was sent and its validity deadline
 * (the last time it read crd_lock_validity_ms plus what that returned). Within that
 * interval the client believed it was the only holder; two intervals of different
 * clients on one name that intersect are an overlap: mutual exclusion broke.
 *
 * No Criterion here (plain returns), so a soak program could link it too. Thread-safe:
 * one mutex per recorder.
 */
#ifndef CRDT_HOLDS_H
#define CRDT_HOLDS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct crdt_holds crdt_holds;

typedef struct crdt_hold {
    int client;        /* who held: any number the scenario gives its clients */
    char name[256];    /* the lock name (longer names are cut: keep them shorter) */
    int64_t start_ns;  /* acquire returned */
    int64_t end_ns;    /* min(release sent, validity deadline) */
} crdt_hold;

crdt_holds *crdt_holds_new(void);
void crdt_holds_free(crdt_holds *h);
/* Record one hold; end_ns < start_ns is stored as an empty hold (start). */
void crdt_holds_add(crdt_holds *h, int client, const char *name, int64_t start_ns,
                    int64_t end_ns);
/* Number of holds recorded. */
int crdt_holds_count(crdt_holds *h);
/* Number of pairs of holds of one name, by different clients, whose intervals
 * intersect (touching ends do not count). When first is not NULL the first such pair
 * found is copied into first[0] and first[1]. */
int crdt_holds_overlaps(crdt_holds *h, crdt_hold first[2]);

#endif /* CRDT_HOLDS_H */
