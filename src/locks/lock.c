/*
 * lock.c -- lock handles (reentrant, fair, read-write views) and what can be asked of a
 * lock without taking it: force-unlock, is-locked, is-held, hold count, TTL, local
 * validity, and extending a hold's lease. Taking a lock is acquire.c, giving it back
 * release.c; what each kind sends is kinds.c.
 *
 * Threads: any caller thread. Locks: holds->mu around bookkeeping only (never during
 * Redis traffic).
 */
#include "kinds_ext.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- handles ----------------------------------------------------------------------------- */

static crd_status new_lock(crd_client *c, crd__kind kind, const char *name, size_t len,
                           crd_lock **out)
{
    crd_status st = crd__check_call(c, out, "lock", name, len, true);
    if (out != NULL)
        *out = NULL;
    if (st != CRD_OK || out == NULL) /* for clang's analyzer (checked) */
        return st;
    crd_lock *l = malloc(sizeof *l);
    if (l == NULL || crd__lock_init(l, c, kind, name, len) != CRD_OK) {
        free(l);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a lock");
    }
    crd__ok(c);
    *out = l;
    return CRD_OK;
}

crd_status crd_lock_new_n(crd_client *c, const char *name, size_t len, crd_lock **out)
{
    return new_lock(c, CRD__RLOCK, name, len, out);
}

crd_status crd_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    return new_lock(c, CRD__RLOCK, name, name != NULL ? strlen(name) : 0, out);
}

crd_status crd_fair_lock_new_n(crd_client *c, const char *name, size_t len, crd_lock **out)
{
    return new_lock(c, CRD__FAIR, name, len, out);
}

crd_status crd_fair_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    return new_lock(c, CRD__FAIR, name, name != NULL ? strlen(name) : 0, out);
}

crd_status crd_fenced_lock_new_n(crd_client *c, const char *name, size_t len, crd_lock **out)
{
    return new_lock(c, CRD__FENCED, name, len, out);
}

crd_status crd_fenced_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    return new_lock(c, CRD__FENCED, name, name != NULL ? strlen(name) : 0, out);
}

crd_status crd_nonreentrant_lock_new_n(crd_client *c, const char *name, size_t len,
                                       crd_lock **out)
{
    return new_lock(c, CRD__NRLOCK, name, len, out);
}

crd_status crd_nonreentrant_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    return new_lock(c, CRD__NRLOCK, name, name != NULL ? strlen(name) : 0, out);
}

crd_status crd_nonreentrant_fair_lock_new_n(crd_client *c, const char *name, size_t len,
                                            crd_lock **out)
{
    return new_lock(c, CRD__NRFAIR, name, len, out);
}

crd_status crd_nonreentrant_fair_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    return new_lock(c, CRD__NRFAIR, name, name != NULL ? strlen(name) : 0, out);
}

crd_status crd_spin_options_init(crd_spin_options *o)
{
    if (o == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "options is NULL");
    memset(o, 0, sizeof *o);
    o->backoff = CRD_BACKOFF_EXPONENTIAL;
    o->initial_delay_ms = CRD__SPIN_INITIAL_MS;
    o->max_delay_ms = CRD__SPIN_MAX_MS;
    o->multiplier = CRD__SPIN_MULTIPLIER;
    o->delay_ms = CRD__SPIN_CONSTANT_MS;
    return CRD_OK;
}

