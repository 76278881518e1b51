/*
 * locks.h -- the locks layer (src/locks/; base.h lists the layers): Redisson's names, the
 * lock kinds, undo of late and lost acquires, holds, the watchdog, the local queue,
 * release, handles and the event loop's lock operations. Sees wait.h and the layers
 * below; waiter.h and acquire.h are its own (the acquire machine).
 */
#ifndef CRD_LOCKS_H
#define CRD_LOCKS_H

#include "wait.h"

/* ---- names.c: Redisson's derived names (PROTOCOL.md 2.1), the one place they live ----------- */

typedef struct crd__buf {
    char *p;
    size_t len;
} crd__buf;

/* Lock kinds. A hold is identified by (name, owner, kind): one owner may hold the read
 * and the write lock of one name at once. What each kind sends is in kinds.c. */
typedef enum crd__kind {
    CRD__RLOCK = 0,
    CRD__FAIR = 1,
    CRD__READ = 2,
    CRD__WRITE = 3,
    CRD__FENCED = 4,
    CRD__NRLOCK = 5, /* Redisson 4.7's RNonReentrantLock */
    CRD__NRFAIR = 6, /* RNonReentrantFairLock */
    CRD__SPIN = 7,   /* RSpinLock */
    CRD__GROUP = 8   /* RedissonFasterMultiLock: a group's values in one hash */
} crd__kind;
#define CRD__NKINDS 9

#define CRD__LOCK_CHANNEL "redisson_lock__channel" /* RLock, fair (+ ":<field>" per waiter) */
#define CRD__RW_CHANNEL "redisson_rwlock"          /* read-write lock */
#define CRD__LATCH "redisson_unlock_latch"         /* unlock latch, "<latch>:{N}:<rid>" */
#define CRD__FAIR_QUEUE "redisson_lock_queue"      /* fair: LIST of waiting owner fields */
#define CRD__FAIR_DEADLINES "redisson_lock_timeout" /* fair: ZSET field -> epoch ms */
#define CRD__FENCED_TOKEN "redisson_lock_token"    /* fenced: the token counter (STRING) */
#define CRD__WRITE_SUFFIX ":write"                 /* a writer's field: "<uuid>:<id>:write" */
#define CRD__READ_TIMEOUT_SUFFIX ":rwlock_timeout" /* read hold i: "<P>:<field>:rwlock_timeout:i" */
#define CRD__FIELD_MAX 80                          /* an owner field, with ":write" and NUL */

/* Every key and channel one lock of one kind uses. */
typedef struct crd__names {
    crd__buf channel;      /* rlock, fair: redisson_lock__channel:{N}; rw: redisson_rwlock:{N} */
    crd__buf latch_prefix; /* redisson_unlock_latch:{N}: (a latch is this plus a request id) */
    crd__buf queue;        /* fair: redisson_lock_queue:{N} */
    crd__buf deadlines;    /* fair: redisson_lock_timeout:{N} */
    crd__buf rw_prefix;    /* read-write: P = {N}, or N when it has a '{' */
    crd__buf token;        /* fenced: redisson_lock_token:{N} */
} crd__names;

crd_status crd__names_init(crd__names *n, crd__kind kind, const char *name, size_t len);
void crd__names_clear(crd__names *n);
/* "<prefix>:{N}" or "<prefix>:N" when N contains '{' (Redisson's prefixName). */
crd_status crd__derived_name(const char *prefix, const char *name, size_t len, crd__buf *out);
/* The unlock latch's prefix "redisson_unlock_latch:{N}:" (a latch is it and a request id). */
crd_status crd__latch_prefix(const char *name, size_t len, crd__buf *out);
/* The read-write key prefix P: "{N}", or N when it contains '{' (Redisson's suffixName
 * without a suffix). _len says how long it is; _put writes it and a NUL into out. */
size_t crd__rw_prefix_len(const char *name, size_t len);
size_t crd__rw_prefix_put(const char *name, size_t len, char *out);
/* The fenced token counter "redisson_lock_token:{N}" (or ":N"): length, and written with
 * a NUL into out. */
size_t crd__token_key_len(const char *name, size_t len);
size_t crd__token_key_put(const char *name, size_t len, char *out);
/* An owner's hash field, "<uuid>:<id>" or "<uuid>:<id>:write"; buf >= CRD__FIELD_MAX. */
size_t crd__field(const char *uuid, uint64_t owner, bool write, char *buf);
/* A read hold's timeout key base "<P>:<field>:rwlock_timeout" (hold i adds ":i") into buf
 * (plen + flen + 16 bytes). Returns its length. */
