/*
 * kinds.c -- the lock kinds as data: for the reentrant lock (PROTOCOL.md 5), the fair lock
 * (8) and the read and write locks of a read-write lock (7), which scripts run, how their
 * KEYS and ARGV are built from a lock's names, and what their replies mean; and the
 * fenced lock (9), an RLock that draws a token with every acquire.
 *
 * This is the file that decides how each kind is encoded on the wire. The acquire state
 * machine, the release path and the watchdog only look up crd__kinds[kind]; none of them
 * branches on the kind to build a command or read a reply: a new kind is one more table
 * entry, as the fenced lock was.
 *
 * Pure functions over a lock's names; no lock, any thread.
 */
#include "kinds_ext.h"

#include <stdlib.h>
#include <string.h>


static void key(crd__cmd *cmd, const crd__buf *b) { crd__cmd_key(cmd, b->p, b->len); }

static void name_key(const crd_lock *l, crd__cmd *cmd) { crd__cmd_key(cmd, l->name, l->route_len); }

/* ---- replies shared by several kinds ----------------------------------------------------- */

/* nil: acquired; an integer: held, the holder's PTTL (-1: a hash without TTL). */
static crd__acq_outcome acquire_reply(const redisReply *r, bool nowait, int64_t *hint_ms,
                                      int64_t *token)
{
    (void)nowait;
    (void)token;
    *hint_ms = 0;
    if (r->type == REDIS_REPLY_NIL)
        return CRD__ACQ_TAKEN;
    if (r->type != REDIS_REPLY_INTEGER)
        return CRD__ACQ_BAD;
    *hint_ms = r->integer;
    return r->integer < 0 ? CRD__ACQ_HELD_NO_TTL : CRD__ACQ_HELD;
}

/* nil: not this owner's; 0: still held; 1: released; 2: the lock was gone (fair). */
static crd__rel_outcome release_reply(const redisReply *r)
{
    if (r->type == REDIS_REPLY_NIL)
        return CRD__REL_NOT_HELD;
    if (r->type != REDIS_REPLY_INTEGER)
        return CRD__REL_BAD;
    switch (r->integer) {
    case 0: return CRD__REL_STILL_HELD;
    case 1: return CRD__REL_RELEASED;
    case 2: return CRD__REL_GONE;
    default: return CRD__REL_BAD;
    }
}

/* The reentrant and the write unlock: 1 + the connections the message reached when it
 * released (1 for a replayed outcome: nobody counted), else as release_reply. */
static crd__rel_outcome exclusive_release_reply(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= 1)
        return CRD__REL_RELEASED;
    return r->type == REDIS_REPLY_INTEGER && r->integer != 0 ? CRD__REL_BAD : release_reply(r);
}

static void exists(const crd_lock *l, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__PLAIN, 2);
    crd__cmd_arg_str(cmd, "EXISTS");
    crd__cmd_arg(cmd, l->name, l->name_len);
}

/* lua/lock_renew.lua for one hold: exclusive kinds (and the write lock). */
static void extend_exclusive(const crd_lock *l, const char *field, size_t flen, int64_t lease_ms,
                             crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_LOCK_RENEW, 0);
    name_key(l, cmd);
    crd__cmd_arg_i64(cmd, lease_ms);
    crd__cmd_arg(cmd, field, flen);
}

/* ---- reentrant lock (RLock) --------------------------------------------------------------- */

static void rlock_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RLOCK_ACQUIRE, 0);
    name_key(l, cmd);
    crd__cmd_arg_i64(cmd, a->lease_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
}

/* The reentrant and the write unlock take the same KEYS and ARGV; the message differs. */
static void exclusive_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd,
                              int script, const char *message)
{
    crd__cmd_init(cmd, script, 0);
    name_key(l, cmd);
    key(cmd, &l->names.channel);
    crd__cmd_key(cmd, a->latch, a->latch_len);
    crd__cmd_arg_str(cmd, message);
    crd__cmd_arg_i64(cmd, a->rearm_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
    crd__cmd_arg_str(cmd, l->publish);
    crd__cmd_arg_i64(cmd, a->latch_ttl_ms);
}

static void rlock_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd)
{
    exclusive_release(l, a, cmd, CRD__SCRIPT_RLOCK_UNLOCK, "0");
}