/* The back-off a spin lock's waiters use, from its options (NULL: Redisson's defaults). */
static crd_status spin_backoff(crd_client *c, const crd_spin_options *o, crd__spin_backoff *b)
{
    crd_spin_options d;
    if (o == NULL) {
        crd_spin_options_init(&d);
        o = &d;
    }
    if (o->backoff == CRD_BACKOFF_CONSTANT) {
        if (o->delay_ms < 1 || o->delay_ms > CRD_DURATION_MAX_MS)
            return crd__fail(c, CRD_INVALID_ARGUMENT, "spin lock: a constant back-off's delay_ms "
                             "must be 1..%lld (got %lld)", (long long)CRD_DURATION_MAX_MS,
                             (long long)o->delay_ms);
        crd__spin_backoff_constant(b, o->delay_ms);
        return CRD_OK;
    }
    if (o->backoff != CRD_BACKOFF_EXPONENTIAL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "spin lock: unknown back-off %d (use "
                         "CRD_BACKOFF_EXPONENTIAL or CRD_BACKOFF_CONSTANT)", (int)o->backoff);
    if (o->initial_delay_ms < 1 || o->max_delay_ms < o->initial_delay_ms ||
        o->max_delay_ms > CRD_DURATION_MAX_MS || o->multiplier < 1 || o->multiplier > 1000)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "spin lock: an exponential back-off needs "
                         "1 <= initial_delay_ms <= max_delay_ms <= %lld and a multiplier of "
                         "1..1000 (got %lld, %lld, %d)", (long long)CRD_DURATION_MAX_MS,
                         (long long)o->initial_delay_ms, (long long)o->max_delay_ms,
                         o->multiplier);
    crd__spin_backoff_exponential(b, o->initial_delay_ms, o->max_delay_ms, o->multiplier);
    return CRD_OK;
}

crd_status crd_spin_lock_new_n(crd_client *c, const char *name, size_t len,
                               const crd_spin_options *opts, crd_lock **out)
{
    if (out != NULL)
        *out = NULL;
    crd__spin_backoff b;
    crd_status st = crd__check_call(c, out, "lock", name, len, true);
    if (st == CRD_OK)
        st = spin_backoff(c, opts, &b);
    if (st != CRD_OK || out == NULL) /* for clang's analyzer (checked) */
        return st;
    st = new_lock(c, CRD__SPIN, name, len, out);
    if (st == CRD_OK)
        (*out)->spin = b;
    return st;
}

crd_status crd_spin_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    return crd_spin_lock_new_n(c, name, name != NULL ? strlen(name) : 0, NULL, out);
}

crd_status crd_group_lock_new_n(crd_client *c, const char *group, size_t group_len,
                                const void *const *values, const size_t *value_lens, size_t n,
                                crd_lock **out)
{
    crd_status st = crd__check_call(c, out, "lock", group, group_len, true);
    if (out != NULL)
        *out = NULL;
    if (st != CRD_OK || out == NULL) /* for clang's analyzer (checked) */
        return st;
    if (n == 0 || values == NULL || value_lens == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "grouped lock \"%.*s\": %s", (int)(group_len > 60
                         ? 60 : group_len), group, n == 0 ? "no values (a group locks 1 or more)"
                         : "values or their lengths are NULL");
    if (n > CRD__GROUP_MAX)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "grouped lock: %zu values; at most %d", n,
                         CRD__GROUP_MAX);
    for (size_t i = 0; i < n; i++) {
        if (values[i] == NULL && value_lens[i] != 0)
            return crd__fail(c, CRD_INVALID_ARGUMENT, "grouped lock: value %zu is NULL", i);
        if (value_lens[i] > CRD_NAME_MAX)
            return crd__fail(c, CRD_INVALID_ARGUMENT, "grouped lock: value %zu is %zu bytes; "
                             "the maximum is %d", i, value_lens[i], CRD_NAME_MAX);
    }
    crd__buf key;
    st = crd__group_key(group, group_len, values, value_lens, n, &key);
    if (st != CRD_OK)
        return crd__fail(c, st, "grouped lock: cannot build its key");
    crd_lock *l = malloc(sizeof *l);
    st = l == NULL ? CRD_NO_MEMORY : crd__lock_init(l, c, CRD__GROUP, key.p, key.len);
    free(key.p);
    if (st != CRD_OK) {
        free(l);
        return crd__fail(c, st, "cannot allocate a grouped lock");
    }
    crd__ok(c);
    *out = l;
    return CRD_OK;
}

