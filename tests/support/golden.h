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

#include <stddef.h>

#include <jansson.h>

/* null -> "nil", an integer -> "(integer) N", a string -> "\"s\"", an array -> "[a, b]"
 * (each element so rendered, in at most 64 bytes), anything else -> "?". Always
 * NUL-terminated within cap. */
void crdt_golden_reply_text(json_t *reply, char *buf, size_t cap);

#endif /* CRDT_GOLDEN_H */
