/*
 * fuzz_names.c -- libFuzzer target for the name rules of src/names.c: any bytes as a
 * lock name. crd__prefix_name and crd__suffix_name must produce exactly Redisson's
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
    static const char *const prefixes[] = {"redisson_lock__channel", "redisson_unlock_latch",
                                           "redisson_lock_queue", "redisson_lock_timeout",
                                           "redisson_rwlock"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        crd__buf b = {NULL, 0};
        if (crd__prefix_name(prefixes[i], name, size, &b) != CRD_OK)
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
    static const char *const suffixes[] = {"", "rwlock_timeout"};
    for (size_t i = 0; i < 2; i++) {
        crd__buf b = {NULL, 0};
        if (crd__suffix_name(name, size, suffixes[i], &b) != CRD_OK)
            continue;
        size_t sl = strlen(suffixes[i]);
        size_t want = size + (tagged ? 0 : 2) + (sl ? sl + 1 : 0);
        if (b.len != want || memcmp(b.p + (tagged ? 0 : 1), name, size) != 0 || b.p[b.len] != '\0')
            abort();
        if (!unsafe)
            same_slot(name, size, &b);
        free(b.p);
    }
    return 0;
}