size_t crd__read_timeout_base(const char *prefix, size_t plen, const char *field, size_t flen,
                              char *buf);
/* True for names whose braces break slot co-location (PROTOCOL.md 2.3 class C). */
bool crd__name_is_unsafe(const char *name, size_t len);
/* The checks of a name a public call is given (label "lock", "semaphore", ... or "" starts
 * the message): not NULL, not empty, at most CRD_NAME_MAX bytes and, when keys (a handle
 * whose scripts will name its keys), not unsafe on a cluster or without
 * allow_unsafe_names. CRD_INVALID_ARGUMENT with a message otherwise. */
crd_status crd__check_name(crd_client *c, const char *label, const char *name, size_t len,
                           bool keys);
/* What a public call that makes a handle or reads a name checks first: its out-parameter
 * (not NULL), the client (crd__client_check), then the name (crd__check_name). */
crd_status crd__check_call(crd_client *c, const void *out, const char *label, const char *name,
                           size_t len, bool keys);

/* ---- undo.c: acquires whose callers were told they failed --------------------------- */

/* What an acquire command took, if it ran (borrowed strings, valid during the call). */
typedef struct crd__undo {
    crd_client *c;
    crd__kind kind;
    const char *name;
    size_t name_len;
    uint64_t owner;
    const char *field;
    size_t flen;
    int64_t lease_ms;
    bool nowait;
} crd__undo;
struct crd__req;
/* A copy for one request (freed with crd__undo_free); at: the index of the acquire's reply.
 * Once tracked (the engine, when the caller goes away with the request unanswered; a loop
 * attempt from its start) the job counts as an acquire of its (name, owner, kind) under way
 * until its request ends (see crd__settle_enter); while the caller waits, its machine
 * counts. */
void *crd__undo_new(const crd__undo *u, int at);
void crd__undo_track(void *job);
void crd__undo_free(void *job);
/* The engine's on_late for an acquire: a late reply that says "taken" is given back
 * (the kind's unlock, one hold); a lost link reads the field back once the node answers
 * and gives back a hold this client does not record. I/O thread. */
void crd__undo_late(crd_client *c, struct crd__req *rq);
/* The call path's hooks for an acquire's command (crd__cmd.late, late_what a crd__undo). */
extern const crd__late crd__acquire_late;
/* Gives one hold of u's owner back (the acquire ran, and its caller went away). */
void crd__undo_give_back(const crd__undo *u);
/* An acquire of u's whose outcome its caller could not learn (its reply was lost and the
 * read-back got no answer before the caller's deadline): read back once the node answers,
 * given back if it ran, counted in outcomes_unknown. */
void crd__undo_unknown(const crd__undo *u);

/* Read-backs of lost acquires are settled one at a time per (name, owner, kind), and only
 * while no acquire of that owner on that name is under way: Redis's count is compared with
 * this client's record only when every acquire that may have run is either recorded or
 * known lost. An acquire machine enters before its first command and leaves when it ends
 * (*entered: it was counted; false only when out of memory, and then it must not leave);
 * park_until > 0 first waits (until then, monotonic ms) for a read-back under way to end:
 * CRD_TIMEOUT when it did not end in time (nothing entered). Any thread but the engine's
 * under its mutex; takes holds->mu. */
crd_status crd__settle_enter(crd_client *c, const char *name, size_t len, uint64_t owner,
                             int kind, int64_t park_until, bool *entered);
void crd__settle_leave(crd_client *c, const char *name, size_t len, uint64_t owner, int kind);

/* ---- holds.c ------------------------------------------------------------------------ */

