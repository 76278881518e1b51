/*
 * names.c -- Redisson's derived names (PROTOCOL.md 2.1) and the cluster-safety class of
 * a name (2.3). Pure functions; no lock, any thread.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

crd_status crd__prefix_name(const char *prefix, const char *name, size_t len, crd__buf *out)
{
    size_t plen = strlen(prefix);
    bool tagged = memchr(name, '{', len) != NULL;
    size_t total = plen + 1 + len + (tagged ? 0 : 2);
    char *p = malloc(total + 1);
    if (p == NULL)
        return CRD_NO_MEMORY;
    size_t o = 0;
    memcpy(p, prefix, plen);
    o += plen;
    p[o++] = ':';
    if (!tagged)
        p[o++] = '{';
    memcpy(p + o, name, len);
    o += len;
    if (!tagged)
        p[o++] = '}';
    p[o] = '\0';
    out->p = p;
    out->len = o;
    return CRD_OK;
}

crd_status crd__suffix_name(const char *name, size_t len, const char *suffix, crd__buf *out)
{
    size_t slen = strlen(suffix);
    bool tagged = memchr(name, '{', len) != NULL;
    size_t total = len + (tagged ? 0 : 2) + (slen ? 1 + slen : 0);
    char *p = malloc(total + 1);
    if (p == NULL)
        return CRD_NO_MEMORY;
    size_t o = 0;
    if (!tagged)
        p[o++] = '{';
    memcpy(p + o, name, len);
    o += len;
    if (!tagged)
        p[o++] = '}';
    if (slen) {
        p[o++] = ':';
        memcpy(p + o, suffix, slen);
        o += slen;
    }
    p[o] = '\0';
    out->p = p;
    out->len = o;
    return CRD_OK;
}

bool crd__name_is_unsafe(const char *name, size_t len)
{
    const char *open = memchr(name, '{', len);
    if (open == NULL)
        return memchr(name, '}', len) != NULL; /* class C: '}' without '{' */
    size_t rest = len - (size_t)(open - name) - 1;
    const char *close = memchr(open + 1, '}', rest);
    if (close == NULL)
        return true; /* unclosed '{' */
    return close == open + 1; /* empty first tag "{}" */
}
