/*
 * scan.c -- crd_scan_*: every Redisson object matching a pattern, SCAN step by SCAN step
 * over each primary (every primary of a cluster in turn), each key read as
 * crd_state_read() reads it (inspect.c) with the identity records kept (crd__idcache) for
 * the scan's life; the keys that are parts of another object are skipped.
 *
 * Threads: the caller's; a scan belongs to one thread at a time. Locks: none of its own
 * (the engine takes its own).
 */
#include "inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the scan ------------------------------------------------------------------------ */

#define SCAN_NODES 64

struct crd_scan {
    crd_client *c;
    char *pattern;
    char count[24];
    unsigned flags;
    crd__idcache *ic;
    crd__pool *pools[SCAN_NODES];
    int npools, at;
    bool listed; /* the nodes are known */
    char cursor[32];
    redisReply *keys; /* the current step's keys */
    size_t next;
    uint64_t scanned;
    bool complete;
};

#define SCAN_FLAGS (CRD__STATE_FLAGS | CRD_SCAN_HELD_ONLY | CRD_SCAN_SYNCS)

crd_status crd_scan_new(crd_client *c, const char *pattern, size_t count, unsigned flags,
                        crd_scan **out)
{
    crd_status st = crd__client_check_out(c, out);
    if (st != CRD_OK)
        return st;
    *out = NULL;
    if (count > 100000)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "count must be at most 100000 (got %zu)", count);
    if (flags & ~SCAN_FLAGS)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "unknown flags 0x%x", flags & ~SCAN_FLAGS);
    crd_scan *s = calloc(1, sizeof *s);
    if (s == NULL || (s->ic = crd__idcache_new()) == NULL ||
        (s->pattern = strdup(pattern != NULL ? pattern : "*")) == NULL) {
        if (s != NULL)
            free(s->ic);
        free(s);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a scan");
    }
    s->c = c;
    s->flags = flags;
    snprintf(s->count, sizeof s->count, "%zu", count ? count : 1000);
    snprintf(s->cursor, sizeof s->cursor, "0");
    *out = s;
    crd__ok(c);
    return CRD_OK;
}

void crd_scan_free(crd_scan *s)
{
    if (s == NULL)
        return;
    freeReplyObject(s->keys);
    crd__idcache_free(s->ic);
    free(s->pattern);
    free(s);
}

void crd_scan_progress(const crd_scan *s, uint64_t *scanned, bool *complete)
{
    if (scanned != NULL)
        *scanned = s != NULL ? s->scanned : 0;
    if (complete != NULL)
        *complete = s != NULL && s->complete;
}

/* One command to one node (SCAN belongs to a node, not to a key). */
static crd_status node_command(crd_client *c, crd__pool *p, int argc, const char **argv,
                               const size_t *lens, redisReply **out)
{
    *out = NULL;
    crd__req *rq = crd__req_new(p, 1);
    if (rq == NULL || !crd__req_add(rq, argc, argv, lens)) {
        crd__req_free(rq);
        return crd__fail(c, CRD_NO_MEMORY, "cannot build %s", argv[0]);
    }
    rq->deadline_ms = crd__now_ms() + c->opts.command_timeout_ms;
    int64_t sent = 0;
    int handed = 0;
    crd_status st = crd__engine_call(c, rq, out, &sent, &handed);
    if (st != CRD_OK)
        return crd__fail(c, st, "%s: %s", argv[0], st == CRD_TIMEOUT ? "no answer in time"
                                                                    : crd_strerror(st));
    if (crd__reply_classify(*out) != CRD__REPLY_OK) {
        st = crd__reply_fail(c, *out, argv[0]);
        freeReplyObject(*out);
        *out = NULL;
    }
    return st;
}

/* A key that is a part of another object, not an object of its own. */
static bool is_part(const char *k, size_t len)
{
    static const char *const prefixes[] = {CRD__FAIR_QUEUE ":", CRD__FAIR_DEADLINES ":",
                                           CRD__FENCED_TOKEN ":", CRD__LATCH ":",
                                           "{credisson}:"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t pl = strlen(prefixes[i]);
        if (len >= pl && memcmp(k, prefixes[i], pl) == 0)
            return true;
    }
    static const char rt[] = CRD__READ_TIMEOUT_SUFFIX ":";
    if (memmem(k, len, rt, sizeof rt - 1) != NULL)
        return true;
    /* A rate limiter's state: "{N}:value" and "{N}:permits" (":<client id>" after either in
     * PER_CLIENT mode), parts of rate limiter N, not a semaphore of their own. */
    const char *close = len > 0 && k[0] == '{' ? memchr(k, '}', len) : NULL;
    if (close != NULL) {
        size_t rest = len - (size_t)(close + 1 - k);
        const char *r = close + 1;
        static const char *const parts[] = {":value", ":permits"};
        for (size_t i = 0; i < 2; i++) {
            size_t pl = strlen(parts[i]);
            if (rest >= pl && memcmp(r, parts[i], pl) == 0 && (rest == pl || r[pl] == ':'))
                return true;
        }
    }
    return false;
}

