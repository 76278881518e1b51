/*
 * kinds_ext.c -- the kinds of Redisson 4.7's lock family as data (kinds_ext.h): the
 * non-reentrant lock and fair lock, the spin lock, the grouped multi-lock, the rate limiter
 * and RSemaphore.releaseIfExists. Each builder puts its lua/ script's KEYS and ARGV in
 * Redisson's order (the golden r47_* recordings, tests/golden/README-r47.md), each reader
 * names what a reply means; kinds.c does the same for the older kinds.
 *
 * Pure functions over names and arguments (the clock and the OS's random bytes aside);
 * no lock, any thread.
 */
#include "kinds_ext.h"

#include <stdlib.h>
#include <string.h>

static void name_key(const crd_lock *l, crd__cmd *cmd)
{
    crd__cmd_key(cmd, l->name, l->name_len);
}

static void buf_key(crd__cmd *cmd, const crd__buf *b)
{
    crd__cmd_key(cmd, b->p, b->len);
}

void crd__arg_and_now(crd__cmd *cmd, int64_t v, bool now_first)
{
    int64_t now = crd__epoch_ms();
    crd__cmd_arg_i64(cmd, now_first ? now : v);
    crd__cmd_arg_i64(cmd, now_first ? v : now);
}

void crd__fair_acquire_cmd(const crd_lock *l, const crd__acq_args *a, int script, crd__cmd *cmd)
{
    crd__cmd_init(cmd, script, 0);
    name_key(l, cmd);
    buf_key(cmd, &l->names.queue);
    buf_key(cmd, &l->names.deadlines);
    crd__cmd_arg_i64(cmd, a->lease_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
    crd__arg_and_now(cmd, a->fair_wait, a->nowait); /* the try-once form: now, then wait */
}

/* ---- non-reentrant lock and fair lock ------------------------------------------------------ */

bool crd__reentry_refused(const redisReply *r)
{
    static const char token[] = CRD__REENTRY_ERROR;
    const size_t n = sizeof token - 1;
    if (r == NULL || r->type != REDIS_REPLY_ERROR)
        return false;
    const char *p = r->str;
    size_t len = r->len;
    if (len >= 4 && memcmp(p, "ERR ", 4) == 0) {
        p += 4;
        len -= 4;
    }
    return len == n && memcmp(p, token, n) == 0;
}

void crd__nrlock_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_NRLOCK_ACQUIRE, 0);
    name_key(l, cmd);
    crd__cmd_arg_i64(cmd, a->lease_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
    crd__cmd_arg_str(cmd, CRD__REENTRY_ERROR);
}

void crd__nrfair_acquire(const crd_lock *l, const crd__acq_args *a, crd__cmd *cmd)
{
    crd__fair_acquire_cmd(
        l, a, a->nowait ? CRD__SCRIPT_NRFAIR_TRY_ACQUIRE : CRD__SCRIPT_NRFAIR_ACQUIRE, cmd);
    crd__cmd_arg_str(cmd, CRD__REENTRY_ERROR);
}

/* ---- spin lock ------------------------------------------------------------------------------ */

void crd__spin_release(const crd_lock *l, const crd__rel_args *a, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_SPIN_UNLOCK, 0);
    name_key(l, cmd);
    crd__cmd_key(cmd, a->latch, a->latch_len);
    crd__cmd_arg_i64(cmd, a->rearm_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
    crd__cmd_arg_i64(cmd, a->latch_ttl_ms);
}

crd__rel_outcome crd__spin_release_reply(const redisReply *r)
{
    if (r->type == REDIS_REPLY_NIL)
        return CRD__REL_NOT_HELD;
    if (r->type != REDIS_REPLY_INTEGER)
        return CRD__REL_BAD;
    if (r->integer == 1)
        return CRD__REL_RELEASED;
    return r->integer == 0 ? CRD__REL_STILL_HELD : CRD__REL_BAD;
}

void crd__spin_force_unlock(const crd_lock *l, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_SPIN_FORCE_UNLOCK, 0);
    name_key(l, cmd);
}

/* ---- grouped multi-lock --------------------------------------------------------------------- */

crd_status crd__group_init(crd__group *g, const char *name, size_t len, const void *const *values,
                           const size_t *lens, size_t n)
{
    memset(g, 0, sizeof *g);
    if (n == 0 || values == NULL || lens == NULL)
        return CRD_INVALID_ARGUMENT;
    g->name = malloc(len + 1);
    g->fields = calloc(n, sizeof *g->fields);
    crd_status st = g->name != NULL && g->fields != NULL ? CRD_OK : CRD_NO_MEMORY;
    if (st == CRD_OK) {
        memcpy(g->name, name, len);
        g->name[len] = '\0';
        g->name_len = len;
        st = crd__derived_name(CRD__LOCK_CHANNEL, name, len, &g->channel);
    }
    if (st == CRD_OK)
        st = crd__latch_prefix(name, len, &g->latch_prefix);
    for (size_t i = 0; st == CRD_OK && i < n; i++) {
        if (values[i] == NULL && lens[i] != 0) {
            st = CRD_INVALID_ARGUMENT;
            break;
        }
        char f[CRD__FML_FIELD_SIZE];
        crd__fml_field(values[i] != NULL ? values[i] : "", lens[i], f);
        bool seen = false;
        for (size_t j = 0; j < g->nfields && !seen; j++)
            seen = memcmp(g->fields[j], f, CRD__FML_FIELD_SIZE) == 0;
        if (!seen)
            memcpy(g->fields[g->nfields++], f, CRD__FML_FIELD_SIZE);
    }
    if (st != CRD_OK)
        crd__group_clear(g);
    return st;
}

