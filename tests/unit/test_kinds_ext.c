/*
 * test_kinds_ext.c -- the standalone pieces of Redisson 4.7's lock family (src/kinds_ext.c,
 * src/fieldhash.c), tested without a server: the grouped multi-lock's field hash against
 * HighwayHash's reference vectors and the fields recorded from Redisson 4.7.0
 * (tests/golden/README-r47.md), the reentry refusal's classification, each builder's KEYS
 * and ARGV in the order of the recordings, the reply readers and the spin back-off. Part of
 * the test_units executable (the suite "units").
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "kinds_ext.h"
#include "sync.h"
#include "units.h"

/* ---- field hash ---------------------------------------------------------------------------- */

/* HighwayHash's own test (c/highwayhash_test.c of google/highwayhash): key 00 01 .. 1f,
 * data[i] = i, HighwayHash64 of the first n bytes for n = 0..64. Frozen values of the
 * reference; they exercise every remainder path (n mod 32 = 0..31) the 128-bit result
 * shares with the 64-bit one. */
static const uint64_t hh_key1[4] = {0x0706050403020100ull, 0x0F0E0D0C0B0A0908ull,
                                    0x1716151413121110ull, 0x1F1E1D1C1B1A1918ull};
static const uint64_t hh_expected64[65] = {
    0x907A56DE22C26E53ull, 0x7EAB43AAC7CDDD78ull, 0xB8D0569AB0B53D62ull, 0x5C6BEFAB8A463D80ull,
    0xF205A46893007EDAull, 0x2B8A1668E4A94541ull, 0xBD4CCC325BEFCA6Full, 0x4D02AE1738F59482ull,
    0xE1205108E55F3171ull, 0x32D2644EC77A1584ull, 0xF6E10ACDB103A90Bull, 0xC3BBF4615B415C15ull,
    0x243CC2040063FA9Cull, 0xA89A58CE65E641FFull, 0x24B031A348455A23ull, 0x40793F86A449F33Bull,
    0xCFAB3489F97EB832ull, 0x19FE67D2C8C5C0E2ull, 0x04DD90A69C565CC2ull, 0x75D9518E2371C504ull,
    0x38AD9B1141D3DD16ull, 0x0264432CCD8A70E0ull, 0xA9DB5A6288683390ull, 0xD7B05492003F028Cull,
    0x205F615AEA59E51Eull, 0xEEE0C89621052884ull, 0x1BFC1A93A7284F4Full, 0x512175B5B70DA91Dull,
    0xF71F8976A0A2C639ull, 0xAE093FEF1F84E3E7ull, 0x22CA92B01161860Full, 0x9FC7007CCF035A68ull,
    0xA0C964D9ECD580FCull, 0x2C90F73CA03181FCull, 0x185CF84E5691EB9Eull, 0x4FC1F5EF2752AA9Bull,
    0xF5B7391A5E0A33EBull, 0xB9B84B83B4E96C9Cull, 0x5E42FE712A5CD9B4ull, 0xA150F2F90C3F97DCull,
    0x7FA522D75E2D637Dull, 0x181AD0CC0DFFD32Bull, 0x3889ED981E854028ull, 0xFB4297E8C586EE2Dull,
    0x6D064A45BB28059Cull, 0x90563609B3EC860Cull, 0x7AA4FCE94097C666ull, 0x1326BAC06B911E08ull,
    0xB926168D2B154F34ull, 0x9919848945B1948Dull, 0xA2A98FC534825EBEull, 0xE9809095213EF0B6ull,
    0x582E5483707BC0E9ull, 0x086E9414A88A6AF5ull, 0xEE86B98D20F6743Dull, 0xF89B7FF609B1C0A7ull,
    0x4C7D9CC19E22C3E8ull, 0x9A97005024562A6Full, 0x5DD41CF423E6EBEFull, 0xDF13609C0468E227ull,
    0x6E0DA4F64188155Aull, 0xB755BA4B50D7D4A1ull, 0x887A3484647479BDull, 0xAB8EEBE9BF2139A0ull,
    0x75542C5D4CD2A6FFull};

