/*
 * undo.c -- no silent hold from a late reply: what the engine does with an acquire whose
 * caller was told it failed (its deadline passed, its connection went unhealthy) while
 * the command was already on its way.
 *
 * - The reply comes late and says the lock was taken: the hold is given back at once
 *   with the kind's owner-checked unlock (one hold: a re-entry undoes only itself).
 * - The link dies first (outcome unknown): the owner's field is read back (HGET) once the
 *   node answers, and when Redis counts more holds than this client records, that many
 *   (at most one per lost acquire) are given back. The read-back waits through reconnects
 *   until the lease would have ended anyway. The acquire itself is never resent.
 * Both are counted in the metrics (late_holds_released, outcomes_unknown).
 *
 * The comparison is only sound while nothing else of the same (name, owner, kind) moves:
 * an acquire of that owner that ran in Redis but whose reply is not recorded yet would
 * look like a lost one and be given back under its caller. So a registry (holds.c,
 * crd__settle) counts the acquires under way per (name, owner, kind): machines from their
 * first command to their end, and each acquire command until its request ends (a late
 * reply's give-back included). A read-back turn starts only when none is under way, runs
 * one at a time, and is repeated when one started meanwhile; a blocking acquire of that
 * owner waits for the turn to end before it starts (crd__settle_enter).
 *
 * Threads: the engine's I/O thread (on_late and on_done callbacks, outside the engine's
 * mutex) and the acquiring threads (enter, leave); takes holds->mu, never with a Redis
 * round trip under it.
 */
#include "locks.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct undo_job {
    crd_client *c;
    crd__kind kind;
    uint64_t owner;
    int64_t lease_ms;
    bool nowait;
    bool tracked; /* counts as under way in the registry until freed or handed on */
    bool in_turn; /* a give-back decided by a read-back turn */
    pid_t pid;    /* the process it was counted in (a fork child forgets the registry) */
    uint64_t epoch; /* a read-back turn: the registry's epoch when it was sent */
    int owed;     /* a read-back turn: the lost acquires it settles */
    int at;
    size_t name_len, flen;
    char field[CRD__FIELD_MAX];
    char name[]; /* name_len bytes and a NUL */
} undo_job;

void *crd__undo_new(const crd__undo *u, int at)
{
    undo_job *j = malloc(sizeof *j + u->name_len + 1);
    if (j == NULL)
        return NULL;
    j->c = u->c;
    j->kind = u->kind;
    j->owner = u->owner;
    j->lease_ms = u->lease_ms;
    j->nowait = u->nowait;
    j->tracked = false;
    j->in_turn = false;
    j->pid = u->c->pid;
    j->at = at;
    j->name_len = u->name_len;
    j->flen = u->flen < sizeof j->field ? u->flen : sizeof j->field - 1;
    memcpy(j->field, u->field, j->flen);
    j->field[j->flen] = '\0';
    memcpy(j->name, u->name, u->name_len);
    j->name[u->name_len] = '\0';
    return j;
}

void crd__undo_track(void *job)
{
    undo_job *j = job;
    if (j->tracked)
        return;
    bool entered = false;
    crd__settle_enter(j->c, j->name, j->name_len, j->owner, j->kind, 0, &entered);
    j->tracked = entered;
}

/* An untracked copy. */
static undo_job *copy_job(const undo_job *j)
{
    undo_job *k = malloc(sizeof *k + j->name_len + 1);
    if (k != NULL) {
        memcpy(k, j, sizeof *k + j->name_len + 1);
        k->tracked = false;
        k->in_turn = false;
    }
    return k;
}

/* A clean-up request for cmd (a script goes as EVAL with its text: a late clean-up must not
 * depend on the script cache) to the peer of the lock's name, waiting through reconnects
 * until deadline_ms. NULL when out of memory or no peer serves the name. */
static crd__req *clean_up_request(crd_client *c, crd__cmd *cmd, const undo_job *j,
                                  int64_t deadline_ms)
{
    crd__pool *p = crd__pool_for(c, j->name, crd__route_len(j->kind, j->name, j->name_len));
    if (p == NULL || cmd->oom)
        return NULL;
    crd__req *rq = crd__req_new(p, 1);
    int first = crd__cmd_head(cmd, true);
    if (rq == NULL ||
        !crd__req_add(rq, crd__cmd_argc(cmd, first), cmd->v + first, cmd->len + first)) {
        crd__req_free(rq);
        return NULL;
    }
    rq->deadline_ms = deadline_ms;
    rq->retry = true;
    return rq;
}


