/*
 * reply.c -- what a Redis reply means, decided in one place: which class an error reply
 * is in (PROTOCOL.md 12: which ones prove the command did not run), how an unusable
 * reply becomes a status and a message, and how replies are rendered for traces.
 *
 * Pure functions, except crd__reply_fail which records the calling thread's detail
 * message. Any thread; no lock.
 */
#include "transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool starts(const redisReply *r, const char *word)
{
    size_t n = strlen(word);
    /* The error code is the first word: "MOVED 3999 127.0.0.1:6381". */
    return r->len >= n && memcmp(r->str, word, n) == 0 && (r->len == n || r->str[n] == ' ');
}

crd__reply_class crd__reply_classify(const redisReply *r)
{
    if (r == NULL)
        return CRD__REPLY_NONE;
    if (r->type != REDIS_REPLY_ERROR)
        return CRD__REPLY_OK;
    if (starts(r, "NOSCRIPT"))
        return CRD__REPLY_NOSCRIPT;
    if (starts(r, "MOVED"))
        return CRD__REPLY_MOVED;
    if (starts(r, "ASK"))
        return CRD__REPLY_ASK;
    if (starts(r, "READONLY"))
        return CRD__REPLY_READONLY;
    if (starts(r, "LOADING") || starts(r, "BUSY") || starts(r, "TRYAGAIN") ||
        starts(r, "CLUSTERDOWN") || starts(r, "MASTERDOWN"))
        return CRD__REPLY_BUSY;
    return CRD__REPLY_ERROR;
}

size_t crd__reply_error_text(const redisReply *r, const char **text)
{
    *text = r->str;
    size_t n = r->len;
    /* Redis 7 appends where a script failed: "... script: <sha1>, on @user_script:9." */
    static const char tail[] = " script: ";
    for (size_t i = 0; i + sizeof tail - 1 <= n; i++)
        if (memcmp(r->str + i, tail, sizeof tail - 1) == 0) {
            n = i;
            break;
        }
    while (n > 0 && (r->str[n - 1] == '.' || r->str[n - 1] == ' '))
        n--;
    return n;
}

const char *crd__reply_meaning(const redisReply *r)
{
    /* Each of these says the server did not do what was asked, and why; a lock caller is
     * told it in words, so that a failed acquire is never read as a held lock nor a
     * refusal of the deployment as a bug of the caller. */
    static const struct {
        const char *code, *meaning;
    } table[] = {
        {"OOM", "maxmemory reached and the maxmemory-policy evicts nothing: the write was "
                "refused, nothing was written (free memory or raise maxmemory)"},
        {"LOADING", "a restart or a replica's full sync: nothing ran"},
        {"BUSY", "another client's script runs past busy-reply-threshold: nothing ran"},
        {"MASTERDOWN", "a replica without its primary that serves no stale data: nothing ran"},
        {"CLUSTERDOWN", "slots without a primary, or this node cut off from the majority: "
                        "nothing ran"},
        {"TRYAGAIN", "the keys' slot is being migrated: nothing ran"},
        {"CROSSSLOT", "a cluster node, or a proxy in front of a sharded database, checks key "
                      "slots and these keys span slots: nothing ran"},
        {"NOPERM", "the README's ACL rules list what each lock kind needs"},
    };
    if (r == NULL || r->type != REDIS_REPLY_ERROR)
        return NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (starts(r, table[i].code))
            return table[i].meaning;
    return NULL;
}

crd_status crd__reply_fail(crd_client *c, const redisReply *r, const char *what)
{
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        const char *text;
        size_t n = crd__reply_error_text(r, &text);
        const char *meaning = crd__reply_meaning(r);
        if (meaning != NULL)
            return crd__fail(c, CRD_SERVER, "%s: %.*s (%s)", what, (int)n, text, meaning);
        return crd__fail(c, CRD_SERVER, "%s: %.*s", what, (int)n, text);
    }
    char text[200];
    crd__reply_render(r, text, sizeof text);
    return crd__fail(c, CRD_PROTOCOL, "%s: unexpected reply %s", what, text);
}

bool crd__reply_int(const redisReply *r, int64_t *out)
{
    if (r == NULL)
        return false;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type == REDIS_REPLY_NIL) {
        *out = 0;
        return true;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0)
        return false;
    char *end = NULL;
    long long v = strtoll(r->str, &end, 10);
    if (end != r->str + r->len)
        return false;
    *out = v;
    return true;
}

static void render(const redisReply *r, char *buf, size_t len, int depth)
{
    if (len == 0)
        return;
    buf[0] = '\0';
    if (r == NULL) {
        snprintf(buf, len, "(no reply)");
        return;
    }
    switch (r->type) {
    case REDIS_REPLY_NIL: snprintf(buf, len, "nil"); return;
    case REDIS_REPLY_INTEGER: snprintf(buf, len, "(integer) %lld", r->integer); return;
    case REDIS_REPLY_STRING: snprintf(buf, len, "\"%.*s\"", (int)r->len, r->str); return;
    case REDIS_REPLY_STATUS: snprintf(buf, len, "%.*s", (int)r->len, r->str); return;
    case REDIS_REPLY_ERROR: snprintf(buf, len, "(error) %.*s", (int)r->len, r->str); return;
    case REDIS_REPLY_ARRAY: {
        size_t o = 0;
        o += (size_t)snprintf(buf + o, len - o, "[");
        for (size_t i = 0; i < r->elements && o + 4 < len && depth < 4; i++) {
            if (i > 0)
                o += (size_t)snprintf(buf + o, len - o, ", ");
            if (o >= len)
                break;
            render(r->element[i], buf + o, len - o, depth + 1);
            o += strlen(buf + o);
        }
        if (o + 2 <= len)
            snprintf(buf + o, len - o, "]");
        return;
    }
    default: snprintf(buf, len, "(reply type %d)", r->type); return;
    }
}

void crd__reply_render(const redisReply *r, char *buf, size_t len) { render(r, buf, len, 0); }