crd_status crd_group_lock_new(crd_client *c, const char *group, const char *const *values,
                              size_t n, crd_lock **out)
{
    size_t small[64];
    size_t *lens = n <= 64 ? small : malloc(n * sizeof *lens);
    if (lens == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a grouped lock");
    bool bad = false;
    for (size_t i = 0; values != NULL && i < n; i++) {
        lens[i] = values[i] != NULL ? strlen(values[i]) : 0;
        bad = bad || values[i] == NULL;
    }
    crd_status st =
        bad ? crd__fail(c, CRD_INVALID_ARGUMENT, "grouped lock: a value is NULL")
            : crd_group_lock_new_n(c, group, group != NULL ? strlen(group) : 0,
                                   (const void *const *)values, lens, n, out);
    if (bad && out != NULL)
        *out = NULL;
    if (lens != small)
        free(lens);
    return st;
}

void crd_lock_free(crd_lock *l)
{
    if (l == NULL || l->view)
        return;
    crd__lock_clear(l);
    free(l);
}

/* ---- read-write locks --------------------------------------------------------------------- */

struct crd_rwlock {
    crd_lock read;
    crd_lock write;
};

crd_status crd_rwlock_new_n(crd_client *c, const char *name, size_t len, crd_rwlock **out)
{
    crd_status st = crd__check_call(c, out, "lock", name, len, true);
    if (out != NULL)
        *out = NULL;
    if (st != CRD_OK || out == NULL) /* for clang's analyzer (checked) */
        return st;
    crd_rwlock *rw = calloc(1, sizeof *rw);
    if (rw == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a read-write lock");
    if (crd__lock_init(&rw->read, c, CRD__READ, name, len) != CRD_OK ||
        crd__lock_init(&rw->write, c, CRD__WRITE, name, len) != CRD_OK) {
        crd__lock_clear(&rw->read);
        free(rw);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a read-write lock");
    }
    rw->read.view = rw->write.view = true;
    crd__ok(c);
    *out = rw;
    return CRD_OK;
}

crd_status crd_rwlock_new(crd_client *c, const char *name, crd_rwlock **out)
{
    return crd_rwlock_new_n(c, name, name != NULL ? strlen(name) : 0, out);
}

crd_lock *crd_rwlock_read(crd_rwlock *rw) { return rw == NULL ? NULL : &rw->read; }
crd_lock *crd_rwlock_write(crd_rwlock *rw) { return rw == NULL ? NULL : &rw->write; }

void crd_rwlock_free(crd_rwlock *rw)
{
    if (rw == NULL)
        return;
    crd__lock_clear(&rw->read);
    crd__lock_clear(&rw->write);
    free(rw);
}

const char *crd_lock_name(const crd_lock *l, size_t *len)
{
    if (l == NULL) {
        if (len != NULL)
            *len = 0;
        return NULL;
    }
    if (len != NULL)
        *len = l->route_len; /* a group's name, not its hold key */
    return l->group_name != NULL ? l->group_name : l->name;
}

crd_status crd__lock_check(crd_lock *l)
{
    if (l == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "lock is NULL");
    return crd__client_check(l->client);
}

crd_status crd__lock_check_out(crd_lock *l, const void *out, const char *what)
{
    crd_status st = crd__lock_check(l);
    if (st == CRD_OK && out == NULL)
        st = crd__fail(l->client, CRD_INVALID_ARGUMENT, "%s is NULL", what);
    return st;
}

crd_status crd__lock_check_fenced(crd_lock *l, const int64_t *token, const char *why)
{
    crd_status st = crd__lock_check_out(l, token, "token");
    if (st == CRD_OK && !crd__kinds[l->kind].fenced)
        st = crd__fail(l->client, CRD_INVALID_ARGUMENT, "\"%.*s\" is a %s, not a fenced lock%s",
                       CRD__NAME_FMT(l), crd__kinds[l->kind].label, why);
    return st;
}

int64_t crd__local_count(const crd_lock *l, uint64_t owner, crd__kind kind)
{
    crd__holds *h = l->client->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, kind);
    int64_t n = hold != NULL && !hold->lost ? hold->count : 0;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* ---- force-unlock and introspection --------------------------------------------------------- */

crd_status crd_lock_force_unlock(crd_lock *l, bool *was_locked)
{
    crd_status st = crd__lock_check(l);
    if (st != CRD_OK)
        return st;
    crd_client *c = l->client;
    crd__cmd cmd;
    crd__kinds[l->kind].force_unlock(l, &cmd);
    redisReply *r = NULL;
    st = crd__call(c, &cmd, "force-unlock", &r, NULL);
    crd__cmd_free(&cmd);
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_INTEGER) {
        if (was_locked != NULL)
            *was_locked = r->integer >= 1; /* a group's: the values it freed */
        crd__ok(c);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        /* The script names what the key is when it is not a lock: it deleted nothing.
         * Redisson's forceUnlock deletes whatever is there; a mistyped name must not
         * cost somebody's data. */
        if (was_locked != NULL)
            *was_locked = false;
        bool hash = r->len == 4 && memcmp(r->str, "hash", 4) == 0;
        st = crd__fail(c, CRD_INVALID_ARGUMENT, "force-unlock refused: \"%.*s\" holds %s%.*s%s, "
                       "not a lock; nothing was deleted", CRD__NAME_FMT(l),
                       hash ? "a hash whose fields are not a lock's owners" : "a ",
                       hash ? 0 : (int)(r->len > 20 ? 20 : r->len), hash ? "" : r->str,
                       hash ? "" : " value");
    } else {
        st = crd__reply_fail(c, r, "force-unlock");
    }
    freeReplyObject(r);
    return st;
}

/* Runs a read-only command or script and returns its integer (or a string holding one:
 * HGET of a count) in *out. */
static crd_status read_int(crd_lock *l, crd__cmd *cmd, int64_t *out, const char *what)
{
    crd_client *c = l->client;
    redisReply *r = NULL;
    crd_status st = crd__call(c, cmd, what, &r, NULL);
    crd__cmd_free(cmd);
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_STRING && !crd__reply_int(r, out))
        st = crd__fail(c, CRD_PROTOCOL, "%s: field holds \"%.*s\", not a hold count", what,
                       (int)(r->len > 40 ? 40 : r->len), r->str);
    else if (!crd__reply_int(r, out))
        st = crd__reply_fail(c, r, what);
    freeReplyObject(r);
    if (st == CRD_OK)
        crd__ok(c);
    return st;
}

