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
    crd__cmd_init(cmd, a->nowait ? CRD__SCRIPT_NRFAIR_TRY_ACQUIRE : CRD__SCRIPT_NRFAIR_ACQUIRE, 0);
    name_key(l, cmd);
    buf_key(cmd, &l->names.queue);
    buf_key(cmd, &l->names.deadlines);
    crd__cmd_arg_i64(cmd, a->lease_ms);
    crd__cmd_arg(cmd, a->field, a->flen);
    if (a->nowait) {
        crd__cmd_arg_i64(cmd, crd__epoch_ms());
        crd__cmd_arg_i64(cmd, a->fair_wait);
    } else {
        crd__cmd_arg_i64(cmd, a->fair_wait);
        crd__cmd_arg_i64(cmd, crd__epoch_ms());
    }
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

void crd__spin_backoff_exponential(crd__spin_backoff *b, int64_t initial_ms, int64_t max_ms, int multiplier)
{
    b->next_ms = initial_ms;
    b->max_ms = max_ms;
    b->multiplier = multiplier;
    b->fails = 0;
}

void crd__spin_backoff_constant(crd__spin_backoff *b, int64_t delay_ms)
{
    b->next_ms = delay_ms;
    b->max_ms = delay_ms;
    b->multiplier = 0;
    b->fails = 0;
}

int64_t crd__spin_backoff_next(crd__spin_backoff *b, uint32_t random)
{
    if (b->multiplier == 0 || b->next_ms >= b->max_ms)
        return b->max_ms;
    int64_t sleep = b->next_ms;
    b->fails++;
    int64_t next = sleep * b->multiplier + (int64_t)(random % (uint32_t)b->fails);
    b->next_ms = next < b->max_ms ? next : b->max_ms;
    return sleep;
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
        st = crd__derived_name(CRD__LATCH, name, len, &g->latch_prefix);
    if (st == CRD_OK) {
        char *p = realloc(g->latch_prefix.p, g->latch_prefix.len + 2);
        if (p == NULL) {
            st = CRD_NO_MEMORY;
        } else {
            p[g->latch_prefix.len++] = ':';
            p[g->latch_prefix.len] = '\0';
            g->latch_prefix.p = p;
        }
    }
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
    free(g->name);
    free(g->channel.p);
    free(g->latch_prefix.p);
    free(g->fields);
    memset(g, 0, sizeof *g);
}

static void group_fields(const crd__group *g, crd__cmd *cmd)
{
    for (size_t i = 0; i < g->nfields; i++)
        crd__cmd_arg(cmd, g->fields[i], CRD__FML_FIELD_SIZE - 1);
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
    /* The try-once form takes now before the lease (Redisson's order). */
    if (a->nowait) {
        crd__cmd_arg_i64(cmd, crd__epoch_ms());
        crd__cmd_arg_i64(cmd, a->lease_ms);
    } else {
        crd__cmd_arg_i64(cmd, a->lease_ms);
        crd__cmd_arg_i64(cmd, crd__epoch_ms());
    }
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

/* ---- rate limiter --------------------------------------------------------------------------- */

/* "{N}:<suffix>" or "N:<suffix>" (Redisson's suffixName), then ":<uuid>" when uuid. */
static crd_status suffix_name(const char *name, size_t len, const char *suffix, const char *uuid,
                              crd__buf *out)
{
    size_t plen = crd__rw_prefix_len(name, len), slen = strlen(suffix);
    size_t ulen = uuid != NULL ? strlen(uuid) + 1 : 0;
    char *p = malloc(plen + 1 + slen + ulen + 1);
    if (p == NULL)
        return CRD_NO_MEMORY;
    size_t o = crd__rw_prefix_put(name, len, p);
    p[o++] = ':';
    memcpy(p + o, suffix, slen);
    o += slen;
    if (uuid != NULL) {
        p[o++] = ':';
        memcpy(p + o, uuid, ulen - 1);
        o += ulen - 1;
    }
    p[o] = '\0';
    out->p = p;
    out->len = o;
    return CRD_OK;
}

crd_status crd__rl_names_init(crd__rl_names *n, const char *name, size_t len, const char *uuid)
{
    memset(n, 0, sizeof *n);
    crd_status st = CRD_NO_MEMORY;
    n->keys[0].p = malloc(len + 1);
    if (n->keys[0].p != NULL) {
        memcpy(n->keys[0].p, name, len);
        n->keys[0].p[len] = '\0';
        n->keys[0].len = len;
        st = suffix_name(name, len, "value", NULL, &n->keys[1]);
    }
    if (st == CRD_OK)
        st = suffix_name(name, len, "value", uuid, &n->keys[2]);
    if (st == CRD_OK)
        st = suffix_name(name, len, "permits", NULL, &n->keys[3]);
    if (st == CRD_OK)
        st = suffix_name(name, len, "permits", uuid, &n->keys[4]);
    if (st != CRD_OK)
        crd__rl_names_clear(n);
    return st;
}

void crd__rl_names_clear(crd__rl_names *n)
{
    for (int i = 0; i < 5; i++)
        free(n->keys[i].p);
    memset(n, 0, sizeof *n);
}

static void rl_keys(crd__cmd *cmd, int script, const crd__rl_names *n)
{
    crd__cmd_init(cmd, script, 0);
    for (int i = 0; i < 5; i++)
        buf_key(cmd, &n->keys[i]);
}

void crd__rl_try_set_rate(const crd__rl_names *n, int64_t rate, int64_t interval_ms,
                          crd__rl_mode mode, int64_t keep_alive_ms, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_RATELIMITER_TRY_SET_RATE, 0);
    buf_key(cmd, &n->keys[0]);
    crd__cmd_arg_i64(cmd, rate);
    crd__cmd_arg_i64(cmd, interval_ms);
    crd__cmd_arg_i64(cmd, (int64_t)mode);
    crd__cmd_arg_i64(cmd, keep_alive_ms);
}

