/*
 * wait.h -- the wait layer (src/wait/; base.h lists the layers): what every waiter of the
 * library stands on. The rules they share (wait.c: a wait's deadline, the slice before the
 * next attempt, how a kind waits), the subscriber thread and the channel subscriptions
 * waiters take (pubsub.c), the event loop's helper threads (offload.c) and its operation
 * runner (loop.c). Sees topology.h and the layers below; what it offers the layers above
 * is this header.
 */
#ifndef CRD_WAIT_H
#define CRD_WAIT_H

#include "topology.h"

/* ---- wait.c: the rules every waiter shares --------------------------------------------------
 *
 * How a wait's wait_ms becomes its deadline, and how long a waiter sleeps before its next
 * attempt (the slice). The lock's acquire machine (acquire.c) and the synchronizers'
 * (sync.c) decide with these and nothing else, so a semaphore's wait ends when a lock's
 * would, and a kind that waits another way (a back-off without a channel, a delay the
 * server names) is a value of crd__wait_how, not a flag in either machine. Pure
 * functions; any thread. */

/* How a kind's waiter learns that it may try again. */
typedef enum crd__wait_how {
    CRD__WAIT_CHANNEL,     /* a message on the object's channel (RLock, RSemaphore, ...) */
    CRD__WAIT_OWN_CHANNEL, /* a message on the waiter's own channel (the fair lock) */
    CRD__WAIT_BACKOFF,     /* no channel: it tries again after a back-off (the spin lock) */
    CRD__WAIT_DELAY        /* no channel: the server says when to try (the rate limiter) */
} crd__wait_how;

/* Why the last attempt did not succeed, as far as the slice is concerned. */
typedef enum crd__busy {
    CRD__BUSY_TTL,     /* taken until hint_ms from now at the latest (a holder's TTL, a
                          permit's lease, the server's delay), or until a message */
    CRD__BUSY_NO_TTL,  /* taken by something that never expires (a lock hash without
                          TTL): a message, or a re-check every poll interval */
    CRD__BUSY_TURN,    /* free, but another waiter's turn (fair): a short back-off */
    CRD__BUSY_MESSAGE  /* only a message frees it (a semaphore's permits, a latch) */
} crd__busy;

/* The inputs of one decision. */
typedef struct crd__slice_in {
    bool failed;        /* the last attempt failed on the connection */
    bool confirmed;     /* the subscription is live (kinds with a channel) */
    crd__busy busy;     /* when it did not fail */
    int64_t hint_ms;    /* CRD__BUSY_TTL's (CRD__WAIT_DELAY: the server's delay) */
    int64_t poll_ms, max_slice_ms; /* the client's options */
    crd__wait_how how;
    uint32_t random;    /* CRD__WAIT_BACKOFF: any 32 random bits (the back-off's jitter) */
} crd__slice_in;

/* Redisson's LockOptions back-off between a spin waiter's attempts (CRD__WAIT_BACKOFF).
 * Exponential (the default: initial 1 ms, at most 128 ms, multiplier 2): each sleep is the
 * previous one times the multiplier plus a jitter in [0, failures), capped; constant: the
 * same delay every time (Redisson's default 64 ms). The slice bounds each sleep by the
 * deadline. */
typedef struct crd__spin_backoff {
    int64_t next_ms;
    int64_t max_ms;
    int multiplier; /* 0: constant */
    int fails;
} crd__spin_backoff;
#define CRD__SPIN_INITIAL_MS 1
#define CRD__SPIN_MAX_MS 128
#define CRD__SPIN_MULTIPLIER 2
#define CRD__SPIN_CONSTANT_MS 64
void crd__spin_backoff_exponential(crd__spin_backoff *b, int64_t initial_ms, int64_t max_ms,
                                   int multiplier);
void crd__spin_backoff_constant(crd__spin_backoff *b, int64_t delay_ms);
/* The next sleep in ms; random is any 32 random bits (the jitter is random % failures). */
int64_t crd__spin_backoff_next(crd__spin_backoff *b, uint32_t random);

/* What a waiter carries between decisions. */
typedef struct crd__backoff {
    int64_t io_ms;   /* after a failure: 25 ms doubling to the poll interval */
    int64_t fair_ms; /* fair, not my turn: 4 ms doubling to the poll interval */
    crd__spin_backoff spin; /* CRD__WAIT_BACKOFF: the kind's back-off (exponential unless
                               the waiter sets another before its first decision) */
} crd__backoff;