/* A plain read of the lock's hash: WORD N [field]. */
static void hash_read(crd__cmd *cmd, const char *word, const crd_lock *l, const char *field,
                      size_t flen)
{
    crd__cmd_init(cmd, CRD__PLAIN, 3);
    crd__cmd_arg_str(cmd, word);
    crd__cmd_arg(cmd, l->name, l->route_len);
    if (field != NULL)
        crd__cmd_arg(cmd, field, flen);
}

crd_status crd_lock_is_locked(crd_lock *l, bool *locked)
{
    crd_status st = crd__lock_check_out(l, locked, "locked");
    if (st != CRD_OK)
        return st;
    crd__cmd cmd;
    crd__kinds[l->kind].is_locked(l, &cmd);
    int64_t v = 0;
    st = read_int(l, &cmd, &v, "is-locked");
    *locked = v == 1;
    return st;
}

/* HEXISTS or HGET of owner's field (with ":write" for a write lock) in the lock's hash,
 * read as an integer into *v. */
static crd_status read_owner_field(crd_lock *l, uint64_t owner, const char *verb, int64_t *v)
{
    char field[CRD__FIELD_MAX];
    size_t flen = crd__field(l->client->uuid, owner, crd__kinds[l->kind].write_field, field);
    crd__cmd cmd;
    hash_read(&cmd, verb, l, field, flen);
    return read_int(l, &cmd, v, verb);
}