Test(units, highwayhash_matches_the_reference_vectors_for_every_length_up_to_64)
{
    unsigned char data[65];
    for (int i = 0; i <= 64; i++)
        data[i] = (unsigned char)i;
    for (size_t n = 0; n <= 64; n++)
        cr_expect_eq(crd__highwayhash64(hh_key1, data, n), hh_expected64[n], "length %zu", n);
    static const uint64_t key2[4] = {1, 2, 3, 4};
    for (int i = 0; i < 33; i++)
        data[i] = (unsigned char)(128 + i);
    cr_expect_eq(crd__highwayhash64(key2, data, 33), 0x53c516cce478cad7ull);
}

/* The values of the r47_fml_* recordings and the fields Redisson 4.7.0 sent for them
 * (tests/golden/README-r47.md, "Faster multi-lock field names"; "z" from r47_fml_d). */
Test(units, group_fields_are_the_fields_redisson_sent_for_each_recorded_value)
{
    static const struct {
        const char *value, *field;
    } cases[] = {
        {"a", "qwvAS12pR0CgRitaypEjUw"},
        {"b", "Q5CdP+xmkHdTGWYr64Lw6A"},
        {"c", "b/ERpQOx2r8GXiGBU6d0Hg"},
        {"d", "cCV/U3K/CnVMICY6x8GOAQ"},
        {"e", "tJRIHtwLw/UZfoKTkKzmFA"},
        {"z", "vwOR5fJTI35BKAC66TjxhQ"},
        {"Jack_001", "7pNoDdizVy2xY792MaFv+w"},
        {"", "t6rZwibGo2uy1OSmNVe8pg"},
        {"\xe9\x94\x81", "drsQAi5D/kArOiCuU0PboA"}, /* 锁, 3 bytes of UTF-8 */
        {"order:{42}", "XRvhfdu7mxjahujWDR6eKg"},
        {"abcdefghijabcdefghijabcdefghijabcdefghij", "iHMScHV2uQujgE7HHNYwZw"},
        {"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij"
         "abcdefghijabcdefghij",
         "imS8nSVqAO6+EoV3d+Cnhw"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char f[CRD__FML_FIELD_SIZE];
        memset(f, 'x', sizeof f);
        crd__fml_field(cases[i].value, strlen(cases[i].value), f);
        cr_expect_str_eq(f, cases[i].field, "value \"%s\" (%zu bytes)", cases[i].value,
                         strlen(cases[i].value));
    }
    /* Binary-safe: a NUL inside the value is part of it. */
    char with_nul[CRD__FML_FIELD_SIZE], without[CRD__FML_FIELD_SIZE];
    crd__fml_field("a\0b", 3, with_nul);
    crd__fml_field("a", 1, without);
    cr_expect(strcmp(with_nul, without) != 0, "a NUL inside a value changed nothing: %s", with_nul);
    cr_expect_eq(strlen(with_nul), 22);
}

/* ---- the reentry refusal ------------------------------------------------------------------- */

static redisReply *reply_of(int type, const char *text, long long integer)
{
    static redisReply r;
    static char buf[256];
    memset(&r, 0, sizeof r);
    r.type = type;
    if (text != NULL) {
        snprintf(buf, sizeof buf, "%s", text);
        r.str = buf;
        r.len = strlen(buf);
    }
    r.integer = integer;
    return &r;
}

Test(units, only_the_non_reentrant_acquires_own_error_is_a_reentry_refusal)
{
    cr_expect(crd__reentry_refused(reply_of(REDIS_REPLY_ERROR, "ERR NON_REENTRANT_REACQUIRE", 0)));
    /* A server that does not prefix error_reply's text (Redis 6, some forks). */
    cr_expect(crd__reentry_refused(reply_of(REDIS_REPLY_ERROR, "NON_REENTRANT_REACQUIRE", 0)));
    static const char *not_it[] = {
        "WRONGTYPE Operation against a key holding the wrong kind of value",
        "ERR user_script:3: NON_REENTRANT_REACQUIRE script: 0123, on @user_script:3.",
        "ERR NON_REENTRANT_REACQUIRE2",
        "ERR NON_REENTRANT",
        "NOSCRIPT No matching script. Please use EVAL.",
        "OOM command not allowed when used memory > 'maxmemory'.",
    };
    for (size_t i = 0; i < sizeof not_it / sizeof not_it[0]; i++)
        cr_expect_not(crd__reentry_refused(reply_of(REDIS_REPLY_ERROR, not_it[i], 0)), "%s",
                      not_it[i]);
    cr_expect_not(crd__reentry_refused(reply_of(REDIS_REPLY_STRING, "NON_REENTRANT_REACQUIRE", 0)));
    cr_expect_not(crd__reentry_refused(reply_of(REDIS_REPLY_NIL, NULL, 0)));
    cr_expect_not(crd__reentry_refused(NULL));
}

/* ---- builders ------------------------------------------------------------------------------ */

#define OWNER "2f3c6a86-6f7d-4c1a-9d53-5d3b1d2b7a10:7"

/* cmd as crdt_unit_expect's want (units.h). */
static const char *shape(const crd__cmd *cmd)
{
    static char out[4096];
    size_t o = 0;
    cr_assert_not(cmd->oom, "the builder ran out of words");
    for (int i = 0; i < cmd->nkeys + cmd->nargs; i++) {
        const char *w = cmd->v[3 + i];
        size_t n = cmd->len[3 + i];
        o += (size_t)snprintf(out + o, sizeof out - o, "%s%s", i ? "|" : "",
                              i == cmd->nkeys ? "ARGV:" : "");
        size_t digits = 0;
        while (digits < n && w[digits] >= '0' && w[digits] <= '9')
            digits++;
        if (digits == n && n >= 10) {
            o += (size_t)snprintf(out + o, sizeof out - o, "#");
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            unsigned char c = (unsigned char)w[k];
            o +=
                (size_t)snprintf(out + o, sizeof out - o, c >= 32 && c < 127 ? "%c" : "\\x%02x", c);
        }
    }
    return out;
}

void crdt_unit_expect(crd__cmd *cmd, int script, const char *want)
{
    if (script != CRDT_UNIT_ANY)
        cr_expect_eq(cmd->script, script, "script %d, not %d, for %s", cmd->script, script, want);
    cr_expect_str_eq(shape(cmd), want);
    crd__cmd_free(cmd);
}

crd_lock crdt_unit_lock(crd__kind kind, const char *name)
{
    crd_lock l;
    cr_assert_eq(crd__lock_init(&l, NULL, kind, name, strlen(name)), CRD_OK);
    return l;
}

Test(units, the_non_reentrant_acquires_send_redissons_keys_and_arguments)
{
    crd__acq_args a = {OWNER, strlen(OWNER), 30000, false, 10000, false};
    crd__cmd cmd;
    crd_lock l = crdt_unit_lock(CRD__RLOCK, "nr1");
    crd__nrlock_acquire(&l, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_NRLOCK_ACQUIRE,
                     "nr1|ARGV:30000|" OWNER "|NON_REENTRANT_REACQUIRE");
    crd__lock_clear(&l);

    l = crdt_unit_lock(CRD__FAIR, "nf1");
    crd__nrfair_acquire(&l, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_NRFAIR_ACQUIRE,
                     "nf1|redisson_lock_queue:{nf1}|redisson_lock_timeout:{nf1}|"
                     "ARGV:30000|" OWNER "|10000|#|NON_REENTRANT_REACQUIRE");
    a.nowait = true; /* tryLock(): now before wait */
    crd__nrfair_acquire(&l, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_NRFAIR_TRY_ACQUIRE,
                     "nf1|redisson_lock_queue:{nf1}|redisson_lock_timeout:{nf1}|"
                     "ARGV:30000|" OWNER "|#|10000|NON_REENTRANT_REACQUIRE");
    crd__lock_clear(&l);
}

Test(units, the_spin_lock_releases_and_force_unlocks_without_a_channel)
{
    const char *latch = "redisson_unlock_latch:{sp1}:0123456789abcdef0123456789abcdef";
    crd__rel_args a = {OWNER, strlen(OWNER), 30000, latch, strlen(latch), 19208};
    crd__cmd cmd;
    crd_lock l = crdt_unit_lock(CRD__RLOCK, "sp1");
    crd__spin_release(&l, &a, &cmd);
    cr_expect_eq(cmd.script, CRD__SCRIPT_SPIN_UNLOCK);
    char want[512];
    snprintf(want, sizeof want, "sp1|%s|ARGV:30000|" OWNER "|19208", latch);
    crdt_unit_expect(&cmd, CRDT_UNIT_ANY, want);
    crd__spin_force_unlock(&l, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_SPIN_FORCE_UNLOCK, "sp1");
    crd__lock_clear(&l);

    cr_expect_eq(crd__spin_release_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 1)),
                 CRD__REL_RELEASED);
    cr_expect_eq(crd__spin_release_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 0)),
                 CRD__REL_STILL_HELD);
    cr_expect_eq(crd__spin_release_reply(reply_of(REDIS_REPLY_NIL, NULL, 0)), CRD__REL_NOT_HELD);
    cr_expect_eq(crd__spin_release_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 2)), CRD__REL_BAD);
}

