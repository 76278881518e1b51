/*
 * engine.h -- the engine layer: every command connection of a client, pipelined on
 * non-blocking sockets driven by one I/O thread per client. Seen by script.c (the call
 * path), route.c and the watchdog; the layers below it (link.c, tls.c) are private to
 * engine.c. docs/ARCHITECTURE.md ("The engine") draws it.
 *
 * A request is one or more commands in RESP form for one peer (a server, or a cluster
 * node: crd__pool), with the caller's deadline. It is queued on its peer, written with
 * whatever else is queued there in one write on one of the peer's links (at most
 * opts.links_per_node, default 2), and its replies are matched in order. The caller either
 * waits for it (crd__engine_call: a blocking thread, bounded by the deadline) or gives a
 * completion (crd__engine_submit with on_done: runs on the I/O thread, never under the
 * engine's mutex).
 *
 * What a late reply becomes: a request whose caller stopped waiting (its deadline passed)
 * after it was written stays in its link's reply queue, "abandoned"; when its reply comes
 * the engine calls its on_late (an acquire's: give the hold back if it was taken,
 * undo.c); when its link dies first, on_late runs with CRD_IO (outcome unknown: undo.c
 * reads the field back once the node answers). A link that has had no reply for
 * command_timeout_ms is declared unhealthy: it takes no new request, and it stays open
 * only while an abandoned request on it still waits for its reply (a stalled server runs
 * what is in its socket buffer when it resumes: that reply must be seen).
 */
#ifndef CRD_ENGINE_H
#define CRD_ENGINE_H

#include "transport.h"

typedef struct crd__req crd__req;
typedef void (*crd__req_fn)(crd_client *c, crd__req *rq);

struct crd__req {
    crd__pool *peer;
    char *buf; /* the commands, RESP */
    size_t len, cap;
    int nreply, got;
    redisReply **replies; /* nreply entries; the inline array when nreply <= 2 */
    redisReply *inline_replies[2];
    int64_t deadline_ms; /* monotonic; 0: the command timeout from submission */
    int64_t sent_ms;     /* when its bytes went to a link (0: never) */
    crd_status st;       /* CRD_OK (replies in place), CRD_TIMEOUT, CRD_IO, CRD_AUTH */
    char why[240];       /* what failed, in words */
    uint64_t topo_gen;   /* the primary generation of the link that carried it */
    uint64_t want_gen;   /* Sentinel mode, with a WAIT: the primary generation it was built
                            for (the WAIT counts that primary's replicas). A link of another
                            generation does not take it: it fails CRD_IO, never sent
                            (sent_ms 0), and its caller builds it again. 0: any link */
    int64_t blocks_ms;   /* a WAIT in it may keep the server quiet this long (replica
                            sync): its link's health limit grows by as much */
    bool asked_replicas; /* engine use */
    /* Completion on the I/O thread (NULL: a waiting thread, crd__engine_call). The engine
     * frees the request after it returns; a callback that keeps a reply sets its slot
     * to NULL. */
    crd__req_fn on_done;
    /* A late reply (st CRD_OK) or the loss of its link (st CRD_IO) after the caller gave
     * up; runs on the I/O thread. */
    crd__req_fn on_late;
    /* The caller went away while it was written and unanswered (its reply now goes to
     * on_late): called with arg, under the engine's mutex; may take holds->mu only. */
    void (*on_abandon)(void *arg);
    void *arg;                 /* for on_late (and on_done when done_arg is NULL) */
    void *done_arg;            /* for on_done, when it needs its own */
    void (*arg_free)(void *);  /* frees arg with the request (NULL: not owned) */
    /* engine state, under the engine's mutex */
    int state;
    bool abandoned;
    bool retry;                /* async: wait through reconnects until the deadline */
    bool waited;               /* a thread waits for it (crd__engine_call/await) */
    atomic_int fin;            /* the waiting thread's wake-up word (a futex): 0 while it
                                  waits, 1 done (the thread takes it without the engine's
                                  mutex; the engine no longer touches it but to wake it),
                                  2 look (it was told early: decided under the mutex) */
    atomic_int refs;           /* 1, and 1 more while a wake-up of its word is on its way:
                                  crd__req_free frees it when the last one lets go */
    bool notified;             /* its caller was told early (deadline, unhealthy link) */
    bool lent;                 /* on a link lent to its waiting thread (the direct path) */
    bool caller_left;          /* a waited-for request's caller left wait_for without it: the
                                  engine's now (until then its caller takes it, even one told
                                  early whose reply comes before the caller wakes) */
    bool link_answered;        /* when told early: its link had answered before (a known-good
                                  connection that went quiet, not one that never worked) */
    bool unsent;               /* failed CRD_TIMEOUT never written: its deadline passed in the
                                  queue while its peer's connection was being set up (not
                                  after a failed connect) */
    crd__req *next;            /* the peer's queue, or the link's reply queue */
    crd__req *done_next;       /* the completions list */
    struct crd__link *link;
};

/* A request for peer with room for nreply replies; NULL when out of memory. */
crd__req *crd__req_new(crd__pool *peer, int nreply);
/* Appends one command (argv with lengths) in RESP; false when out of memory. */
bool crd__req_add(crd__req *rq, int argc, const char *const *argv, const size_t *lens);
void crd__req_free(crd__req *rq);