crd_status crd_lock_is_held_owner(crd_lock *l, uint64_t owner, bool *held)
{
    crd_status st = crd__lock_check_out(l, held, "held");
    int64_t v = 0;
    if (st == CRD_OK && crd__kinds[l->kind].is_held != NULL) {
        /* The group's: every value names the owner with a live entry (Redisson's skips
         * the first value). */
        char field[CRD__FIELD_MAX];
        size_t flen = crd__field(l->client->uuid, owner, false, field);
        crd__cmd cmd;
        crd__kinds[l->kind].is_held(l, field, flen, &cmd);
        st = read_int(l, &cmd, &v, "is-held");
    } else if (st == CRD_OK) {
        st = read_owner_field(l, owner, "HEXISTS", &v);
    }
    if (held != NULL)
        *held = v == 1;
    return st;
}

crd_status crd_lock_is_held(crd_lock *l, bool *held)
{
    return crd_lock_is_held_owner(l, crd_owner_current(), held);
}

crd_status crd_lock_hold_count_owner(crd_lock *l, uint64_t owner, int64_t *count)
{
    crd_status st = crd__lock_check_out(l, count, "count");
    if (st != CRD_OK)
        return st;
    *count = 0;
    if (crd__kinds[l->kind].hold_count == NULL)
        return read_owner_field(l, owner, "HGET", count);
    char field[CRD__FIELD_MAX];
    size_t flen = crd__field(l->client->uuid, owner, false, field);
    crd__cmd cmd;
    crd__hold_count_cmd(l, field, flen, &cmd);
    redisReply *r = NULL;
    st = crd__call(l->client, &cmd, "hold count", &r, NULL);
    crd__cmd_free(&cmd);
    if (st != CRD_OK)
        return st;
    if (!crd__hold_count_of(l->kind, r, field, flen, count))
        st = crd__reply_fail(l->client, r, "hold count");
    freeReplyObject(r);
    if (st == CRD_OK)
        crd__ok(l->client);
    return st;
}

crd_status crd_lock_hold_count(crd_lock *l, int64_t *count)
{
    return crd_lock_hold_count_owner(l, crd_owner_current(), count);
}

crd_status crd_lock_remaining_ttl(crd_lock *l, int64_t *ttl_ms)
{
    crd_status st = crd__lock_check_out(l, ttl_ms, "ttl_ms");
    if (st != CRD_OK)
        return st;
    crd__cmd cmd;
    hash_read(&cmd, "PTTL", l, NULL, 0);
    return read_int(l, &cmd, ttl_ms, "PTTL");
}

crd_status crd_lock_token(crd_lock *l, int64_t *token)
{
    crd_status st = crd__lock_check_fenced(l, token, "");
    if (st != CRD_OK)
        return st;
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__PLAIN, 2);
    crd__cmd_arg_str(&cmd, "GET");
    crd__cmd_arg(&cmd, l->names.token.p, l->names.token.len);
    *token = 0;
    return read_int(l, &cmd, token, "GET token");
}

crd_status crd_lock_validity_ms_owner(crd_lock *l, uint64_t owner, int64_t *validity_ms)
{
    crd_status st = crd__lock_check_out(l, validity_ms, "validity_ms");
    if (st != CRD_OK)
        return st;
    crd_client *c = l->client;
    *validity_ms = 0;
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    int64_t left = hold != NULL ? hold->valid_until - crd__now_ms() : 0;
    bool lost = hold != NULL && (hold->lost || left <= 0);
    pthread_mutex_unlock(&h->mu);
    if (hold == NULL)
        return crd__fail(c, CRD_NOT_OWNER, "owner %llu holds no lock on this name here",
                         (unsigned long long)owner);
    if (lost)
        return crd__fail(c, CRD_LOCK_LOST, "the hold is lost or its lease has run out");
    *validity_ms = left;
    crd__ok(c);
    return CRD_OK;
}