static const void *const abc[] = {"a", "b", "c"};
static const size_t abc_len[] = {1, 1, 1};
#define FA "qwvAS12pR0CgRitaypEjUw"
#define FB "Q5CdP+xmkHdTGWYr64Lw6A"
#define FC "b/ERpQOx2r8GXiGBU6d0Hg"

Test(units, a_group_is_one_hash_with_one_field_per_distinct_value)
{
    crd__group g;
    cr_assert_eq(crd__group_init(&g, "grp1", 4, abc, abc_len, 3), CRD_OK);
    cr_expect_str_eq(g.name, "grp1");
    cr_expect_str_eq(g.channel.p, "redisson_lock__channel:{grp1}");
    cr_expect_str_eq(g.latch_prefix.p, "redisson_unlock_latch:{grp1}:");
    cr_assert_eq(g.nfields, 3);
    cr_expect_str_eq(g.fields[0], FA);
    cr_expect_str_eq(g.fields[2], FC);
    crd__group_clear(&g);

    /* A name with a brace keeps its own hash tag (r47_cluster_fml: {g}1). */
    const void *const dup[] = {"c", "a", "c", "a"};
    const size_t dup_len[] = {1, 1, 1, 1};
    cr_assert_eq(crd__group_init(&g, "{g}1", 4, dup, dup_len, 4), CRD_OK);
    cr_expect_str_eq(g.channel.p, "redisson_lock__channel:{g}1");
    cr_expect_str_eq(g.latch_prefix.p, "redisson_unlock_latch:{g}1:");
    cr_expect_eq(g.nfields, 2, "the same value twice is one field, as in Java's set");
    crd__group_clear(&g);

    cr_expect_eq(crd__group_init(&g, "grp1", 4, abc, abc_len, 0), CRD_INVALID_ARGUMENT);
    const void *const missing[] = {NULL};
    const size_t one[] = {1};
    cr_expect_eq(crd__group_init(&g, "grp1", 4, missing, one, 1), CRD_INVALID_ARGUMENT);
}