static void rlock_force_unlock(const crd_lock *l, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RLOCK_FORCE_UNLOCK, 0);
    name_key(l, cmd);
    key(cmd, &l->names.channel);
    crd__cmd_arg_str(cmd, "0");
    crd__cmd_arg_str(cmd, l->publish);
}

/* ---- fair lock ------------------------------------------------------------------------------ */

static void fair_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd)
{
    crd__fair_acquire_cmd(l, a, a->nowait ? CRD__SCRIPT_FAIR_TRY_ACQUIRE : CRD__SCRIPT_FAIR_ACQUIRE,
                          cmd);
}

/* The queueing form answers the time to wait, 0 for "free, but not your turn"; the
 * try-once form answers 1 for "not acquired", without a hint. */
static crd__acq_outcome fair_acquire_reply(const redisReply *r, bool nowait, int64_t *hint_ms,
                                           int64_t *token)
{
    crd__acq_outcome o = acquire_reply(r, nowait, hint_ms, token);
    if (o == CRD__ACQ_TAKEN || o == CRD__ACQ_BAD)
        return o;
    if (nowait) {
        *hint_ms = 0;
        return CRD__ACQ_REFUSED;
    }
    return *hint_ms == 0 ? CRD__ACQ_NOT_MY_TURN : o;
}

static void fair_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_FAIR_UNLOCK, 0);
    name_key(l, cmd);
    key(cmd, &l->names.queue);
    key(cmd, &l->names.deadlines);
    key(cmd, &l->names.channel);
    crd__cmd_key(cmd, a->latch, a->latch_len);
    crd__cmd_arg_str(cmd, "0");
    crd__cmd_arg_i64(cmd, a->rearm_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    crd__cmd_arg_str(cmd, l->publish);
    crd__cmd_arg_i64(cmd, a->latch_ttl_ms);
}

static void fair_force_unlock(const crd_lock *l, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_FAIR_FORCE_UNLOCK, 0);
    name_key(l, cmd);
    key(cmd, &l->names.queue);
    key(cmd, &l->names.deadlines);
    key(cmd, &l->names.channel);
    crd__cmd_arg_str(cmd, "0");
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    crd__cmd_arg_str(cmd, l->publish);
}

void crd__fair_give_up_cmd(const crd_lock *l, const char *field, size_t flen, int64_t wait_ms,
                           crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_FAIR_ACQUIRE_FAILED, 0);
    key(cmd, &l->names.queue);
    key(cmd, &l->names.deadlines);
    name_key(l, cmd);
    key(cmd, &l->names.channel);
    crd__cmd_arg(cmd, field, flen);
    crd__cmd_arg_i64(cmd, wait_ms);
    crd__cmd_arg_str(cmd, l->publish);
}

/* ---- read-write lock: the read side ---------------------------------------------------------- */

/* "<P>:<field>:rwlock_timeout", the base of the owner's read-hold timeout keys. */
static void read_timeout_key(const crd_lock *l, const char *field, size_t flen, crd__cmd *cmd)
{
    const crd__buf *p = &l->names.rw_prefix;
    char *t = crd__cmd_space(cmd, p->len + flen + sizeof CRD__READ_TIMEOUT_SUFFIX + 1);
    if (t == NULL) {
        crd__cmd_key(cmd, "", 0);
        return;
    }
    crd__cmd_key(cmd, t, crd__read_timeout_base(p->p, p->len, field, flen, t));
}

