/*
 * names.c -- every name Redisson derives from a lock name (PROTOCOL.md 2.1), the owner
 * fields, and the cluster-safety class of a name (2.3). The one place these rules live:
 * the lock kinds, the watchdog and the CLI all take their keys and channels from here.
 *
 * Pure functions; no lock, any thread.
 */
#include "locks.h"

#include <stdlib.h>
#include <string.h>

/* "<prefix>:{N}", or "<prefix>:N" when N contains '{' (Redisson's prefixName), then tail
 * when it is not NUL (the latch prefix keeps the ':' before its request id). */
static crd_status prefix_name_tail(const char *prefix, const char *name, size_t len, char tail,
                                   crd__buf *out)
{
    size_t plen = strlen(prefix);
    char *p = malloc(plen + 1 + crd__rw_prefix_len(name, len) + 2);
    if (p == NULL)
        return CRD_NO_MEMORY;
    memcpy(p, prefix, plen);
    p[plen] = ':';
    out->p = p;
    out->len = plen + 1 + crd__rw_prefix_put(name, len, p + plen + 1);
    if (tail != '\0') {
        p[out->len++] = tail;
        p[out->len] = '\0';
    }
    return CRD_OK;
}

static crd_status prefix_name(const char *prefix, const char *name, size_t len, crd__buf *out)
{
    return prefix_name_tail(prefix, name, len, '\0', out);
}

size_t crd__rw_prefix_len(const char *name, size_t len)
{
    return len + (memchr(name, '{', len) != NULL ? 0 : 2);
}

size_t crd__rw_prefix_put(const char *name, size_t len, char *out)
{
    bool tagged = memchr(name, '{', len) != NULL;
    size_t o = 0;
    if (!tagged)
        out[o++] = '{';
    memcpy(out + o, name, len);
    o += len;
    if (!tagged)
        out[o++] = '}';
    out[o] = '\0';
    return o;
}

size_t crd__token_key_len(const char *name, size_t len)
{
    return sizeof CRD__FENCED_TOKEN + crd__rw_prefix_len(name, len);
}

size_t crd__token_key_put(const char *name, size_t len, char *out)
{
    memcpy(out, CRD__FENCED_TOKEN ":", sizeof CRD__FENCED_TOKEN);
    return sizeof CRD__FENCED_TOKEN + crd__rw_prefix_put(name, len, out + sizeof CRD__FENCED_TOKEN);
}

static crd_status rw_prefix(const char *name, size_t len, crd__buf *out)
{
    out->p = malloc(crd__rw_prefix_len(name, len) + 1);
    if (out->p == NULL)
        return CRD_NO_MEMORY;
    out->len = crd__rw_prefix_put(name, len, out->p);
    return CRD_OK;
}

crd_status crd__names_init(crd__names *n, crd__kind kind, const char *name, size_t len)
{
    memset(n, 0, sizeof *n);
    bool rw = kind == CRD__READ || kind == CRD__WRITE;
    crd_status st = prefix_name(rw ? CRD__RW_CHANNEL : CRD__LOCK_CHANNEL, name, len, &n->channel);
    if (st == CRD_OK)
        st = crd__latch_prefix(name, len, &n->latch_prefix);
    bool fair = kind == CRD__FAIR || kind == CRD__NRFAIR;
    if (st == CRD_OK && fair)
        st = prefix_name(CRD__FAIR_QUEUE, name, len, &n->queue);
    if (st == CRD_OK && fair)
        st = prefix_name(CRD__FAIR_DEADLINES, name, len, &n->deadlines);
    if (st == CRD_OK && rw)
        st = rw_prefix(name, len, &n->rw_prefix);
    if (st == CRD_OK && kind == CRD__FENCED)
        st = prefix_name(CRD__FENCED_TOKEN, name, len, &n->token);
    if (st != CRD_OK)
        crd__names_clear(n);
    return st;
}

void crd__names_clear(crd__names *n)
{
    free(n->channel.p);
    free(n->latch_prefix.p);
    free(n->queue.p);
    free(n->deadlines.p);
    free(n->rw_prefix.p);
    free(n->token.p);
    memset(n, 0, sizeof *n);
}