Test(units, the_group_scripts_send_redissons_keys_and_arguments)
{
    crd__group g;
    cr_assert_eq(crd__group_init(&g, "grp1", 4, abc, abc_len, 3), CRD_OK);
    crd__acq_args a = {OWNER, strlen(OWNER), 30000, false, 0, false};
    crd__cmd cmd;
    crd__group_acquire(&g, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_GROUP_ACQUIRE,
                     "grp1|ARGV:30000|#|" OWNER "|" FA "|" FB "|" FC);
    a.nowait = true; /* tryLock(): now before the lease */
    crd__group_acquire(&g, &a, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_GROUP_TRY_ACQUIRE,
                     "grp1|ARGV:#|30000|" OWNER "|" FA "|" FB "|" FC);

    const char *latch = "redisson_unlock_latch:{grp1}:0123456789abcdef0123456789abcdef";
    crd__rel_args r = {OWNER, strlen(OWNER), 30000, latch, strlen(latch), 17836};
    crd__group_release(&g, &r, "SPUBLISH", &cmd);
    cr_expect_eq(cmd.script, CRD__SCRIPT_GROUP_UNLOCK);
    char want[1024];
    snprintf(want, sizeof want,
             "grp1|redisson_lock__channel:{grp1}|%s|ARGV:" OWNER "|0|30000|SPUBLISH|17836|#|" FA
             "|" FB "|" FC,
             latch);
    crdt_unit_expect(&cmd, CRDT_UNIT_ANY, want);

    crd__group_force_unlock(&g, "PUBLISH", &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_GROUP_FORCE_UNLOCK,
                     "grp1|redisson_lock__channel:{grp1}|ARGV:0|PUBLISH|" FA "|" FB "|" FC);
    crd__group_renew(&g, OWNER, strlen(OWNER), 3000, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_GROUP_RENEW, "grp1|ARGV:3000|#|" OWNER "|" FA "|" FB "|" FC);
    crd__group_is_locked(&g, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_GROUP_IS_LOCKED, "grp1|ARGV:#|" FA "|" FB "|" FC);
    crd__group_is_held(&g, OWNER, strlen(OWNER), &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_GROUP_IS_HELD, "grp1|ARGV:#|" OWNER "|" FA "|" FB "|" FC);
    crd__group_clear(&g);

    /* Hundreds of values: the builder sizes itself, nothing is dropped. */
    enum { N = 300 };
    static char vals[N][8];
    const void *vp[N];
    size_t vl[N];
    for (int i = 0; i < N; i++) {
        vl[i] = (size_t)snprintf(vals[i], sizeof vals[i], "row%d", i);
        vp[i] = vals[i];
    }
    cr_assert_eq(crd__group_init(&g, "rows", 4, vp, vl, N), CRD_OK);
    crd__group_acquire(&g, &a, &cmd);
    cr_expect_not(cmd.oom);
    cr_expect_eq(cmd.nkeys + cmd.nargs, 1 + 3 + N);
    crd__cmd_free(&cmd);
    crd__group_clear(&g);
}

