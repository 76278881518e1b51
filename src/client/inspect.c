/*
 * inspect.c -- the state of a name as a public API (crd_state_read): one snapshot read and
 * decoded per kind, joined (whois.c) with the identity records ident.c writes (the scan,
 * scan.c, reads each object so). Also the small helpers the CLI needs
 * (crd_url_check, crd_object_delete, crd_lock_await_watch), so that it is a client of the
 * public API like any other program.
 *
 * One name is read in one script call (lua/inspect_read.lua: atomic, on the node serving
 * the name, every kind's keys and the PUBSUB counts of every kind's channel), its kind
 * decided here from what the keys hold (the rules are in the header, crd_object_kind),
 * and the owners' records read in one more call (whois.c).
 *
 * Threads: the caller's; a scan or a cache belongs to one thread at a time. Locks: none of
 * its own (crd__call and the engine take theirs).
 */
#include "inspect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX 1000   /* queue entries and permits listed */
#define HASH_MAX 512    /* a bigger hash is nobody's lock */

const char *crd_object_kind_name(crd_object_kind k)
{
    switch (k) {
    case CRD_KIND_NONE:
        return "none";
    case CRD_KIND_OTHER:
        return "other";
    case CRD_KIND_LOCK:
        return "rlock";
    case CRD_KIND_FAIR_LOCK:
        return "fair";
    case CRD_KIND_READ_WRITE_LOCK:
        return "rwlock";
    case CRD_KIND_FENCED_LOCK:
        return "fenced";
    case CRD_KIND_SEMAPHORE:
        return "semaphore";
    case CRD_KIND_PERMIT_SEMAPHORE:
        return "permit_semaphore";
    case CRD_KIND_LATCH:
        return "latch";
    case CRD_KIND_RATE_LIMITER:
        return "rate_limiter";
    case CRD_KIND_GROUP_LOCK:
        return "group";
    }
    return "unknown";
}

/* ---- one name ------------------------------------------------------------------------------- */

/* The snapshot script's call for name. */
static crd_status snapshot(crd_client *c, const char *name, size_t len, redisReply **out)
{
    crd__buf queue = {0}, deadlines = {0}, token = {0}, permits = {0}, lock_ch = {0}, rw_ch = {0},
             sem_ch = {0}, latch_ch = {0};
    char *prefix = malloc(crd__rw_prefix_len(name, len) + 1);
    crd_status st = CRD_NO_MEMORY;
    if (prefix != NULL && crd__derived_name(CRD__FAIR_QUEUE, name, len, &queue) == CRD_OK &&
        crd__derived_name(CRD__FAIR_DEADLINES, name, len, &deadlines) == CRD_OK &&
        crd__derived_name(CRD__FENCED_TOKEN, name, len, &token) == CRD_OK &&
        crd__timeouts_name(name, len, &permits) == CRD_OK &&
        crd__derived_name(CRD__LOCK_CHANNEL, name, len, &lock_ch) == CRD_OK &&
        crd__derived_name(CRD__RW_CHANNEL, name, len, &rw_ch) == CRD_OK &&
        crd__derived_name(CRD__SEMAPHORE_CHANNEL, name, len, &sem_ch) == CRD_OK &&
        crd__latch_channel_name(name, len, &latch_ch) == CRD_OK) {
        size_t plen = crd__rw_prefix_put(name, len, prefix);
        crd__cmd cmd;
        crd__cmd_init(&cmd, CRD__SCRIPT_INSPECT_READ, 12);
        crd__cmd_key(&cmd, name, len);
        crd__cmd_key(&cmd, queue.p, queue.len);
        crd__cmd_key(&cmd, deadlines.p, deadlines.len);
        crd__cmd_key(&cmd, token.p, token.len);
        crd__cmd_key(&cmd, permits.p, permits.len);
        crd__cmd_key(&cmd, prefix, plen);
        crd__cmd_arg(&cmd, lock_ch.p, lock_ch.len);
        crd__cmd_arg(&cmd, rw_ch.p, rw_ch.len);
        crd__cmd_arg(&cmd, sem_ch.p, sem_ch.len);
        crd__cmd_arg(&cmd, latch_ch.p, latch_ch.len);
        crd__cmd_arg_i64(&cmd, LIST_MAX);
        crd__cmd_arg_i64(&cmd, HASH_MAX);
        st = crd__call(c, &cmd, "reading the state", out, NULL);
        crd__cmd_free(&cmd);
    } else {
        st = crd__fail(c, CRD_NO_MEMORY, "cannot build the state's read");
    }
    free(prefix);
    free(queue.p);
    free(deadlines.p);
    free(token.p);
    free(permits.p);
    free(lock_ch.p);
    free(rw_ch.p);
    free(sem_ch.p);
    free(latch_ch.p);
    return st;
}