crd_status crd_lock_validity_ms(crd_lock *l, int64_t *validity_ms)
{
    return crd_lock_validity_ms_owner(l, crd_owner_current(), validity_ms);
}

/* Records an extend's answer: a new validity, or the hold is gone. */
static void settle_extend(crd_lock *l, uint64_t owner, bool ok, int64_t sent, int64_t lease_ms)
{
    crd__holds *h = l->client->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    if (hold != NULL) {
        if (ok) {
            hold->valid_until = sent + lease_ms;
            if (!hold->watchdog)
                hold->lease_ms = lease_ms;
        } else {
            hold->lost = true;
        }
    }
    pthread_mutex_unlock(&h->mu);
}

crd_status crd__extend_begin(crd_lock *l, uint64_t owner, int64_t lease_ms,
                             char field[CRD__FIELD_MAX], crd__cmd *cmd)
{
    crd_status st = crd__lock_check(l);
    if (st != CRD_OK)
        return st;
    crd_client *c = l->client;
    if (lease_ms < 1 || lease_ms > CRD_DURATION_MAX_MS)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "lease_ms must be 1..%lld (got %lld)",
                         (long long)CRD_DURATION_MAX_MS, (long long)lease_ms);
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    bool known = hold != NULL, lost = hold != NULL && hold->lost;
    pthread_mutex_unlock(&h->mu);
    if (!known)
        return crd__fail(c, CRD_NOT_OWNER, "owner %llu holds no lock on this name here",
                         (unsigned long long)owner);
    if (lost)
        return crd__fail(c, CRD_LOCK_LOST, "the hold was lost");
    /* The command points into field: the caller keeps it until the command is freed. */
    size_t flen = crd__field(c->uuid, owner, crd__kinds[l->kind].write_field, field);
    crd__kinds[l->kind].extend(l, field, flen, lease_ms, cmd);
    return CRD_OK;
}

crd_status crd__extend_end(crd_lock *l, uint64_t owner, int64_t lease_ms, crd_status st,
                           redisReply *r, int64_t sent)
{
    crd_client *c = l->client;
    if (st != CRD_OK)
        return st;
    /* {1} / {0}, or a group's 1 / 0 */
    const redisReply *v = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1
                              ? r->element[0]
                              : r;
    if (r != NULL && crd__reply_classify(r) == CRD__REPLY_OK && v->type == REDIS_REPLY_INTEGER &&
        (v != r || crd__kinds[l->kind].renew_one != NULL)) {
        bool ok = v->integer == 1;
        settle_extend(l, owner, ok, sent, lease_ms);
        st = ok ? CRD_OK : crd__fail(c, CRD_LOCK_LOST, "the hold expired or was force-unlocked");
        if (ok)
            crd__ok(c);
    } else {
        st = crd__reply_fail(c, r, "extend");
    }
    freeReplyObject(r);
    return st;
}

crd_status crd_lock_extend_owner(crd_lock *l, uint64_t owner, int64_t lease_ms)
{
    crd__cmd cmd;
    char field[CRD__FIELD_MAX];
    crd_status st = crd__extend_begin(l, owner, lease_ms, field, &cmd);
    if (st != CRD_OK)
        return st;
    int64_t sent = 0;
    redisReply *r = NULL;
    st = crd__call(l->client, &cmd, "extend", &r, &sent);
    crd__cmd_free(&cmd);
    return crd__extend_end(l, owner, lease_ms, st, r, sent);
}

crd_status crd_lock_extend(crd_lock *l, int64_t lease_ms)
{
    return crd_lock_extend_owner(l, crd_owner_current(), lease_ms);
}

/* ---- the event loop's lock operations (loop.c) -------------------------------------------- */

