/*
 * undo.c -- no silent hold from a late reply: what the engine does with an acquire whose
 * caller was told it failed (its deadline passed, its connection went unhealthy) while
 * the command was already on its way.
 *
 * - The reply comes late and says the lock was taken: the hold is given back at once
 *   with the kind's owner-checked unlock (one hold: a re-entry undoes only itself).
 * - The link dies first (outcome unknown): the owner's field is read back (HGET) once the
 *   node answers, and when Redis counts more holds than this client records, one is
 *   given back. The read-back waits through reconnects until the lease would have ended
 *   anyway. The acquire itself is never resent.
 * Both are counted in the metrics (late_holds_released, outcomes_unknown).
 *
 * Threads: the engine's I/O thread (on_late and on_done callbacks, outside the engine's
 * mutex); takes holds->mu for the read-back's comparison.
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

typedef struct undo_job {
    crd_client *c;
    crd__kind kind;
    uint64_t owner;
    int64_t lease_ms;
    bool nowait;
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
    j->at = at;
    j->name_len = u->name_len;
    j->flen = u->flen < sizeof j->field ? u->flen : sizeof j->field - 1;
    memcpy(j->field, u->field, j->flen);
    j->field[j->flen] = '\0';
    memcpy(j->name, u->name, u->name_len);
    j->name[u->name_len] = '\0';
    return j;
}

static undo_job *copy_job(const undo_job *j)
{
    undo_job *k = malloc(sizeof *k + j->name_len + 1);
    if (k != NULL)
        memcpy(k, j, sizeof *k + j->name_len + 1);
    return k;
}

/* A clean-up request for cmd (a script goes as EVAL with its text: a late clean-up must not
 * depend on the script cache) to the peer of the lock's name, waiting through reconnects
 * until deadline_ms. NULL when out of memory or no peer serves the name. */
static crd__req *clean_up_request(crd_client *c, crd__cmd *cmd, const undo_job *j,
                                  int64_t deadline_ms)
{
    crd__pool *p = crd__pool_for(c, j->name, j->name_len);
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

/* Gives one hold of the job's owner back with the kind's unlock. */
static void give_back(crd_client *c, const undo_job *j)
{
    crd_lock l;
    if (crd__lock_init(&l, c, j->kind, j->name, j->name_len) != CRD_OK)
        return;
    char rid[33];
    char latch[512];
    const crd__buf *lp = &l.names.latch_prefix;
    if (crd__random_hex32(rid) != CRD_OK || lp->len + 33 > sizeof latch) {
        crd__lock_clear(&l);
        return;
    }
    memcpy(latch, lp->p, lp->len);
    memcpy(latch + lp->len, rid, sizeof rid);
    crd__rel_args args = {j->field, j->flen, j->lease_ms, latch, lp->len + 32,
                          2 * c->opts.command_timeout_ms + 1000};
    crd__cmd cmd;
    crd__kinds[j->kind].release(&l, &args, &cmd);
    crd__req *rq = clean_up_request(c, &cmd, j, crd__now_ms() + j->lease_ms);
    crd__cmd_free(&cmd);
    crd__lock_clear(&l);
    if (rq != NULL && crd__engine_submit(c, rq) == CRD_OK)
        CRD__COUNT(c, late_holds_released);
}

/* The read-back's answer: Redis's count for the owner against this client's own. */
static void read_back_done(crd_client *c, crd__req *rq)
{
    undo_job *j = rq->arg;
    if (rq->st != CRD_OK)
        return; /* the lease ends it */
    int64_t redis = 0;
    if (rq->replies[0]->type == REDIS_REPLY_STRING && !crd__reply_int(rq->replies[0], &redis))
        redis = 0;
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, j->name, j->name_len, j->owner, j->kind);
    int64_t mine = hold != NULL && !hold->lost ? hold->count : 0;
    pthread_mutex_unlock(&h->mu);
    if (redis > mine)
        give_back(c, j);
}

static void read_back(crd_client *c, const undo_job *j)
{
    CRD__COUNT(c, outcomes_unknown);
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__PLAIN, 3);
    crd__cmd_arg_str(&cmd, "HGET");
    crd__cmd_arg(&cmd, j->name, j->name_len);
    crd__cmd_arg(&cmd, j->field, j->flen);
    crd__req *rq = clean_up_request(c, &cmd, j, crd__now_ms() + j->lease_ms);
    crd__cmd_free(&cmd);
    if (rq == NULL)
        return;
    if ((rq->arg = copy_job(j)) == NULL) {
        crd__req_free(rq);
        return;
    }
    rq->arg_free = free;
    rq->on_done = read_back_done;
    crd__engine_submit(c, rq);
}

void crd__undo_late(crd_client *c, crd__req *rq)
{
    const undo_job *j = rq->arg;
    if (rq->st == CRD_IO) {
        read_back(c, j);
        return;
    }
    if (rq->st != CRD_OK)
        return; /* the client is closing: its holds end with their leases */
    redisReply *r = rq->replies[j->at];
    if (r == NULL || crd__reply_classify(r) != CRD__REPLY_OK)
        return; /* nothing ran (NOSCRIPT, a redirect, an error) */
    int64_t hint = 0, token = 0;
    if (crd__kinds[j->kind].acquire_reply(r, j->nowait, &hint, &token) == CRD__ACQ_TAKEN)
        give_back(c, j);
}

void crd__undo_give_back(const crd__undo *u)
{
    undo_job *j = crd__undo_new(u, 0);
    if (j == NULL)
        return;
    give_back(u->c, j);
    free(j);
}