static void read_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RW_READ_ACQUIRE, 0);
    name_key(l, cmd);
    read_timeout_key(l, a->field, a->flen, cmd);
    crd__cmd_arg_i64(cmd, a->lease_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
    /* The same owner's write field: a writer may also read (downgrade). */
    char *w = crd__cmd_space(cmd, a->flen + sizeof CRD__WRITE_SUFFIX);
    if (w != NULL) {
        memcpy(w, a->field, a->flen);
        memcpy(w + a->flen, CRD__WRITE_SUFFIX, sizeof CRD__WRITE_SUFFIX);
    }
    crd__cmd_arg(cmd, w != NULL ? w : "", w != NULL ? a->flen + sizeof CRD__WRITE_SUFFIX - 1 : 0);
}

/* nil: this owner holds no read hold; 0 and 1 (other holds remain / the lock is free)
 * both end one of its holds: the local count tells whether it holds more. */
static crd__rel_outcome read_release_reply(const redisReply *r)
{
    crd__rel_outcome o = release_reply(r);
    return o == CRD__REL_STILL_HELD || o == CRD__REL_RELEASED ? CRD__REL_READ_ONE : o;
}

static void read_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RW_READ_UNLOCK, 0);
    name_key(l, cmd);
    key(cmd, &l->names.channel);
    read_timeout_key(l, a->field, a->flen, cmd);
    key(cmd, &l->names.rw_prefix);
    crd__cmd_key(cmd, a->latch, a->latch_len);
    crd__cmd_arg_str(cmd, "0");
    crd__cmd_arg(cmd, a->field, a->flen);
    crd__cmd_arg_str(cmd, l->publish);
    crd__cmd_arg_i64(cmd, a->latch_ttl_ms);
}

/* Read and write force-unlock share one script: the message and the mode differ. */
static void rw_force_unlock(const crd_lock *l, crd__cmd *cmd, const char *message,
                            const char *mode)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RW_FORCE_UNLOCK, 0);
    name_key(l, cmd);
    key(cmd, &l->names.channel);
    crd__cmd_arg_str(cmd, message);
    crd__cmd_arg_str(cmd, l->publish);
    crd__cmd_arg_str(cmd, mode);
}

static void read_force_unlock(const crd_lock *l, crd__cmd *cmd)
{
    rw_force_unlock(l, cmd, "0", "read");
}

static void rw_is_locked(const crd_lock *l, crd__cmd *cmd, const char *mode)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RW_IS_LOCKED, 0);
    name_key(l, cmd);
    crd__cmd_arg_str(cmd, mode);
}

static void read_is_locked(const crd_lock *l, crd__cmd *cmd) { rw_is_locked(l, cmd, "read"); }

static void read_extend(const crd_lock *l, const char *field, size_t flen, int64_t lease_ms,
                        crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RW_READ_RENEW, 0);
    name_key(l, cmd);
    key(cmd, &l->names.rw_prefix);
    crd__cmd_arg_i64(cmd, lease_ms);
    crd__cmd_arg(cmd, field, flen);
}

/* ---- read-write lock: the write side --------------------------------------------------------- */

static void write_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RW_WRITE_ACQUIRE, 0);
    name_key(l, cmd);
    crd__cmd_arg_i64(cmd, a->lease_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
}

static void write_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd)
{
    exclusive_release(l, a, cmd, CRD__SCRIPT_RW_WRITE_UNLOCK, "1");
}

static void write_force_unlock(const crd_lock *l, crd__cmd *cmd)
{
    rw_force_unlock(l, cmd, "1", "write");
}

static void write_is_locked(const crd_lock *l, crd__cmd *cmd) { rw_is_locked(l, cmd, "write"); }

/* ---- fenced lock ---------------------------------------------------------------------------- */