/* What this client believes one owner holds on one name. */
typedef struct crd__hold {
    char *name;           /* points at name_buf: one allocation per hold */
    size_t name_len;
    uint64_t owner;
    int kind;             /* crd__kind */
    uint64_t id;          /* unique per record: tells a replaced record from the old one */
    int64_t count;        /* local view of the hold count */
    int64_t lease_ms;     /* lease of the most recent acquire (re-arm on unlock) */
    bool watchdog;        /* renewed by the watchdog */
    bool releasing;       /* a final release is in flight: do not renew */
    bool lost;            /* known lost; kept only until the owner is told */
    bool failing;         /* renewals are failing */
    int64_t valid_until;  /* monotonic ms: send time of last acquire/renewal + lease */
    int64_t since;        /* monotonic ms of the first acquire of this hold */
    struct crd__sub *watch_sub; /* prompt_loss_detection: its channel's watch reference */
    bool counted;         /* taken in a counted turn behind a herd (acquire.c): its final
                             release keeps the hand-off's subscription (release.c) */
    struct crd__hold *next;
    char name_buf[];      /* the name, NUL-terminated */
} crd__hold;

/* undo.c's bookkeeping for one (name, owner, kind) while an acquire of it is under way or a
 * lost acquire of it is still to be read back (crd__settle_enter); under holds->mu. */
typedef struct crd__settle {
    struct crd__settle *next;
    uint64_t owner;
    int kind;
    int busy;          /* acquire machines under way, and commands of theirs still in flight */
    uint64_t epoch;    /* bumped whenever busy changes */
    int unknown;       /* lost acquires still to read back */
    int64_t until;     /* monotonic ms: the leases of those end; no read-back after it */
    bool turn;         /* a read-back (and the give-backs it decided) is under way */
    int giving;        /* give-backs of that turn not answered yet */
    int64_t forgotten; /* holds no longer recorded but legitimately taken (their thread
                          ended: lifecycle.c stops renewing them, the lease ends them) */
    void *job;         /* undo.c's copy of the latest lost acquire (field, lease, kind) */
    size_t name_len;
    char name[];       /* NUL-terminated */
} crd__settle;

#define CRD__SETTLE_BUCKETS 256

struct crd__holds {
    pthread_mutex_t mu;
    pthread_cond_t settled; /* a read-back turn ended (crd__settle_enter parks on it) */
    crd__settle *settle[CRD__SETTLE_BUCKETS];
    crd__hold **buckets;
    size_t nbuckets;
    size_t count;
    atomic_int_fast64_t *gauge; /* the client's metrics.holds, kept equal to count */
    uint64_t next_id;
    /* Watch references of removed holds, dropped outside the mutex (crd__watch_flush) */
    struct crd__sub **unwatch;
    size_t nunwatch, capunwatch;
};

crd_status crd__holds_init(crd_client *c);
void crd__holds_free(crd_client *c);
/* Lookup; caller holds holds->mu. */
crd__hold *crd__holds_find(crd__holds *h, const char *name, size_t len, uint64_t owner,
                           int kind);
/* Insert a new record with count 0; caller holds holds->mu. NULL on OOM. */
crd__hold *crd__holds_insert(crd__holds *h, const char *name, size_t len, uint64_t owner,
                             int kind);
/* Remove and free; caller holds holds->mu. */
void crd__holds_remove(crd__holds *h, crd__hold *hold);
/* Iterate all records; caller holds holds->mu. */
void crd__holds_foreach(crd__holds *h, void (*fn)(crd__hold *, void *), void *arg);
/* Hands over the watch references of removed holds (*out: the caller frees it). Caller
 * holds h->mu. */
size_t crd__holds_take_unwatch(crd__holds *h, struct crd__sub ***out);
/* The registry entry of (name, owner, kind), NULL when none; _get makes one (NULL: out of
 * memory); _drop frees it when nothing is left to do. Caller holds h->mu. */
crd__settle *crd__settle_find(crd__holds *h, const char *name, size_t len, uint64_t owner,
                              int kind);
crd__settle *crd__settle_get(crd__holds *h, const char *name, size_t len, uint64_t owner,
                             int kind);
void crd__settle_drop(crd__holds *h, crd__settle *s);
/* Frees every entry (a fork child: the parent's owners are not its own; the client's end). */
void crd__settle_forget(crd__holds *h);

/* ---- watchdog.c ---------------------------------------------------------------------- */

crd_status crd__watchdog_start(crd_client *c);
void crd__watchdog_stop(crd_client *c); /* joins the thread; stays allocated */
void crd__watchdog_free(crd_client *c);
/* A watchdog hold was added: make sure the thread has a tick scheduled. */
/* prompt_loss_detection: drops the watch references of removed holds (outside every
 * mutex: the releasing thread after a release, the watchdog thread each round). */