/* script.c: whether the event loop's commands can go out as single requests (a standalone
 * client without replica sync); otherwise they step through crd__call, bounded by their
 * deadlines. */
bool crd__call_async_ok(crd_client *c);
/* script.c: the request of one plain attempt of cmd (EVALSHA, or EVAL when eval) to the
 * peer of its key, with cmd's deadline and undo; NULL when out of memory or no peer. */
crd__req *crd__call_request(crd_client *c, crd__cmd *cmd, bool eval);
/* Marks rq as one a thread will wait for (crd__engine_await) once another submits it. */
void crd__engine_prepare_wait(crd__req *rq);

/* Starts the client's I/O thread (crd_client_new). */
crd_status crd__engine_start(crd_client *c);
/* Stops and joins it; every request still queued or waited for completes with
 * CRD_CLOSED. The peers stay allocated (crd__pool_free frees them). */
void crd__engine_stop(crd_client *c);
void crd__engine_free(crd_client *c);

/* Queues rq (its completion is on_done on the I/O thread). CRD_CLOSED when the client
 * is closing (rq is then freed). Any thread; never blocks on the network. */
crd_status crd__engine_submit(crd_client *c, crd__req *rq);
/* Holds back the I/O thread's wake-ups for what this thread submits (crd__engine_submit)
 * until the matching crd__engine_uncork, which writes the lot from this thread in one send
 * per link when the I/O thread sleeps in poll() (its poll then reads the replies), or
 * wakes it. The event loop's dispatch pass: the operations it steps submit one command
 * each, and go out together. Nests; never blocks on the network. */
void crd__engine_cork(crd_client *c);
void crd__engine_uncork(crd_client *c);
/* Queues rq and waits for it until its deadline (when the peer has nothing queued and an
 * idle link, the calling thread writes rq and reads its reply itself on that link, lent
 * to it by the I/O thread: the direct path; the outcome rules are the same). On CRD_OK
 * the replies are moved to out[0..nreply-1] (the caller frees them). On CRD_TIMEOUT or
 * CRD_IO *sent_ms says whether it was written (0: not: it never runs); *handed_over is
 * nonzero when the engine now owns its outcome (rq->on_late will see the late reply): the
 * caller must not read it back; 1 when its connection had answered before (Redis went
 * quiet), 2 when it never had; -1 when it was never written because its deadline passed
 * while it waited in the queue (no connection was ready in time). rq is always consumed. */
crd_status crd__engine_call(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
                            int *handed_over);
/* Submits rq (crd__engine_prepare_wait done) for the thread that will await it (the
 * hand-off): on an idle link it is written at once by the calling thread, and the link is
 * lent to the awaiting thread, which reads the reply itself (no I/O thread hop on either
 * side); otherwise as crd__engine_submit. Never blocks on the network. */
crd_status crd__engine_submit_lent(crd_client *c, crd__req *rq);
/* The same for a request some other thread submitted (the hand-off). */
crd_status crd__engine_await(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
                             int *handed_over);

/* The event loop's requests (acquire.c, loop.c): submitted without a waiting thread; the
 * completion writes the loop fd, and dispatch takes the answer. */
typedef struct crd__aio crd__aio;
/* Submits rq (its on_done is the engine's); NULL when refused (rq freed). tag is handed
 * back by crd__aio_take (e.g. "this was the EVAL"). */
crd__aio *crd__aio_submit(crd_client *c, crd__req *rq, bool tag);
/* Whether the answer came. */
bool crd__aio_ready(crd__aio *io);
/* (After crd__aio_ready) whether it was sent and got no answer by its deadline: 1 on a
 * connection that had answered before, 2 on one that never had; 0: not so. */
int crd__aio_unanswered(const crd__aio *io);
/* (After crd__aio_ready) whether it was never written because its deadline passed while
 * its peer's connection was being set up: nothing failed, the time ran out. */
bool crd__aio_unsent(const crd__aio *io);
/* (After crd__aio_ready) whether it was written and its connection closed under it (its
 * outcome went to rq->on_late: read back once the node answers). */
bool crd__aio_cut(const crd__aio *io);
/* The answer (after crd__aio_ready); frees io. CRD_OK: *reply (the caller frees it);
 * otherwise CRD_IO with the detail set (a lost link's outcome went to rq->on_late). */
crd_status crd__aio_take(crd_client *c, crd__aio *io, redisReply **reply, int64_t *sent_ms,
                         bool *tag);
/* The operation went away first: returns the reply if it had come (the caller frees it),
 * else NULL (the completion then gives the reply to rq->on_late, or drops it). */
redisReply *crd__aio_drop(crd__aio *io);

/* Fork: the prepare handler holds the engine's mutex; the child forgets the parent's
 * thread, sockets and requests (kept reachable, never touched) and starts afresh. */
void crd__engine_lock_for_fork(crd_client *c, bool lock);
void crd__engine_after_fork_child(crd_client *c);

/* Metrics the engine keeps (connections per peer). */
int crd__engine_links(crd_client *c);

#endif
