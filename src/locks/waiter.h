/*
 * waiter.h -- what the acquire machine (acquire.c) and the local queue (gate.c) share: the
 * machine's states and the record of one acquire in progress, and the queue's calls on
 * it. acquire.h adds the machine's own calls. Private to the locks layer.
 * docs/ARCHITECTURE.md ("One blocking acquire") walks through the states.
 */
#ifndef CRD_WAITER_H
#define CRD_WAITER_H

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
    bool defer_sub;       /* subscribing for a counted deferral (back to DEFER after it) */
    bool defer_timed_out; /* the counted deferral's last wait ended without a message */
    int turns;            /* counted deferral: releases still to let pass (-1: timed) */
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
    crd__ident_wait iw;     /* blocking driver: this wait in the identity record (ident.c),
                               ended by finish() while the client is still there */
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
/* Until when attempts on a's lock are deferred (monotonic µs; 0 or past: not), and how
 * many subscribers of other clients the release that deferred them reached. */
int64_t crd__gate_deferred_until(crd__acquire *a, int *others);

#endif /* CRD_WAITER_H */