void crd__watch_flush(crd_client *c);
void crd__watchdog_kick(crd_client *c);
void crd__watchdog_after_fork_child(crd_client *c);
/* Logs an event and calls on_event (watchdog thread or caller, no lock held), or keeps
 * it for crd_loop_dispatch when the options say events_on_loop. */
void crd__emit_event(crd_client *c, crd_event_kind kind, const char *name, size_t name_len,
                     uint64_t owner, int64_t valid_until, crd_status st, const char *detail);

/* ---- kinds.c: the lock kinds as data ----------------------------------------------------- */

struct crd__group; /* kinds_ext.h: a grouped multi-lock's hash and fields */

struct crd_lock {
    crd_client *client;
    crd__kind kind;
    /* The lock's identity: the Redis key for every kind but the group, whose name is its
     * hold key (crd__group_key: the group name, its sorted fields and their count), so that
     * holds, the local queue and undo.c's registry tell two value sets of one group apart
     * and any of them can rebuild the group from the name alone (crd__lock_init). */
    char *name;
    size_t name_len;
    /* The Redis key's length: a prefix of name (name_len for every kind but the group).
     * Commands are routed, and messages name the lock, by name[0..route_len). */
    size_t route_len;
    crd__names names; /* the keys and channels of its kind */
    const char *publish; /* what its unlock scripts publish with: PUBLISH or SPUBLISH */
    bool view;        /* read or write view owned by a crd_rwlock */
    struct crd__group *group; /* CRD__GROUP: the group, decoded from name; else NULL */
    char *group_name;         /* CRD__GROUP: its name, NUL-terminated (crd_lock_name) */
    crd__spin_backoff spin;   /* CRD__SPIN: the back-off each acquire starts from */
};

/* What an acquire script's reply means. */
typedef enum crd__acq_outcome {
    CRD__ACQ_TAKEN,       /* acquired or re-entered */
    CRD__ACQ_HELD,        /* held by another owner; the reply is a wait hint in ms */
    CRD__ACQ_HELD_NO_TTL, /* held through a hash without TTL: no hint */
    CRD__ACQ_NOT_MY_TURN, /* fair: free, but another waiter is at the head */
    CRD__ACQ_REFUSED,     /* fair try-once form: not acquired, no hint */
    CRD__ACQ_BAD          /* a reply the script never gives */
} crd__acq_outcome;

/* What a release script's reply means. */
typedef enum crd__rel_outcome {
    CRD__REL_RELEASED,   /* the last hold: the lock is free and waiters were told */
    CRD__REL_STILL_HELD, /* one hold fewer; this owner still holds the lock */
    CRD__REL_READ_ONE,   /* read: one of this owner's read holds ended (the local count
                            tells whether more remain) */
    CRD__REL_GONE,       /* fair: the lock no longer existed (expired or force-unlocked) */
    CRD__REL_NOT_HELD,   /* this owner holds nothing */
    CRD__REL_BAD         /* a reply the script never gives */
} crd__rel_outcome;

/* An acquire's inputs. */
typedef struct crd__acq_args {
    const char *field;
    size_t flen;
    int64_t lease_ms;
    bool nowait;        /* fair: the try-once form, which never joins the queue */
    int64_t fair_wait;  /* fair: the wait announced to the queue */
    bool want_token;    /* fenced: the form that returns the token */
} crd__acq_args;

/* A release's inputs. */
typedef struct crd__rel_args {
    const char *field;
    size_t flen;
    int64_t rearm_ms;   /* lease re-armed when holds remain */
    const char *latch;  /* the request's latch key */
    size_t latch_len;
    int64_t latch_ttl_ms;
} crd__rel_args;

/* One lock kind: the scripts it runs, how it builds their KEYS/ARGV, and what their
 * replies mean. Nothing outside kinds.c branches on the kind to build or decode. */