crd_op *crd__lock_op_new(crd_lock *l, uint64_t owner, const crd__op_kind *kind, size_t size,
                         crd_op_done_fn done, void *user, crd_status *st)
{
    *st = crd__lock_check(l);
    if (*st != CRD_OK)
        return NULL;
    if (done == NULL || owner == 0) {
        *st = crd__fail(l->client, CRD_INVALID_ARGUMENT, "%s",
                        done == NULL ? "done is NULL" : "owner id 0 is not valid");
        return NULL;
    }
    crd_op *op = crd__op_new(l->client, kind, size, done, user, st);
    if (op == NULL)
        return NULL;
    op->l = l;
    op->owner = owner;
    return op;
}

/* An extend on the event loop: on the engine (never resent after CRD_IO: a second extend
 * is harmless, but the caller hears what happened). */
typedef struct extend_op {
    crd_op op;
    int64_t lease_ms;
    crd__aio *aio;
    bool begun;
} extend_op;

static extend_op *xop(crd_op *op) { return (extend_op *)(void *)op; }

/* Puts the extend on the engine (EVAL after a NOSCRIPT); false when refused or unbuilt. */
static bool send_extend(extend_op *o, bool eval, crd_status *st)
{
    crd__cmd cmd;
    char field[CRD__FIELD_MAX];
    if ((*st = crd__extend_begin(o->op.l, o->op.owner, o->lease_ms, field, &cmd)) != CRD_OK)
        return false;
    crd__req *rq = crd__call_request(o->op.c, &cmd, eval);
    crd__cmd_free(&cmd);
    o->aio = rq != NULL ? crd__aio_submit(o->op.c, rq, eval) : NULL;
    if (o->aio == NULL)
        *st = crd__fail(o->op.c, CRD_CLOSED, "client is closed");
    return o->aio != NULL;
}

static int xop_step(crd_op *op)
{
    extend_op *o = xop(op);
    crd_client *c = op->c;
    crd_status st;
    if (op->landed)
        return (int)op->off_st; /* it ran whole on the helper thread */
    if (!o->begun) {
        o->begun = true;
        if (!crd__call_async_ok(c))
            return crd__op_offload(op) ? -1 : (int)crd_lock_extend_owner(op->l, op->owner,
                                                                          o->lease_ms);
        return send_extend(o, false, &st) ? -1 : (int)st;
    }
    if (!crd__aio_ready(o->aio))
        return -1;
    redisReply *r = NULL;
    int64_t sent;
    bool eval;
    st = crd__aio_take(c, o->aio, &r, &sent, &eval);
    o->aio = NULL;
    if (st == CRD_OK && !eval && crd__reply_classify(r) == CRD__REPLY_NOSCRIPT) {
        freeReplyObject(r);
        return send_extend(o, true, &st) ? -1 : (int)st; /* nothing ran */
    }
    return (int)crd__extend_end(op->l, op->owner, o->lease_ms, st, r, sent);
}

static crd_status xop_helper(crd_op *op)
{
    return crd_lock_extend_owner(op->l, op->owner, xop(op)->lease_ms);
}

static int64_t xop_timeout(crd_op *op, int64_t now)
{
    (void)now;
    crd__aio *io = xop(op)->aio;
    if (io == NULL)
        return 0; /* not begun */
    return crd__aio_ready(io) ? 0 : -1;
}

static crd_status xop_close(crd_op *op)
{
    extend_op *o = xop(op);
    if (op->landed)
        return op->off_st;
    if (o->aio != NULL) {
        redisReply *r = crd__aio_drop(o->aio);
        o->aio = NULL;
        if (r != NULL)
            freeReplyObject(r);
    }
    return CRD_CLOSED;
}

static const crd__op_kind extend_kind = {xop_step, xop_helper, xop_timeout, xop_close, false};

crd_status crd_lock_extend_async(crd_lock *l, uint64_t owner, int64_t lease_ms,
                                 crd_op_done_fn done, void *user, crd_op **out)
{
    crd_status st;
    crd_op *op = crd__lock_op_new(l, owner, &extend_kind, sizeof(extend_op), done, user, &st);
    if (op == NULL)
        return st;
    xop(op)->lease_ms = lease_ms;
    crd__op_start(op, out);
    return CRD_OK;
}