static void fenced_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd)
{
    crd__cmd_init(cmd,
                  a->want_token ? CRD__SCRIPT_FENCED_ACQUIRE_TOKEN : CRD__SCRIPT_FENCED_ACQUIRE, 0);
    name_key(l, cmd);
    key(cmd, &l->names.token);
    crd__cmd_arg_i64(cmd, a->lease_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
}

/* The token form answers {-1, token} or {pttl, -1}; the plain form as an RLock. */
static crd__acq_outcome fenced_acquire_reply(const redisReply *r, bool nowait, int64_t *hint_ms,
                                             int64_t *token)
{
    if (r->type != REDIS_REPLY_ARRAY)
        return acquire_reply(r, nowait, hint_ms, token);
    *hint_ms = 0;
    if (r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER)
        return CRD__ACQ_BAD;
    long long first = r->element[0]->integer, second = r->element[1]->integer;
    if (first == -1 && second >= 1) {
        *token = second;
        return CRD__ACQ_TAKEN;
    }
    if (second != -1)
        return CRD__ACQ_BAD;
    *hint_ms = first;
    return first < 0 ? CRD__ACQ_HELD_NO_TTL : CRD__ACQ_HELD;
}

static void fenced_extend(const crd_lock *l, const char *field, size_t flen, int64_t lease_ms,
                          crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_FENCED_RENEW, 0);
    name_key(l, cmd);
    key(cmd, &l->names.token);
    crd__cmd_arg_i64(cmd, lease_ms);
    crd__cmd_arg(cmd, field, flen);
}

/* ---- Redisson 4.7's kinds (kinds_ext.c builds their scripts) -------------------------------- */

/* The grouped multi-lock: its builders take the group (decoded from the lock's name). */
static void group_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd)
{
    crd__group_acquire(l->group, a, cmd);
}

static void group_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd)
{
    crd__group_release(l->group, a, l->publish, cmd);
}

static void group_force_unlock(const crd_lock *l, crd__cmd *cmd)
{
    crd__group_force_unlock(l->group, l->publish, cmd);
}

static void group_is_locked(const crd_lock *l, crd__cmd *cmd) { crd__group_is_locked(l->group, cmd); }

static void group_is_held(const crd_lock *l, const char *field, size_t flen, crd__cmd *cmd)
{
    crd__group_is_held(l->group, field, flen, cmd);
}

static void group_extend(const crd_lock *l, const char *field, size_t flen, int64_t lease_ms,
                         crd__cmd *cmd)
{
    crd__group_renew(l->group, field, flen, lease_ms, cmd);
}

static void group_hold_count(const crd_lock *l, const char *field, size_t flen, crd__cmd *cmd)
{
    crd__group_hold_count(l->group, field, flen, cmd);
}

/* The watchdog's renewal of one group hold: the command's words point into name (the
 * round's copy of the hold key), nothing is allocated. */
static void group_renew_one(crd_client *c, const char *name, size_t len, const char *field,
                            size_t flen, int64_t timeout_ms, crd__cmd *cmd)
{
    (void)c;
    crd__group g;
    if (!crd__group_view(&g, name, len)) {
        crd__cmd_init(cmd, CRD__SCRIPT_GROUP_RENEW, 0);
        cmd->oom = true; /* never a hold key of a group: nothing sent */
        return;
    }
    crd__group_renew(&g, field, flen, timeout_ms, cmd);
}

/* ---- the table ------------------------------------------------------------------------------ */

