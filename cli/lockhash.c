/*
 * lockhash.c -- a lock's hash as status, watch and list read it: the owner fields and
 * their hold counts, and the read-write lock's "mode" field. Pure functions.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

bool cli_parse_count(const char *s, size_t len, long long *out)
{
    if (len == 0 || len > 18)
        return false;
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == len)
        return false;
    long long v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = s[0] == '-' ? -v : v;
    return true;
}

bool cli_is_writer(const char *owner, size_t len)
{
    size_t n = sizeof CRD__WRITE_SUFFIX - 1;
    return len >= n && memcmp(owner + len - n, CRD__WRITE_SUFFIX, n) == 0;
}

bool cli_is_owner_field(const char *f, size_t len)
{
    /* "<uuid>:<id>" with an optional writer's suffix: a UUID's 36 characters (hex digits
     * and four dashes), ':', then a decimal thread id. */
    if (cli_is_writer(f, len))
        len -= sizeof CRD__WRITE_SUFFIX - 1;
    if (len < 38 || f[36] != ':')
        return false;
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        char c = f[i];
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (dash ? c != '-' : !hex)
            return false;
    }
    for (size_t i = 37; i < len; i++)
        if (f[i] < '0' || f[i] > '9')
            return false;
    return true;
}

bool cli_lockhash_read(const redisReply *hash, cli_lockhash *out)
{
    memset(out, 0, sizeof *out);
    out->is_lock = true;
    if (hash->type != REDIS_REPLY_ARRAY)
        return true;
    out->holders = calloc(hash->elements / 2 + 1, sizeof *out->holders);
    if (out->holders == NULL)
        return false;
    for (size_t i = 0; i + 1 < hash->elements; i += 2) {
        const redisReply *f = hash->element[i], *v = hash->element[i + 1];
        if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            out->mode = v->str;
            out->mode_len = v->len;
            continue;
        }
        cli_holder *h = &out->holders[out->nholders];
        if (!cli_parse_count(v->str, v->len, &h->count)) {
            out->is_lock = false; /* a hash, but not a lock's */
            continue;
        }
        h->owner = f->str;
        h->owner_len = f->len;
        out->nholders++;
    }
    return true;
}

void cli_lockhash_free(cli_lockhash *h)
{
    free(h->holders);
    memset(h, 0, sizeof *h);
}