crd_status crd__derived_name(const char *prefix, const char *name, size_t len, crd__buf *out)
{
    return prefix_name(prefix, name, len, out);
}

crd_status crd__latch_prefix(const char *name, size_t len, crd__buf *out)
{
    return prefix_name_tail(CRD__LATCH, name, len, ':', out);
}

size_t crd__field(const char *uuid, uint64_t owner, bool write, char *buf)
{
    size_t n = crd__owner_field(uuid, owner, buf);
    if (write) {
        memcpy(buf + n, CRD__WRITE_SUFFIX, sizeof CRD__WRITE_SUFFIX);
        n += sizeof CRD__WRITE_SUFFIX - 1;
    }
    return n;
}

size_t crd__read_timeout_base(const char *prefix, size_t plen, const char *field, size_t flen,
                              char *buf)
{
    size_t o = 0;
    memcpy(buf, prefix, plen);
    o += plen;
    buf[o++] = ':';
    memcpy(buf + o, field, flen);
    o += flen;
    memcpy(buf + o, CRD__READ_TIMEOUT_SUFFIX, sizeof CRD__READ_TIMEOUT_SUFFIX);
    return o + sizeof CRD__READ_TIMEOUT_SUFFIX - 1;
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

/* ---- synchronizers (issue 27): semaphores and the count-down latch ---------------------- */

crd_status crd__timeouts_name(const char *name, size_t len, crd__buf *out)
{
    /* Redisson's suffixName(N, "timeout"): "{N}:timeout", or "N:timeout" with a '{'. */
    size_t plen = crd__rw_prefix_len(name, len);
    out->p = malloc(plen + sizeof CRD__PERMIT_TIMEOUTS);
    if (out->p == NULL)
        return CRD_NO_MEMORY;
    size_t o = crd__rw_prefix_put(name, len, out->p);
    memcpy(out->p + o, CRD__PERMIT_TIMEOUTS, sizeof CRD__PERMIT_TIMEOUTS);
    out->len = o + sizeof CRD__PERMIT_TIMEOUTS - 1;
    return CRD_OK;
}

crd_status crd__latch_channel_name(const char *name, size_t len, crd__buf *out)
{
    /* Braces always added, even around a name with its own (golden cdl_d). */
    size_t plen = sizeof CRD__LATCH_CHANNEL - 1;
    out->p = malloc(plen + len + 3);
    if (out->p == NULL)
        return CRD_NO_MEMORY;
    memcpy(out->p, CRD__LATCH_CHANNEL, plen);
    out->p[plen] = '{';
    memcpy(out->p + plen + 1, name, len);
    out->p[plen + 1 + len] = '}';
    out->p[plen + 2 + len] = '\0';
    out->len = plen + 2 + len;
    return CRD_OK;
}

crd_status crd__check_name(crd_client *c, const char *label, const char *name, size_t len,
                           bool keys)
{
    const char *sp = label[0] != '\0' ? " " : "";
    if (name == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "%s%sname is NULL", label, sp);
    if (len == 0)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "%s%sname is empty", label, sp);
    if (len > CRD_NAME_MAX)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "%s%sname is %zu bytes; the maximum is %d",
                         label, sp, len, CRD_NAME_MAX);
    /* On a cluster such a name cannot work at all (CROSSSLOT, PROTOCOL.md 2.3): refused
     * whatever allow_unsafe_names says. */
    if (keys && crd__name_is_unsafe(name, len) &&
        (c->cluster != NULL || !c->opts.allow_unsafe_names))
        return crd__fail(c, CRD_INVALID_ARGUMENT,
                         "%s%sname \"%.*s\" has braces that would put its keys in different "
                         "cluster slots ('}' without '{', an unclosed '{' or an empty \"{}\" "
                         "tag)%s", label, sp, (int)(len > 60 ? 60 : len), name,
                         c->cluster != NULL ? "; a cluster refuses its scripts (CROSSSLOT)"
                                            : "; set allow_unsafe_names to accept it");
    return CRD_OK;
}

crd_status crd__check_call(crd_client *c, const void *out, const char *label, const char *name,
                           size_t len, bool keys)
{
    if (out == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "out is NULL");
    crd_status st = crd__client_check(c);
    return st == CRD_OK ? crd__check_name(c, label, name, len, keys) : st;
}
