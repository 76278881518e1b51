/*
 * test_server.c -- the server facts credisson relies on, checked on whichever server
 * the run uses (CRD_REDIS_SERVER: redis-server by default, valkey-server in `make
 * test-valkey`). Each test asserts the part both servers share and prints, with a
 * "[server]" prefix, what it found and on which server, where Redis 7 and Valkey 8
 * differ:
 *   - identity: Valkey names itself in INFO (server_name, valkey_version) and keeps
 *     redis_version at 7.2.4 for old clients; its redis_mode is server_mode;
 *   - NOSCRIPT: the text after the code differs; credisson matches only the code;
 *   - a script's writes show on MONITOR as "lua" lines (the golden and watchdog suites
 *     read them), and replies of a failing script keep the server's words;
 *   - CLIENT KILL TYPE pubsub (the pubsub and fault suites) and INFO commandstats
 *     (the pubsub and watchdog suites count script calls with it).
 * CRDT_EXPECT_SERVER=redis|valkey makes the identity test fail when the server that
 * answered is not the one the run meant to test (no silent fallback to Redis).
 *
 * One test at a time (CRDT_SERIAL_TEST): INFO commandstats is server-wide.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"

/* A field of INFO server ("" when absent), copied into buf. */
static const char *info_field(const char *info, const char *name, char *buf, size_t cap)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\n%s:", name);
    buf[0] = '\0';
    const char *p = strstr(info, needle);
    if (p != NULL) {
        p += strlen(needle);
        size_t n = strcspn(p, "\r\n");
        snprintf(buf, cap, "%.*s", (int)n, p);
    }
    return buf;
}

typedef struct server_id {
    bool valkey;
    char version[32];        /* the server's own version */
    char redis_version[32];  /* what it reports as redis_version */
    int major;
} server_id;

static server_id identify(redisContext *r)
{
    server_id id = {0};
    redisReply *rep = crdt_cmd(r, "INFO server");
    cr_assert_eq(rep->type, REDIS_REPLY_STRING);
    char name[32];
    id.valkey = strcmp(info_field(rep->str, "server_name", name, sizeof name), "valkey") == 0;
    info_field(rep->str, "redis_version", id.redis_version, sizeof id.redis_version);
    info_field(rep->str, id.valkey ? "valkey_version" : "redis_version", id.version,
               sizeof id.version);
    freeReplyObject(rep);
    id.major = atoi(id.version);
    return id;
}

static const char *server_name(const server_id *id)
{
    return id->valkey ? "valkey" : "redis";
}

Test(server, is_redis_7_or_later_or_valkey_8_or_later_and_says_which)
{
    redisContext *r = crdt_redis();
    server_id id = identify(r);
    cr_assert_neq(id.version[0], '\0', "INFO server names no version");
    cr_assert_geq(id.major, id.valkey ? 8 : 7, "%s %s is older than credisson supports",
                  server_name(&id), id.version);
    if (id.valkey)
        fprintf(stderr,
                "[server] valkey %s (%s); INFO says redis_version:%s for old clients, "
                "server_mode instead of redis_mode\n",
                id.version, crdt_redis_server_path(), id.redis_version);
    else
        fprintf(stderr, "[server] redis %s (%s)\n", id.version, crdt_redis_server_path());
    const char *want = getenv("CRDT_EXPECT_SERVER");
    if (want != NULL && want[0] != '\0')
        cr_assert_str_eq(server_name(&id), want, "the run meant to test %s, %s answered", want,
                         crdt_redis_server_path());
    redisFree(r);
}

Test(server, answers_an_unknown_script_with_the_NOSCRIPT_code_whatever_text_follows)
{
    redisContext *r = crdt_redis();
    server_id id = identify(r);
    /* No script has this SHA1 (it is not the digest of anything loaded here). */
    redisReply *rep = crdt_cmd(r, "EVALSHA 0000000000000000000000000000000000000001 0");
    cr_assert_eq(rep->type, REDIS_REPLY_ERROR);
    /* src/script.c and src/watchdog.c compare the first 8 bytes only. */
    cr_assert(strncmp(rep->str, "NOSCRIPT ", 9) == 0, "%s", rep->str);
    fprintf(stderr, "[server] %s: \"%s\"%s\n", server_name(&id), rep->str,
            strstr(rep->str, "Please use EVAL") != NULL ? " (Redis's text)"
                                                        : " (not Redis's text: only the code matters)");
    freeReplyObject(rep);
    redisFree(r);
}

