/*
 * state.c -- the pieces every introspection file builds a crd_state from: its memory (an
 * arena behind the public struct, freed at once by crd_state_free) and the readers of
 * reply pieces (counts, owner fields, text replies, a kind's channel). Below inspect.c,
 * scan.c, whois.c and watch.c, which all read states (inspect.h says who shares what).
 *
 * Threads: the caller's; a state belongs to one thread at a time. Locks: none.
 */
#include "inspect.h"

#include <stdlib.h>
#include <string.h>

/* ---- an arena: every piece of a crd_state, freed at once ------------------------------- */


void *crd__state_alloc(state_box *b, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    crd__state_chunk *k = b->chunks;
    if (k == NULL || k->size - k->used < n) {
        size_t size = n > 8192 ? n : 8192;
        k = malloc(sizeof *k + size);
        if (k == NULL) {
            b->oom = true;
            return NULL;
        }
        k->size = size;
        k->used = 0;
        k->next = b->chunks;
        b->chunks = k;
    }
    void *p = (char *)k->data + k->used;
    k->used += n;
    memset(p, 0, n);
    return p;
}

/* A NUL-terminated copy of len bytes ("" when out of memory). */
const char *crd__state_str(state_box *b, const char *s, size_t len)
{
    char *p = s != NULL ? crd__state_alloc(b, len + 1) : NULL;
    if (p == NULL)
        return "";
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void crd_state_free(crd_state *st)
{
    if (st == NULL)
        return;
    state_box *b = (state_box *)st;
    while (b->chunks != NULL) {
        crd__state_chunk *k = b->chunks;
        b->chunks = k->next;
        free(k);
    }
    free(b);
}

/* ---- reading replies --------------------------------------------------------------------- */

/* A signed decimal of at most 18 digits (a hold count, a semaphore's value). */
bool crd__count_parse(const char *s, size_t len, int64_t *out)
{
    if (s == NULL || len == 0 || len > 19)
        return false;
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == len || len - i > 18)
        return false;
    int64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = s[0] == '-' ? -v : v;
    return true;
}

bool crd__reply_is_text(const redisReply *r)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

int64_t crd__state_int(const redisReply *r, int64_t dflt)
{
    int64_t v;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (crd__reply_is_text(r) && crd__count_parse(r->str, r->len, &v))
        return v;
    return dflt;
}

/* An owner field as the force-unlock guard reads one: "...:<digits>" or
 * "...:<digits>:write"; or node-redisson's "<uuid>:<anything>" (thread 0). *ulen: the
 * client part's length, *thread, *writer. */
bool crd__owner_field_parse(const char *f, size_t len, size_t *ulen, uint64_t *thread, bool *writer)
{
    static const char w[] = ":write";
    *writer = len > sizeof w - 1 && memcmp(f + len - (sizeof w - 1), w, sizeof w - 1) == 0;
    if (*writer)
        len -= sizeof w - 1;
    size_t d = len;
    while (d > 0 && f[d - 1] >= '0' && f[d - 1] <= '9')
        d--;
    if (d == len || d == 0 || f[d - 1] != ':' || len - d > 20) {
        /* node-redisson's form: "<client uuid>:<lock object uuid>" (no thread id). */
        if (len < 38 || f[36] != ':')
            return false;
        for (size_t i = 0; i < 36; i++) {
            bool dash = i == 8 || i == 13 || i == 18 || i == 23;
            char ch = f[i];
            bool hex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
                       (ch >= 'A' && ch <= 'F');
            if (dash ? ch != '-' : !hex)
                return false;
        }
        *ulen = 36;
        *thread = 0;
        return true;
    }
    uint64_t t = 0;
    for (size_t i = d; i < len; i++)
        t = t * 10 + (uint64_t)(f[i] - '0');
    *ulen = d - 1;
    *thread = t;
    return true;
}

/* Which channel's subscribers wait for a state of this kind: 0 lock, 1 read-write,
 * 2 semaphores, 3 latch; -1 none. */
int crd__state_channel(crd_object_kind k)
{
    switch (k) {
    case CRD_KIND_LOCK:
    case CRD_KIND_FAIR_LOCK:
    case CRD_KIND_FENCED_LOCK:
        return 0;
    case CRD_KIND_READ_WRITE_LOCK:
        return 1;
    case CRD_KIND_SEMAPHORE:
    case CRD_KIND_PERMIT_SEMAPHORE:
        return 2;
    case CRD_KIND_LATCH:
        return 3;
    case CRD_KIND_GROUP_LOCK:
        return 0; /* redisson_lock__channel:{G} */
    case CRD_KIND_NONE:
    case CRD_KIND_OTHER:
    case CRD_KIND_RATE_LIMITER: /* no channel: its waiters sleep the server's delay */
        break;
    }
    return -1;
}
