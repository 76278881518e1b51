/*
 * golden.c -- the recorded-reply rendering of golden.h.
 */
#include "golden.h"

#include <stdio.h>

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
