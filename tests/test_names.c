/*
 * test_names.c -- the key, channel and latch names credisson derives, against the
 * names Redisson 3.52.0 used (golden names.json), observed black-box: the KEYS of the
 * acquire and unlock scripts and a waiter's SUBSCRIBE, all from on_trace, plus the
 * keys that exist in Redis afterwards. Class C names (braces that break cluster slot
 * co-location) are refused unless allow_unsafe_names, and then behave like Java's on a
 * single server. Also: a 1 KiB name, binary names, empty, NULL and oversize names.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"
#include "waiters.h"

#ifndef CRD_GOLDEN_DIR
#error "CRD_GOLDEN_DIR must be defined by the build"
#endif

static json_t *load_names(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/names.json", CRD_GOLDEN_DIR);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "cannot load %s: %s", path, err.text);
    json_t *names = json_object_get(root, "names");
    cr_assert(json_is_array(names) && json_array_size(names) >= 12);
    return root;
}

static const char *jpath(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(json_object_get(o, a), b);
    cr_assert(json_is_string(v), "names.json: %s.%s missing", a, b);
    return json_string_value(v);
}

/* What one lock round trip showed on the wire. */
typedef struct observed {
    char *key;
    size_t key_len;
    char *channel;     /* KEYS[2] of unlock */
    size_t channel_len;
    char *latch;       /* KEYS[3] of unlock */
    size_t latch_len;
    char *sub_channel; /* a waiter's SUBSCRIBE */
    size_t sub_len;
} observed;

