/*
 * ratelimiter.c -- Redisson's RRateLimiter (golden r47_rl_*, r47_cluster_rl;
 * docs/KINDS-R47.md): a config hash N (rate, interval, type, keepAliveTime), the permits
 * left in {N}:value and the permits given in the last interval as records of the sorted set
 * {N}:permits (PER_CLIENT: {N}:value:<uuid>, {N}:permits:<uuid>, the client's id). Each
 * operation is one script (lua/ratelimiter_*.lua), which fixes Redisson's known bugs
 * without changing what Java reads (interop/README.md, "Rate limiter").
 *
 * Waiting is sync.c's machine with CRD__WAIT_DELAY: no channel, no subscription; a refused
 * acquire answers the ms until enough permits come back, the waiter sleeps that long
 * (bounded by its deadline, cut short by the client's end or an interrupt) and tries again
 * with new random bytes; a delay that ends after the deadline ends the wait at once. An
 * acquire is not idempotent: a lost reply is read back (is the record, 0x10 + the 16
 * random bytes + the permits, in either permit set?), never resent blindly.
 *
 * Threads: any caller thread, the loop thread for the _async form. Locks: none of its own.
 */
#include "sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void buf_key(crd__cmd *cmd, const crd__buf *b)
{
    crd__cmd_key(cmd, b->p, b->len);
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
        if (len > 0) /* an empty name was refused before; the analyzer cannot see that */
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
    return crd__rl_try_acquire_with(n, permits, cmd, NULL);
}

crd_status crd__rl_try_acquire_with(const crd__rl_names *n, int64_t permits, crd__cmd *cmd,
                                    unsigned char drawn[16])
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
    if (drawn != NULL)
        memcpy(drawn, random, 16);
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


/* ---- the object --------------------------------------------------------------------------- */

static crd__sync *sync_of(crd_rate_limiter *rl) { return rl != NULL ? &rl->s : NULL; }

crd_status crd_rate_limiter_new_n(crd_client *c, const char *name, size_t len,
                                  crd_rate_limiter **out)
{
    crd__sync *s = NULL;
    crd_status st = crd__sync_new(c, CRD__SYNC_LIMITER, out, name, len,
                                  sizeof(crd_rate_limiter), &s);
    if (out != NULL)
        *out = NULL;
    if (st != CRD_OK)
        return st;
    if (out == NULL || name == NULL) { /* refused by crd__sync_new: said for clang's analyzer */
        crd__sync_free(s);
        return CRD_INVALID_ARGUMENT;
    }
    crd_rate_limiter *rl = (crd_rate_limiter *)s; /* s is its first member */
    if (crd__rl_names_init(&rl->names, name, len, c->uuid) != CRD_OK) {
        crd__sync_free(s);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a rate limiter");
    }
    *out = rl;
    return CRD_OK;
}

crd_status crd_rate_limiter_new(crd_client *c, const char *name, crd_rate_limiter **out)
{
    return crd_rate_limiter_new_n(c, name, name != NULL ? strlen(name) : 0, out);
}

void crd_rate_limiter_free(crd_rate_limiter *rl)
{
    if (rl == NULL)
        return;
    crd__rl_names_clear(&rl->names);
    crd__sync_free(&rl->s);
}

const char *crd_rate_limiter_name(const crd_rate_limiter *rl, size_t *len)
{
    return crd__sync_name(rl != NULL ? &rl->s : NULL, len);
}