Test(units, group_replies_decode_into_named_outcomes)
{
    int64_t hint = -1, token = 0;
    cr_expect_eq(crd__group_acquire_reply(reply_of(REDIS_REPLY_NIL, NULL, 0), false, &hint, &token),
                 CRD__ACQ_TAKEN);
    cr_expect_eq(
        crd__group_acquire_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 27840), false, &hint, &token),
        CRD__ACQ_HELD);
    cr_expect_eq(hint, 27840);
    cr_expect_eq(
        crd__group_acquire_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 1), true, &hint, &token),
        CRD__ACQ_TAKEN);
    cr_expect_eq(
        crd__group_acquire_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 0), true, &hint, &token),
        CRD__ACQ_REFUSED);
    cr_expect_eq(crd__group_acquire_reply(reply_of(REDIS_REPLY_NIL, NULL, 0), true, &hint, &token),
                 CRD__ACQ_BAD);
    cr_expect_eq(crd__group_release_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 3)),
                 CRD__REL_RELEASED);
    cr_expect_eq(crd__group_release_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 0)),
                 CRD__REL_STILL_HELD);
    cr_expect_eq(crd__group_release_reply(reply_of(REDIS_REPLY_NIL, NULL, 0)), CRD__REL_NOT_HELD);
    cr_expect_eq(crd__group_release_reply(reply_of(REDIS_REPLY_INTEGER, NULL, -1)),
                 CRD__REL_NOT_HELD);
    cr_expect_eq(crd__group_release_reply(reply_of(REDIS_REPLY_INTEGER, NULL, -2)), CRD__REL_BAD);
}