typedef struct crd__kind_ops {
    const char *label;     /* "lock", "fair lock", "read lock", "write lock" */
    bool write_field;      /* its owner field ends in ":write" */
    bool queued;           /* fair: a waiter joins a queue it must leave when it gives up */
    bool try_form;         /* a try without a wait (wait_ms 0) sends its own script
                              (crd__acq_args.nowait): fair, the group */
    bool clocked;          /* its acquire carries the caller's clock (the group: the expiry
                              it writes is now + lease): never prepared ahead of its send
                              (no hand-off, acquire.c lend_attempt) */
    crd__wait_how wait;    /* how its waiter learns it may try again (wait.h): the lock's
                              channel, or (fair) its own "<channel>:<field>" */
    bool fenced;           /* draws a token with every acquire */
    bool local_fifo;       /* exclusive and not fair: local waiters queue (gate.c) */
    bool counts_receivers; /* its unlock replies 1 + the connections the message reached */
    int renew_script;      /* lock_renew, rw_read_renew or fenced_renew */
    /* The second key per renewed hold (read: P, fenced: the token counter), or NULL for
     * holds renewed on N alone: its length, and the key written with a NUL. */
    size_t (*renew_key2_len)(const char *name, size_t len);
    size_t (*renew_key2_put)(const char *name, size_t len, char *out);
    void (*acquire)(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd);
    /* *token: the token a fenced acquire returned, else left alone. */
    crd__acq_outcome (*acquire_reply)(const redisReply *r, bool nowait, int64_t *hint_ms,
                                      int64_t *token);
    void (*release)(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd);
    crd__rel_outcome (*release_reply)(const redisReply *r);
    void (*force_unlock)(const crd_lock *l, crd__cmd *cmd);
    void (*is_locked)(const crd_lock *l, crd__cmd *cmd); /* integer reply 1 = locked */
    void (*extend)(const crd_lock *l, const char *field, size_t flen, int64_t lease_ms,
                   crd__cmd *cmd); /* reply {1} or 1 = extended, {0} or 0 = gone */
    /* Redisson 4.7's kinds (docs/KINDS-R47.md): */
    bool refuses_reentry; /* non-reentrant: a reentry is the script's error reply, told
                             apart by crd__reentry_refused, and the acquire is CRD_DEADLOCK */
    /* Whether owner's field holds the lock (integer reply 1/0); NULL: HEXISTS N field. */
    void (*is_held)(const crd_lock *l, const char *field, size_t flen, crd__cmd *cmd);
    /* The owner's hold count as Redis has it (hold count, and the read-back of a lost
     * acquire); NULL: HGET N field, a count or nil. With it, hold_count_reply reads the
     * reply: false for a reply it does not know. */
    void (*hold_count)(const crd_lock *l, const char *field, size_t flen, crd__cmd *cmd);
    bool (*hold_count_reply)(const redisReply *r, const char *field, size_t flen,
                             int64_t *count);
    /* The watchdog's renewal of one hold by itself (one call per hold, integer reply 1 or
     * 0), for a kind whose renewal names more than its key; NULL: renew_script in batches.
     * name is the hold's (crd__hold.name). */
    void (*renew_one)(crd_client *c, const char *name, size_t len, const char *field,
                      size_t flen, int64_t timeout_ms, crd__cmd *cmd);
} crd__kind_ops;

extern const crd__kind_ops crd__kinds[CRD__NKINDS];

/* Fills l with a copy of the name and the keys and channels of its kind (a group's name
 * is its hold key, crd__group_key: the group is decoded from it). */
crd_status crd__lock_init(crd_lock *l, crd_client *c, crd__kind kind, const char *name,
                          size_t len);
/* The length of the Redis key that (name, len) of kind routes by: len, or for a group the
 * group name's length, a prefix of its hold key. Pure. */
size_t crd__route_len(int kind, const char *name, size_t len);
void crd__lock_clear(crd_lock *l);
/* The lock kind's fair-waiter builder: give up a place in the queue. */
void crd__fair_give_up_cmd(const crd_lock *l, const char *field, size_t flen, int64_t wait_ms,
                           crd__cmd *cmd);

/* ---- lock.c: handles, force-unlock, introspection, extend -------------------------------- */

/* A lock operation of the event loop (crd__op_new) for l and owner: the lock, the owner
 * and done are checked (*st says why not: NULL lock, owner 0, done NULL, out of memory). */
crd_op *crd__lock_op_new(crd_lock *l, uint64_t owner, const crd__op_kind *kind, size_t size,
                         crd_op_done_fn done, void *user, crd_status *st);

