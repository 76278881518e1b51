/*
 * pubsub_int.h -- what the subscriber's two files share (pubsub.c: the subscriber thread,
 * its connections and the entries' life; pubsub_wait.c: the waiters' side, watched holds,
 * the event loop's hooks). Private to them.
 */
#ifndef CRD_PUBSUB_INT_H
#define CRD_PUBSUB_INT_H

#include "wait.h"

#include <string.h>
#include <unistd.h>

/* After a hand-off the entry stays subscribed at most this many ms with no reference,
 * then this thread looks at it unasked; the holder's release ends it sooner. */
#define HANDOFF_LOOK_MS 2

struct sublink;

struct crd__sub {
    char *channel;
    size_t len;
    int refs;          /* references held by waiters */
    int watch_refs;    /* holds watched for a prompt loss (prompt_loss_detection) */
    bool check;        /* a message came while watched: the watchdog checks the holds */
    crd__handoff *handoff; /* a lone waiter's prepared acquire (crd__sub_arm) */
    int loop_refs;     /* of those, event-loop operations (they poll permits in dispatch) */
    atomic_uint_fast64_t events; /* wake-ups and confirmations so far: a loop operation
                                    skips the mutex while this has not moved */
    int64_t permits;   /* wake-ups not yet consumed */
    int64_t need;      /* a counted turn waits for this many releases (crd__sub_wait_turns):
                          the subscriber thread lets them add up before it wakes it */
    int wake_rule;     /* what a message means for its waiters: CRD__WAKE_* (internal.h) */
    bool subscribed;   /* confirmed on its link's current connection */
    bool inflight;     /* (S)SUBSCRIBE or (S)UNSUBSCRIBE sent, confirmation pending */
    bool unsubscribing; /* the one in flight is an UNSUBSCRIBE: not live any more */
    bool stale;        /* joined while lingering: what it hears is from before its waiter
                          (not live until subscribed afresh) */
    bool resubscribe;  /* the UNSUBSCRIBE in flight has a SUBSCRIBE behind it */
    bool recheck;      /* wake everyone once resubscribed (a message may be lost) */
    struct sublink *link; /* where it is subscribed or being subscribed (NULL: nowhere) */
    int64_t retry_at;  /* after a refused SUBSCRIBE: not again before this (monotonic ms) */
    /* The node whose pushed SUNSUBSCRIBE dropped the channel (its slot moved away), the
     * map's stale mark that push made, and when (monotonic ms): not subscribed there
     * again on a map read before it (sync_entries). */
    crd__node *dropped_by;
    uint64_t drop_mark;
    int64_t dropped_at;
    int64_t look_at;   /* after a hand-off: kept subscribed until then with no reference,
                          then looked at unasked (monotonic ms; 0: not due) */
    bool kept;         /* lingering through this client's own release, for its next turn
                          (crd__sub_keep_linger): what it hears after that release's own
                          message are releases elsewhere, counted in permits */
    int own_skip;      /* this client's own unlock messages still to come on it: dropped */
    pthread_cond_t cv;
    struct crd__sub *next;
};

/* One subscriber connection: the classic one (node NULL: the client's endpoint, or any
 * cluster node, since classic messages are broadcast to every node), or in sharded
 * cluster mode one per primary that owns channels with waiters. Links are created
 * under ps->mu and freed only when the subscriber stops; their connections are touched
 * by the subscriber thread alone. */
typedef struct sublink {
    crd__node *node;
    crd__conn conn;
    bool wanted;      /* an entry waits for this link to connect */
    int backoff;      /* ms before the next connect attempt after a failure */
    int64_t retry_at; /* no connect attempt before this */
    unsigned opened;  /* connections opened so far (a reopen is logged) */
    char *out;        /* (UN)SUBSCRIBEs encoded under ps->mu, sent after it is released
                         through the connection's transport (plain or TLS) */
    size_t out_len, out_cap;
    /* Writes to conn, and closing it, happen under wmu (a leaf, never with ps->mu): the
     * thread's flush and a last waiter's own UNSUBSCRIBE (leave_direct). open says (under
     * wmu) that conn is connected; gen counts the connections closed; rest holds what a
     * waiter's send() left unsent, sent first. */
    pthread_mutex_t wmu;
    bool open;
    atomic_uint gen;
    char *rest;
    size_t rest_len;
    int64_t owed_since; /* a confirmation is owed since (0: none): a link that owes one
                           for command_timeout_ms is given up (health_check) */
    struct sublink *next;
} sublink;

