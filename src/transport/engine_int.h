/*
 * engine_int.h -- what the engine's files share (engine.c: requests, peers, completion,
 * links, life; engine_pass.c: the I/O thread's pass; engine_call.c: corked submissions,
 * the direct path, waiting callers, the event loop's requests). Private to them.
 */
#ifndef CRD_ENGINE_INT_H
#define CRD_ENGINE_INT_H

#include "transport.h"
#include "link.h"

#include <poll.h>

enum { RQ_NEW, RQ_QUEUED, RQ_INFLIGHT, RQ_DONE };

#define MAX_UNHEALTHY 16 /* unhealthy links kept per peer for their late replies */
#define WAKES_MAX 128    /* wake-ups the I/O thread holds back per pass */
#define PIPE_DEPTH 64    /* replies one link may owe before the next request goes elsewhere */

extern __thread bool crd__eng_on_io_thread;
/* The engine whose submissions this thread holds back (crd__engine_cork), and how deep. */
extern __thread struct crd__engine *crd__eng_corked;
extern __thread int crd__eng_cork_depth;

struct crd__pool {
    crd_client *c;
    const crd__endpoint *ep; /* borrowed; &c->ep for the client's primary */
    crd__req *qhead, *qtail;
    crd__link *links;
    int nlinks;
    crd__link *unhealthy; /* kept open for abandoned requests' replies */
    int nunhealthy;
    int64_t retry_at; /* no connect before this (after a failed one), monotonic ms */
    int64_t backoff_ms;
    crd_status last_st; /* the last connect failure, told to requests during the backoff */
    char last_why[400];
    /* replica sync on a cluster: this node's replicas (ROLE), and when they were read */
    int replicas;
    int64_t replicas_at;
    crd__pool *next;
};

typedef struct crd__engine {
    pthread_mutex_t mu;
    pthread_t thread;
    bool started, stopping;
    int wake_fd;
    bool polling; /* in poll(): a submitter writes the eventfd */
    bool kicked;  /* the eventfd was written since the thread last drained it */
    crd__pool *peers;
    struct pollfd *pfds;
    crd__link **plinks;
    size_t pcap;
    size_t npoll;       /* entries of pfds in the poll() under way (while polling) */
    int64_t poll_until; /* when that poll() returns by itself (0: never) */
    bool held_back;     /* a corked submission queued without waking the thread */
    crd__req *done_head, *done_tail; /* completions to run outside the mutex */
    crd__req *wakes[WAKES_MAX]; /* the I/O thread's wake-ups of waiting threads, made
                                   after it lets go of mu (a woken thread that ran while
                                   it still held mu would find it taken) */
    int nwakes;
    atomic_int callers;    /* threads waiting in crd__engine_call/await */
    atomic_bool draining;  /* crd__engine_stop waits for callers to drop to 0 */
    pthread_cond_t idle;   /* signalled then, under mu */
} crd__engine;

static inline crd__engine *engine_of(crd_client *c) { return c->engine; }

/* Shared by the loop operation and its request's completion (I/O thread): state 0 in
 * flight, 1 answered (the fields below set), 2 the operation went away first. */
struct crd__aio {
    atomic_int state;
    crd_status st;
    redisReply *reply;
    int64_t sent_ms;
    bool tag;
    bool answered; /* told CRD_TIMEOUT on a link that had answered before */
    bool unsent;   /* told CRD_TIMEOUT, never written, its connection still being set up */
    bool cut;      /* CRD_IO: written, and its link closed under it (outcome to on_late) */
    char why[240];
};

/* ---- what one engine file calls in another (e->mu held unless said) ----------------------- */

/* Wakes the I/O thread (an eventfd write, only while it sleeps in poll()). */
void crd__eng_wake(crd__engine *e);
/* Whether l may take a request now (ready, healthy, its primary still the primary). */
bool crd__eng_usable(crd_client *c, const crd__pool *p, const crd__link *l);
/* Takes the request at the head of l's line off it. */
void crd__eng_unlink_head(crd__link *l);
/* Tells on_trace about each command of rq and its reply (or what failed). Runs on the
 * thread that completes rq for its caller, outside the engine's mutex. */