void crd__group_clear(crd__group *g)
{
    if (g->view) {
        memset(g, 0, sizeof *g);
        return;
    }
    free(g->name);
    free(g->channel.p);
    free(g->latch_prefix.p);
    free(g->fields);
    memset(g, 0, sizeof *g);
}

static void group_fields(const crd__group *g, crd__cmd *cmd)
{
    for (size_t i = 0; i < g->nfields; i++)
        crd__cmd_arg(cmd, g->packed != NULL ? g->packed + i * (CRD__FML_FIELD_SIZE - 1)
                                            : g->fields[i],
                     CRD__FML_FIELD_SIZE - 1);
}

#define FIELD_LEN (CRD__FML_FIELD_SIZE - 1)
#define COUNT_HEX 8

static int by_bytes(const void *a, const void *b) { return memcmp(a, b, FIELD_LEN); }

crd_status crd__group_key(const char *name, size_t len, const void *const *values,
                          const size_t *lens, size_t n, crd__buf *out)
{
    out->p = NULL;
    out->len = 0;
    if (n == 0 || n > CRD__GROUP_MAX || values == NULL || lens == NULL)
        return CRD_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (values[i] == NULL && lens[i] != 0)
            return CRD_INVALID_ARGUMENT;
    char *p = malloc(len + n * FIELD_LEN + COUNT_HEX + 1);
    if (p == NULL)
        return CRD_NO_MEMORY;
    memcpy(p, name, len);
    char *f = p + len;
    for (size_t i = 0; i < n; i++) {
        char one[CRD__FML_FIELD_SIZE];
        crd__fml_field(values[i] != NULL ? values[i] : "", lens[i], one);
        memcpy(f + i * FIELD_LEN, one, FIELD_LEN);
    }
    /* Sorted and without repeats: one set of values, one key (Java's set of fields). */
    qsort(f, n, FIELD_LEN, by_bytes);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || memcmp(f + (k - 1) * FIELD_LEN, f + i * FIELD_LEN, FIELD_LEN) != 0)
            memmove(f + k++ * FIELD_LEN, f + i * FIELD_LEN, FIELD_LEN);
    static const char hex[] = "0123456789abcdef";
    char *t = f + k * FIELD_LEN;
    for (int i = 0; i < COUNT_HEX; i++)
        t[i] = hex[(k >> (4 * (COUNT_HEX - 1 - i))) & 0xf];
    t[COUNT_HEX] = '\0';
    out->p = p;
    out->len = len + k * FIELD_LEN + COUNT_HEX;
    return CRD_OK;
}

/* The field count a hold key ends with, and the group name's length; false when (key,
 * len) is not a hold key. */
static bool key_parts(const char *key, size_t len, size_t *glen, size_t *k)
{
    if (len < COUNT_HEX)
        return false;
    size_t v = 0;
    for (int i = 0; i < COUNT_HEX; i++) {
        char ch = key[len - COUNT_HEX + (size_t)i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v * 16 + (size_t)d;
    }
    if (v == 0 || v > CRD__GROUP_MAX || v * FIELD_LEN > len - COUNT_HEX)
        return false;
    *k = v;
    *glen = len - COUNT_HEX - v * FIELD_LEN;
    return true;
}

size_t crd__group_key_route(const char *key, size_t len)
{
    size_t glen = 0, k = 0;
    return key_parts(key, len, &glen, &k) ? glen : 0;
}

bool crd__group_view(crd__group *g, const char *key, size_t len)
{
    memset(g, 0, sizeof *g);
    size_t glen = 0, k = 0;
    if (!key_parts(key, len, &glen, &k))
        return false;
    g->name = (char *)key; /* a view: never freed, never written */
    g->name_len = glen;
    g->packed = key + glen;
    g->nfields = k;
    g->view = true;
    return true;
}

void crd__group_hold_count(const crd__group *g, const char *field, size_t flen, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__PLAIN, 5);
    crd__cmd_arg_str(cmd, "HMGET");
    crd__cmd_arg(cmd, g->name, g->name_len);
    const char *f1 = g->packed != NULL ? g->packed : g->fields[0];
    crd__cmd_arg(cmd, f1, FIELD_LEN);
    static const char *const suffix[2] = {":lock_count", ":expire_time"};
    for (int i = 0; i < 2; i++) {
        size_t slen = strlen(suffix[i]);
        char *w = crd__cmd_space(cmd, FIELD_LEN + 1 + flen + slen);
        if (w == NULL) {
            crd__cmd_arg(cmd, "", 0);
            continue;
        }
        memcpy(w, f1, FIELD_LEN);
        w[FIELD_LEN] = ':';
        memcpy(w + FIELD_LEN + 1, field, flen);
        memcpy(w + FIELD_LEN + 1 + flen, suffix[i], slen);
        crd__cmd_arg(cmd, w, FIELD_LEN + 1 + flen + slen);
    }
}

