/*
 * grow.c -- the growing arrays of the library (watchdog rounds, identity entries, watch
 * queues, identity caches): one rule for making room, and one order for sorting byte
 * strings (names, fields) in them.
 *
 * Pure; no lock, any thread.
 */
#include "base.h"

#include <stdlib.h>
#include <string.h>

void *crd__grow(void *v, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return v;
    size_t n = *cap != 0 ? *cap * 2 : first;
    while (n < need)
        n *= 2;
    void *p = realloc(v, n * size);
    if (p != NULL)
        *cap = n;
    return p;
}

int crd__bytes_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    int d = memcmp(a, b, alen < blen ? alen : blen);
    return d != 0 ? d : (alen > blen) - (alen < blen);
}
