/*
 * golden.h -- helpers of the suites that compare credisson's traffic with the Redisson
 * recordings in tests/golden/ (test_golden.c, test_watchdog.c).
 *
 * What it provides
 *   - crdt_golden_reply_text: a recorded reply (JSON) rendered the way crd_trace renders
 *     the reply it got, so that the two compare as strings.
 *
 * Asserts nothing.
 */
#ifndef CRDT_GOLDEN_H
#define CRDT_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

/* null -> "nil", an integer -> "(integer) N", a string -> "\"s\"", an array -> "[a, b]"
 * (each element so rendered, in at most 64 bytes), anything else -> "?". Always
 * NUL-terminated within cap. */
void crdt_golden_reply_text(json_t *reply, char *buf, size_t cap);

/* One of our scripts as the build expanded it (CRD_LUA_DIR/<file>.lua, includes
 * resolved: what the library sends) and its SHA1 as the server computed it. */
typedef struct crdt_golden_script {
    char *text; /* NUL-terminated; free() it */
    size_t len;
    char sha[41];
} crdt_golden_script;

/* Reads file's script into s and asks r for its SHA1 (both asserted): with load by
 * SCRIPT LOAD, which leaves it in the server's script cache; without by redis.sha1hex,
 * which loads nothing (a replay then sees the library's NOSCRIPT and EVAL). */
void crdt_golden_script_read(redisContext *r, const char *file, bool load, crdt_golden_script *s);
/* Whether a traced call runs s: EVALSHA with its SHA1 or EVAL with its text. */
bool crdt_golden_script_runs(const crdt_golden_script *s, int argc, char *const *argv,
                             const size_t *argvlen);

#endif /* CRDT_GOLDEN_H */