/* ---- the registry: acquires under way, lost ones to read back ----------------------------- */

/* An interrupt of a blocking acquire parked on a read-back turn (interrupt.c). */
static void wake_parked(void *arg)
{
    crd__holds *h = arg;
    pthread_mutex_lock(&h->mu);
    pthread_cond_broadcast(&h->settled);
    pthread_mutex_unlock(&h->mu);
}

crd_status crd__settle_enter(crd_client *c, const char *name, size_t len, uint64_t owner,
                             int kind, int64_t park_until, bool *entered)
{
    crd__holds *h = c->holds;
    *entered = false;
    crd_interrupt *in = park_until > 0 ? crd__intr_current() : NULL;
    crd__intr_wait iw;
    crd__intr_enter(in, &iw, wake_parked, h);
    pthread_mutex_lock(&h->mu);
    if (park_until > 0) {
        struct timespec ts = crd__abstime(park_until);
        crd__settle *s;
        while ((s = crd__settle_find(h, name, len, owner, kind)) != NULL && s->turn) {
            bool out = crd__now_ms() >= park_until, intr = crd__intr_raised(in);
            if (out || intr) {
                pthread_mutex_unlock(&h->mu);
                crd__intr_leave(in, &iw);
                return intr ? CRD_INTERRUPTED : CRD_TIMEOUT;
            }
            pthread_cond_timedwait(&h->settled, &h->mu, &ts);
        }
    }
    crd__settle *s = crd__settle_get(h, name, len, owner, kind);
    if (s != NULL) {
        s->busy++;
        s->epoch++;
        *entered = true;
    }
    pthread_mutex_unlock(&h->mu);
    crd__intr_leave(in, &iw);
    return CRD_OK;
}

/* One acquire under way fewer; caller holds h->mu. */
static void leave_locked(crd__holds *h, const char *name, size_t len, uint64_t owner, int kind)
{
    crd__settle *s = crd__settle_find(h, name, len, owner, kind);
    if (s == NULL)
        return;
    s->busy--;
    s->epoch++;
    crd__settle_drop(h, s);
}

/* The job's acquire command ended (or its count went on to a give-back). */
static void untrack(undo_job *j)
{
    if (!j->tracked)
        return;
    j->tracked = false;
    if (j->pid != j->c->pid)
        return; /* a fork child: the parent's registry is forgotten */
    crd__holds *h = j->c->holds;
    pthread_mutex_lock(&h->mu);
    leave_locked(h, j->name, j->name_len, j->owner, j->kind);
    pthread_mutex_unlock(&h->mu);
}

void crd__undo_free(void *job)
{
    undo_job *j = job;
    if (j == NULL)
        return;
    untrack(j);
    free(j);
}

/* The turn ended: blocking acquires parked on it go on. Caller holds h->mu. */
static void end_turn_locked(crd__holds *h, crd__settle *s)
{
    s->turn = false;
    s->giving = 0;
    pthread_cond_broadcast(&h->settled);
}

static bool read_back(crd_client *c, undo_job *t);

/* Starts a read-back turn for (name, owner, kind) when one is owed and nothing of it is
 * under way; drops the entry when nothing is left to do. Never under holds->mu. */
static void kick(crd_client *c, const char *name, size_t len, uint64_t owner, int kind)
{
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    crd__settle *s = crd__settle_find(h, name, len, owner, kind);
    if (s == NULL) {
        pthread_mutex_unlock(&h->mu);
        return;
    }
    if (s->unknown > 0 && crd__now_ms() >= s->until)
        s->unknown = 0; /* their leases have ended them */
    if (s->turn || s->busy > 0 || s->unknown == 0) {
        crd__settle_drop(h, s);
        pthread_mutex_unlock(&h->mu);
        return;
    }
    /* The turn's job carries what it compares against: the registry's epoch and the
     * number of lost acquires it settles. */
    undo_job *t = s->job != NULL ? copy_job(s->job) : NULL;
    if (t == NULL) {
        s->unknown = 0; /* out of memory: the leases end them */
        crd__settle_drop(h, s);
        pthread_mutex_unlock(&h->mu);
        return;
    }
    t->epoch = s->epoch;
    int owed = t->owed = s->unknown;
    s->turn = true;
    pthread_mutex_unlock(&h->mu);
    if (read_back(c, t)) /* t is the request's from here on */
        return;
    /* Nothing could be sent (no peer, out of memory, closing): the leases end them. */
    pthread_mutex_lock(&h->mu);
    s = crd__settle_find(h, name, len, owner, kind);
    s->unknown -= owed;
    end_turn_locked(h, s);
    crd__settle_drop(h, s);
    pthread_mutex_unlock(&h->mu);
}

