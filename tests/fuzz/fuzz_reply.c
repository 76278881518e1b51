/*
 * fuzz_reply.c -- libFuzzer target for reply decoding: any bytes as what a server sends
 * back, parsed by hiredis's reader (the library's only wire parser). Every reply goes
 * through every decision the library takes on one: the classifier and error text
 * (src/reply.c), each lock kind's acquire and release decoders (src/kinds.c: nil =
 * acquired, integer = TTL, {-1, token}, ...), the integer reader, and the renderer that
 * turns replies into trace and error text, into buffers of many sizes (it must stay
 * inside its buffer and NUL-terminate it). Decoders must give one of their named
 * outcomes and never read outside the reply. The corpus holds the reply of every script
 * (nil, integers, [1]/[0], errors such as WRONGTYPE and NOSCRIPT, pub/sub messages) and
 * malformed variants.
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

/* Every decision taken on a reply: each must give a named outcome. */
static void decide(const redisReply *r)
{
    if ((unsigned)crd__reply_classify(r) > CRD__REPLY_NONE)
        abort();
    if (r->type == REDIS_REPLY_ERROR) {
        const char *text;
        size_t n = crd__reply_error_text(r, &text);
        if (text != r->str || n > r->len)
            abort();
    }
    int64_t v = 0;
    (void)crd__reply_int(r, &v);
    for (int k = 0; k < CRD__NKINDS; k++) {
        for (int nowait = 0; nowait < 2; nowait++) {
            int64_t hint = 0, token = 0;
            if ((unsigned)crd__kinds[k].acquire_reply(r, nowait, &hint, &token) > CRD__ACQ_BAD)
                abort();
        }
        if ((unsigned)crd__kinds[k].release_reply(r) > CRD__REL_BAD)
            abort();
    }
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
            decide(reply);
            freeReplyObject(reply);
        }
    }
    redisReaderFree(rd);
    return 0;
}
