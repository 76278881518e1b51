/*
 * fieldhash.c -- the field name a Redisson grouped multi-lock (RedissonFasterMultiLock,
 * getMultiLock(group, values)) gives a value: Redisson's Hash.hash128toBase64 of the
 * value's codec bytes, i.e. HighwayHash-128 under Redisson's fixed key, the two 64-bit
 * halves written big-endian, base64 without the trailing "==" (22 characters).
 *
 * HighwayHash (Alakuijala, Cox, Wassenberg; github.com/google/highwayhash) is written here
 * from its published algorithm, portable C over uint64_t lanes, instead of linking Debian's
 * libhighwayhash-dev: that package is a git snapshot of a C++ library whose C bindings
 * (c_bindings.h) offer HighwayHash64 only (the 128-bit result is reachable only through its
 * C++ templates), it ships no pkg-config or CMake files and has no stable ABI (Debian gave
 * up tracking its symbols), and a C library that needs one hash of a few dozen bytes per
 * value is better off without a C++ runtime dependency. The 64-bit result is kept (static,
 * exposed for the unit tests) because the reference's frozen test vectors are 64-bit:
 * they cover every remainder path the 128-bit result shares.
 *
 * Pure functions; no lock, any thread.
 */
#include "kinds_ext.h"

#include <string.h>

typedef struct hh_state {
    uint64_t v0[4], v1[4], mul0[4], mul1[4];
} hh_state;

static const uint64_t hh_init0[4] = {0xdbe6d5d5fe4cce2full, 0xa4093822299f31d0ull,
                                     0x13198a2e03707344ull, 0x243f6a8885a308d3ull};
static const uint64_t hh_init1[4] = {0x3bd39e10cb0ef593ull, 0xc0acf169b5f18a8cull,
                                     0xbe5466cf34e90c6cull, 0x452821e638d01377ull};

/* Redisson's key (org.redisson.misc.Hash.KEY). */
static const uint64_t redisson_key[4] = {0x9e3779b97f4a7c15ull, 0xf39cc0605cedc834ull,
                                         0x1082276bf3a27251ull, 0xf86c6a11d0c18e95ull};

static void hh_reset(hh_state *s, const uint64_t key[4])
{
    for (int i = 0; i < 4; i++) {
        s->mul0[i] = hh_init0[i];
        s->mul1[i] = hh_init1[i];
        s->v0[i] = s->mul0[i] ^ key[i];
        s->v1[i] = s->mul1[i] ^ ((key[i] >> 32) | (key[i] << 32));
    }
}

/* Adds to *add0 and *add1 the bytes of v0 and v1 shuffled so that the bits the
 * multiplications mixed best reach every lane. */
static void zipper_merge_add(uint64_t v1, uint64_t v0, uint64_t *add1, uint64_t *add0)
{
    *add0 += (((v0 & 0xff000000ull) | (v1 & 0xff00000000ull)) >> 24) |
             (((v0 & 0xff0000000000ull) | (v1 & 0xff000000000000ull)) >> 16) | (v0 & 0xff0000ull) |
             ((v0 & 0xff00ull) << 32) | ((v1 & 0xff00000000000000ull) >> 8) | (v0 << 56);
    *add1 += (((v1 & 0xff000000ull) | (v0 & 0xff00000000ull)) >> 24) | (v1 & 0xff0000ull) |
             ((v1 & 0xff0000000000ull) >> 16) | ((v1 & 0xff00ull) << 24) |
             ((v0 & 0xff000000000000ull) >> 8) | ((v1 & 0xffull) << 48) |
             (v0 & 0xff00000000000000ull);
}

static void hh_update(hh_state *s, const uint64_t lanes[4])
{
    for (int i = 0; i < 4; i++) {
        s->v1[i] += s->mul0[i] + lanes[i];
        s->mul0[i] ^= (s->v1[i] & 0xffffffffull) * (s->v0[i] >> 32);
        s->v0[i] += s->mul1[i];
        s->mul1[i] ^= (s->v0[i] & 0xffffffffull) * (s->v1[i] >> 32);
    }
    zipper_merge_add(s->v1[1], s->v1[0], &s->v0[1], &s->v0[0]);
    zipper_merge_add(s->v1[3], s->v1[2], &s->v0[3], &s->v0[2]);
    zipper_merge_add(s->v0[1], s->v0[0], &s->v1[1], &s->v1[0]);
    zipper_merge_add(s->v0[3], s->v0[2], &s->v1[3], &s->v1[2]);
}

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void hh_update_packet(hh_state *s, const unsigned char packet[32])
{
    uint64_t lanes[4];
    for (int i = 0; i < 4; i++)
        lanes[i] = read_le64(packet + 8 * i);
    hh_update(s, lanes);
}