/* Subscribers of channel i (0 lock, 1 rw, 2 semaphore, 3 latch) in NUMSUB + SHARDNUMSUB. */
static int64_t subs_of(const redisReply *numsub, const redisReply *shard, int i)
{
    int64_t n = 0;
    if (numsub != NULL && numsub->type == REDIS_REPLY_ARRAY && numsub->elements == 8)
        n += crd__state_int(numsub->element[2 * i + 1], 0);
    if (shard != NULL && shard->type == REDIS_REPLY_ARRAY && shard->elements == 8)
        n += crd__state_int(shard->element[2 * i + 1], 0);
    return n;
}

/* The holders of a lock hash (flat HGETALL), the mode; false when it is not a lock's. */
static bool read_holders(state_box *b, const redisReply *h, int64_t key_ttl)
{
    crd_state *s = &b->pub;
    size_t n = h->elements / 2;
    s->holders = crd__state_alloc(b, (n + 1) * sizeof *s->holders);
    if (s->holders == NULL)
        return false;
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (!crd__reply_is_text(f) || !crd__reply_is_text(v))
            return false;
        if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            s->mode = crd__state_str(b, v->str, v->len);
            continue;
        }
        size_t ul;
        uint64_t t;
        bool w;
        int64_t count;
        if (!crd__owner_field_parse(f->str, f->len, &ul, &t, &w) || !crd__count_parse(v->str, v->len, &count))
            return false;
        crd_holder *ho = &s->holders[s->nholders++];
        ho->owner = crd__state_str(b, f->str, f->len - (w ? 6 : 0));
        ho->count = count;
        ho->writer = w;
        ho->ttl_ms = key_ttl;
        ho->since_ms = ho->held_ms = -1;
    }
    /* The writer first. */
    for (size_t i = 1; i < s->nholders; i++)
        if (s->holders[i].writer) {
            crd_holder w = s->holders[i];
            memmove(&s->holders[1], &s->holders[0], i * sizeof w);
            s->holders[0] = w;
        }
    return s->nholders > 0;
}



static void hex16(const redisReply *m, char out[CRD_PERMIT_ID_SIZE])
{
    static const char hx[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < m->len && i < 16; i++) {
        out[k++] = hx[(unsigned char)m->str[i] >> 4];
        out[k++] = hx[(unsigned char)m->str[i] & 15];
    }
    out[k] = '\0';
}

/* Whether hash h (HGETALL's flat array) is a Redisson 4.7 rate limiter's configuration
 * (getRateLimiter: fields rate, interval and type; keepAliveTime optional). */
static bool is_rate_limiter(const redisReply *h)
{
    int seen = 0;
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i];
        if (!crd__reply_is_text(f))
            return false;
        if ((f->len == 4 && memcmp(f->str, "rate", 4) == 0) ||
            (f->len == 8 && memcmp(f->str, "interval", 8) == 0) ||
            (f->len == 4 && memcmp(f->str, "type", 4) == 0))
            seen++;
    }
    return seen == 3;
}

/* A grouped multi-lock's hash (RedissonFasterMultiLock, crd_group_lock_new): per value a
 * field F (its 22-character hash) naming the owner, and F:<owner>:expire_time (epoch ms)
 * and F:<owner>:lock_count. Its holders are the distinct owners, each with the number of
 * values it holds as its count and its latest expire time as its TTL. False when h has any
 * other field (then it is nobody's group). */