/* The checks of a rate configuration (Java's, and a rate of 0 or an unknown mode). */
static crd_status check_config(crd__sync *s, const crd_rate_config *cfg)
{
    crd_client *c = s->client;
    if (cfg == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "rate limiter \"%.*s\": config is NULL",
                         CRD__SYNC_NAME_FMT(s));
    if (cfg->mode != CRD_RATE_OVERALL && cfg->mode != CRD_RATE_PER_CLIENT)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "rate limiter \"%.*s\": unknown mode %d (use "
                         "CRD_RATE_OVERALL or CRD_RATE_PER_CLIENT); nothing was changed",
                         CRD__SYNC_NAME_FMT(s), (int)cfg->mode);
    if (cfg->rate < 1 || cfg->rate > INT32_MAX)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "rate limiter \"%.*s\": the rate must be 1..%d "
                         "permits per interval (got %lld); nothing was changed",
                         CRD__SYNC_NAME_FMT(s), INT32_MAX, (long long)cfg->rate);
    if (cfg->interval_ms < 1 || cfg->interval_ms > CRD_DURATION_MAX_MS)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "rate limiter \"%.*s\": interval_ms must be "
                         "1..%lld (got %lld); nothing was changed", CRD__SYNC_NAME_FMT(s),
                         (long long)CRD_DURATION_MAX_MS, (long long)cfg->interval_ms);
    if (cfg->keep_alive_ms < 0 || cfg->keep_alive_ms > CRD_DURATION_MAX_MS ||
        (cfg->keep_alive_ms > 0 && cfg->keep_alive_ms < cfg->interval_ms))
        return crd__fail(c, CRD_INVALID_ARGUMENT, "rate limiter \"%.*s\": keep_alive_ms must be "
                         "0 (none) or at least the interval (%lld ms), as Java requires (got "
                         "%lld); nothing was changed", CRD__SYNC_NAME_FMT(s),
                         (long long)cfg->interval_ms, (long long)cfg->keep_alive_ms);
    return CRD_OK;
}

/* How a configuration is written: only where none is (trySetRate), always (setRate), only
 * where one is (updateRate). */
typedef enum rate_write { RATE_TRY, RATE_SET, RATE_UPDATE } rate_write;

static crd_status write_rate(crd_rate_limiter *rl, const crd_rate_config *cfg, rate_write how,
                             bool keep_state, bool *written)
{
    static const char *const what[] = {"rate limiter try_set_rate", "rate limiter set_rate",
                                       "rate limiter update_rate"};
    if (written != NULL)
        *written = false;
    crd_status st = crd__sync_check(sync_of(rl));
    if (st == CRD_OK)
        st = check_config(&rl->s, cfg);
    if (st != CRD_OK)
        return st;
    crd__cmd cmd;
    if (how == RATE_TRY)
        crd__rl_try_set_rate(&rl->names, cfg->rate, cfg->interval_ms, (crd__rl_mode)cfg->mode,
                             cfg->keep_alive_ms, &cmd);
    else
        crd__rl_set_rate(&rl->names, cfg->rate, cfg->interval_ms, (crd__rl_mode)cfg->mode,
                         cfg->keep_alive_ms, keep_state, how == RATE_UPDATE, &cmd);
    int64_t v = 0;
    /* Idempotent: the same configuration written twice is the same configuration (a
     * second keep_state recomputation finds the records the first left). */
    st = crd__sync_run_ok(&rl->s, &cmd, what[how], true, &v);
    if (st == CRD_OK && written != NULL)
        *written = v == 1;
    return st;
}

crd_status crd_rate_limiter_try_set_rate(crd_rate_limiter *rl, const crd_rate_config *cfg,
                                         bool *set)
{
    return write_rate(rl, cfg, RATE_TRY, false, set);
}

crd_status crd_rate_limiter_set_rate(crd_rate_limiter *rl, const crd_rate_config *cfg,
                                     bool keep_state)
{
    return write_rate(rl, cfg, RATE_SET, keep_state, NULL);
}

crd_status crd_rate_limiter_update_rate(crd_rate_limiter *rl, const crd_rate_config *cfg,
                                        bool keep_state, bool *updated)
{
    return write_rate(rl, cfg, RATE_UPDATE, keep_state, updated);
}

/* A field of HGETALL's flat array reply, as an integer. */
static bool field_int(const redisReply *r, const char *name, int64_t *out)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i];
        if (k->type == REDIS_REPLY_STRING && k->len == strlen(name) &&
            memcmp(k->str, name, k->len) == 0)
            return crd__reply_int(r->element[i + 1], out) &&
                   r->element[i + 1]->type == REDIS_REPLY_STRING;
    }
    return false;
}