void crd__backoff_init(crd__backoff *b);
/* The slice in ms (>= 1; INT64_MAX: until a message or the deadline) for one decision;
 * updates the back-offs. CRD__WAIT_BACKOFF: the back-off's next step, or the holder's TTL
 * when that ends sooner (the lock is free then, and no release publishes); with
 * CRD__WAIT_DELAY: the server's delay. Kinds without a channel are never capped by the
 * poll interval: nothing is missed without a subscription. */
int64_t crd__wait_slice(const crd__slice_in *in, crd__backoff *b);
/* Whether a wait for slice ms from now, ending after deadline, cannot succeed: a kind
 * whose waits are the server's own delays (CRD__WAIT_DELAY) hears no message, so an
 * attempt before the delay has passed is refused again; such a wait ends at once with
 * the wait's outcome instead of sleeping to its deadline. Never for the other kinds. */
bool crd__wait_futile(const crd__slice_in *in, int64_t slice, int64_t now, int64_t deadline);
/* When a slice of slice ms that starts at now ends, by deadline at the latest; one ms
 * over the slice itself: a TTL is read in whole ms, and waking just before it ends would
 * cost a useless attempt. */
int64_t crd__wait_until(int64_t now, int64_t slice, int64_t deadline);
/* The deadline (monotonic ms) of a wait of wait_ms (-1: forever, INT64_MAX) that starts
 * at start: one ms over, since the clock is read in whole ms and a wait never ends before
 * wait_ms has passed. */
int64_t crd__wait_deadline(int64_t start, int64_t wait_ms);

/* ---- pubsub.c ------------------------------------------------------------------------ */

typedef struct crd__sub crd__sub;

crd_status crd__pubsub_start(crd_client *c);
void crd__pubsub_stop(crd_client *c);
/* Frees what crd__pubsub_stop left for the engine's last completions (after
 * crd__engine_stop). */
void crd__pubsub_free(crd_client *c);
/* Takes a reference on the channel's shared subscription (subscribing if it is the
 * first) and waits until the subscription is confirmed or deadline_ms passes.
 * *confirmed tells which. The reference must be dropped with crd__sub_release(). */
crd_status crd__sub_acquire(crd_client *c, const char *channel, size_t len,
                            int64_t deadline_ms, crd__sub **out, bool *confirmed);
void crd__sub_release(crd_client *c, crd__sub *s);
/* A wait without a channel (the spin lock's back-off, the rate limiter's delays): an entry
 * of its own that nothing is published to, so crd__sub_wait on it sleeps until its
 * deadline, the client's end or an interrupt; crd_client_free waits for it as for a
 * channel's reference. Given back with crd__sub_release. CRD_CLOSED, CRD_NO_MEMORY. */
crd_status crd__sub_quiet(crd_client *c, crd__sub **out);
/* prompt_loss_detection: a hold's reference on its lock's channel, kept subscribed while
 * held (no wait for the confirmation; NULL when out of memory). A message on it marks
 * the entry for a check and calls c->on_watched_message. */
crd__sub *crd__sub_watch(crd_client *c, const char *channel, size_t len);
void crd__sub_unwatch(crd_client *c, crd__sub *s);
/* Lends h to the entry: the next message sends it (crd__handoff_send) before waking.
 * False when the entry is not live, has other waiters or a wake-up pending. */
bool crd__sub_arm(crd_client *c, crd__sub *s, crd__handoff *h);
/* Takes the hand-off back: after this the subscriber thread never touches h. */
void crd__sub_disarm(crd_client *c, crd__sub *s);
/* Entries marked since the last call (at most max), unmarked. */
int crd__sub_take_checks(crd_client *c, crd__sub **out, int max);
/* Waits (until deadline_ms) for channel's subscription to be confirmed; whether it is. */
bool crd__sub_await_live(crd_client *c, const char *channel, size_t len, int64_t deadline_ms);
/* Whether this client's subscriber has channel subscribed now. */
bool crd__sub_is_live(crd_client *c, const char *channel, size_t len);
/* Before a release of the lock whose channel this is: a subscription kept after a
 * hand-off with nobody waiting on it ends now (its UNSUBSCRIBE written, or the subscriber
 * thread woken to write it), ahead of the release's message. */
void crd__sub_end_linger(crd_client *c, const char *channel, size_t len);
/* After the hand-off that gave this client a hold in a counted turn (acquire.c): the
 * subscription s lingers until until_ms (not HANDOFF_LOOK_MS), so that the hold's release
 * finds it and can keep it (crd__sub_keep_linger). Nothing when no hand-off lingers. */
void crd__sub_hold_linger(crd_client *c, crd__sub *s, int64_t until_ms);
/* Instead, before the final release of a hold taken in a counted turn (acquire.c, issue
 * #48): a subscription lingering after the hand-off that gave this client the lock stays
 * through the release, until until_ms, so this client's next counted turn needs no new
 * SUBSCRIBE. The release's own message is dropped on it; the releases after it are kept
 * as wake-ups for that turn (crd__sub_acquire_turn). True when it is kept: the release's
 * outcome then goes to crd__sub_kept_settle. Otherwise as crd__sub_end_linger. */