Test(units, the_rate_limiter_names_its_five_keys_as_redisson_and_sends_its_arguments)
{
    const char *uuid = "0b6a2c7e-54d1-4a36-9d43-6a0c1f2e3d4b";
    crd__rl_names n;
    cr_assert_eq(crd__rl_names_init(&n, "rl1", 3, uuid), CRD_OK);
    char all[512];
    snprintf(all, sizeof all, "rl1|{rl1}:value|{rl1}:value:%s|{rl1}:permits|{rl1}:permits:%s", uuid,
             uuid);
    crd__cmd cmd;
    char want[1024];
    crd__rl_try_set_rate(&n, 3, 2000, CRD__RL_OVERALL, 0, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_RATELIMITER_TRY_SET_RATE, "rl1|ARGV:3|2000|0|0");
    crd__rl_set_rate(&n, 10, 10000, CRD__RL_PER_CLIENT, 30000, true, true, &cmd);
    cr_expect_eq(cmd.script, CRD__SCRIPT_RATELIMITER_SET_RATE);
    snprintf(want, sizeof want, "%s|ARGV:10|10000|1|30000|#|1|1", all);
    crdt_unit_expect(&cmd, CRDT_UNIT_ANY, want);
    cr_assert_eq(crd__rl_try_acquire(&n, 2, &cmd), CRD_OK);
    cr_expect_eq(cmd.script, CRD__SCRIPT_RATELIMITER_TRY_ACQUIRE);
    cr_expect_eq(cmd.nkeys, 5);
    cr_assert_eq(cmd.nargs, 3);
    cr_expect_eq(cmd.len[3 + 5 + 2], 16, "16 random bytes, raw");
    char first[16];
    memcpy(first, cmd.v[3 + 5 + 2], 16);
    crd__cmd_free(&cmd);
    cr_assert_eq(crd__rl_try_acquire(&n, 2, &cmd), CRD_OK);
    cr_expect(memcmp(first, cmd.v[3 + 5 + 2], 16) != 0, "a new record id every call");
    crd__cmd_free(&cmd);
    crd__rl_available(&n, &cmd);
    snprintf(want, sizeof want, "%s|ARGV:#", all);
    crdt_unit_expect(&cmd, CRDT_UNIT_ANY, want);
    crd__rl_release(&n, 2, &cmd);
    snprintf(want, sizeof want, "%s|ARGV:2", all);
    crdt_unit_expect(&cmd, CRDT_UNIT_ANY, want);
    crd__rl_expire(&n, 5000, &cmd);
    cr_expect_eq(cmd.script, CRD__SCRIPT_RATELIMITER_EXPIRE);
    snprintf(want, sizeof want, "%s|ARGV:5000|", all);
    crdt_unit_expect(&cmd, CRDT_UNIT_ANY, want);
    crd__rl_delete(&n, &cmd);
    cr_expect_eq(cmd.script, CRD__PLAIN);
    cr_expect_eq(cmd.nargs, 6);
    crd__cmd_free(&cmd);
    crd__rl_names_clear(&n);

    /* A name with a brace: no braces added (Redisson's suffixName). */
    cr_assert_eq(crd__rl_names_init(&n, "rl{1}", 5, uuid), CRD_OK);
    cr_expect_str_eq(n.keys[1].p, "rl{1}:value");
    cr_expect_str_eq(n.keys[3].p, "rl{1}:permits");
    crd__rl_names_clear(&n);
}