const crd__kind_ops crd__kinds[CRD__NKINDS] = {
    [CRD__RLOCK] = {.label = "lock",
                    .renew_script = CRD__SCRIPT_LOCK_RENEW,
                    .acquire = rlock_acquire,
                    .acquire_reply = acquire_reply,
                    .release = rlock_release,
                    .release_reply = exclusive_release_reply,
                    .local_fifo = true,
                    .counts_receivers = true,
                    .force_unlock = rlock_force_unlock,
                    .is_locked = exists,
                    .extend = extend_exclusive},
    [CRD__FAIR] = {.label = "fair lock",
                   .queued = true,
                   .try_form = true,
                   .wait = CRD__WAIT_OWN_CHANNEL,
                   .renew_script = CRD__SCRIPT_LOCK_RENEW,
                   .acquire = fair_acquire,
                   .acquire_reply = fair_acquire_reply,
                   .release = fair_release,
                   .release_reply = release_reply,
                   .force_unlock = fair_force_unlock,
                   .is_locked = exists,
                   .extend = extend_exclusive},
    [CRD__READ] = {.label = "read lock",
                   .renew_script = CRD__SCRIPT_RW_READ_RENEW,
                   .renew_key2_len = crd__rw_prefix_len,
                   .renew_key2_put = crd__rw_prefix_put,
                   .acquire = read_acquire,
                   .acquire_reply = acquire_reply,
                   .release = read_release,
                   .release_reply = read_release_reply,
                   .force_unlock = read_force_unlock,
                   .is_locked = read_is_locked,
                   .extend = read_extend},
    [CRD__WRITE] = {.label = "write lock",
                    .write_field = true,
                    .renew_script = CRD__SCRIPT_LOCK_RENEW,
                    .acquire = write_acquire,
                    .acquire_reply = acquire_reply,
                    .release = write_release,
                    .release_reply = exclusive_release_reply,
                    .local_fifo = true,
                    .counts_receivers = true,
                    .force_unlock = write_force_unlock,
                    .is_locked = write_is_locked,
                    .extend = extend_exclusive},
    /* Java's RFencedLock: an RLock (same unlock, force-unlock, channel) plus the counter. */
    [CRD__FENCED] = {.label = "fenced lock",
                     .fenced = true,
                     .renew_script = CRD__SCRIPT_FENCED_RENEW,
                     .renew_key2_len = crd__token_key_len,
                     .renew_key2_put = crd__token_key_put,
                     .acquire = fenced_acquire,
                     .acquire_reply = fenced_acquire_reply,
                     .release = rlock_release,
                     .release_reply = exclusive_release_reply,
                     .local_fifo = true,
                     .counts_receivers = true,
                     .force_unlock = rlock_force_unlock,
                     .is_locked = exists,
                     .extend = fenced_extend},
    /* Redisson 4.7's non-reentrant locks: the RLock and RFairLock but for the acquire,
     * which refuses the holder's reentry with an error reply (docs/KINDS-R47.md). */
    [CRD__NRLOCK] = {.label = "non-reentrant lock",
                     .refuses_reentry = true,
                     .renew_script = CRD__SCRIPT_LOCK_RENEW,
                     .acquire = crd__nrlock_acquire,
                     .acquire_reply = acquire_reply,
                     .release = rlock_release,
                     .release_reply = exclusive_release_reply,
                     .local_fifo = true,
                     .counts_receivers = true,
                     .force_unlock = rlock_force_unlock,
                     .is_locked = exists,
                     .extend = extend_exclusive},
    [CRD__NRFAIR] = {.label = "non-reentrant fair lock",
                     .refuses_reentry = true,
                     .queued = true,
                     .try_form = true,
                     .wait = CRD__WAIT_OWN_CHANNEL,
                     .renew_script = CRD__SCRIPT_LOCK_RENEW,
                     .acquire = crd__nrfair_acquire,
                     .acquire_reply = fair_acquire_reply,
                     .release = fair_release,
                     .release_reply = release_reply,
                     .force_unlock = fair_force_unlock,
                     .is_locked = exists,
                     .extend = extend_exclusive},
    /* RSpinLock: the RLock's hash and acquire; no channel: a release publishes nothing and
     * a waiter backs off between attempts (wait.c). */
    [CRD__SPIN] = {.label = "spin lock",
                   .wait = CRD__WAIT_BACKOFF,
                   .renew_script = CRD__SCRIPT_LOCK_RENEW,
                   .acquire = rlock_acquire,
                   .acquire_reply = acquire_reply,
                   .release = crd__spin_release,
                   .release_reply = crd__spin_release_reply,
                   .local_fifo = true,
                   .force_unlock = crd__spin_force_unlock,
                   .is_locked = exists,
                   .extend = extend_exclusive},
    /* RedissonFasterMultiLock: every value of a group in one hash, one script for all; the
     * watchdog renews each group hold with one call of its own. */
    [CRD__GROUP] = {.label = "grouped multi-lock",
                    .try_form = true,
                    .clocked = true,
                    .renew_script = CRD__SCRIPT_GROUP_RENEW,
                    .renew_one = group_renew_one,
                    .acquire = group_acquire,
                    .acquire_reply = crd__group_acquire_reply,
                    .release = group_release,
                    .release_reply = crd__group_release_reply,
                    .local_fifo = true,
                    .counts_receivers = true,
                    .force_unlock = group_force_unlock,
                    .is_locked = group_is_locked,
                    .is_held = group_is_held,
                    .hold_count = group_hold_count,
                    .hold_count_reply = crd__group_count_reply,
                    .extend = group_extend},
};