static void kick_job(const undo_job *j) { kick(j->c, j->name, j->name_len, j->owner, j->kind); }

void crd__settle_leave(crd_client *c, const char *name, size_t len, uint64_t owner, int kind)
{
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    leave_locked(h, name, len, owner, kind);
    pthread_mutex_unlock(&h->mu);
    kick(c, name, len, owner, kind);
}

/* ---- giving holds back ------------------------------------------------------------------- */

/* A give-back was answered (or failed): its count as an acquire under way ends, and a turn
 * that decided it may end. */
static void given_back(crd_client *c, crd__req *rq)
{
    undo_job *j = rq->arg;
    untrack(j);
    if (j->in_turn && j->pid == c->pid) {
        crd__holds *h = c->holds;
        pthread_mutex_lock(&h->mu);
        crd__settle *s = crd__settle_find(h, j->name, j->name_len, j->owner, j->kind);
        if (s != NULL && s->turn && --s->giving <= 0)
            end_turn_locked(h, s);
        pthread_mutex_unlock(&h->mu);
    }
    kick_job(j);
}

/* Submits a clean-up request (NULL: it could not be built) carrying job j, completed by
 * done; false when nothing was sent (j is freed then, with rq if there was one). */
static bool send_clean_up(crd_client *c, crd__req *rq, undo_job *j,
                          void (*done)(crd_client *, crd__req *))
{
    if (rq == NULL) {
        crd__undo_free(j);
        return false;
    }
    rq->arg = j;
    rq->arg_free = crd__undo_free;
    rq->on_done = done;
    return crd__engine_submit(c, rq) == CRD_OK;
}

/* Gives one hold of the job's owner back with the kind's unlock. The request takes j over
 * (its count as an acquire under way ends when the give-back is answered); false when
 * nothing was sent (j is freed then). */
static bool give_back(crd_client *c, undo_job *j)
{
    crd_lock l;
    crd__req *rq = NULL;
    if (crd__lock_init(&l, c, j->kind, j->name, j->name_len) == CRD_OK) {
        char rid[33];
        char latch[512];
        const crd__buf *lp = &l.names.latch_prefix;
        if (crd__random_hex32(rid) == CRD_OK && lp->len + 33 <= sizeof latch) {
            memcpy(latch, lp->p, lp->len);
            memcpy(latch + lp->len, rid, sizeof rid);
            crd__rel_args args = {j->field, j->flen, j->lease_ms, latch, lp->len + 32,
                                  2 * c->opts.command_timeout_ms + 1000};
            crd__cmd cmd;
            crd__kinds[j->kind].release(&l, &args, &cmd);
            rq = clean_up_request(c, &cmd, j, crd__now_ms() + j->lease_ms);
            crd__cmd_free(&cmd);
        }
        crd__lock_clear(&l);
    }
    if (!send_clean_up(c, rq, j, given_back))
        return false;
    CRD__COUNT(c, late_holds_released);
    return true;
}

/* ---- reading a lost acquire back ---------------------------------------------------------- */

/* The turn's answer: Redis's count for the owner against this client's own, taken only if
 * nothing of this (name, owner, kind) moved while the HGET was out. */