struct crd__pubsub {
    pthread_mutex_t mu;
    pthread_cond_t idle_cv; /* signalled when total_refs drops to 0 */
    crd__sub *subs;
    crd__sub *quiet; /* waiters' entries without a channel (crd__sub_quiet): never
                        subscribed, woken only by the client's end and interrupts */
    int total_refs;
    int pipe_fd[2];
    pthread_t thread;
    bool thread_started;
    bool stop;
    sublink *links; /* see struct sublink; a forked child abandons their connections */
    int loop_fd;    /* eventfd of the event-loop API (loop.c), -1 until first asked for */
    /* loop_fd was written and the loop has not drained it since: further notices need no
     * write (crd__pubsub_loop_drain explains the order that makes this safe). */
    atomic_bool loop_signalled;
};


/* The UNSUBSCRIBE of an entry nobody wants any more, written by the thread that let it
 * go (leave_direct), outside ps->mu. */
typedef struct leaving {
    sublink *l;      /* NULL: nothing to write (the subscriber thread was woken instead) */
    unsigned gen;    /* l's connection when it was decided */
    char buf[256];
    char *cmd;       /* buf, or allocated for a long channel */
    size_t len;
} leaving;

/* Wakes the subscriber thread (its self-pipe; a full pipe already holds a wake-up). */
static inline void poke(crd__pubsub *ps)
{
    char b = 1;
    ssize_t n = write(ps->pipe_fd[1], &b, 1);
    (void)n; /* a full pipe already holds a wake-up */
}

/* The entry of channel ch, or NULL. Caller holds ps->mu. */
static inline crd__sub *find(crd__pubsub *ps, const char *ch, size_t len)
{
    for (crd__sub *s = ps->subs; s != NULL; s = s->next)
        if (s->len == len && memcmp(s->channel, ch, len) == 0)
            return s;
    return NULL;
}

/* A message published now will reach this entry. */
static inline bool live(const crd__sub *s) { return s->subscribed && !s->unsubscribing && !s->stale; }

/* The entry of channel, created (not yet wanted) when new; NULL when out of memory.
 * Caller holds ps->mu. */
crd__sub *crd__ps_entry_for(crd__pubsub *ps, const char *channel, size_t len);
/* Starts the subscriber thread if it is not running. Caller holds ps->mu. */
crd_status crd__ps_start_thread(crd_client *c);
void crd__ps_write_loop_fd(crd__pubsub *ps);
/* Tells the event loop (loop.c) that an operation may progress. Caller holds ps->mu. */
void crd__ps_notify_loop(crd__pubsub *ps, crd__sub *s);
/* Adds permits and wakes; all = a "1" message or a resubscribe. */
void crd__ps_wake(crd__pubsub *ps, crd__sub *s, bool all);
/* The counting rule (semaphores): a payload k > 0 lets up to k waiters re-check, one that
 * is 0 or negative none (no permit can be free then, and the message that frees one is
 * still to come); a payload that is not an integer wakes everyone to re-check. */
void crd__ps_wake_counted(crd__pubsub *ps, crd__sub *s, const char *p, size_t len);
/* Subscribed nowhere, nothing in flight (its link's connection is gone, or the server
 * confirmed its UNSUBSCRIBE). */
void crd__ps_unlinked(crd__sub *s);
void crd__ps_free_sub(crd__sub *s);
/* s has no waiter and no watched hold left (ps->mu held): its UNSUBSCRIBE is encoded into
 * *out for the caller to send once it has let go of ps->mu, on a plaintext client; else
 * the thread is woken to send it. The entry is unsubscribing from now on, as if the
 * thread had sent it. */
void crd__ps_leave(crd_client *c, crd__sub *s, leaving *out);
/* Writes what leave() encoded, without waiting: what send() does not take is left for
 * the subscriber thread (woken), which sends it before anything else. The link's
 * connection is the one leave() saw or the write is dropped: a connection closed since
 * took the subscription with it. */
void crd__ps_leave_direct(crd_client *c, leaving *lv);

#endif /* CRD_PUBSUB_INT_H */