crd_status crd_rate_limiter_get_rate(crd_rate_limiter *rl, crd_rate_config *cfg, bool *exists)
{
    crd_status st = crd__sync_check_ptr(sync_of(rl), cfg, "config");
    if (exists != NULL)
        *exists = false;
    if (st != CRD_OK)
        return st;
    memset(cfg, 0, sizeof *cfg);
    crd__sync *s = &rl->s;
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__PLAIN, 2);
    crd__cmd_arg_str(&cmd, "HGETALL");
    crd__cmd_arg(&cmd, s->name, s->name_len);
    redisReply *r = NULL;
    st = crd__sync_call(s, &cmd, "rate limiter get_rate", true, &r, NULL);
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 0) {
        freeReplyObject(r);
        crd__ok(s->client);
        return CRD_OK; /* no rate set */
    }
    int64_t rate = 0, interval = 0, type = 0, keep = 0;
    bool ok = r->type == REDIS_REPLY_ARRAY && field_int(r, "rate", &rate) &&
              field_int(r, "interval", &interval) && field_int(r, "type", &type) &&
              (type == 0 || type == 1);
    if (ok && !field_int(r, "keepAliveTime", &keep))
        keep = 0; /* written by Redisson before 4.x */
    if (!ok) {
        st = crd__fail(s->client, CRD_PROTOCOL, "rate limiter \"%.*s\": the hash is not a rate "
                       "limiter's configuration", CRD__SYNC_NAME_FMT(s));
        freeReplyObject(r);
        return st;
    }
    freeReplyObject(r);
    cfg->mode = type == 1 ? CRD_RATE_PER_CLIENT : CRD_RATE_OVERALL;
    cfg->rate = rate;
    cfg->interval_ms = interval;
    cfg->keep_alive_ms = keep;
    if (exists != NULL)
        *exists = true;
    crd__ok(s->client);
    return CRD_OK;
}

/* The errors of the acquire and available scripts that say what state the limiter is in:
 * read as outcomes, not failures (crd__cmd.keep_error). */
static bool limiter_error(const redisReply *r)
{
    int64_t w;
    crd__rl_outcome o = crd__rl_acquire_reply(r, &w);
    return o == CRD__RL_UNINITIALIZED || o == CRD__RL_TOO_MANY;
}

static crd_status not_initialized(crd__sync *s)
{
    return crd__fail(s->client, CRD_INVALID_ARGUMENT, "rate limiter \"%.*s\" has no rate (never "
                     "set, deleted, or its keep-alive ran out): set one first "
                     "(crd_rate_limiter_try_set_rate)", CRD__SYNC_NAME_FMT(s));
}

crd_status crd_rate_limiter_available(crd_rate_limiter *rl, int64_t *available)
{
    crd_status st = crd__sync_check_ptr(sync_of(rl), available, "available");
    if (st != CRD_OK)
        return st;
    *available = 0;
    crd__sync *s = &rl->s;
    crd__cmd cmd;
    crd__rl_available(&rl->names, &cmd);
    cmd.keep_error = limiter_error;
    redisReply *r = NULL;
    st = crd__sync_call(s, &cmd, "rate limiter available", true, &r, NULL);
    if (st != CRD_OK)
        return st;
    int64_t w = 0;
    if (r->type == REDIS_REPLY_ERROR && crd__rl_acquire_reply(r, &w) == CRD__RL_UNINITIALIZED)
        st = not_initialized(s);
    else if (!crd__rl_count_reply(r, available) || r->type == REDIS_REPLY_NIL)
        st = crd__reply_fail(s->client, r, "rate limiter available");
    freeReplyObject(r);
    if (st == CRD_OK)
        crd__ok(s->client);
    return st;
}

crd_status crd_rate_limiter_release(crd_rate_limiter *rl, int64_t permits)
{
    crd_status st = crd__sync_check(sync_of(rl));
    if (st != CRD_OK)
        return st;
    crd__sync *s = &rl->s;
    if (permits < 1 || permits > INT32_MAX)
        return crd__fail(s->client, CRD_INVALID_ARGUMENT, "rate limiter \"%.*s\": a release of "
                         "%lld permits; nothing was changed", CRD__SYNC_NAME_FMT(s),
                         (long long)permits);
    crd__cmd cmd;
    crd__rl_release(&rl->names, permits, &cmd);
    return crd__sync_run_ok(s, &cmd, "rate limiter release", false, NULL);
}