/* NULL lock, or a client that cannot be used. */
crd_status crd__lock_check(crd_lock *l);
/* crd__lock_check, then an out-parameter: "<what> is NULL" when it is missing. */
crd_status crd__lock_check_out(crd_lock *l, const void *out, const char *what);
/* crd__lock_check_out for a token, then the lock's kind must be fenced; why ends the message. */
crd_status crd__lock_check_fenced(crd_lock *l, const int64_t *token, const char *why);
/* A name (at most 60 bytes of it) for messages: a group's name, not its hold key. */
#define CRD__NAME_FMT(l) (int)((l)->route_len > 60 ? 60 : (l)->route_len), (l)->name
/* This client's local hold count of (name, owner, kind): 0 when none or lost. */
int64_t crd__local_count(const crd_lock *l, uint64_t owner, crd__kind kind);

/* ---- gate.c: the local queue of an exclusive lock's waiters, and release deferral ------ */

crd_status crd__gates_init(crd_client *c);
void crd__gates_free(crd_client *c);
/* Wakes every blocked queued waiter (the client is closing). */
void crd__gates_wake_all(crd_client *c);
/* Defers this client's attempts on name until until_us (monotonic µs): its release
 * reached others subscribers of other clients (the waiters it woke). */
void crd__gate_defer(crd_client *c, const char *name, size_t len, int64_t until_us, int others);
/* Waiters woken elsewhere from which this client's next blocking acquire counts their
 * turns instead of sleeping out the deferral (acquire.c), and keeps its subscription
 * through the release of a hold so taken (release.c, crd__sub_keep_linger). */
#define CRD__COUNTED_MIN 4
void crd__gates_after_fork_child(crd_client *c);

/* ---- release.c ---------------------------------------------------------------------------- */

/* Owner-checked release of one hold of l. */
/* The undo of an acquire no replica acknowledged: the same release without replica
 * sync's WAIT (its answer would change nothing, and it would hold the caller up to
 * replica_sync_timeout_ms more). */
crd_status crd__release_undo(crd_lock *l, uint64_t owner);
/* A release in three steps, for the event loop (loop.c) as for the blocking call: begin
 * (bookkeeping: a lost hold ends here with its status; the request id), the command (the
 * same request id on every try), end (the reply's outcome applied, the status). */
typedef struct crd__rel {
    crd_lock *l;
    uint64_t owner;
    char field[CRD__FIELD_MAX];
    size_t flen;
    int64_t rearm;
    bool known;
    char *latch;
    size_t latch_len;
    char latch_inline[256];
    bool nosync; /* no WAIT after it (an unsynced acquire's undo: crd__release_undo) */
    bool kept;   /* the channel's subscription stays through it (crd__sub_keep_linger) */
} crd__rel;
crd_status crd__release_begin(crd__rel *r, crd_lock *l, uint64_t owner);
void crd__release_cmd(crd__rel *r, crd__cmd *cmd);
/* The blocking send: the command, and once more with the same request id after CRD_IO. */
crd_status crd__release_send(crd__rel *r, struct redisReply **reply);
/* st and reply as crd__call gave them (reply freed here); frees what begin took. */
crd_status crd__release_end(crd__rel *r, crd_status st, struct redisReply *reply);
void crd__release_clear(crd__rel *r);
/* An extend in two steps (lock.c), for the event loop as for the blocking call: begin
 * (checks; builds *cmd over the caller's field buffer when it returns CRD_OK, the caller
 * frees it), end (the reply
 * applied: crd__call's st, reply (freed here) and send time). */
crd_status crd__extend_begin(crd_lock *l, uint64_t owner, int64_t lease_ms,
                             char field[CRD__FIELD_MAX], crd__cmd *cmd);
crd_status crd__extend_end(crd_lock *l, uint64_t owner, int64_t lease_ms, crd_status st,
                           struct redisReply *r, int64_t sent);
crd_status crd__release(crd_lock *l, uint64_t owner);
/* The same without a lock handle (shutdown and thread exit). */
crd_status crd__release_by_name(crd_client *c, const char *name, size_t len, uint64_t owner,
                                crd__kind kind);
/* The reply of a hold count read (crd__kind_ops.hold_count, or HGET N field) as a count;
 * false for a reply that is not one. */
bool crd__hold_count_of(int kind, const redisReply *r, const char *field, size_t flen,
                        int64_t *count);
/* Builds the hold count read of owner's field on l. */
void crd__hold_count_cmd(const crd_lock *l, const char *field, size_t flen, crd__cmd *cmd);

/* ==== What the lock layer shares with the synchronizers (sync.h has the rest) ==== */

