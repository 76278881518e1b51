/*
 * fuzz_names.c -- libFuzzer target for the name rules of src/names.c: any bytes as a
 * lock name. crd__derived_name, crd__rw_prefix_put and crd__read_timeout_base must produce
 * exactly Redisson's
 * prefixName / suffixName bytes (PROTOCOL.md 2.1), and for every name that
 * crd__name_is_unsafe accepts, every derived key and channel must hash to the same
 * Redis Cluster slot as the name itself (the same hash-tag bytes, PROTOCOL.md 2.3).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes Redis Cluster hashes for a key (cluster.c keyHashSlot). */
static void hashed_part(const char *k, size_t len, const char **p, size_t *n)
{
    const char *open = memchr(k, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - k) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1) {
            *p = open + 1;
            *n = (size_t)(close - open - 1);
            return;
        }
    }
    *p = k;
    *n = len;
}

static void same_slot(const char *name, size_t len, const crd__buf *b)
{
    const char *a, *c;
    size_t an, cn;
    hashed_part(name, len, &a, &an);
    hashed_part(b->p, b->len, &c, &cn);
    if (an != cn || memcmp(a, c, an) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0; /* an empty name is refused before anything is derived (check_name) */
    const char *name = (const char *)data;
    bool tagged = memchr(name, '{', size) != NULL;
    bool unsafe = crd__name_is_unsafe(name, size);
    static const char *const prefixes[] = {CRD__LOCK_CHANNEL, CRD__LATCH, CRD__FAIR_QUEUE,
                                           CRD__FAIR_DEADLINES, CRD__RW_CHANNEL};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        crd__buf b = {NULL, 0};
        if (crd__derived_name(prefixes[i], name, size, &b) != CRD_OK)
            continue;
        size_t pl = strlen(prefixes[i]);
        /* "<prefix>:{N}" or, when N has a '{', "<prefix>:N" */
        size_t want = pl + 1 + size + (tagged ? 0 : 2);
        if (b.len != want || memcmp(b.p, prefixes[i], pl) != 0 || b.p[pl] != ':' ||
            memcmp(b.p + pl + 1 + (tagged ? 0 : 1), name, size) != 0 || b.p[b.len] != '\0')
            abort();
        if (!unsafe)
            same_slot(name, size, &b);
        free(b.p);
    }
    /* P = "{N}" or N, and a read hold's timeout key base "<P>:<field>:rwlock_timeout" */
    char *p = malloc(crd__rw_prefix_len(name, size) + 1);
    char *t = malloc(crd__rw_prefix_len(name, size) + 1 + 80 + 16);
    if (p != NULL && t != NULL) {
        size_t pl = crd__rw_prefix_put(name, size, p);
        if (pl != size + (tagged ? 0 : 2) || memcmp(p + (tagged ? 0 : 1), name, size) != 0 ||
            p[pl] != '\0')
            abort();
        static const char field[] = "0b5ba1a6-5a6c-4a0f-9c8e-0f9b2b8f6f1a:1";
        size_t tl = crd__read_timeout_base(p, pl, field, sizeof field - 1, t);
        if (tl != pl + 1 + sizeof field - 1 + 15 || memcmp(t, p, pl) != 0 ||
            memcmp(t + tl - 15, ":rwlock_timeout", 15) != 0 || t[tl] != '\0')
            abort();
        crd__buf pb = {p, pl}, tb = {t, tl};
        if (!unsafe) {
            same_slot(name, size, &pb);
            same_slot(name, size, &tb);
        }
    }
    free(p);
    free(t);
    return 0;
}