/* Each 32-bit half of each lane rotated left by count (0..31). */
static void rotate32_by(unsigned count, uint64_t lanes[4])
{
    for (int i = 0; i < 4; i++) {
        uint32_t lo = (uint32_t)lanes[i], hi = (uint32_t)(lanes[i] >> 32);
        if (count != 0) {
            lo = (lo << count) | (lo >> (32 - count));
            hi = (hi << count) | (hi >> (32 - count));
        }
        lanes[i] = ((uint64_t)hi << 32) | lo;
    }
}

/* The last size (1..31) bytes: the length folds into the state, then one padded packet. */
static void hh_update_remainder(hh_state *s, const unsigned char *bytes, size_t size)
{
    size_t mod4 = size & 3;
    const unsigned char *tail = bytes + (size & ~(size_t)3);
    unsigned char packet[32] = {0};
    for (int i = 0; i < 4; i++)
        s->v0[i] += ((uint64_t)size << 32) + size;
    rotate32_by((unsigned)size, s->v1);
    memcpy(packet, bytes, (size_t)(tail - bytes));
    if (size & 16) {
        /* The last four bytes, read backwards from the end (they may overlap). */
        for (int i = 0; i < 4; i++)
            packet[28 + i] = tail[(size_t)i + mod4 - 4];
    } else if (mod4 != 0) {
        packet[16] = tail[0];
        packet[17] = tail[mod4 >> 1];
        packet[18] = tail[mod4 - 1];
    }
    hh_update_packet(s, packet);
}

static void hh_permute_update(hh_state *s)
{
    uint64_t p[4];
    p[0] = (s->v0[2] >> 32) | (s->v0[2] << 32);
    p[1] = (s->v0[3] >> 32) | (s->v0[3] << 32);
    p[2] = (s->v0[0] >> 32) | (s->v0[0] << 32);
    p[3] = (s->v0[1] >> 32) | (s->v0[1] << 32);
    hh_update(s, p);
}

static void hh_absorb(hh_state *s, const uint64_t key[4], const unsigned char *data, size_t len)
{
    hh_reset(s, key);
    size_t full = len & ~(size_t)31;
    for (size_t i = 0; i < full; i += 32)
        hh_update_packet(s, data + i);
    if (len & 31)
        hh_update_remainder(s, data + full, len & 31);
}

uint64_t crd__highwayhash64(const uint64_t key[4], const void *data, size_t len)
{
    hh_state s;
    hh_absorb(&s, key, data, len);
    for (int i = 0; i < 4; i++)
        hh_permute_update(&s);
    return s.v0[0] + s.v1[0] + s.mul0[0] + s.mul1[0];
}

void crd__highwayhash128(const uint64_t key[4], const void *data, size_t len, uint64_t out[2])
{
    hh_state s;
    hh_absorb(&s, key, data, len);
    for (int i = 0; i < 6; i++)
        hh_permute_update(&s);
    out[0] = s.v0[0] + s.mul0[0] + s.v1[2] + s.mul1[2];
    out[1] = s.v0[1] + s.mul0[1] + s.v1[3] + s.mul1[3];
}

void crd__fml_field(const void *value, size_t len, char out[CRD__FML_FIELD_SIZE])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint64_t h[2];
    crd__highwayhash128(redisson_key, value, len, h);
    unsigned char bytes[18] = {0};
    for (int i = 0; i < 8; i++) {
        bytes[i] = (unsigned char)(h[0] >> (56 - 8 * i));
        bytes[8 + i] = (unsigned char)(h[1] >> (56 - 8 * i));
    }
    /* 16 bytes are five full 3-byte groups and one byte: 20 + 2 characters ("==" dropped). */
    size_t o = 0;
    for (int i = 0; i < 18; i += 3) {
        uint32_t g = ((uint32_t)bytes[i] << 16) | ((uint32_t)bytes[i + 1] << 8) | bytes[i + 2];
        out[o++] = b64[(g >> 18) & 63];
        out[o++] = b64[(g >> 12) & 63];
        if (o == 22)
            break;
        out[o++] = b64[(g >> 6) & 63];
        out[o++] = b64[g & 63];
    }
    out[22] = '\0';
}
