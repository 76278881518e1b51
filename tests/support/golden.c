/*
 * golden.c -- the recorded-reply rendering and the script reading of golden.h.
 */
#include "golden.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"

void crdt_golden_reply_text(json_t *reply, char *buf, size_t cap)
{
    if (json_is_null(reply)) {
        snprintf(buf, cap, "nil");
    } else if (json_is_integer(reply)) {
        snprintf(buf, cap, "(integer) %lld", (long long)json_integer_value(reply));
    } else if (json_is_array(reply)) {
        size_t o = (size_t)snprintf(buf, cap, "[");
        for (size_t i = 0; i < json_array_size(reply) && o < cap; i++) {
            char el[64];
            crdt_golden_reply_text(json_array_get(reply, i), el, sizeof el);
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", el);
        }
        if (o < cap)
            snprintf(buf + o, cap - o, "]");
    } else if (json_is_string(reply)) {
        snprintf(buf, cap, "\"%s\"", json_string_value(reply));
    } else {
        snprintf(buf, cap, "?");
    }
}

void crdt_golden_script_read(redisContext *r, const char *file, bool load, crdt_golden_script *s)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.lua", CRD_LUA_DIR, file);
    s->text = crdt_slurp(path, &s->len);
    cr_assert_not_null(s->text, "cannot read %s", path);
    redisReply *rep =
        load ? redisCommand(r, "SCRIPT LOAD %b", s->text, s->len)
             : redisCommand(r, "EVAL %s 0 %b", "return redis.sha1hex(ARGV[1])", s->text, s->len);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len == 40, "%s of %s: %s",
              load ? "SCRIPT LOAD" : "redis.sha1hex", file,
              rep != NULL && rep->type == REDIS_REPLY_ERROR ? rep->str : "no SHA1");
    memcpy(s->sha, rep->str, 41);
    freeReplyObject(rep);
}

bool crdt_golden_script_runs(const crdt_golden_script *s, int argc, char *const *argv,
                             const size_t *argvlen)
{
    if (argc < 2)
        return false;
    if (strcasecmp(argv[0], "EVALSHA") == 0)
        return strcmp(argv[1], s->sha) == 0;
    return strcasecmp(argv[0], "EVAL") == 0 && argvlen[1] == s->len &&
           memcmp(argv[1], s->text, s->len) == 0;
}