bool crd__sub_keep_linger(crd_client *c, const char *channel, size_t len, int64_t until_ms);
/* After that release: keep = it woke a herd again (the next acquire counts its turns),
 * the subscription stays until until_ms; otherwise it ends as crd__sub_end_linger would
 * have ended it. published = the release's message went out (false: no release happened,
 * so none of this client's own is to come). */
void crd__sub_kept_settle(crd_client *c, const char *channel, size_t len, bool keep,
                          bool published, int64_t until_ms);
/* Waits for one wake-up permit, or for the caller's lent attempt (mine, or NULL) to be
 * sent, or until deadline_ms. Returns CRD_OK when woken, CRD_TIMEOUT when the deadline
 * passed, CRD_CLOSED on shutdown, CRD_INTERRUPTED when the calling thread's interrupt
 * token (crd_interrupt_bind) is raised. *confirmed is updated with whether the
 * subscription is live now. */
crd_status crd__sub_wait(crd_client *c, crd__sub *s, int64_t deadline_ms,
                         const crd__handoff *mine, bool *confirmed);
/* A counted turn's wait (acquire.c): for need releases on s, asleep until they have all
 * come or until deadline_ms; *got says how many it took (need when CRD_OK; those that came
 * when CRD_TIMEOUT, the caller's progress). Other returns as crd__sub_wait's. */
crd_status crd__sub_wait_turns(crd_client *c, crd__sub *s, int64_t need, int64_t deadline_ms,
                               int64_t *got, bool *confirmed);
void crd__pubsub_after_fork_child(crd_client *c);
/* The event-loop API (loop.c): one eventfd per client, made readable when an operation
 * may progress (a permit or a confirmation for a subscription with loop operations, or
 * crd__pubsub_loop_notify); -1 when it cannot be made. */
int crd__pubsub_loop_fd(crd_client *c);
/* Makes loop_fd readable unless a notice since the last drain already did (the loop's next
 * pass then sees what the caller did before calling). Any thread. */
void crd__pubsub_loop_notify(crd_client *c);
/* The loop thread, at the start of a pass: empties fd (crd__pubsub_loop_fd's), then
 * re-arms the notices; the pass then looks at every operation. */
void crd__pubsub_loop_drain(crd_client *c, int fd);
/* A loop operation starts or stops polling s (it then counts for notifications). */
void crd__sub_loop_watch(crd_client *c, crd__sub *s, bool on);
/* Takes one wake-up permit without waiting; *confirmed: the subscription is live. */
bool crd__sub_try_take(crd_client *c, crd__sub *s, bool *confirmed);
/* How many wake-ups and confirmations s has had (no lock: a cheap "anything new?"). */
uint64_t crd__sub_events(const crd__sub *s);

/* pubsub.c: what a message on a channel tells its local waiters (crd__sub_acquire_rule;
 * crd__sub_acquire is CRD__WAKE_LOCK). */
#define CRD__WAKE_LOCK 0  /* locks: "1" wakes every waiter, any other payload one */
#define CRD__WAKE_COUNT 1 /* semaphores: a payload k > 0 lets up to k waiters re-check,
                             k <= 0 none, a payload that is not a number every one */
#define CRD__WAKE_ALL 2   /* latch: every message wakes every waiter to re-check */
/* crd__sub_acquire with the entry's wake rule set first (one channel carries one kind of
 * object, so every reference agrees on it). */
crd_status crd__sub_acquire_rule(crd_client *c, const char *channel, size_t len, int rule,
                                 int64_t deadline_ms, crd__sub **out, bool *confirmed);
/* crd__sub_acquire (the lock rule) for a counted turn: an entry kept through this
 * client's release (crd__sub_keep_linger) is joined as it is, with the releases it heard
 * since as wake-ups; any other is joined as crd__sub_acquire joins it. */
crd_status crd__sub_acquire_turn(crd_client *c, const char *channel, size_t len,
                                 int64_t deadline_ms, crd__sub **out, bool *confirmed);


/* ---- offload.c: the loop API's helper thread ----------------------------------------------- */

typedef struct crd__offload crd__offload;
typedef struct crd__job crd__job;
/* Runs the job on the helper thread (run), or only frees what a detached job owns (the
 * client closed before it ran). */