static bool read_group(state_box *b, const redisReply *h)
{
    crd_state *s = &b->pub;
    size_t n = h->elements / 2;
    s->holders = crd__state_alloc(b, (n + 1) * sizeof *s->holders);
    if (s->holders == NULL || n == 0)
        return false;
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (!crd__reply_is_text(f) || !crd__reply_is_text(v) || f->len < 22)
            return false;
        if (f->len > 22) {
            /* F:<owner>:expire_time or F:<owner>:lock_count: counted with F's entry. */
            if (f->str[22] != ':')
                return false;
            continue;
        }
        if (memchr(f->str, ':', f->len) != NULL)
            return false;
        crd_holder *ho = NULL;
        for (size_t k = 0; k < s->nholders; k++)
            if (strlen(s->holders[k].owner) == v->len &&
                memcmp(s->holders[k].owner, v->str, v->len) == 0)
                ho = &s->holders[k];
        if (ho == NULL) {
            ho = &s->holders[s->nholders++];
            ho->owner = crd__state_str(b, v->str, v->len);
            ho->ttl_ms = -1;
            ho->since_ms = ho->held_ms = -1;
        }
        ho->count++;
        /* This value's expire time: the field F:<owner>:expire_time. */
        for (size_t k = 0; k + 1 < h->elements; k += 2) {
            const redisReply *g = h->element[k];
            static const char et[] = ":expire_time";
            if (crd__reply_is_text(g) && g->len == 22 + 1 + v->len + sizeof et - 1 &&
                memcmp(g->str, f->str, 22) == 0 && memcmp(g->str + 23, v->str, v->len) == 0 &&
                memcmp(g->str + 23 + v->len, et, sizeof et - 1) == 0) {
                int64_t left = crd__state_int(h->element[k + 1], -1) - s->read_at_ms;
                if (left > ho->ttl_ms)
                    ho->ttl_ms = left;
            }
        }
    }
    return s->nholders > 0;
}

/* The kind and state of one snapshot r (the script's reply, inspect_read.lua). False when
 * the reply is not the script's. */
static bool decode(state_box *b, const redisReply *r, raw *rw)
{
    crd_state *s = &b->pub;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 13)
        return false;
    redisReply **e = r->element;
    s->type = crd__reply_is_text(e[0]) ? crd__state_str(b, e[0]->str, e[0]->len) : "none";
    s->ttl_ms = crd__state_int(e[1], -2);
    int64_t hlen = crd__state_int(e[2], 0), qlen = crd__state_int(e[4], 0), pcount = crd__state_int(e[8], 0);
    s->token = e[6]->type == REDIS_REPLY_STRING ? crd__state_int(e[6], -1) : -1;
    for (int i = 0; i < 4; i++)
        rw->subs[i] = subs_of(e[10], e[11]->type == REDIS_REPLY_ARRAY ? e[11] : NULL, i);
    if (strcmp(s->type, "hash") == 0) {
        if (hlen <= HASH_MAX && e[3]->type == REDIS_REPLY_ARRAY && read_holders(b, e[3], s->ttl_ms))
            s->kind = s->mode[0] != '\0' ? CRD_KIND_READ_WRITE_LOCK
                      : qlen > 0         ? CRD_KIND_FAIR_LOCK
                      : s->token >= 0    ? CRD_KIND_FENCED_LOCK
                                         : CRD_KIND_LOCK;
        else {
            /* Not a lock hash: one of Redisson 4.7's hashes, or nobody's. */
            s->nholders = 0;
            s->mode = "";
            bool fields = hlen <= HASH_MAX && e[3]->type == REDIS_REPLY_ARRAY;
            if (fields && is_rate_limiter(e[3]))
                s->kind = CRD_KIND_RATE_LIMITER;
            else if (fields && read_group(b, e[3]))
                s->kind = CRD_KIND_GROUP_LOCK;
            else {
                s->kind = CRD_KIND_OTHER;
                s->nholders = 0;
            }
        }
    } else if (strcmp(s->type, "none") == 0) {
        s->kind = qlen > 0 ? CRD_KIND_FAIR_LOCK : s->token >= 0 ? CRD_KIND_FENCED_LOCK
                                                                : CRD_KIND_NONE;
    } else if (strcmp(s->type, "string") == 0 && crd__reply_is_text(e[7]) &&
               crd__count_parse(e[7]->str, e[7]->len, &rw->value)) {
        rw->number = true;
        s->kind = pcount > 0 ? CRD_KIND_PERMIT_SEMAPHORE : CRD_KIND_SEMAPHORE; /* latch: later */
    } else {
        s->kind = CRD_KIND_OTHER;
    }
    s->held = s->nholders > 0;
    /* The fair queue, head first, with each entry's deadline. */
    if (s->kind == CRD_KIND_FAIR_LOCK && e[5]->type == REDIS_REPLY_ARRAY) {
        size_t n = e[5]->elements / 2;
        s->nqueue = (size_t)qlen;
        s->queue = crd__state_alloc(b, (n + 1) * sizeof *s->queue);
        for (size_t i = 0; s->queue != NULL && i < n; i++) {
            const redisReply *m = e[5]->element[2 * i], *d = e[5]->element[2 * i + 1];
            crd_waiter *w = &s->queue[s->nqueue_listed++];
            w->owner = crd__reply_is_text(m) ? crd__state_str(b, m->str, m->len) : "";
            w->deadline_ms = crd__reply_is_text(d) ? crd__state_int(d, -1) : -1;
            w->remaining_ms = w->deadline_ms >= 0 ? w->deadline_ms - s->read_at_ms : -1;
            w->since_ms = w->waited_ms = -1;
        }
    }
    /* A read-write lock's read holds and their own timeout keys. */
    if (s->kind == CRD_KIND_READ_WRITE_LOCK && e[12]->type == REDIS_REPLY_ARRAY) {
        size_t n = e[12]->elements / 3;
        s->read_holds = crd__state_alloc(b, (n + 1) * sizeof *s->read_holds);
        for (size_t i = 0; s->read_holds != NULL && i < n; i++) {
            const redisReply *f = e[12]->element[3 * i];
            crd_read_hold *h = &s->read_holds[s->nread_holds++];
            h->owner = crd__reply_is_text(f) ? crd__state_str(b, f->str, f->len) : "";
            h->index = crd__state_int(e[12]->element[3 * i + 1], 0);
            h->ttl_ms = crd__state_int(e[12]->element[3 * i + 2], -2);
        }
        /* A reader's TTL: its longest read hold's. */
        for (size_t i = 0; i < s->nholders; i++) {
            crd_holder *ho = &s->holders[i];
            if (ho->writer)
                continue;
            int64_t best = -3;
            for (size_t k = 0; k < s->nread_holds; k++)
                if (strcmp(s->read_holds[k].owner, ho->owner) == 0 && s->read_holds[k].ttl_ms > best)
                    best = s->read_holds[k].ttl_ms;
            if (best > -3)
                ho->ttl_ms = best;
        }
    }
    /* An expirable semaphore's permits out. */
    if (s->kind == CRD_KIND_PERMIT_SEMAPHORE && e[9]->type == REDIS_REPLY_ARRAY) {
        size_t n = e[9]->elements / 2;
        s->npermits = (size_t)pcount;
        s->permits = crd__state_alloc(b, (n + 1) * sizeof *s->permits);
        for (size_t i = 0; s->permits != NULL && i < n; i++) {
            const redisReply *m = e[9]->element[2 * i];
            crd_permit *p = &s->permits[s->npermits_listed++];
            if (crd__reply_is_text(m))
                hex16(m, p->id);
            int64_t dl = crd__state_int(e[9]->element[2 * i + 1], -1);
            p->deadline_ms = dl == CRD__PERMIT_NO_LEASE_MS ? -1 : dl;
            p->remaining_ms = p->deadline_ms >= 0 ? p->deadline_ms - s->read_at_ms : -1;
        }
    }
    return !b->oom;
}

