/*
 * test_units.c -- the pieces of src/ that stand alone, tested without a server: the reply
 * classifier (reply.c), the wait slice (acquire.c), the lock kinds' tables (kinds.c),
 * the name rules (names.c) and the command builder (script.c). Linked against the
 * library's internals (credisson_internal), not the public library.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "acquire.h"
#include "units.h"

/* ---- replies ------------------------------------------------------------------------------ */

static redisReply *error_reply(const char *text)
{
    static redisReply r;
    static char buf[256];
    memset(&r, 0, sizeof r);
    snprintf(buf, sizeof buf, "%s", text);
    r.type = REDIS_REPLY_ERROR;
    r.str = buf;
    r.len = strlen(buf);
    return &r;
}

Test(units, every_error_reply_is_classified_by_its_first_word)
{
    static const struct {
        const char *text;
        crd__reply_class want;
    } cases[] = {
        {"NOSCRIPT No matching script. Please use EVAL.", CRD__REPLY_NOSCRIPT},
        {"MOVED 3999 127.0.0.1:6381", CRD__REPLY_MOVED},
        {"ASK 3999 127.0.0.1:6381", CRD__REPLY_ASK},
        {"READONLY You can't write against a read only replica.", CRD__REPLY_READONLY},
        {"LOADING Redis is loading the dataset in memory", CRD__REPLY_BUSY},
        {"BUSY Redis is busy running a script.", CRD__REPLY_BUSY},
        {"TRYAGAIN Multiple keys request during rehashing of slot", CRD__REPLY_BUSY},
        {"CLUSTERDOWN The cluster is down", CRD__REPLY_BUSY},
        {"MASTERDOWN Link with MASTER is down", CRD__REPLY_BUSY},
        {"WRONGTYPE Operation against a key holding the wrong kind of value", CRD__REPLY_ERROR},
        {"ERR unknown command", CRD__REPLY_ERROR},
        /* a word that merely starts like a class is not that class */
        {"ASKING is not allowed here", CRD__REPLY_ERROR},
        {"BUSYKEY Target key name already exists.", CRD__REPLY_ERROR},
        {"MOVED", CRD__REPLY_MOVED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(crd__reply_classify(error_reply(cases[i].text)), cases[i].want, "%s",
                     cases[i].text);
}

Test(units, replies_that_are_not_errors_are_ok_and_no_reply_is_none)
{
    redisReply r;
    memset(&r, 0, sizeof r);
    int types[] = {REDIS_REPLY_NIL, REDIS_REPLY_INTEGER, REDIS_REPLY_STRING, REDIS_REPLY_ARRAY,
                   REDIS_REPLY_STATUS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        r.type = types[i];
        cr_expect_eq(crd__reply_classify(&r), CRD__REPLY_OK);
    }
    cr_expect_eq(crd__reply_classify(NULL), CRD__REPLY_NONE);
}

Test(units, a_script_error_keeps_the_servers_words_without_sha_or_script_position)
{
    const char *text;
    redisReply *r = error_reply("WRONGTYPE Operation against a key holding the wrong kind of "
                                "value script: 4f0c5b0e5a4b6b1a0d2c3e4f5a6b7c8d9e0f1a2b, on "
                                "@user_script:9.");
    size_t n = crd__reply_error_text(r, &text);
    const char *want = "WRONGTYPE Operation against a key holding the wrong kind of value";
    cr_assert(n == strlen(want) && memcmp(text, want, n) == 0, "%.*s", (int)n, text);
    r = error_reply("ERR plain words.");
    n = crd__reply_error_text(r, &text);
    cr_assert(n == 15 && memcmp(text, "ERR plain words", n) == 0, "%.*s", (int)n, text);
}

Test(units, integer_replies_and_strings_holding_integers_are_read_as_numbers)
{
    redisReply r;
    memset(&r, 0, sizeof r);
    int64_t v = -1;
    r.type = REDIS_REPLY_INTEGER;
    r.integer = 42;
    cr_expect(crd__reply_int(&r, &v) && v == 42);
    r.type = REDIS_REPLY_NIL;
    cr_expect(crd__reply_int(&r, &v) && v == 0);
    char s[] = "17";
    r.type = REDIS_REPLY_STRING;
    r.str = s;
    r.len = 2;
    cr_expect(crd__reply_int(&r, &v) && v == 17);
    char bad[] = "17x";
    r.str = bad;
    r.len = 3;
    cr_expect(!crd__reply_int(&r, &v));
    r.type = REDIS_REPLY_ARRAY;
    cr_expect(!crd__reply_int(&r, &v));
}

/* ---- the wait slice ---------------------------------------------------------------------- */

static crd__slice_in slice_in(bool failed, bool confirmed, crd__busy busy, int64_t hint)
{
    crd__slice_in in = {failed, confirmed, busy, hint, 1000, 0, CRD__WAIT_CHANNEL};
    return in;
}

Test(units, a_held_lock_is_waited_for_until_one_ms_past_its_ttl)
{
    crd__backoff b;
    crd__backoff_init(&b);
    /* The TTL and our clock are whole ms: one more puts the attempt past the key's end. */
    crd__slice_in in = slice_in(false, true, CRD__BUSY_TTL, 2500);
    cr_expect_eq(crd__wait_slice(&in, &b), 2501);
    in.hint_ms = 0; /* expiring in this millisecond */
    cr_expect_eq(crd__wait_slice(&in, &b), 1);
}

Test(units, without_a_live_subscription_the_slice_is_the_poll_interval_at_most)
{
    crd__backoff b;
    crd__backoff_init(&b);
    crd__slice_in in = slice_in(false, false, CRD__BUSY_TTL, 30000);
    cr_expect_eq(crd__wait_slice(&in, &b), 1000);
    in.hint_ms = 300;
    cr_expect_eq(crd__wait_slice(&in, &b), 301);
}

Test(units, a_lock_without_ttl_is_polled_at_the_poll_interval)
{
    crd__backoff b;
    crd__backoff_init(&b);
    crd__slice_in in = slice_in(false, true, CRD__BUSY_NO_TTL, -1);
    cr_expect_eq(crd__wait_slice(&in, &b), 1000);
}

Test(units, failures_back_off_from_25_ms_doubling_to_the_poll_interval_and_reset)
{
    crd__backoff b;
    crd__backoff_init(&b);
    crd__slice_in in = slice_in(true, true, CRD__BUSY_TTL, 0);
    int64_t want[] = {25, 50, 100, 200, 400, 800, 1000, 1000};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_eq(crd__wait_slice(&in, &b), want[i], "failure %zu", i);
    in = slice_in(false, true, CRD__BUSY_TTL, 5000);
    cr_expect_eq(crd__wait_slice(&in, &b), 5001);
    in = slice_in(true, true, CRD__BUSY_TTL, 0);
    cr_expect_eq(crd__wait_slice(&in, &b), 25, "a success resets the backoff");
}

Test(units, a_fair_waiter_not_at_the_head_backs_off_from_4_ms_and_resets_when_held)
{
    crd__backoff b;
    crd__backoff_init(&b);
    crd__slice_in in = slice_in(false, true, CRD__BUSY_TURN, 0);
    int64_t want[] = {4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_eq(crd__wait_slice(&in, &b), want[i], "turn %zu", i);
    in = slice_in(false, true, CRD__BUSY_TTL, 700);
    cr_expect_eq(crd__wait_slice(&in, &b), 701);
    in = slice_in(false, true, CRD__BUSY_TURN, 0);
    cr_expect_eq(crd__wait_slice(&in, &b), 4);
}

Test(units, a_wait_for_a_message_has_no_timer_but_the_deadline_unless_unsubscribed)
{
    crd__backoff b;
    crd__backoff_init(&b);
    crd__slice_in in = slice_in(false, true, CRD__BUSY_MESSAGE, 0);
    cr_expect_eq(crd__wait_slice(&in, &b), INT64_MAX);
    in.confirmed = false;
    cr_expect_eq(crd__wait_slice(&in, &b), 1000, "no live subscription: the poll interval");
    in.how = CRD__WAIT_DELAY; /* no channel: nothing to be subscribed to */
    in.busy = CRD__BUSY_TTL;
    in.hint_ms = 2500; /* the server's delay, in whole ms as a TTL */
    cr_expect_eq(crd__wait_slice(&in, &b), 2501);
}

Test(units, a_wait_ends_one_ms_after_its_wait_and_a_slice_one_ms_after_itself)
{
    cr_expect_eq(crd__wait_deadline(1000, 0), 1001);
    cr_expect_eq(crd__wait_deadline(1000, 250), 1251);
    cr_expect_eq(crd__wait_deadline(1000, -1), INT64_MAX);
    cr_expect_eq(crd__wait_until(1000, 100, 5000), 1101);
    cr_expect_eq(crd__wait_until(1000, 100, 1050), 1050, "never past the deadline");
    cr_expect_eq(crd__wait_until(1000, INT64_MAX, INT64_MAX), INT64_MAX);
    cr_expect_eq(crd__wait_until(1000, INT64_MAX, 3000), 3000);
}

Test(units, max_wait_slice_caps_every_slice)
{
    crd__backoff b;
    crd__backoff_init(&b);
    crd__slice_in in = slice_in(false, true, CRD__BUSY_TTL, 30000);
    in.max_slice_ms = 50;
    cr_expect_eq(crd__wait_slice(&in, &b), 50);
}

/* ---- the kinds' tables ------------------------------------------------------------------- */

#define FIELD "2f3c6a86-6f7d-4c1a-9d53-5d3b1d2b7a10:7"

static char *word(const crd__cmd *cmd, int i)
{
    return strndup(cmd->v[3 + i], cmd->len[3 + i]);
}

Test(units, each_kind_builds_redissons_acquire_keys_and_arguments)
{
    crd__acq_args a = {FIELD, strlen(FIELD), 30000, false, 5000};
    crd__cmd cmd;
    crd_lock l = crdt_unit_lock(CRD__RLOCK, "orders");
    crd__kinds[CRD__RLOCK].acquire(&l, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_RLOCK_ACQUIRE, "orders|ARGV:30000|" FIELD);
    crd__lock_clear(&l);

    l = crdt_unit_lock(CRD__FAIR, "orders");
    crd__kinds[CRD__FAIR].acquire(&l, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_FAIR_ACQUIRE,
                     "orders|redisson_lock_queue:{orders}|redisson_lock_timeout:"
                     "{orders}|ARGV:30000|" FIELD "|5000|#");
    a.nowait = true; /* the try-once form: now before wait */
    crd__kinds[CRD__FAIR].acquire(&l, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_FAIR_TRY_ACQUIRE,
                     "orders|redisson_lock_queue:{orders}|redisson_lock_timeout:"
                     "{orders}|ARGV:30000|" FIELD "|#|5000");
    crd__lock_clear(&l);
    a.nowait = false;

    l = crdt_unit_lock(CRD__READ, "orders");
    crd__kinds[CRD__READ].acquire(&l, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_RW_READ_ACQUIRE,
                     "orders|{orders}:" FIELD ":rwlock_timeout|ARGV:30000|" FIELD "|" FIELD
                     ":write");
    crd__lock_clear(&l);

    l = crdt_unit_lock(CRD__WRITE, "a{tag}b");
    char wfield[] = FIELD ":write";
    crd__acq_args w = {wfield, strlen(wfield), 30000, false, 0};
    crd__kinds[CRD__WRITE].acquire(&l, &w, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_RW_WRITE_ACQUIRE, "a{tag}b|ARGV:30000|" FIELD ":write");
    crd__lock_clear(&l);
}

#define LATCH "redisson_unlock_latch:{orders}:0123456789abcdef0123456789abcdef"

Test(units, each_kind_builds_redissons_release_keys_and_arguments)
{
    static const struct {
        crd__kind kind;
        int script;
        const char *want;
    } kinds[] = {
        {CRD__RLOCK, CRD__SCRIPT_RLOCK_UNLOCK,
         "orders|redisson_lock__channel:{orders}|" LATCH "|ARGV:0|30000|" FIELD "|PUBLISH|7000"},
        {CRD__FAIR, CRD__SCRIPT_FAIR_UNLOCK,
         "orders|redisson_lock_queue:{orders}|redisson_lock_timeout:{orders}|"
         "redisson_lock__channel:{orders}|" LATCH "|ARGV:0|30000|" FIELD "|#|PUBLISH|7000"},
        {CRD__READ, CRD__SCRIPT_RW_READ_UNLOCK,
         "orders|redisson_rwlock:{orders}|{orders}:" FIELD ":rwlock_timeout|{orders}|" LATCH
         "|ARGV:0|" FIELD "|PUBLISH|7000"},
        {CRD__WRITE, CRD__SCRIPT_RW_WRITE_UNLOCK,
         "orders|redisson_rwlock:{orders}|" LATCH "|ARGV:1|30000|" FIELD "|PUBLISH|7000"},
    };
    crd__rel_args a = {FIELD, strlen(FIELD), 30000, LATCH, strlen(LATCH), 7000};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        crd__cmd cmd;
        crd_lock l = crdt_unit_lock(kinds[i].kind, "orders");
        crd__kinds[kinds[i].kind].release(&l, &a, &cmd);
        crdt_unit_expect(&cmd, kinds[i].script, kinds[i].want);
        crd__lock_clear(&l);
    }
}

Test(units, force_unlock_and_is_locked_use_each_kinds_script_or_exists)
{
    /* The fair lock's is_locked is the plain lock's: not checked again here. */
    static const struct {
        crd__kind kind;
        const char *force_unlock, *is_locked;
        int is_locked_script;
    } kinds[] = {
        {CRD__RLOCK, "x|redisson_lock__channel:{x}|ARGV:0|PUBLISH", "ARGV:EXISTS|x", CRD__PLAIN},
        {CRD__WRITE, "x|redisson_rwlock:{x}|ARGV:1|PUBLISH|write", "x|ARGV:write", CRDT_UNIT_ANY},
        {CRD__FAIR,
         "x|redisson_lock_queue:{x}|redisson_lock_timeout:{x}|"
         "redisson_lock__channel:{x}|ARGV:0|#|PUBLISH",
         NULL, 0},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const crd__kind_ops *ops = &crd__kinds[kinds[i].kind];
        crd__cmd cmd;
        crd_lock l = crdt_unit_lock(kinds[i].kind, "x");
        ops->force_unlock(&l, &cmd);
        crdt_unit_expect(&cmd, CRDT_UNIT_ANY, kinds[i].force_unlock);
        if (kinds[i].is_locked != NULL) {
            ops->is_locked(&l, &cmd);
            crdt_unit_expect(&cmd, kinds[i].is_locked_script, kinds[i].is_locked);
        }
        crd__lock_clear(&l);
    }
}

static redisReply int_reply(long long v)
{
    redisReply r;
    memset(&r, 0, sizeof r);
    r.type = REDIS_REPLY_INTEGER;
    r.integer = v;
    return r;
}

Test(units, replies_decode_into_named_outcomes_per_kind)
{
    int64_t hint = 0, token = 0;
    redisReply nil;
    memset(&nil, 0, sizeof nil);
    nil.type = REDIS_REPLY_NIL;
    redisReply ttl = int_reply(1234), zero = int_reply(0), one = int_reply(1), two = int_reply(2),
               none = int_reply(-1);
    const crd__kind_ops *rl = &crd__kinds[CRD__RLOCK], *fair = &crd__kinds[CRD__FAIR],
                        *rd = &crd__kinds[CRD__READ];
    cr_expect_eq(rl->acquire_reply(&nil, false, &hint, &token), CRD__ACQ_TAKEN);
    cr_expect(rl->acquire_reply(&ttl, false, &hint, &token) == CRD__ACQ_HELD && hint == 1234);
    cr_expect_eq(rl->acquire_reply(&none, false, &hint, &token), CRD__ACQ_HELD_NO_TTL);
    cr_expect_eq(fair->acquire_reply(&zero, false, &hint, &token), CRD__ACQ_NOT_MY_TURN);
    cr_expect_eq(fair->acquire_reply(&one, true, &hint, &token), CRD__ACQ_REFUSED);
    cr_expect(fair->acquire_reply(&ttl, false, &hint, &token) == CRD__ACQ_HELD && hint == 1234);
    cr_expect_eq(rl->release_reply(&nil), CRD__REL_NOT_HELD);
    cr_expect_eq(rl->release_reply(&zero), CRD__REL_STILL_HELD);
    cr_expect_eq(rl->release_reply(&one), CRD__REL_RELEASED);
    cr_expect_eq(fair->release_reply(&two), CRD__REL_GONE);
    /* 1 + the connections the unlock message reached: any count is a release. */
    cr_expect_eq(rl->release_reply(&two), CRD__REL_RELEASED);
    cr_expect_eq(rl->release_reply(&ttl), CRD__REL_RELEASED);
    cr_expect_eq(rl->release_reply(&none), CRD__REL_BAD);
    cr_expect_eq(fair->release_reply(&ttl), CRD__REL_BAD);
    cr_expect_eq(rd->release_reply(&zero), CRD__REL_READ_ONE);
    cr_expect_eq(rd->release_reply(&one), CRD__REL_READ_ONE);
    cr_expect_eq(rd->release_reply(&nil), CRD__REL_NOT_HELD);
    cr_expect(crd__kinds[CRD__WRITE].write_field && !rl->write_field && fair->queued &&
              fair->wait == CRD__WAIT_OWN_CHANNEL && rd->renew_key2_put != NULL && rl->renew_key2_put == NULL);
}

Test(units, the_fenced_kind_draws_a_token_and_renews_with_its_counter)
{
    crd_lock l = crdt_unit_lock(CRD__FENCED, "fe1");
    cr_expect_str_eq(l.names.token.p, "redisson_lock_token:{fe1}");
    crd__acq_args a = {FIELD, strlen(FIELD), 30000, false, 0, true};
    crd__cmd cmd;
    crd__kinds[CRD__FENCED].acquire(&l, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_FENCED_ACQUIRE_TOKEN,
                     "fe1|redisson_lock_token:{fe1}|ARGV:30000|" FIELD);
    a.want_token = false;
    crd__kinds[CRD__FENCED].acquire(&l, &a, &cmd);
    cr_expect_eq(cmd.script, CRD__SCRIPT_FENCED_ACQUIRE);
    crd__cmd_free(&cmd);
    crd__kinds[CRD__FENCED].extend(&l, FIELD, strlen(FIELD), 5000, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_FENCED_RENEW,
                     "fe1|redisson_lock_token:{fe1}|ARGV:5000|" FIELD);
    char key[64];
    size_t n = crd__kinds[CRD__FENCED].renew_key2_put("a{b}", 4, key);
    cr_expect_eq(n, crd__kinds[CRD__FENCED].renew_key2_len("a{b}", 4));
    cr_expect_str_eq(key, "redisson_lock_token:a{b}");
    crd__lock_clear(&l);

    /* {-1, t}: acquired with token t; {pttl, -1}: held */
    redisReply e0 = int_reply(-1), e1 = int_reply(7), *el[2] = {&e0, &e1};
    redisReply arr;
    memset(&arr, 0, sizeof arr);
    arr.type = REDIS_REPLY_ARRAY;
    arr.elements = 2;
    arr.element = el;
    int64_t hint = 0, token = 0;
    cr_expect_eq(crd__kinds[CRD__FENCED].acquire_reply(&arr, false, &hint, &token),
                 CRD__ACQ_TAKEN);
    cr_expect_eq(token, 7);
    e0.integer = 2500;
    e1.integer = -1;
    cr_expect_eq(crd__kinds[CRD__FENCED].acquire_reply(&arr, false, &hint, &token), CRD__ACQ_HELD);
    cr_expect_eq(hint, 2500);
    e0.integer = -1; /* a hash without TTL: no hint, never "acquired" */
    cr_expect_eq(crd__kinds[CRD__FENCED].acquire_reply(&arr, false, &hint, &token),
                 CRD__ACQ_HELD_NO_TTL);
    e1.integer = 0;
    cr_expect_eq(crd__kinds[CRD__FENCED].acquire_reply(&arr, false, &hint, &token), CRD__ACQ_BAD);
}

/* ---- names and the builder ------------------------------------------------------------------ */

Test(units, names_follow_redissons_prefix_and_suffix_rules)
{
    crd__names n;
    cr_assert_eq(crd__names_init(&n, CRD__FAIR, "a{b}c", 5), CRD_OK);
    cr_expect_str_eq(n.channel.p, "redisson_lock__channel:a{b}c");
    cr_expect_str_eq(n.latch_prefix.p, "redisson_unlock_latch:a{b}c:");
    cr_expect_str_eq(n.queue.p, "redisson_lock_queue:a{b}c");
    cr_expect_str_eq(n.deadlines.p, "redisson_lock_timeout:a{b}c");
    crd__names_clear(&n);
    cr_assert_eq(crd__names_init(&n, CRD__READ, "m", 1), CRD_OK);
    cr_expect_str_eq(n.channel.p, "redisson_rwlock:{m}");
    cr_expect_str_eq(n.rw_prefix.p, "{m}");
    cr_expect(n.queue.p == NULL);
    crd__names_clear(&n);
    char f[CRD__FIELD_MAX];
    const char *uuid = "2f3c6a86-6f7d-4c1a-9d53-5d3b1d2b7a10";
    cr_expect_eq(crd__field(uuid, 12, true, f), strlen(uuid) + strlen(":12:write"));
    cr_expect_str_eq(f, "2f3c6a86-6f7d-4c1a-9d53-5d3b1d2b7a10:12:write");
    cr_expect_eq(crd__field(uuid, 12, false, f), strlen(uuid) + 3);
}

Test(units, the_builder_grows_past_its_inline_words_and_formats_numbers)
{
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__SCRIPT_LOCK_RENEW, 301);
    cr_assert(!cmd.oom);
    for (int i = 0; i < 150; i++)
        crd__cmd_key(&cmd, "k", 1);
    crd__cmd_arg_i64(&cmd, -9223372036854775807LL - 1);
    for (int i = 0; i < 150; i++)
        crd__cmd_arg_i64(&cmd, i);
    cr_expect(!cmd.oom);
    cr_expect_eq(cmd.nkeys, 150);
    cr_expect_eq(cmd.nargs, 151);
    char *w = word(&cmd, 150);
    cr_expect_str_eq(w, "-9223372036854775808");
    free(w);
    w = word(&cmd, 300);
    cr_expect_str_eq(w, "149");
    free(w);
    cr_expect_eq(crd__cmd_head(&cmd, false), 0);
    cr_expect_eq(cmd.len[2], 3);
    cr_expect_str_eq(cmd.numkeys, "150");
    crd__cmd_free(&cmd);
    /* crd__put_u64's one- and two-digit shortcuts and the loop meet at 10 and 100. */
    const uint64_t v[] = {0, 9, 10, 99, 100, 101, 999, 1000, 18446744073709551615ULL};
    const char *want[] = {"0", "9", "10", "99", "100", "101", "999", "1000", "18446744073709551615"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char buf[24];
        *crd__put_u64(buf, v[i]) = '\0';
        cr_expect_str_eq(buf, want[i]);
    }
}

/* ---- cluster slots, redirects and cluster URLs ------------------------------------------------ */

Test(units, slots_are_redis_crc16_of_the_hash_tag_modulo_16384)
{
    cr_expect_eq(crd__crc16("123456789", 9), 0x31C3); /* the CRC16/XMODEM check value */
    cr_expect_eq(crd__key_slot("foo", 3), 12182);
    cr_expect_eq(crd__key_slot("", 0), 0);
    cr_expect_eq(crd__key_slot("{user1000}.following", 20), crd__key_slot("{user1000}.followers", 20));
    cr_expect_eq(crd__key_slot("{user1000}.following", 20), crd__key_slot("user1000", 8));
    /* Only the first '{' and the first '}' after it count; an empty tag hashes the key. */
    cr_expect_eq(crd__key_slot("foo{}{bar}", 10), crd__crc16("foo{}{bar}", 10) % 16384);
    cr_expect_eq(crd__key_slot("foo{{bar}}zap", 13), crd__key_slot("{bar", 4));
    cr_expect_eq(crd__key_slot("foo{bar}{zap}", 13), crd__key_slot("bar", 3));
    cr_expect_eq(crd__key_slot("a{b", 3), crd__crc16("a{b", 3) % 16384);
    /* Every derived name of a class A or B lock shares the name's slot (PROTOCOL.md 2.3). */
    const char *names[] = {"orders", "order:{42}", "a{b}c", "{x}", "锁:中文"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        crd__names n;
        size_t len = strlen(names[i]);
        cr_assert_eq(crd__names_init(&n, CRD__FAIR, names[i], len), CRD_OK);
        int slot = crd__key_slot(names[i], len);
        cr_expect_eq(crd__key_slot(n.channel.p, n.channel.len), slot, "%s", n.channel.p);
        cr_expect_eq(crd__key_slot(n.queue.p, n.queue.len), slot, "%s", n.queue.p);
        cr_expect_eq(crd__key_slot(n.deadlines.p, n.deadlines.len), slot, "%s", n.deadlines.p);
        cr_expect_eq(crd__key_slot(n.latch_prefix.p, n.latch_prefix.len), slot);
        crd__names_clear(&n);
    }
}

Test(units, moved_and_ask_replies_name_the_slot_and_the_node)
{
    int slot = -1, port = -1;
    const char *host = NULL;
    size_t hl = 0;
    cr_assert(crd__cluster_parse_redirect(error_reply("MOVED 3999 127.0.0.1:6381"), &slot, &host,
                                          &hl, &port));
    cr_expect_eq(slot, 3999);
    cr_expect_eq(port, 6381);
    cr_expect_eq(hl, 9);
    cr_expect(strncmp(host, "127.0.0.1", hl) == 0);
    cr_assert(crd__cluster_parse_redirect(error_reply("ASK 16383 [::1]:7000"), &slot, &host, &hl,
                                          &port));
    cr_expect_eq(slot, 16383);
    cr_expect(hl == 3 && strncmp(host, "::1", 3) == 0);
    cr_assert(crd__cluster_parse_redirect(error_reply("MOVED 1 :7001"), &slot, &host, &hl, &port));
    cr_expect_eq(hl, 0); /* the node that answered */
    cr_expect(!crd__cluster_parse_redirect(error_reply("MOVED 16384 h:1"), &slot, &host, &hl, &port));
    cr_expect(!crd__cluster_parse_redirect(error_reply("MOVED"), &slot, &host, &hl, &port));
    cr_expect(!crd__cluster_parse_redirect(error_reply("MOVED 12 host"), &slot, &host, &hl, &port));
    cr_expect(!crd__cluster_parse_redirect(error_reply("MOVED 12 h:99999"), &slot, &host, &hl, &port));
}

Test(units, cluster_urls_carry_credentials_and_every_seed)
{
    crd__endpoint ep;
    char err[200];
    cr_assert_eq(crd__url_parse("redis-cluster://bob:s%40c@10.0.0.1:7000,[::1]:7001,h3", &ep, err,
                                sizeof err), CRD_OK, "%s", err);
    cr_expect(ep.cluster);
    cr_expect_str_eq(ep.username, "bob");
    cr_expect_str_eq(ep.password, "s@c");
    cr_assert_eq(ep.nseeds, 3);
    cr_expect_str_eq(ep.seeds[0].host, "10.0.0.1");
    cr_expect_eq(ep.seeds[0].port, 7000);
    cr_expect_str_eq(ep.seeds[1].host, "::1");
    cr_expect_eq(ep.seeds[1].port, 7001);
    cr_expect_str_eq(ep.seeds[2].host, "h3");
    cr_expect_eq(ep.seeds[2].port, 6379);
    cr_expect_str_eq(ep.host, "10.0.0.1");
    cr_expect_eq(ep.port, 7000);
    crd__endpoint_clear(&ep);
    cr_assert_eq(crd__url_parse("redis-cluster://h:1", &ep, err, sizeof err), CRD_OK);
    cr_expect_eq(ep.nseeds, 1);
    cr_expect(!ep.tls);
    crd__endpoint_clear(&ep);
    cr_assert_eq(crd__url_parse("rediss-cluster://:pw@h:1,h2:2", &ep, err, sizeof err), CRD_OK);
    cr_expect(ep.nseeds == 2 && ep.tls && ep.cluster && strcmp(ep.password, "pw") == 0);
    crd__endpoint_clear(&ep);
    const char *bad[] = {"redis-cluster://", "redis-cluster://h:1,", "redis-cluster://h:1,,h:2",
                         "redis-cluster://h:0", "redis-cluster://h:1/3", "redis-cluster://[::1",
                         "rediscluster://h:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        cr_expect_eq(crd__url_parse(bad[i], &ep, err, sizeof err), CRD_INVALID_ARGUMENT, "%s", bad[i]);
        cr_expect(err[0] != '\0', "%s gives no reason", bad[i]);
        cr_expect_eq(ep.seeds, NULL);
        cr_expect_eq(ep.host, NULL);
    }
    /* A plain redis:// URL is no cluster. */
    cr_assert_eq(crd__url_parse("redis://h:1", &ep, err, sizeof err), CRD_OK);
    cr_expect(!ep.cluster);
    cr_expect_eq(ep.nseeds, 0);
    crd__endpoint_clear(&ep);
}