static void read_back_done(crd_client *c, crd__req *rq)
{
    undo_job *t = rq->arg;
    if (t->pid != c->pid)
        return;
    int64_t redis = 0;
    if (rq->st == CRD_OK && !crd__hold_count_of(t->kind, rq->replies[0], t->field, t->flen, &redis))
        redis = 0;
    crd__holds *h = c->holds;
    int give = 0;
    pthread_mutex_lock(&h->mu);
    crd__settle *s = crd__settle_find(h, t->name, t->name_len, t->owner, t->kind);
    if (rq->st != CRD_OK) {
        s->unknown -= t->owed; /* no answer for a whole lease: the lease ended them */
    } else if (s->busy == 0 && s->epoch == t->epoch) {
        crd__hold *hold = crd__holds_find(h, t->name, t->name_len, t->owner, t->kind);
        int64_t mine = (hold != NULL && !hold->lost ? hold->count : 0) + s->forgotten;
        int64_t excess = redis - mine;
        give = excess <= 0 ? 0 : excess < t->owed ? (int)excess : t->owed;
        s->unknown -= t->owed;
    } /* else an acquire of this owner moved meanwhile: the turn is taken again */
    s->giving = give;
    if (give == 0)
        end_turn_locked(h, s);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < give; i++) {
        undo_job *g = copy_job(t);
        if (g != NULL)
            g->in_turn = true;
        if (g == NULL || !give_back(c, g)) {
            pthread_mutex_lock(&h->mu);
            s = crd__settle_find(h, t->name, t->name_len, t->owner, t->kind);
            if (s != NULL && s->turn && --s->giving <= 0)
                end_turn_locked(h, s);
            pthread_mutex_unlock(&h->mu);
        }
    }
    if (give == 0)
        kick_job(t);
}

/* Sends the turn's HGET; t goes with the request. False when nothing was sent. */
static bool read_back(crd_client *c, undo_job *t)
{
    crd_lock l;
    crd__req *rq = NULL;
    if (crd__lock_init(&l, c, t->kind, t->name, t->name_len) == CRD_OK) {
        crd__cmd cmd;
        crd__hold_count_cmd(&l, t->field, t->flen, &cmd); /* HGET N field, for most kinds */
        rq = clean_up_request(c, &cmd, t, crd__now_ms() + t->lease_ms);
        crd__cmd_free(&cmd);
        crd__lock_clear(&l);
    }
    return send_clean_up(c, rq, t, read_back_done);
}

/* A lost acquire: one more to read back, the job kept for its field and lease. */
static void note_unknown(crd_client *c, const undo_job *j)
{
    CRD__COUNT(c, outcomes_unknown);
    undo_job *k = copy_job(j);
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    crd__settle *s = crd__settle_get(h, j->name, j->name_len, j->owner, j->kind);
    if (s != NULL && k != NULL) {
        free(s->job);
        s->job = k;
        k = NULL;
        s->unknown++;
        int64_t until = crd__now_ms() + j->lease_ms;
        if (until > s->until)
            s->until = until;
    } else if (s != NULL) {
        crd__settle_drop(h, s); /* out of memory: its lease ends it */
    }
    pthread_mutex_unlock(&h->mu);
    free(k);
}

void crd__undo_late(crd_client *c, crd__req *rq)
{
    undo_job *j = rq->arg;
    if (j == NULL || j->pid != c->pid)
        return;
    if (rq->st == CRD_IO) {
        note_unknown(c, j);
        untrack(j);
    } else if (rq->st == CRD_OK) {
        redisReply *r = rq->replies[j->at];
        int64_t hint = 0, token = 0;
        /* Taken: the give-back goes on counting as under way until it is answered, so no
         * read-back turn counts this hold as a lost one's too. */
        if (r != NULL && crd__reply_classify(r) == CRD__REPLY_OK &&
            crd__kinds[j->kind].acquire_reply(r, j->nowait, &hint, &token) == CRD__ACQ_TAKEN) {
            rq->arg = NULL;
            rq->arg_free = NULL;
            give_back(c, j);
            return;
        }
        untrack(j); /* nothing ran (NOSCRIPT, a redirect, an error) */
    } else {
        untrack(j); /* the client is closing: its holds end with their leases */
    }
    kick_job(j);
}

void crd__undo_give_back(const crd__undo *u)
{
    undo_job *j = crd__undo_new(u, 0);
    if (j == NULL)
        return;
    crd__undo_track(j); /* under way until the give-back is answered */
    give_back(u->c, j);
}

void crd__undo_unknown(const crd__undo *u)
{
    undo_job *j = crd__undo_new(u, 0);
    if (j == NULL)
        return; /* out of memory: its lease ends it */
    note_unknown(u->c, j);
    kick_job(j); /* waits while the caller's own acquire is still under way */
    free(j);
}

static void *late_job_new(const void *what, int at) { return crd__undo_new(what, at); }

const crd__late crd__acquire_late = {late_job_new, crd__undo_track, crd__undo_free,
                                     crd__undo_late};