void crd__rl_set_rate(const crd__rl_names *n, int64_t rate, int64_t interval_ms, crd__rl_mode mode,
                      int64_t keep_alive_ms, bool keep_state, bool require_exist, crd__cmd *cmd)
{
    rl_keys(cmd, CRD__SCRIPT_RATELIMITER_SET_RATE, n);
    crd__cmd_arg_i64(cmd, rate);
    crd__cmd_arg_i64(cmd, interval_ms);
    crd__cmd_arg_i64(cmd, (int64_t)mode);
    crd__cmd_arg_i64(cmd, keep_alive_ms);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    crd__cmd_arg_str(cmd, keep_state ? "1" : "0");
    crd__cmd_arg_str(cmd, require_exist ? "1" : "0");
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0;
}

crd_status crd__rl_try_acquire(const crd__rl_names *n, int64_t permits, crd__cmd *cmd)
{
    char hex[33];
    crd_status st = crd__random_hex32(hex);
    rl_keys(cmd, CRD__SCRIPT_RATELIMITER_TRY_ACQUIRE, n);
    crd__cmd_arg_i64(cmd, permits);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    /* The command borrows its words: the bytes go into its own scratch space. */
    char *random = crd__cmd_space(cmd, 16);
    if (random == NULL) {
        crd__cmd_arg(cmd, "", 0);
        return CRD_NO_MEMORY;
    }
    for (int i = 0; i < 16; i++)
        random[i] = (char)(hex_value(hex[2 * i]) << 4 | hex_value(hex[2 * i + 1]));
    crd__cmd_arg(cmd, random, 16);
    return st;
}

void crd__rl_available(const crd__rl_names *n, crd__cmd *cmd)
{
    rl_keys(cmd, CRD__SCRIPT_RATELIMITER_AVAILABLE, n);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
}

void crd__rl_release(const crd__rl_names *n, int64_t permits, crd__cmd *cmd)
{
    rl_keys(cmd, CRD__SCRIPT_RATELIMITER_RELEASE, n);
    crd__cmd_arg_i64(cmd, permits);
}

void crd__rl_expire(const crd__rl_names *n, int64_t ttl_ms, crd__cmd *cmd)
{
    rl_keys(cmd, CRD__SCRIPT_RATELIMITER_EXPIRE, n);
    crd__cmd_arg_i64(cmd, ttl_ms);
    crd__cmd_arg_str(cmd, "");
}

void crd__rl_delete(const crd__rl_names *n, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__PLAIN, 6);
    crd__cmd_arg_str(cmd, "DEL");
    for (int i = 0; i < 5; i++)
        crd__cmd_arg(cmd, n->keys[i].p, n->keys[i].len);
}

/* Whether the error text of r contains words (Redisson's assert adds "user_script:1: "
 * before them and " script: <sha>, ..." after; credisson's scripts send them bare). */
static bool error_says(const redisReply *r, const char *words)
{
    return r->type == REDIS_REPLY_ERROR && memmem(r->str, r->len, words, strlen(words)) != NULL;
}

crd__rl_outcome crd__rl_acquire_reply(const redisReply *r, int64_t *wait_ms)
{
    *wait_ms = 0;
    if (r->type == REDIS_REPLY_NIL)
        return CRD__RL_GRANTED;
    if (r->type == REDIS_REPLY_INTEGER) {
        if (r->integer < 0)
            return CRD__RL_BAD;
        *wait_ms = r->integer;
        return CRD__RL_WAIT;
    }
    if (error_says(r, "RateLimiter is not initialized"))
        return CRD__RL_UNINITIALIZED;
    if (error_says(r, "Requested permits amount cannot exceed defined rate"))
        return CRD__RL_TOO_MANY;
    return CRD__RL_BAD;
}

bool crd__rl_count_reply(const redisReply *r, int64_t *count)
{
    return crd__reply_int(r, count);
}

/* ---- RSemaphore.releaseIfExists ------------------------------------------------------------ */

void crd__semaphore_release_if_exists(const char *name, size_t len, const crd__buf *channel,
                                      const char *publish, int64_t permits, crd__cmd *cmd)
{
    crd__cmd_init(cmd, CRD__SCRIPT_SEMAPHORE_RELEASE_IF_EXISTS, 0);
    crd__cmd_key(cmd, name, len);
    buf_key(cmd, channel);
    crd__cmd_arg_i64(cmd, permits);
    crd__cmd_arg_str(cmd, publish);
}