bool crd__group_count_reply(const redisReply *r, const char *field, size_t flen, int64_t *count)
{
    *count = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3)
        return false;
    const redisReply *owner = r->element[0];
    if (owner->type != REDIS_REPLY_STRING || owner->len != flen ||
        memcmp(owner->str, field, flen) != 0)
        return true; /* not this owner's: no hold */
    int64_t n = 0, expire = 0;
    if (!crd__reply_int(r->element[1], &n) || !crd__reply_int(r->element[2], &expire))
        return true;
    if (r->element[2]->type == REDIS_REPLY_NIL || expire <= crd__epoch_ms())
        return true; /* lapsed: another owner may take it over (KINDS-R47.md) */
    *count = n;
    return true;
}

/* Words a group command has besides its fields (the builder's inline room is small). */
static void group_init(crd__cmd *cmd, int script, const crd__group *g, int fixed)
{
    crd__cmd_init(cmd, script, fixed + (int)g->nfields);
    crd__cmd_key(cmd, g->name, g->name_len);
}

void crd__group_acquire(const crd__group *g, const crd__acq_args *a, crd__cmd *cmd)
{
    group_init(cmd, a->nowait ? CRD__SCRIPT_GROUP_TRY_ACQUIRE : CRD__SCRIPT_GROUP_ACQUIRE, g, 4);
    crd__arg_and_now(cmd, a->lease_ms, a->nowait); /* the try-once form: now, then the lease */
    crd__cmd_arg(cmd, a->field, a->flen);
    group_fields(g, cmd);
}

crd__acq_outcome crd__group_acquire_reply(const redisReply *r, bool nowait, int64_t *hint_ms,
                                          int64_t *token)
{
    (void)token;
    *hint_ms = 0;
    if (r->type == REDIS_REPLY_NIL)
        return nowait ? CRD__ACQ_BAD : CRD__ACQ_TAKEN;
    if (r->type != REDIS_REPLY_INTEGER)
        return CRD__ACQ_BAD;
    if (nowait)
        return r->integer == 1 ? CRD__ACQ_TAKEN : r->integer == 0 ? CRD__ACQ_REFUSED : CRD__ACQ_BAD;
    if (r->integer < 0)
        return CRD__ACQ_BAD;
    *hint_ms = r->integer;
    return CRD__ACQ_HELD;
}

void crd__group_release(const crd__group *g, const crd__rel_args *a, const char *publish,
                        crd__cmd *cmd)
{
    group_init(cmd, CRD__SCRIPT_GROUP_UNLOCK, g, 9);
    buf_key(cmd, &g->channel);
    crd__cmd_key(cmd, a->latch, a->latch_len);
    crd__cmd_arg(cmd, a->field, a->flen);
    crd__cmd_arg_str(cmd, "0");
    crd__cmd_arg_i64(cmd, a->rearm_ms);
    crd__cmd_arg_str(cmd, publish);
    crd__cmd_arg_i64(cmd, a->latch_ttl_ms);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    group_fields(g, cmd);
}

crd__rel_outcome crd__group_release_reply(const redisReply *r)
{
    if (r->type == REDIS_REPLY_NIL)
        return CRD__REL_NOT_HELD;
    if (r->type != REDIS_REPLY_INTEGER)
        return CRD__REL_BAD;
    if (r->integer >= 1)
        return CRD__REL_RELEASED;
    if (r->integer == 0)
        return CRD__REL_STILL_HELD;
    return r->integer == -1 ? CRD__REL_NOT_HELD : CRD__REL_BAD;
}

void crd__group_force_unlock(const crd__group *g, const char *publish, crd__cmd *cmd)
{
    group_init(cmd, CRD__SCRIPT_GROUP_FORCE_UNLOCK, g, 4);
    buf_key(cmd, &g->channel);
    crd__cmd_arg_str(cmd, "0");
    crd__cmd_arg_str(cmd, publish);
    group_fields(g, cmd);
}

void crd__group_renew(const crd__group *g, const char *field, size_t flen, int64_t timeout_ms,
                      crd__cmd *cmd)
{
    group_init(cmd, CRD__SCRIPT_GROUP_RENEW, g, 4);
    crd__cmd_arg_i64(cmd, timeout_ms);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    crd__cmd_arg(cmd, field, flen);
    group_fields(g, cmd);
}

void crd__group_is_locked(const crd__group *g, crd__cmd *cmd)
{
    group_init(cmd, CRD__SCRIPT_GROUP_IS_LOCKED, g, 2);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    group_fields(g, cmd);
}

void crd__group_is_held(const crd__group *g, const char *field, size_t flen, crd__cmd *cmd)
{
    group_init(cmd, CRD__SCRIPT_GROUP_IS_HELD, g, 3);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    crd__cmd_arg(cmd, field, flen);
    group_fields(g, cmd);
}

