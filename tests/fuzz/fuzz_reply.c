/*
 * fuzz_reply.c -- libFuzzer target for reply decoding: any bytes as what a server sends
 * back, parsed by hiredis's reader (the library's only wire parser) and each reply
 * rendered by crd__reply_render (src/conn.c), which turns every script reply and every
 * unexpected one into trace and error text, into buffers of many sizes. The
 * rendering must stay inside its buffer and NUL-terminate it.
 *
 * Gap: the decisions lock.c takes on a script's reply (nil = acquired, integer = TTL,
 * [1] = renewed, ...) are inline in functions that also talk to Redis, so they are not
 * reachable from here; the fault and foreign-state tests drive them with real
 * servers. The corpus holds the reply of every script (nil, integers, [1]/[0],
 * errors such as WRONGTYPE and NOSCRIPT, pub/sub messages) and malformed variants.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void render_checked(const redisReply *r, size_t cap)
{
    char *buf = malloc(cap + 8);
    if (buf == NULL)
        return;
    memset(buf, 0x5a, cap + 8);
    crd__reply_render(r, buf, cap);
    for (size_t i = cap; i < cap + 8; i++)
        if ((unsigned char)buf[i] != 0x5a)
            abort(); /* wrote past the buffer */
    if (cap > 0 && memchr(buf, '\0', cap) == NULL)
        abort(); /* not terminated */
    free(buf);
}

/* hiredis 0.14 allocates a multi-bulk's element array from the announced count before
 * any element arrives ("*1000000000" asks for 16 GB) and has no limit to set; newer
 * hiredis has maxelements. That is hiredis's own exposure to a hostile server, not
 * ours, and it would only stop the fuzzer at its memory limit: skip such inputs. */
static bool announces_huge_array(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        if (data[i] != '*')
            continue;
        size_t digits = 0;
        while (i + 1 + digits < size && data[i + 1 + digits] >= '0' && data[i + 1 + digits] <= '9')
            digits++;
        if (digits >= 6)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (announces_huge_array(data, size))
        return 0;
    redisReader *rd = redisReaderCreate();
    if (rd == NULL)
        return 0;
    /* Feed in two pieces, as replies arrive split across reads. */
    size_t cut = size > 0 ? data[0] % (size + 1) : 0;
    if (redisReaderFeed(rd, (const char *)data, cut) == REDIS_OK &&
        redisReaderFeed(rd, (const char *)data + cut, size - cut) == REDIS_OK) {
        for (int n = 0; n < 64; n++) {
            void *reply = NULL;
            if (redisReaderGetReply(rd, &reply) != REDIS_OK || reply == NULL)
                break;
            static const size_t caps[] = {0, 1, 2, 3, 5, 8, 13, 40, 200, 1024};
            for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
                render_checked(reply, caps[i]);
            freeReplyObject(reply);
        }
    }
    redisReaderFree(rd);
    return 0;
}