static char *dupn(const char *p, size_t n)
{
    char *d = malloc(n + 1);
    cr_assert_not_null(d);
    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

static void observed_free(observed *o)
{
    free(o->key);
    free(o->channel);
    free(o->latch);
    free(o->sub_channel);
    memset(o, 0, sizeof *o);
}

static bool is_script(const crdt_trace_entry *e)
{
    return e->argc >= 3 &&
           (strcasecmp(e->argv[0], "EVALSHA") == 0 || strcasecmp(e->argv[0], "EVAL") == 0) &&
           strncmp(e->reply, "(error) NOSCRIPT", 16) != 0;
}

/* Holder A acquires and releases name (binary, len bytes) while waiter B, subscribed,
 * waits for it (then takes and releases it); the names come from the traces. */
static void round_trip(const char *name, size_t len, bool allow_unsafe, int db, observed *out)
{
    memset(out, 0, sizeof *out);
    crd_options o;
    crdt_options(&o);
    o.allow_unsafe_names = allow_unsafe;
    o.db = db;
    crdt_tracelog *ta = crdt_tracelog_new(), *tb = crdt_tracelog_new();
    crdt_tracelog_attach(ta, &o);
    crd_client *a = crdt_client_opts(&o);
    crdt_tracelog_attach(tb, &o);
    crd_client *b = crdt_client_opts(&o);
    crd_lock *la = NULL, *lb = NULL;
    cr_assert_eq(crd_lock_new_n(a, name, len, &la), CRD_OK, "%.*s: %s", (int)len, name,
                 crd_client_errmsg(a));
    cr_assert_eq(crd_lock_new_n(b, name, len, &lb), CRD_OK);

    size_t a0 = crdt_tracelog_count(ta), b0 = crdt_tracelog_count(tb);
    cr_assert_eq(crd_lock_acquire(la, 0, 10000), CRD_OK, "%s", crd_client_errmsg(a));
    /* The waiter waits until it is seen subscribed, then the holder releases: a short
     * try could end before its SUBSCRIBE is sent (under valgrind the failed acquire
     * alone may take longer than the try), and then no channel is observed. */
    crdt_waiter w = {.lock = lb, .wait_ms = 30000, .lease_ms = 10000};
    crdt_waiter_start(&w);
    cr_assert(crdt_await_traced(tb, b0, "SUBSCRIBE", 1, 1, 10000), "the waiter never subscribed");
    cr_assert_eq(crd_lock_release(la), CRD_OK);
    crdt_waiter_join(&w, 30000, "waiter of a round trip");
    cr_assert_eq(w.acquire_st, CRD_OK, "%s", crd_strerror(w.acquire_st));
    cr_assert_eq(w.release_st, CRD_OK, "%s", crd_strerror(w.release_st));

    int scripts = 0;
    for (size_t i = a0; i < crdt_tracelog_count(ta); i++) {
        crdt_trace_entry e;
        cr_assert(crdt_tracelog_get(ta, i, &e));
        if (is_script(&e)) {
            scripts++;
            if (scripts == 1) { /* acquire: KEYS = [N] */
                cr_assert_str_eq(e.argv[2], "1");
                out->key = dupn(e.argv[3], e.argvlen[3]);
                out->key_len = e.argvlen[3];
            } else if (scripts == 2) { /* unlock: KEYS = [N, channel, latch] */
                cr_assert_str_eq(e.argv[2], "3");
                cr_assert_eq(e.argvlen[3], out->key_len);
                cr_assert_eq(memcmp(e.argv[3], out->key, out->key_len), 0);
                out->channel = dupn(e.argv[4], e.argvlen[4]);
                out->channel_len = e.argvlen[4];
                out->latch = dupn(e.argv[5], e.argvlen[5]);
                out->latch_len = e.argvlen[5];
            }
        } else {
            cr_assert_neq(strcasecmp(e.argv[0], "DEL"), 0, "no DEL after an unlock (Q1)");
        }
        crdt_trace_entry_free(&e);
    }
    cr_assert_eq(scripts, 2, "the holder sent %d scripts", scripts);
    for (size_t i = b0; i < crdt_tracelog_count(tb); i++) {
        crdt_trace_entry e;
        cr_assert(crdt_tracelog_get(tb, i, &e));
        if (e.subscriber && strcasecmp(e.argv[0], "SUBSCRIBE") == 0 && out->sub_channel == NULL) {
            out->sub_channel = dupn(e.argv[1], e.argvlen[1]);
            out->sub_len = e.argvlen[1];
        }
        crdt_trace_entry_free(&e);
    }
    cr_assert_not_null(out->sub_channel, "the waiter never subscribed");

    /* The latch really exists under that name, with value 1 and a TTL. */
    redisContext *r = crdt_redis();
    freeReplyObject(crdt_cmd(r, "SELECT %d", db));
    char buf[16];
    crdt_cmd_str(r, buf, sizeof buf, "GET %b", out->latch, out->latch_len);
    cr_assert_str_eq(buf, "1", "latch %s", out->latch);
    cr_assert_gt(crdt_cmd_int(r, "PTTL %b", out->latch, out->latch_len), 0);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %b", name, len), 0);
    freeReplyObject(crdt_cmd(r, "DEL %b", out->latch, out->latch_len));
    redisFree(r);

    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    crdt_tracelog_free(ta);
    crdt_tracelog_free(tb);
}

static void assert_latch_shape(const observed *o, const char *prefix, size_t prefix_len)
{
    cr_assert_eq(o->latch_len, prefix_len + 32, "latch %s", o->latch);
    cr_assert_eq(memcmp(o->latch, prefix, prefix_len), 0, "latch %s, prefix %s", o->latch,
                 prefix);
    for (size_t i = prefix_len; i < o->latch_len; i++) {
        char ch = o->latch[i];
        cr_assert((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'),
                  "request id of %s is not 32 lowercase hex characters", o->latch);
    }
}

/* CRC16 (XMODEM), the Redis Cluster key hash. */
static unsigned crc16(const char *buf, size_t len)
{
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)buf[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

static unsigned keyslot(const char *key, size_t len)
{
    size_t s;
    for (s = 0; s < len && key[s] != '{'; s++) {
    }
    if (s == len)
        return crc16(key, len) & 16383;
    size_t e;
    for (e = s + 1; e < len && key[e] != '}'; e++) {
    }
    if (e == len || e == s + 1)
        return crc16(key, len) & 16383;
    return crc16(key + s + 1, e - s - 1) & 16383;
}

static bool is_class_c(json_t *entry)
{
    return json_is_false(json_object_get(entry, "all_in_lock_key_slot"));
}

/* Each recorded name of names.json in class C (class_c) or not: a lock of it
 * (round_trip, allow_unsafe = class_c, db tag) derives the recording's key, channel,
 * waiter channel and latch prefix, and passes more(n, name, &o) when given. Returns how
 * many names it checked. */
static int check_recorded_names(bool class_c, int tag,
                                void (*more)(json_t *n, const char *name, const observed *o))
{
    json_t *root = load_names();
    size_t i;
    json_t *n;
    int checked = 0;
    json_array_foreach(json_object_get(root, "names"), i, n) {
        if (is_class_c(n) != class_c)
            continue;
        const char *name = json_string_value(json_object_get(n, "name"));
        observed o;
        round_trip(name, strlen(name), class_c, tag, &o);
        cr_assert_str_eq(o.key, jpath(n, "rlock", "key"), "key of %s", name);
        cr_assert_str_eq(o.channel, jpath(n, "rlock", "channel"), "channel of %s", name);
        cr_assert_str_eq(o.sub_channel, jpath(n, "rlock", "channel"), "waiter channel of %s",
                         name);
        const char *lp = jpath(n, "rlock", "unlock_latch_key_prefix");
        assert_latch_shape(&o, lp, strlen(lp));
        if (more != NULL)
            more(n, name, &o);
        observed_free(&o);
        checked++;
    }
    json_decref(root);
    return checked;
}

/* The name's length in bytes and the slots the recording got from CLUSTER KEYSLOT. */
static void assert_recorded_length_and_slots(json_t *n, const char *name, const observed *o)
{
    cr_assert_eq((json_int_t)strlen(name),
                 json_integer_value(json_object_get(n, "name_utf8_bytes")));
    json_t *slots = json_object_get(n, "cluster_keyslot");
    cr_assert_eq(keyslot(o->key, o->key_len),
                 json_integer_value(json_object_get(slots, "lock_key")));
    cr_assert_eq(keyslot(o->channel, o->channel_len),
                 json_integer_value(json_object_get(slots, "rlock_channel")));
    cr_assert_eq(keyslot(o->latch, o->latch_len),
                 json_integer_value(json_object_get(slots, "unlock_latch_key")));
}

Test(names, every_recorded_name_derives_the_same_key_channel_and_latch_as_redisson)
{
    int checked = check_recorded_names(false, 1, assert_recorded_length_and_slots);
    cr_assert_geq(checked, 9, "only %d class A/B names in names.json", checked);
}

Test(names, class_c_names_are_refused_by_default)
{
    json_t *root = load_names();
    crd_client *c = crdt_client();
    size_t i;
    json_t *n;
    int refused = 0;
    json_array_foreach(json_object_get(root, "names"), i, n) {
        const char *name = json_string_value(json_object_get(n, "name"));
        crd_lock *l = NULL;
        crd_status st = crd_lock_new(c, name, &l);
        if (is_class_c(n)) {
            cr_assert_eq(st, CRD_INVALID_ARGUMENT, "class C name '%s' gave %s", name,
                         crd_strerror(st));
            cr_assert_null(l);
            cr_assert_str_neq(crd_client_errmsg(c), "");
            refused++;
        } else {
            cr_assert_eq(st, CRD_OK, "name '%s' gave %s", name, crd_strerror(st));
            crd_lock_free(l);
        }
    }
    cr_assert_eq(refused, 3, "names.json has three class C names");
    /* The other class C shapes of PROTOCOL.md 2.3. */
    const char *more[] = {"a}b", "a{b", "a{}b", "}", "}}", "x{}{y}"};
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++) {
        crd_lock *l = NULL;
        cr_assert_eq(crd_lock_new(c, more[k], &l), CRD_INVALID_ARGUMENT, "'%s'", more[k]);
    }
    crd_client_free(c);
    json_decref(root);
}

Test(names, class_c_names_behave_like_java_when_allowed)
{
    cr_assert_eq(check_recorded_names(true, 2, NULL), 3);
}

Test(names, a_one_kib_name_follows_the_same_rule_and_keeps_one_slot)
{
    /* Class A: no brace, so every derived name wraps it in {...}. */
    size_t len = 1024;
    char *name = malloc(len + 1);
    cr_assert_not_null(name);
    for (size_t i = 0; i < len; i++)
        name[i] = (char)('a' + i % 26);
    name[len] = '\0';
    observed o;
    round_trip(name, len, false, 3, &o);
    char *want = malloc(len + 64);
    cr_assert_not_null(want);
    cr_assert_eq(o.key_len, len);
    cr_assert_eq(memcmp(o.key, name, len), 0);
    snprintf(want, len + 64, "redisson_lock__channel:{%s}", name);
    cr_assert_str_eq(o.channel, want);
    cr_assert_str_eq(o.sub_channel, want);
    snprintf(want, len + 64, "redisson_unlock_latch:{%s}:", name);
    assert_latch_shape(&o, want, strlen(want));
    unsigned slot = keyslot(o.key, o.key_len);
    cr_assert_eq(keyslot(o.channel, o.channel_len), slot);
    cr_assert_eq(keyslot(o.latch, o.latch_len), slot);
    observed_free(&o);

    /* Class B: a tag inside, so derived names are prefix:N and keep that tag. */
    memcpy(name + 100, "{tenant-7}", 10);
    round_trip(name, len, false, 3, &o);
    snprintf(want, len + 64, "redisson_lock__channel:%s", name);
    cr_assert_str_eq(o.channel, want);
    snprintf(want, len + 64, "redisson_unlock_latch:%s:", name);
    assert_latch_shape(&o, want, strlen(want));
    slot = keyslot(o.key, o.key_len);
    cr_assert_eq(slot, crc16("tenant-7", 8) & 16383);
    cr_assert_eq(keyslot(o.channel, o.channel_len), slot);
    cr_assert_eq(keyslot(o.latch, o.latch_len), slot);
    observed_free(&o);
    free(want);
    free(name);
}

Test(names, binary_names_are_sent_byte_for_byte)
{
    const char name[] = {'b', 'i', 'n', '\0', ' ', '%', 's', '\n', (char)0xff};
    size_t len = sizeof name;
    observed o;
    round_trip(name, len, false, 4, &o);
    cr_assert_eq(o.key_len, len);
    cr_assert_eq(memcmp(o.key, name, len), 0);
    const char pre[] = "redisson_lock__channel:{";
    cr_assert_eq(o.channel_len, strlen(pre) + len + 1);
    cr_assert_eq(memcmp(o.channel, pre, strlen(pre)), 0);
    cr_assert_eq(memcmp(o.channel + strlen(pre), name, len), 0);
    cr_assert_eq(o.channel[o.channel_len - 1], '}');
    cr_assert_eq(o.sub_len, o.channel_len);
    cr_assert_eq(memcmp(o.sub_channel, o.channel, o.channel_len), 0);
    observed_free(&o);
}

Test(names, empty_null_and_oversize_names_are_invalid_arguments)
{
    crd_client *c = crdt_client();
    crd_lock *l = NULL;
    cr_assert_eq(crd_lock_new(c, "", &l), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_new(c, NULL, &l), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_new_n(c, NULL, 0, &l), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_lock_new_n(c, "x", 0, &l), CRD_INVALID_ARGUMENT);
    char *big = malloc(CRD_NAME_MAX + 1);
    cr_assert_not_null(big);
    memset(big, 'z', CRD_NAME_MAX + 1);
    cr_assert_eq(crd_lock_new_n(c, big, CRD_NAME_MAX + 1, &l), CRD_INVALID_ARGUMENT);
    cr_assert_null(l);
    cr_assert_eq(crd_lock_new_n(c, big, CRD_NAME_MAX, &l), CRD_OK);
    crd_lock_free(l);
    free(big);
    crd_client_free(c);
}
