/*
 * acquire.h -- the acquire state machine (acquire.c), its local queue and deferral
 * (gate.c), seen by its two drivers: the blocking one in acquire.c and the event loop's
 * (loop.c). Nothing below the lock layer sees it. docs/ARCHITECTURE.md ("One blocking
 * acquire") walks through the states.
 */
#ifndef CRD_ACQUIRE_H
#define CRD_ACQUIRE_H

#include "locks.h"

typedef enum crd__acq_state {
    CRD__AS_QUEUE,     /* behind local waiters of the same lock (gate.c): the driver waits */
    CRD__AS_TRY,       /* run the acquire script (first resolving a lost reply) */
    CRD__AS_SUBSCRIBE, /* take the lock's channel before re-trying */
    CRD__AS_WAIT,      /* wait for a wake-up or the end of the slice (the driver waits) */
    CRD__AS_DEFER,     /* this client just released to waiters elsewhere: the driver waits
                          until wake_at before the next TRY (gate.c) */
    CRD__AS_IO,        /* event loop: the acquire is in flight on the engine; its completion
                          notifies the loop fd (acquire.c, crd__aio) */
    CRD__AS_DONE       /* result holds the outcome */
} crd__acq_state;

/* One acquire in progress: everything the waiter algorithm needs between steps. */
typedef struct crd__acquire {
    crd__acq_state state;
    crd_lock *l;
    crd_client *c;
    uint64_t owner;
    char field[CRD__FIELD_MAX];
    size_t flen;
    int64_t lease;
    bool watchdog;
    bool nowait;          /* fair: the try-once form */
    int64_t fair_wait;
    bool want_token;      /* fenced: return the token */
    int64_t token;        /* fenced: the token of the acquire, once TAKEN */
    int64_t wait_ms;      /* as asked: -1 forever, 0 try once */
    int64_t start, deadline;
    bool pending;         /* an acquire's outcome is unknown: read back before resending */
    int64_t pending_sent; /* when that acquire was sent: its lease cannot start earlier */
    bool queued;          /* fair: may have joined the queue */
    crd__sub *sub;
    bool confirmed;
    char *own_channel;    /* fair: "<channel>:<field>", allocated */
    bool last_failed;     /* the last try failed on the connection */
    bool cut;             /* the last (event-loop) try was written on a connection that
                             closed under it */
    bool forgave;         /* one such cut was retried as if nothing had failed */
    int unanswered;       /* the last try was sent and got no answer by its deadline: 1 on a
                             connection that had answered before, 2 on one that never had */
    bool unsent;          /* the last try's deadline passed before it could be sent */
    crd__acq_outcome outcome;
    int64_t hint_ms;
    crd__backoff backoff;
    int64_t wake_at;      /* CRD__AS_WAIT: wait until then (monotonic ms) */
    crd_status result;    /* CRD__AS_DONE */
    bool nonblocking;     /* driven by an event loop (loop.c): never wait inside a step */
    bool watching;        /* the loop polls sub (crd__sub_loop_watch) */
    uint64_t seen_events; /* crd__sub_events(sub) when the loop last looked */
    bool gated;           /* in its lock's local queue (gate.c) */
    bool deferrable;      /* waits out this client's release deferrals (gate.c) */
    bool sub_handed;      /* its subscription went to the next local waiter (gate.c) */
    bool has_cv;          /* gate_cv is initialised */
    bool was_deferred;    /* the next attempt follows a deferral (gate.c learns its use) */
    bool have_pre;        /* the hand-off sent the next attempt: its outcome below */
    bool entered;         /* counted under way in undo.c's registry (crd__settle_enter) */
    crd_status pre_st;
    struct redisReply *pre_reply;
    int64_t pre_sent;
    bool gate_head;       /* first in that queue: the one that talks to Redis (gates->mu) */
    int64_t behind_ms;    /* made head by one that took the lock with this lease (gate.c): it
                             waits for that release instead of trying (0: it tries) */
    struct crd__acquire *gate_next; /* the next in the queue (gates->mu) */
    pthread_cond_t gate_cv; /* blocking driver: signalled when it becomes the head */
    struct crd__aio *aio;   /* CRD__AS_IO: the in-flight acquire (acquire.c) */
} crd__acquire;

/* ---- gate.c: an acquire in its lock's local queue ------------------------------------- */

/* Joins a's lock's local queue at the tail; true when a is the head at once. */
bool crd__gate_join(crd__acquire *a);
/* Leaves the queue; the next waiter becomes the head, inherits a's subscription
 * reference when it has none, and is woken (its condition variable, or the loop fd).
 * took: a leaves holding the lock (the next head then waits for its release). */
void crd__gate_leave(crd__acquire *a, bool took);
/* Whether a is the head now (an event-loop acquire polls this). */
bool crd__gate_is_head(crd__acquire *a);
/* Blocking driver: waits until a is the head, the client closes (CRD_CLOSED) or
 * deadline_ms passes (CRD_TIMEOUT). */
crd_status crd__gate_wait(crd__acquire *a, int64_t deadline_ms);
/* Blocking driver: sleeps until deadline_ms unless the client closes (CRD_CLOSED). */
crd_status crd__gate_sleep(crd__acquire *a, int64_t deadline_ms);
/* After a deferred attempt: used = someone else had taken the lock meanwhile. Eight
 * unused deferrals in a row pause deferring for that name (every 16th release probes). */
void crd__gate_deferral_used(crd__acquire *a, bool used);
/* Until when attempts on a's lock are deferred (monotonic µs; 0 or past: not). */
int64_t crd__gate_deferred_until(crd__acquire *a);

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
