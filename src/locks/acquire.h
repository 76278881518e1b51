/*
 * acquire.h -- the acquire machine's calls (acquire.c): seen by acquire.c's two drivers
 * (the blocking call and the event loop's operation) and the unit tests; the machine's
 * record and the local queue's calls on it are in waiter.h.
 */
#ifndef CRD_ACQUIRE_H
#define CRD_ACQUIRE_H

#include "waiter.h"

/* Checks the arguments and prepares a; state CRD__AS_DONE with a->result set when they
 * are refused. */
void crd__acquire_begin(crd__acquire *a, crd_lock *l, uint64_t owner, int64_t wait_ms,
                        int64_t lease_ms);
/* Counts a begun acquire as under way for undo.c (crd__settle_enter); park: a blocking
 * acquire first waits out a read-back of this owner's lost acquire of the same lock. */
void crd__acquire_enter(crd__acquire *a, bool park);
/* Joins the lock's local queue (gate.c) when the acquire may wait on an exclusive kind
 * and is not a re-entry; state CRD__AS_QUEUE when others are ahead. After begin (and
 * after nonblocking is set). */
void crd__acquire_enqueue(crd__acquire *a);
/* Runs the current state's work and moves to the next state. */
void crd__acquire_step(crd__acquire *a);
/* The driver's report after a CRD__AS_WAIT: woken (CRD_OK), slice over (CRD_TIMEOUT) or
 * CRD_CLOSED; confirmed is the subscription's state now. */
void crd__acquire_woken(crd__acquire *a, crd_status w, bool confirmed);
/* Whether the next step of a non-blocking acquire needs a blocking call (crd__call: a
 * cluster's or Sentinel's hops, replica sync, a read-back): the loop runs it on its helper
 * thread. */
bool crd__acquire_blocks(const crd__acquire *a);
/* Ends an acquire that is not done with st (CRD_CANCELLED, CRD_CLOSED): it leaves its
 * subscription and, for a fair lock, the queue. */
void crd__acquire_cancel(crd__acquire *a, crd_status st);

#endif /* CRD_ACQUIRE_H */