crd_status crd_rate_limiter_delete(crd_rate_limiter *rl, bool *deleted)
{
    if (deleted != NULL)
        *deleted = false;
    crd_status st = crd__sync_check(sync_of(rl));
    if (st != CRD_OK)
        return st;
    crd__cmd cmd;
    crd__rl_delete(&rl->names, &cmd);
    int64_t v = 0;
    st = crd__sync_run_ok(&rl->s, &cmd, "rate limiter delete", true, &v);
    if (st == CRD_OK && deleted != NULL)
        *deleted = v > 0;
    return st;
}

/* ---- acquire: sync.c's machine, waiting the server's delays -------------------------------- */

typedef struct rl_try {
    crd_rate_limiter *rl;
    int64_t permits;
    unsigned char random[16]; /* the last attempt's record bytes (its read-back) */
    bool pending;             /* that attempt's reply was lost: read back before anything */
} rl_try;

static crd_status rl_build(void *arg, crd__cmd *cmd)
{
    rl_try *t = arg;
    crd_status st = crd__rl_try_acquire_with(&t->rl->names, t->permits, cmd, t->random);
    cmd->keep_error = limiter_error;
    if (st != CRD_OK) {
        crd__cmd_free(cmd);
        return crd__fail(t->rl->s.client, st, "rate limiter: cannot draw random bytes");
    }
    return CRD_OK;
}

static crd_status rl_read(void *arg, crd_status st, redisReply *r, bool sent,
                          int64_t *retry_epoch_ms)
{
    rl_try *t = arg;
    crd__sync *s = &t->rl->s;
    if (st == CRD_IO && sent) {
        t->pending = true; /* read back by the next try (or the end hook) */
        return st;
    }
    if (st != CRD_OK)
        return st;
    int64_t wait = 0;
    crd__rl_outcome o = crd__rl_acquire_reply(r, &wait);
    switch (o) {
    case CRD__RL_GRANTED:
        st = CRD_OK;
        break;
    case CRD__RL_WAIT:
        /* The wall clock the server counted from: the delay ends that long from now. */
        *retry_epoch_ms = crd__epoch_ms() + (wait > 0 ? wait : 1);
        st = CRD_BUSY;
        break;
    case CRD__RL_UNINITIALIZED:
        st = not_initialized(s);
        break;
    case CRD__RL_TOO_MANY:
        st = crd__fail(s->client, CRD_INVALID_ARGUMENT, "rate limiter \"%.*s\": %lld permits "
                       "are more than its rate: they can never be given at once",
                       CRD__SYNC_NAME_FMT(s), (long long)t->permits);
        break;
    case CRD__RL_BAD:
        st = crd__reply_fail(s->client, r, "rate limiter acquire");
        break;
    }
    freeReplyObject(r);
    return st;
}

/* The record a lost attempt would have left: 0x10, its 16 random bytes, the permits as a
 * little-endian 32-bit integer (Lua's struct.pack('Bc0I', 16, random, permits)). */
static void record_of(const rl_try *t, char out[21])
{
    out[0] = 0x10;
    memcpy(out + 1, t->random, 16);
    uint32_t p = (uint32_t)t->permits;
    for (int i = 0; i < 4; i++)
        out[17 + i] = (char)(p >> (8 * i) & 0xff);
}

/* Reads a lost attempt back: its record in the overall or this client's permit set means
 * it ran (the permits are the caller's); in neither, it did not. CRD_OK granted, CRD_BUSY
 * not, CRD_IO when the read itself got no answer. */