Test(units, rate_limiter_replies_decode_into_named_outcomes)
{
    int64_t wait = -1, count = -1;
    cr_expect_eq(crd__rl_acquire_reply(reply_of(REDIS_REPLY_NIL, NULL, 0), &wait), CRD__RL_GRANTED);
    cr_expect_eq(crd__rl_acquire_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 1190), &wait),
                 CRD__RL_WAIT);
    cr_expect_eq(wait, 1190);
    cr_expect_eq(crd__rl_acquire_reply(
                     reply_of(REDIS_REPLY_ERROR, "ERR RateLimiter is not initialized", 0), &wait),
                 CRD__RL_UNINITIALIZED);
    /* Redisson's own script's text (an assert) reads the same. */
    cr_expect_eq(crd__rl_acquire_reply(
                     reply_of(REDIS_REPLY_ERROR,
                              "ERR user_script:1: RateLimiter is not initialized script: 12ab, "
                              "on @user_script:1.",
                              0),
                     &wait),
                 CRD__RL_UNINITIALIZED);
    cr_expect_eq(crd__rl_acquire_reply(
                     reply_of(REDIS_REPLY_ERROR,
                              "ERR Requested permits amount cannot exceed defined rate", 0),
                     &wait),
                 CRD__RL_TOO_MANY);
    cr_expect_eq(
        crd__rl_acquire_reply(reply_of(REDIS_REPLY_ERROR, "WRONGTYPE Operation", 0), &wait),
        CRD__RL_BAD);
    cr_expect(crd__rl_count_reply(reply_of(REDIS_REPLY_STRING, "3", 0), &count));
    cr_expect_eq(count, 3);
    cr_expect(crd__rl_count_reply(reply_of(REDIS_REPLY_INTEGER, NULL, 7), &count));
    cr_expect_eq(count, 7);
}

Test(units, release_if_exists_sends_the_semaphores_key_channel_and_permits)
{
    crd__buf channel = {"redisson_sc:{sem1}", strlen("redisson_sc:{sem1}")};
    crd__cmd cmd;
    crd__semaphore_release_if_exists("sem1", 4, &channel, "PUBLISH", 2, &cmd);
    crdt_unit_expect(&cmd, CRD__SCRIPT_SEMAPHORE_RELEASE_IF_EXISTS,
                     "sem1|redisson_sc:{sem1}|ARGV:2|PUBLISH");
}

/* ---- spin back-off -------------------------------------------------------------------------- */

Test(units, the_spin_back_off_doubles_from_1_ms_with_jitter_up_to_128_or_stays_constant)
{
    crd__spin_backoff b;
    crd__spin_backoff_exponential(&b, CRD__SPIN_INITIAL_MS, CRD__SPIN_MAX_MS, CRD__SPIN_MULTIPLIER);
    /* No jitter: 1, 2, 4, ... 128, then 128 for ever. */
    static const int64_t plain[] = {1, 2, 4, 8, 16, 32, 64, 128, 128, 128};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        cr_expect_eq(crd__spin_backoff_next(&b, 0), plain[i], "sleep %zu", i);
    /* The most jitter: the k-th doubling adds k - 1 (Java's nextInt(++fails)). */
    crd__spin_backoff_exponential(&b, CRD__SPIN_INITIAL_MS, CRD__SPIN_MAX_MS, CRD__SPIN_MULTIPLIER);
    static const int64_t most[] = {1, 2, 5, 12, 27, 58, 121, 128, 128};
    for (size_t i = 0; i < sizeof most / sizeof most[0]; i++)
        cr_expect_eq(crd__spin_backoff_next(&b, (uint32_t)i), most[i], "sleep %zu", i);
    int64_t total = 0;
    crd__spin_backoff_exponential(&b, CRD__SPIN_INITIAL_MS, CRD__SPIN_MAX_MS, CRD__SPIN_MULTIPLIER);
    for (int i = 0; i < 100; i++) {
        int64_t s = crd__spin_backoff_next(&b, (uint32_t)rand());
        cr_expect(s >= 1 && s <= CRD__SPIN_MAX_MS);
        total += s;
    }
    cr_expect_gt(total, 0);
    crd__spin_backoff_constant(&b, CRD__SPIN_CONSTANT_MS);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(crd__spin_backoff_next(&b, (uint32_t)i), 64);
}