crd_status crd__state_read_cached(crd_client *c, const char *name, size_t len, unsigned flags,
                                  crd__idcache *ic, crd_state **out)
{
    redisReply *r = NULL;
    crd_status st = snapshot(c, name, len, &r);
    if (st != CRD_OK)
        return st;
    state_box *b = calloc(1, sizeof *b);
    if (b == NULL) {
        freeReplyObject(r);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a state");
    }
    crd_state *s = &b->pub;
    s->name = crd__state_str(b, name, len);
    s->name_len = len;
    s->mode = "";
    s->token = -1;
    s->read_at_ms = crd__epoch_ms();
    raw rw;
    memset(&rw, 0, sizeof rw);
    bool ok = decode(b, r, &rw);
    freeReplyObject(r);
    if (!ok) {
        bool oom = b->oom;
        crd_state_free(s);
        return oom ? crd__fail(c, CRD_NO_MEMORY, "cannot allocate a state")
                   : crd__fail(c, CRD_PROTOCOL, "the state's read got a reply no version of "
                               "inspect_read.lua gives");
    }
    int64_t watches = -1;
    if (!(flags & CRD_STATE_NO_IDENTITY) && (st = crd__state_join(c, b, ic, flags, &rw, &watches)) != CRD_OK) {
        crd_state_free(s);
        return st;
    }
    if (rw.number && s->kind == CRD_KIND_SEMAPHORE) {
        /* A latch is a count >= 1 someone awaits on the latch's channel (a crd_watch of the
         * name subscribes to both channels: its own subscription is not a waiter). */
        int64_t w = watches > 0 ? watches : 0;
        int64_t latch = rw.subs[3] - w, sem = rw.subs[2] - w;
        if (rw.value >= 1 && latch > 0 && sem <= 0)
            s->kind = CRD_KIND_LATCH;
        else
            s->maybe_latch = rw.value >= 1 && sem <= 0;
    }
    if (rw.number) {
        s->available = rw.value;
        s->count = s->kind == CRD_KIND_LATCH ? rw.value : 0;
    }
    s->kind_name = crd_object_kind_name(s->kind);
    int ch = crd__state_channel(s->kind);
    s->subscribers = ch >= 0 ? rw.subs[ch] : 0;
    if (s->kind == CRD_KIND_FAIR_LOCK) {
        s->waiters = (int64_t)s->nqueue;
    } else {
        int64_t not_waiting = watches > 0 ? watches : 0;
        for (size_t i = 0; i < s->nholders; i++) {
            bool seen = false;
            for (size_t k = 0; k < i && !seen; k++)
                seen = s->holders[k].watching &&
                       strcmp(s->holders[k].who.client_id, s->holders[i].who.client_id) == 0;
            not_waiting += s->holders[i].watching && !seen;
        }
        s->waiters = s->subscribers - not_waiting > 0 ? s->subscribers - not_waiting : 0;
    }
    if (b->oom) {
        crd_state_free(s);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a state");
    }
    *out = s;
    return CRD_OK;
}