static crd_status rl_resolve(void *arg)
{
    rl_try *t = arg;
    crd__sync *s = &t->rl->s;
    char member[21];
    record_of(t, member);
    for (int k = 3; k <= 4; k++) {
        crd__cmd cmd;
        crd__cmd_init(&cmd, CRD__PLAIN, 3);
        crd__cmd_arg_str(&cmd, "ZSCORE");
        crd__cmd_arg(&cmd, t->rl->names.keys[k].p, t->rl->names.keys[k].len);
        crd__cmd_arg(&cmd, member, sizeof member);
        redisReply *r = NULL;
        crd_status st = crd__sync_call(s, &cmd, "rate limiter read-back", true, &r, NULL);
        if (st != CRD_OK)
            return st;
        bool there = r->type == REDIS_REPLY_STRING; /* RESP2: a score is a bulk string */
        freeReplyObject(r);
        if (there) {
            t->pending = false;
            return CRD_OK;
        }
    }
    t->pending = false;
    return CRD_BUSY;
}

static bool rl_inline(void *arg) { return ((rl_try *)arg)->pending; }

static const crd__sync_attempt rl_attempt = {rl_build, rl_read, rl_inline, limiter_error,
                                              rl_resolve};

static crd_status rl_try_once(void *arg, int64_t *retry_epoch_ms)
{
    return crd__sync_attempt_call(&((rl_try *)arg)->rl->s, &rl_attempt, arg, "rate limiter acquire",
                                  retry_epoch_ms);
}

/* The wait's end: a lost attempt still unresolved is read back, so that permits it took are
 * reported taken (CRD_OK) rather than lost. */
static crd_status rl_end(crd__sync *s, void *arg, crd_status st, bool waited)
{
    (void)waited;
    rl_try *t = arg;
    if (st != CRD_OK && t->pending) {
        crd_status rs = rl_resolve(t);
        if (rs == CRD_OK)
            st = CRD_OK;
        else if (rs != CRD_BUSY)
            st = crd__fail(s->client, CRD_OUTCOME_UNKNOWN, "rate limiter \"%.*s\": an acquire's "
                           "reply was lost and could not be read back: its permits may have "
                           "been taken", CRD__SYNC_NAME_FMT(s));
    }
    return st;
}

static crd_status check_acquire(crd_rate_limiter *rl, int64_t permits, int64_t wait_ms)
{
    crd_status st = crd__sync_check(sync_of(rl));
    if (st != CRD_OK)
        return st;
    if (permits < 1 || permits > INT32_MAX || wait_ms < -1 || wait_ms > CRD_DURATION_MAX_MS)
        return crd__fail(rl->s.client, CRD_INVALID_ARGUMENT,
                         "rate limiter \"%.*s\": permits must be 1..%d and wait_ms -1, 0 or up "
                         "to %lld (got %lld and %lld)", CRD__SYNC_NAME_FMT(&rl->s), INT32_MAX,
                         (long long)CRD_DURATION_MAX_MS, (long long)permits, (long long)wait_ms);
    return CRD_OK;
}

crd_status crd_rate_limiter_acquire(crd_rate_limiter *rl, int64_t permits, int64_t wait_ms)
{
    crd_status st = check_acquire(rl, permits, wait_ms);
    if (st != CRD_OK)
        return st;
    rl_try t = {rl, permits, {0}, false};
    crd__sync_op op = {&rl->s, rl_try_once, NULL, &t, rl_end, CRD__WAKE_ALL, false,
                       CRD__WAIT_DELAY};
    return crd__sync_wait(&op, wait_ms);
}

crd_status crd_rate_limiter_acquire_async(crd_rate_limiter *rl, int64_t permits, int64_t wait_ms,
                                          crd_op_done_fn done, void *user, crd_op **op)
{
    if (op != NULL)
        *op = NULL;
    crd_status st = check_acquire(rl, permits, wait_ms);
    if (st != CRD_OK)
        return st;
    rl_try *t = calloc(1, sizeof *t);
    if (t == NULL)
        return crd__fail(rl->s.client, CRD_NO_MEMORY, "cannot allocate an operation");
    t->rl = rl;
    t->permits = permits;
    crd__sync_op sop = {&rl->s, rl_try_once, &rl_attempt, t, rl_end, CRD__WAKE_ALL, false,
                        CRD__WAIT_DELAY};
    return crd__sync_start(&sop, wait_ms, done, user, op);
}