typedef void (*crd__job_fn)(crd__job *j, bool run);
struct crd__job {
    crd__job_fn fn;
    crd_client *c;
    bool detached; /* the helper frees it (fn does); nobody waits for it */
    bool done;     /* under the helper's mutex: crd__job_done */
    crd__job *next;
};
/* Queues j on the client's helper thread (started on first use); the helper writes the
 * loop fd when it is done. False when the thread cannot be had (the caller runs the step
 * itself). */
bool crd__offload_run(crd_client *c, crd__job *j);
/* The helper's queue (crd_client_new; the thread starts on the first job). */
crd_status crd__offload_init(crd_client *c);
/* Whether an offloaded, not detached job has run (its owner may then touch what it
 * changed, and free it). */
bool crd__job_done(crd_client *c, crd__job *j);
void crd__job_wait(crd_client *c, crd__job *j);
/* A copy of cmd sent once through crd__call on the helper, its reply ignored (label is
 * a static string). False when it cannot be queued. */
bool crd__offload_call(crd_client *c, const crd__cmd *cmd, const char *label);
/* Joins the helper (crd_client_free: after every loop operation ended); detached jobs not
 * yet run are freed unsent. */
void crd__offload_stop(crd_client *c);

/* ---- loop.c: the event-loop API's operations ---------------------------------------------- */

/* What an operation of one kind does (acquire.c, release.c, lock.c, sync.c); every
 * function runs on the loop thread but helper, which runs on the helper thread. */
typedef struct crd__op_kind {
    /* Steps op as far as it goes without waiting: its outcome, or -1 while it is pending
     * (in flight, waiting, or handed to the helper with crd__op_offload). op->landed: a
     * helper's step has just ended (op->off_st). */
    int (*step)(crd_op *op);
    /* The blocking step crd__op_offload hands over; its status. */
    crd_status (*helper)(crd_op *op);
    /* Ms until op must be stepped although the fd stays quiet (0: now; -1: the fd says
     * when). */
    int64_t (*timeout)(crd_op *op, int64_t now);
    /* The client is being freed: op ends now, on the calling thread (it may block, bounded
     * by its deadline); the status its callback gets. */
    crd_status (*close)(crd_op *op);
    bool cancellable; /* crd_op_cancel accepts it */
} crd__op_kind;

/* One pending operation: the head of a kind's own struct, which begins with it. */
struct crd_op {
    crd__job job;     /* a step on the helper thread (offload.c): first */
    const crd__op_kind *kind;
    crd_client *c;
    crd_lock *l;      /* a lock operation's lock (crd_op_lock), else NULL */
    uint64_t owner;   /* a lock operation's owner (crd_op_owner) */
    int64_t token;    /* a fenced acquire's token (crd_op_token) */
    bool cancel;      /* crd_op_cancel was called: the kind's step ends it */
    bool off;         /* the helper owns the operation until job is done */
    bool landed;      /* a job's outcome not yet taken: off_st */
    crd_status off_st;
    char off_msg[512]; /* the job's detail string, for the loop thread's */
    crd_op_done_fn done;
    void *user;
    unsigned pass;    /* the dispatch pass that last stepped it (0: none yet) */
    struct crd_op *next;
};

/* A zeroed operation of size bytes (a kind's struct beginning with a crd_op) for c, not
 * started; NULL on failure, *st and the client's error saying why (done NULL, out of
 * memory, the client being freed). */
crd_op *crd__op_new(crd_client *c, const crd__op_kind *kind, size_t size, crd_op_done_fn done,
                    void *user, crd_status *st);
/* Starts op (*out = op when out is not NULL): the next dispatch steps it, or the pass
 * under way when a callback started it. */
void crd__op_start(crd_op *op, crd_op **out);
/* Hands op's blocking step (kind->helper) to the helper thread; false when it cannot (the
 * client is being freed, no thread): the caller runs the step itself. */
bool crd__op_offload(crd_op *op);
/* Whether an operation's WAIT on sub until wake_at is over: a wake-up permit, the
 * subscription going live (a release may have come before it), the wake time, or the
 * client closing (*woke: CRD_OK, CRD_TIMEOUT, CRD_CLOSED); *confirmed is brought up to
 * date. Nothing happened to the subscription since *seen: no mutex taken. */
bool crd__loop_wait_over(crd_client *c, crd__sub *sub, uint64_t *seen, bool *confirmed,
                         int64_t wake_at, crd_status *woke);
/* What a kind's timeout returns for a wait until until: -1 for INT64_MAX, else the ms
 * left (0: now). */
int64_t crd__loop_left(int64_t until, int64_t now);
/* Ends every pending operation with CRD_CLOSED, callbacks on the calling thread
 * (crd_client_free), and frees the loop. */
void crd__loop_free(crd_client *c);

#endif /* CRD_WAIT_H */
