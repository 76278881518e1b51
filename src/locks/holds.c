/*
 * holds.c -- the client's record of what it holds: one record per (name, owner) with
 * the local hold count, the lease of the last acquire (the re-arm lease an unlock
 * sends), whether the watchdog renews it, and the local validity deadline.
 *
 * A chained hash table guarded by holds->mu. Callers (lock.c, watchdog.c) take the
 * mutex around lookups and updates; no Redis traffic ever happens under it.
 */
#include "locks.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *name, size_t len, uint64_t owner, int kind)
{
    uint64_t h = (1469598103934665603ULL ^ owner) + (uint64_t)kind * 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

crd_status crd__holds_init(crd_client *c)
{
    crd__holds *h = calloc(1, sizeof *h);
    if (h == NULL)
        return CRD_NO_MEMORY;
    h->nbuckets = 64;
    h->gauge = &c->metrics.holds;
    h->buckets = calloc(h->nbuckets, sizeof *h->buckets);
    if (h->buckets == NULL) {
        free(h);
        return CRD_NO_MEMORY;
    }
    if (crd__mutex_make(c, CRD__MU_HOLDS, &h->mu, &h->settled) != 0) {
        free(h->buckets);
        free(h);
        return CRD_NO_MEMORY;
    }
    c->holds = h;
    return CRD_OK;
}

void crd__holds_free(crd_client *c)
{
    crd__holds *h = c->holds;
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->nbuckets; i++) {
        crd__hold *e = h->buckets[i];
        while (e != NULL) {
            crd__hold *next = e->next;
            free(e);
            e = next;
        }
    }
    free(h->buckets);
    free(h->unwatch);
    crd__settle_forget(h);
    crd__mutex_drop(c, CRD__MU_HOLDS, &h->mu, &h->settled);
    free(h);
    c->holds = NULL;
}

crd__hold *crd__holds_find(crd__holds *h, const char *name, size_t len, uint64_t owner, int kind)
{
    size_t b = hash(name, len, owner, kind) & (h->nbuckets - 1);
    for (crd__hold *e = h->buckets[b]; e != NULL; e = e->next)
        if (e->owner == owner && e->kind == kind && e->name_len == len &&
            memcmp(e->name, name, len) == 0)
            return e;
    return NULL;
}

static void grow(crd__holds *h)
{
    size_t n = h->nbuckets * 2;
    crd__hold **nb = calloc(n, sizeof *nb);
    if (nb == NULL)
        return; /* stay at the current size: slower, still correct */
    for (size_t i = 0; i < h->nbuckets; i++) {
        crd__hold *e = h->buckets[i];
        while (e != NULL) {
            crd__hold *next = e->next;
            size_t b = hash(e->name, e->name_len, e->owner, e->kind) & (n - 1);
            e->next = nb[b];
            nb[b] = e;
            e = next;
        }
    }
    free(h->buckets);
    h->buckets = nb;
    h->nbuckets = n;
}

crd__hold *crd__holds_insert(crd__holds *h, const char *name, size_t len, uint64_t owner,
                             int kind)
{
    crd__hold *e = calloc(1, sizeof *e + len + 1);
    if (e == NULL)
        return NULL;
    e->name = e->name_buf;
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    e->name_len = len;
    e->owner = owner;
    e->kind = kind;
    e->id = ++h->next_id;
    if (h->count + 1 > h->nbuckets)
        grow(h);
    size_t b = hash(name, len, owner, kind) & (h->nbuckets - 1);
    e->next = h->buckets[b];
    h->buckets[b] = e;
    h->count++;
    atomic_fetch_add_explicit(h->gauge, 1, memory_order_relaxed);
    return e;
}

void crd__holds_remove(crd__holds *h, crd__hold *hold)
{
    if (hold->watch_sub != NULL) {
        /* Its watch reference is dropped later, outside holds->mu (crd__watch_flush). */
        if (h->nunwatch == h->capunwatch) {
            size_t cap = h->capunwatch ? h->capunwatch * 2 : 8;
            crd__sub **p = realloc(h->unwatch, cap * sizeof *p);
            if (p != NULL) {
                h->unwatch = p;
                h->capunwatch = cap;
            }
        }
        /* Out of memory: the reference stays and the channel stays subscribed. */
        if (h->nunwatch < h->capunwatch)
            h->unwatch[h->nunwatch++] = hold->watch_sub;
    }
    size_t b = hash(hold->name, hold->name_len, hold->owner, hold->kind) & (h->nbuckets - 1);
    for (crd__hold **pp = &h->buckets[b]; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == hold) {
            *pp = hold->next;
            h->count--;
            atomic_fetch_sub_explicit(h->gauge, 1, memory_order_relaxed);
            free(hold);
            return;
        }
    }
}

size_t crd__holds_take_unwatch(crd__holds *h, crd__sub ***out)
{
    *out = h->unwatch;
    size_t n = h->nunwatch;
    h->unwatch = NULL;
    h->nunwatch = h->capunwatch = 0;
    return n;
}

void crd__holds_foreach(crd__holds *h, void (*fn)(crd__hold *, void *), void *arg)
{
    for (size_t i = 0; i < h->nbuckets; i++) {
        crd__hold *e = h->buckets[i];
        while (e != NULL) {
            crd__hold *next = e->next; /* fn may remove e */
            fn(e, arg);
            e = next;
        }
    }
}

/* ---- undo.c's registry of acquires under way and lost ones to read back ----------------- */

static crd__settle **settle_slot(crd__holds *h, const char *name, size_t len, uint64_t owner,
                                 int kind)
{
    crd__settle **pp = &h->settle[hash(name, len, owner, kind) % CRD__SETTLE_BUCKETS];
    while (*pp != NULL && ((*pp)->owner != owner || (*pp)->kind != kind ||
                           (*pp)->name_len != len || memcmp((*pp)->name, name, len) != 0))
        pp = &(*pp)->next;
    return pp;
}

crd__settle *crd__settle_find(crd__holds *h, const char *name, size_t len, uint64_t owner,
                              int kind)
{
    return *settle_slot(h, name, len, owner, kind);
}

crd__settle *crd__settle_get(crd__holds *h, const char *name, size_t len, uint64_t owner,
                             int kind)
{
    crd__settle **pp = settle_slot(h, name, len, owner, kind);
    if (*pp != NULL)
        return *pp;
    crd__settle *e = calloc(1, sizeof *e + len + 1);
    if (e == NULL)
        return NULL;
    e->owner = owner;
    e->kind = kind;
    e->name_len = len;
    memcpy(e->name, name, len);
    *pp = e;
    return e;
}

void crd__settle_drop(crd__holds *h, crd__settle *s)
{
    if (s->busy > 0 || s->unknown > 0 || s->turn)
        return;
    crd__settle **pp = settle_slot(h, s->name, s->name_len, s->owner, s->kind);
    *pp = s->next;
    free(s->job);
    free(s);
}

void crd__settle_forget(crd__holds *h)
{
    for (size_t i = 0; i < CRD__SETTLE_BUCKETS; i++) {
        crd__settle *e = h->settle[i];
        while (e != NULL) {
            crd__settle *next = e->next;
            free(e->job);
            free(e);
            e = next;
        }
        h->settle[i] = NULL;
    }
}
