/*
 * holds.c -- the hold recorder and overlap checker (see holds.h). A growing array under
 * one mutex; the check sorts a copy by name and start and compares each hold with the
 * later-starting holds of its name that begin before it ends.
 */
#include "holds.h"
#include "locked.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct crdt_holds {
    pthread_mutex_t mu;
    crdt_hold *v;
    int n, cap;
};

crdt_holds *crdt_holds_new(void)
{
    crdt_holds *h = calloc(1, sizeof *h);
    if (h != NULL)
        pthread_mutex_init(&h->mu, NULL);
    return h;
}

void crdt_holds_free(crdt_holds *h)
{
    if (h == NULL)
        return;
    pthread_mutex_destroy(&h->mu);
    free(h->v);
    free(h);
}

void crdt_holds_add(crdt_holds *h, int client, const char *name, int64_t start_ns,
                    int64_t end_ns)
{
    pthread_mutex_lock(&h->mu);
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 64;
        crdt_hold *v = realloc(h->v, (size_t)cap * sizeof *v);
        if (v == NULL) {
            pthread_mutex_unlock(&h->mu);
            return;
        }
        h->v = v;
        h->cap = cap;
    }
    crdt_hold *e = &h->v[h->n++];
    memset(e, 0, sizeof *e);
    e->client = client;
    strncpy(e->name, name, sizeof e->name - 1);
    e->start_ns = start_ns;
    e->end_ns = end_ns < start_ns ? start_ns : end_ns;
    pthread_mutex_unlock(&h->mu);
}

int crdt_holds_count(crdt_holds *h) { return crdt_locked_int(&h->mu, &h->n); }

static int by_name_start(const void *a, const void *b)
{
    const crdt_hold *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0)
        return c;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

int crdt_holds_overlaps(crdt_holds *h, crdt_hold first[2])
{
    pthread_mutex_lock(&h->mu);
    int n = h->n;
    crdt_hold *v = n > 0 ? malloc((size_t)n * sizeof *v) : NULL;
    if (v != NULL)
        memcpy(v, h->v, (size_t)n * sizeof *v);
    pthread_mutex_unlock(&h->mu);
    if (v == NULL)
        return 0;
    qsort(v, (size_t)n, sizeof *v, by_name_start);
    int overlaps = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n && strcmp(v[j].name, v[i].name) == 0 &&
                            v[j].start_ns < v[i].end_ns; j++) {
            if (v[j].client == v[i].client)
                continue;
            if (overlaps++ == 0 && first != NULL) {
                first[0] = v[i];
                first[1] = v[j];
            }
        }
    free(v);
    return overlaps;
}