size_t crd__route_len(int kind, const char *name, size_t len)
{
    return kind == CRD__GROUP ? crd__group_key_route(name, len) : len;
}

void crd__hold_count_cmd(const crd_lock *l, const char *field, size_t flen, crd__cmd *cmd)
{
    const crd__kind_ops *ops = &crd__kinds[l->kind];
    if (ops->hold_count != NULL) {
        ops->hold_count(l, field, flen, cmd);
        return;
    }
    crd__cmd_init(cmd, CRD__PLAIN, 3);
    crd__cmd_arg_str(cmd, "HGET");
    crd__cmd_arg(cmd, l->name, l->route_len);
    crd__cmd_arg(cmd, field, flen);
}

bool crd__hold_count_of(int kind, const redisReply *r, const char *field, size_t flen,
                        int64_t *count)
{
    const crd__kind_ops *ops = &crd__kinds[kind];
    if (ops->hold_count_reply != NULL)
        return ops->hold_count_reply(r, field, flen, count);
    *count = 0;
    if (r == NULL)
        return false;
    if (r->type == REDIS_REPLY_NIL)
        return true;
    return r->type == REDIS_REPLY_STRING && crd__reply_int(r, count);
}
/* ---- lock records ---------------------------------------------------------------------------- */

void crd__lock_clear(crd_lock *l)
{
    free(l->name);
    crd__names_clear(&l->names);
    free(l->group); /* a view over name and names */
    free(l->group_name);
    memset(l, 0, sizeof *l);
}

crd_status crd__lock_init(crd_lock *l, crd_client *c, crd__kind kind, const char *name,
                          size_t len)
{
    memset(l, 0, sizeof *l);
    l->client = c;
    l->kind = kind;
    /* What unlock scripts publish with is the client's choice (PROTOCOL.md 4.4): SPUBLISH
     * with sharded pub/sub, else PUBLISH (also for records made without a client). */
    l->publish = c != NULL && c->publish != NULL ? c->publish : "PUBLISH";
    l->name = malloc(len + 1);
    if (l->name == NULL)
        return CRD_NO_MEMORY;
    memcpy(l->name, name, len);
    l->name[len] = '\0';
    l->name_len = len;
    l->route_len = len;
    crd__spin_backoff_exponential(&l->spin, CRD__SPIN_INITIAL_MS, CRD__SPIN_MAX_MS,
                                  CRD__SPIN_MULTIPLIER);
    if (kind == CRD__GROUP) {
        /* The name is the hold key: the group and its fields are read from it, and the
         * keys and channel are the group name's (its prefix). */
        l->group = malloc(sizeof *l->group);
        if (l->group == NULL || !crd__group_view(l->group, l->name, len)) {
            crd_status bad = l->group == NULL ? CRD_NO_MEMORY : CRD_INVALID_ARGUMENT;
            crd__lock_clear(l);
            return bad;
        }
        l->route_len = l->group->name_len;
        l->group_name = malloc(l->route_len + 1);
        if (l->group_name == NULL) {
            crd__lock_clear(l);
            return CRD_NO_MEMORY;
        }
        memcpy(l->group_name, name, l->route_len);
        l->group_name[l->route_len] = '\0';
    }
    crd_status st = crd__names_init(&l->names, kind, name, l->route_len);
    if (st == CRD_OK && l->group != NULL) {
        l->group->channel = l->names.channel;
        l->group->latch_prefix = l->names.latch_prefix;
    }
    if (st != CRD_OK)
        crd__lock_clear(l);
    return st;
}