/* Whether the scan's caller wants st. */
static bool wanted(const crd_scan *s, const crd_state *st)
{
    switch (st->kind) {
    case CRD_KIND_NONE:
    case CRD_KIND_OTHER:
        return false;
    case CRD_KIND_LOCK:
    case CRD_KIND_FAIR_LOCK:
    case CRD_KIND_READ_WRITE_LOCK:
    case CRD_KIND_FENCED_LOCK:
    case CRD_KIND_GROUP_LOCK:
        return !(s->flags & CRD_SCAN_HELD_ONLY) || st->held;
    case CRD_KIND_RATE_LIMITER:
        return (s->flags & CRD_SCAN_SYNCS) != 0;
    case CRD_KIND_PERMIT_SEMAPHORE:
        return st->npermits > 0 || (s->flags & CRD_SCAN_SYNCS);
    case CRD_KIND_SEMAPHORE:
    case CRD_KIND_LATCH:
        return (s->flags & CRD_SCAN_SYNCS) != 0;
    }
    return false;
}

/* The next SCAN step (the next node when this one is done). False at the end. */
static crd_status scan_step(crd_scan *s, bool *more)
{
    crd_client *c = s->c;
    if (!s->listed) {
        s->listed = true;
        if (c->cluster != NULL) {
            crd__node *nodes[SCAN_NODES];
            s->npools = crd__cluster_primaries(c, nodes, SCAN_NODES);
            for (int i = 0; i < s->npools; i++)
                s->pools[i] = nodes[i]->pool;
        } else {
            s->pools[0] = c->pool;
            s->npools = c->pool != NULL ? 1 : 0;
        }
        if (s->npools == 0)
            return crd__fail(c, CRD_IO, "no node to scan (the cluster's map is empty)");
    }
    if (s->at >= s->npools) {
        *more = false;
        s->complete = true;
        return CRD_OK;
    }
    const char *argv[6] = {"SCAN", s->cursor, "MATCH", s->pattern, "COUNT", s->count};
    size_t lens[6];
    for (int i = 0; i < 6; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = NULL;
    crd_status st = node_command(c, s->pools[s->at], 6, argv, lens, &r);
    if (st != CRD_OK)
        return st;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !crd__reply_is_text(r->element[0]) ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
        st = crd__reply_fail(c, r, "SCAN");
        freeReplyObject(r);
        return st;
    }
    snprintf(s->cursor, sizeof s->cursor, "%.*s", (int)r->element[0]->len, r->element[0]->str);
    if (strcmp(s->cursor, "0") == 0) {
        s->at++; /* this node is done */
    }
    freeReplyObject(s->keys);
    s->keys = r;
    s->next = 0;
    s->scanned += r->element[1]->elements;
    *more = true;
    return CRD_OK;
}

crd_status crd_scan_next(crd_scan *s, int64_t timeout_ms, crd_state **out)
{
    if (out != NULL)
        *out = NULL;
    if (s == NULL || out == NULL)
        return crd__fail(s != NULL ? s->c : NULL, CRD_INVALID_ARGUMENT, "scan or out is NULL");
    crd_client *c = s->c;
    crd_status st = crd__client_check(c);
    if (st != CRD_OK)
        return st;
    if (timeout_ms < 0 || timeout_ms > CRD_DURATION_MAX_MS)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "timeout_ms must be 0..%lld (got %lld)",
                         (long long)CRD_DURATION_MAX_MS, (long long)timeout_ms);
    int64_t deadline = timeout_ms > 0 ? crd__now_ms() + timeout_ms : INT64_MAX;
    bool stepped = false; /* every call makes progress, however short its bound */
    for (;;) {
        while (s->keys != NULL && s->next < s->keys->element[1]->elements) {
            const redisReply *k = s->keys->element[1]->element[s->next];
            if (!crd__reply_is_text(k) || k->len == 0 || is_part(k->str, k->len)) {
                s->next++;
                continue;
            }
            crd_state *state = NULL;
            st = crd__state_read_cached(c, k->str, k->len, s->flags & CRD__STATE_FLAGS, s->ic, &state);
            if (st != CRD_OK)
                return st; /* this key is read again at the next call */
            s->next++;
            if (wanted(s, state)) {
                *out = state;
                crd__ok(c);
                return CRD_OK;
            }
            crd_state_free(state);
            if (crd__now_ms() >= deadline)
                return crd__fail(c, CRD_TIMEOUT, "the scan's step took longer than %lld ms",
                                 (long long)timeout_ms);
        }
        if (s->complete) {
            crd__ok(c);
            return CRD_OK;
        }
        if (stepped && crd__now_ms() >= deadline)
            return crd__fail(c, CRD_TIMEOUT, "the scan took longer than %lld ms",
                             (long long)timeout_ms);
        stepped = true;
        bool more = false;
        if ((st = scan_step(s, &more)) != CRD_OK)
            return st;
        if (!more) {
            crd__ok(c);
            return CRD_OK;
        }
    }
}