void crd__eng_trace(crd_client *c, const crd__req *rq, crd_status st);
/* Queues rq on its peer and wakes the thread unless it is held back (corked). */
crd_status crd__eng_queue(crd_client *c, crd__engine *e, crd__req *rq);
/* The waiting thread's futex: it sleeps while *w is 0, until deadline_ms (monotonic). */
void crd__eng_park(atomic_int *w, int64_t deadline_ms);
/* A request never written because its deadline passed in the queue: -1 while its peer's
 * connection is merely being set up, 0 (and the last connect failure appended to why) when
 * the peer's last connect failed. Under e->mu. */
int crd__eng_not_sent(const crd__req *rq, char *why, size_t n);
/* l failed after its connect: its requests fail with st, its idle siblings close. */
void crd__eng_link_broke(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                       crd_status st, const char *why);
/* An abandoned request's end (its late reply, or its link's): on_late, or freed. */
void crd__eng_late_done(crd__engine *e, crd__req *rq);
/* How long l may stay quiet while it owes replies: command_timeout_ms, plus the time the
 * WAITs it carries may block the server's answers (a replica-sync WAIT of 1 s on a link
 * with a 500 ms command timeout is not a dead link). */
int64_t crd__eng_health_limit(const crd_client *c, const crd__link *l);
/* Puts rq on link l: its bytes into the write buffer, itself at the end of the replies
 * l owes. */
void crd__eng_assign(crd__engine *e, crd__link *l, crd__req *rq, int64_t now);
/* rq's caller went away while it was written and unanswered (an acquire's job then counts
 * as under way in undo.c's registry until its reply or its link's end reaches on_late). */
void crd__eng_abandon(crd__req *rq);
/* Fails rq, taken from its peer's queue, whose deadline passed before it was written. */
void crd__eng_fail_unsent(crd__engine *e, crd__req *rq);
/* Runs the collected callbacks; called with e->mu held, returns with it held. */
void crd__eng_run_completions(crd_client *c, crd__engine *e);
/* Tells rq's caller st now although rq stays in line for its reply (its deadline passed,
 * or its link became unhealthy); the reply, when it comes, goes to on_late. */
void crd__eng_tell_early(crd__engine *e, crd__req *rq, crd_status st, const char *why);
/* Lets go of e->mu and makes the wake-ups held back meanwhile. */
void crd__eng_unlock_and_wake(crd__engine *e);
/* A link failed during its connect or handshake: nothing of the requests was sent. */
void crd__eng_connect_failed(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                           crd_status st, const char *why, int64_t now);
/* Fails every request l owes with st (they were sent: they may have run), closes it. */
void crd__eng_drop_link(crd__engine *e, crd__link *l, crd_status st, const char *why);
/* Opens link l of peer p; false when it failed at once (queued requests failed). */
bool crd__eng_open_link(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l, int64_t now);
/* Advances l with revents; false when it was closed. */
bool crd__eng_service_link(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                         short revents, int64_t now);
/* The I/O thread: the answer (or an early CRD_TIMEOUT, the reply then going to on_late).
 * A link that broke under it leaves the outcome unknown: on_late (undo.c) reads it back,
 * and the operation is told CRD_IO. */
void crd__eng_aio_done(crd_client *c, crd__req *rq);
/* Fails the peer's queued requests that may not wait for a later connect. */
void crd__eng_fail_queue(crd__engine *e, crd__pool *p, crd_status st, const char *why);
/* Ends rq with st and why (its caller is told, or its completion collected). */
void crd__eng_fail(crd__engine *e, crd__req *rq, crd_status st, const char *why);
/* Ends rq answered: its waiting caller is woken, or its completion collected. */
void crd__eng_complete(crd__engine *e, crd__req *rq);

#endif /* CRD_ENGINE_INT_H */