crd_status crd__state_read(crd_client *c, const char *name, size_t len, unsigned flags,
                           crd_state **out)
{
    crd__idcache *ic = crd__idcache_new();
    if (ic == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a state");
    crd_status st = crd__state_read_cached(c, name, len, flags, ic, out);
    crd__idcache_free(ic);
    return st;
}

crd_status crd_state_read(crd_client *c, const char *name, size_t len, unsigned flags,
                          crd_state **out)
{
    if (out != NULL)
        *out = NULL;
    crd_status st = crd__check_call(c, out, "", name, len, false);
    if (st != CRD_OK || out == NULL) /* for clang's analyzer (checked) */
        return st;
    if (flags & ~CRD__STATE_FLAGS)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "unknown flags 0x%x", flags & ~CRD__STATE_FLAGS);
    if ((st = crd__state_read(c, name, len, flags, out)) == CRD_OK)
        crd__ok(c);
    return st;
}

/* ---- small helpers for tools ------------------------------------------------------------ */

crd_status crd_url_check(const char *url, char *err, size_t errlen)
{
    char why[256] = "";
    crd_status st;
    if (url == NULL) {
        st = CRD_INVALID_ARGUMENT;
        snprintf(why, sizeof why, "url is NULL");
    } else if (crd__url_is_sentinel(url)) {
        crd__sentinel_cfg cfg;
        st = crd__sentinel_url_parse(url, &cfg, why, sizeof why);
        if (st == CRD_OK)
            crd__sentinel_cfg_clear(&cfg);
    } else {
        crd__endpoint ep;
        st = crd__url_parse(url, &ep, why, sizeof why);
        if (st == CRD_OK)
            crd__endpoint_clear(&ep);
    }
    if (st == CRD_NO_MEMORY)
        snprintf(why, sizeof why, "out of memory");
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", st == CRD_OK ? "" : why);
    return st;
}

crd_status crd_object_delete(crd_client *c, const char *name, size_t len, bool *deleted)
{
    if (deleted != NULL)
        *deleted = false;
    crd_status st = crd__client_check(c);
    if (st != CRD_OK || (st = crd__check_name(c, "", name, len, false)) != CRD_OK)
        return st;
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__PLAIN, 2);
    crd__cmd_arg_str(&cmd, "DEL");
    crd__cmd_arg(&cmd, name, len);
    redisReply *r = NULL;
    st = crd__call(c, &cmd, "DEL", &r, NULL);
    crd__cmd_free(&cmd);
    if (st != CRD_OK)
        return st;
    if (deleted != NULL)
        *deleted = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
    freeReplyObject(r);
    crd__ok(c);
    return CRD_OK;
}

crd_status crd_lock_await_watch(crd_lock *l, int64_t timeout_ms)
{
    crd_status st = crd__lock_check(l);
    if (st != CRD_OK)
        return st;
    if (timeout_ms < 0 || timeout_ms > CRD_DURATION_MAX_MS)
        return crd__fail(l->client, CRD_INVALID_ARGUMENT, "timeout_ms must be 0..%lld (got %lld)",
                         (long long)CRD_DURATION_MAX_MS, (long long)timeout_ms);
    bool live = crd__sub_await_live(l->client, l->names.channel.p, l->names.channel.len,
                                    crd__now_ms() + timeout_ms);
    if (!live)
        return crd__fail(l->client, CRD_TIMEOUT, "lock \"%.*s\": its channel is not subscribed "
                         "within %lld ms", CRD__NAME_FMT(l), (long long)timeout_ms);
    crd__ok(l->client);
    return CRD_OK;
}