/* names.c */
#define CRD__SEMAPHORE_CHANNEL "redisson_sc"       /* both semaphores: redisson_sc:{N} */
#define CRD__LATCH_CHANNEL "redisson_countdownlatch__channel__" /* + "{N}", always braced */
#define CRD__PERMIT_TIMEOUTS ":timeout"            /* permits: ZSET {N}:timeout */
#define CRD__PERMIT_NO_LEASE "922337203685477"     /* a permit's deadline without a lease */
#define CRD__PERMIT_NO_LEASE_MS INT64_C(922337203685477)
/* The permit zset "{N}:timeout" ("N:timeout" when N has a '{'), allocated into *out. */
crd_status crd__timeouts_name(const char *name, size_t len, crd__buf *out);
/* The latch channel "redisson_countdownlatch__channel__{N}", allocated into *out. */
crd_status crd__latch_channel_name(const char *name, size_t len, crd__buf *out);

/* ---- ident.c: this client's identity record (crd_options.identity) ------------------ */

/* The identity record of client <uuid> and the registry of every client's uuid: one hash
 * tag, so that on a cluster every record lives on one node (a reader finds them all
 * with one script call, and the writer updates record and registry in one). Read by the
 * client layer's state calls (whois.c). */
#define CRD__IDENT_KEY_PREFIX "{credisson}:client:"
#define CRD__IDENT_REGISTRY "{credisson}:clients"
/* The record's entries: a hold ("h:<owner id>:<name>", "hw:" for a write hold), a wait
 * ("w:<owner id>:<name>") and a watch ("x:<name>"); the value is the epoch ms since
 * when, followed by " w" for a hold whose channel the client keeps subscribed. */
#define CRD__IDENT_HOLD "h:"
#define CRD__IDENT_WRITE_HOLD "hw:"
#define CRD__IDENT_WAIT "w:"
#define CRD__IDENT_WATCH "x:"
/* Holds and waits younger than this are not written: nothing is sent for a hold that
 * ends before the next tick, and a tick comes at most this often. */
#define CRD__IDENT_MIN_AGE_MS 250
#define CRD__IDENT_TICK_MS 250
/* The most entries one record lists, and the longest name it lists. */
#define CRD__IDENT_MAX_ENTRIES 1000
#define CRD__IDENT_MAX_NAME 1024
#define CRD__IDENT_TEXT_MAX 200 /* program and label */

/* Reads who this process is (host, pid, program) and sets c->ident up; NULL (off) when
 * the options say so. crd_client_new, before the watchdog starts. */
crd_status crd__ident_init(crd_client *c, const crd_options *o);
/* crd_client_free, after the watchdog thread has stopped: waits (bounded) for a write in
 * flight, then deletes the record (one script call). */
void crd__ident_stop(crd_client *c);
void crd__ident_free(crd_client *c);
/* The watchdog thread: writes what is due (never waits for Redis: the write goes to the
 * engine) and returns when it wants to run next (monotonic ms; INT64_MAX: never). */
int64_t crd__ident_tick(crd_client *c);
/* A hold was recorded (acquire.c): when the identity thought it had nothing to write,
 * wake the watchdog so it looks again within 250 ms. One atomic load otherwise. */
void crd__ident_touch(crd_client *c);
/* A blocking acquire that waits (acquire.c's driver): entered on its first wait, left at
 * its end. The record lists it once it has waited 250 ms. The entry is the caller's
 * (on its stack); name is borrowed for the wait. */
typedef struct crd__ident_wait {
    struct crd__ident_wait *prev, *next;
    const char *name;
    size_t name_len;
    uint64_t owner; /* 0: a crd_watch, not a waiter */
    int64_t since;  /* monotonic ms */
    bool on;
} crd__ident_wait;
void crd__ident_wait_begin(crd_client *c, crd__ident_wait *w, const char *name, size_t len,
                           uint64_t owner);
void crd__ident_wait_end(crd_client *c, crd__ident_wait *w);
/* A crd_watch declares itself (owner 0 in the wait list): its subscription is not a
 * waiter's. Ended with crd__ident_wait_end. */
void crd__ident_watch_begin(crd_client *c, crd__ident_wait *w, const char *name, size_t len);
/* The fork child handler (watchdog.c's): a child's client keeps no record. */
void crd__ident_after_fork_child(crd_client *c);

#endif /* CRD_LOCKS_H */