Test(server, shows_the_writes_a_script_makes_on_MONITOR_as_lua_commands, .timeout = 30)
{
    redisContext *mon = crdt_redis();
    redisContext *r = crdt_redis();
    server_id id = identify(r);
    redisReply *rep = crdt_cmd(mon, "MONITOR");
    cr_assert_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0}; /* the deadline of every read below */
    redisSetTimeout(mon, tv);

    const char *key = crdt_key("effects");
    rep = crdt_cmd(r, "EVAL %s 1 %s",
                   "redis.call('hset', KEYS[1], 'f', '1'); redis.call('pexpire', KEYS[1], 30000); "
                   "return 1",
                   key);
    cr_assert_eq(rep->type, REDIS_REPLY_INTEGER);
    freeReplyObject(rep);
    freeReplyObject(crdt_cmd(r, "ECHO %s", key)); /* end marker */

    bool hset = false, pexpire = false, marker = false;
    while (!marker) {
        redisReply *line = NULL;
        cr_assert_eq(redisGetReply(mon, (void **)&line), REDIS_OK, "MONITOR: %s", mon->errstr);
        crdt_mon_cmd m;
        if (crdt_mon_parse(line->str, line->len, &m)) {
            bool ours = m.argc >= 2 && strcmp(m.argv[1], key) == 0;
            if (ours && strcmp(m.source, "lua") == 0) {
                hset |= strcasecmp(m.argv[0], "hset") == 0;
                pexpire |= strcasecmp(m.argv[0], "pexpire") == 0;
            }
            marker = ours && strcasecmp(m.argv[0], "echo") == 0;
            crdt_mon_cmd_free(&m);
        }
        freeReplyObject(line);
    }
    cr_assert(hset && pexpire, "%s: MONITOR showed hset %d, pexpire %d from lua", server_name(&id),
              hset, pexpire);
    fprintf(stderr, "[server] %s: a script's writes show on MONITOR as [db lua] lines\n",
            server_name(&id));
    redisFree(mon);
    redisFree(r);
}

Test(server, keeps_its_own_words_in_a_failing_script_reply)
{
    redisContext *r = crdt_redis();
    server_id id = identify(r);
    const char *key = crdt_key("string");
    freeReplyObject(crdt_cmd(r, "SET %s x", key));
    redisReply *rep = crdt_cmd(r, "EVAL %s 1 %s", "return redis.call('hset', KEYS[1], 'f', '1')", key);
    cr_assert_eq(rep->type, REDIS_REPLY_ERROR);
    cr_assert(strncmp(rep->str, "WRONGTYPE Operation against a key holding the wrong kind of value",
                      65) == 0,
              "%s", rep->str);
    /* Both append where it happened; a user-facing message may want to cut it off. */
    const char *where = strstr(rep->str, " script: ");
    fprintf(stderr, "[server] %s: a script's WRONGTYPE reply %s\n", server_name(&id),
            where != NULL ? "ends with \" script: <sha1>, on @user_script:<line>.\""
                          : "has nothing after the server's words");
    freeReplyObject(rep);
    redisFree(r);
}

Test(server, kills_subscriber_connections_by_CLIENT_KILL_TYPE_pubsub)
{
    /* A private server: the kill is server-wide. */
    crdt_server srv;
    crdt_server_start(&srv, false, NULL, NULL, NULL);
    redisContext *sub = crdt_redis_port(srv.port);
    redisContext *normal = crdt_redis_port(srv.port);
    server_id id = identify(normal);
    redisReply *rep = crdt_cmd(sub, "SUBSCRIBE %s", crdt_key("ch"));
    cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
    freeReplyObject(rep);
    cr_assert_eq(crdt_cmd_int(normal, "CLIENT KILL TYPE pubsub"), 1);
    cr_assert_eq(crdt_cmd_int(normal, "CLIENT KILL TYPE pubsub"), 0);
    char pong[16];
    crdt_cmd_str(normal, pong, sizeof pong, "PING");
    cr_assert_str_eq(pong, "PONG", "CLIENT KILL TYPE pubsub killed a normal connection");
    fprintf(stderr, "[server] %s: CLIENT KILL TYPE pubsub kills subscribers only\n",
            server_name(&id));
    redisFree(sub);
    redisFree(normal);
    crdt_server_stop(&srv);
}

Test(server, counts_script_calls_in_INFO_commandstats)
{
    redisContext *r = crdt_redis();
    server_id id = identify(r);
    long long eval = crdt_cmdstat_calls(r, "eval");
    long long hset = crdt_cmdstat_calls(r, "hset");
    redisReply *rep = crdt_cmd(r, "EVAL %s 1 %s", "return redis.call('hset', KEYS[1], 'f', '1')",
                               crdt_key("stats"));
    freeReplyObject(rep);
    cr_assert_eq(crdt_cmdstat_calls(r, "eval"), eval + 1);
    /* A command a script runs counts too (the suites count EVAL/EVALSHA only). */
    cr_assert_eq(crdt_cmdstat_calls(r, "hset"), hset + 1);
    fprintf(stderr, "[server] %s: INFO commandstats counts scripts and what they run\n",
            server_name(&id));
    redisFree(r);
}
