/*
 * crd_worker.c -- one C process of the mixed-language counter test.
 *
 * What it provides
 *   COUNT times: take the lock NAME through credisson, check that nobody else is inside
 *   (INCR PREFIX:guard must answer 1, otherwise INCR PREFIX:violations), do a
 *   read-modify-write of PREFIX:counter (GET, then SET value+1, so that two holders at
 *   once would lose an increment), note the language of the holder in PREFIX:last
 *   (SET .. GET; a change of language counts in PREFIX:handoffs, which shows that the
 *   lock really passed between C and Node), DECR the guard and release. The Node workers of
 *   interop/node/driver.js do exactly the same with node-redisson, on the same keys.
 *   Prints one JSON line at the end: {"lang":"c","done":N,"errors":E,"max_wait_ms":W}.
 *   Exit 0 when every iteration worked, 1 otherwise, 69 when Redis is unreachable.
 *
 * Usage
 *   crd_interop_worker --port P --name NAME --prefix PREFIX --count N [--lease MS]
 *
 * The counter keys go through a plain hiredis connection (argv form, explicit
 * lengths), never through the library's connections. Single-threaded.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "credisson.h"

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run a command with two string arguments (the second may be NULL); returns the
 * reply (caller frees) or NULL on a connection error. */
static redisReply *cmd2(redisContext *rc, const char *verb, const char *key, const char *arg)
{
    const char *argv[3] = {verb, key, arg};
    size_t lens[3] = {strlen(verb), strlen(key), arg ? strlen(arg) : 0};
    return redisCommandArgv(rc, arg ? 3 : 2, argv, lens);
}

int main(int argc, char **argv)
{
    int port = 6379;
    const char *name = NULL, *prefix = NULL;
    long count = 0;
    int64_t lease_ms = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--name") == 0)
            name = argv[i + 1];
        else if (strcmp(argv[i], "--prefix") == 0)
            prefix = argv[i + 1];
        else if (strcmp(argv[i], "--count") == 0)
            count = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--lease") == 0)
            lease_ms = atoll(argv[i + 1]);
    }
    if (!name || !prefix || count <= 0) {
        fprintf(stderr, "usage: %s --port P --name NAME --prefix PREFIX --count N [--lease MS]\n",
                argv[0]);
        return 64;
    }

    char k_guard[512], k_counter[512], k_viol[512], k_last[512], k_hand[512];
    snprintf(k_guard, sizeof k_guard, "%s:guard", prefix);
    snprintf(k_counter, sizeof k_counter, "%s:counter", prefix);
    snprintf(k_viol, sizeof k_viol, "%s:violations", prefix);
    snprintf(k_last, sizeof k_last, "%s:last", prefix);
    snprintf(k_hand, sizeof k_hand, "%s:handoffs", prefix);

    crd_options opts;
    crd_options_init(&opts);
    opts.port = port;
    crd_client *c = NULL;
    if (crd_client_new(&opts, &c) != CRD_OK) {
        fprintf(stderr, "crd_client_new: %s\n", c ? crd_client_errmsg(c) : "no memory");
        crd_client_free(c);
        return 69;
    }
    struct timeval tv = {5, 0};
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!rc || rc->err) {
        fprintf(stderr, "hiredis connect failed\n");
        crd_client_free(c);
        return 69;
    }
    redisSetTimeout(rc, tv);
    crd_lock *l = NULL;
    if (crd_lock_new(c, name, &l) != CRD_OK) {
        fprintf(stderr, "crd_lock_new: %s\n", crd_client_errmsg(c));
        return 1;
    }

    long done = 0, errors = 0;
    int64_t max_wait = 0;
    for (long i = 0; i < count; i++) {
        int64_t t0 = mono_ms();
        crd_status st = crd_lock_acquire(l, 60000, lease_ms);
        int64_t waited = mono_ms() - t0;
        if (waited > max_wait)
            max_wait = waited;
        if (st != CRD_OK) {
            fprintf(stderr, "acquire: %s (%s)\n", crd_strerror(st), crd_client_errmsg(c));
            errors++;
            continue;
        }
        redisReply *r = cmd2(rc, "INCR", k_guard, NULL);
        if (!r)
            goto io;
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
            freeReplyObject(cmd2(rc, "INCR", k_viol, NULL));
        }
        freeReplyObject(r);
        r = cmd2(rc, "GET", k_counter, NULL);
        if (!r)
            goto io;
        long long v = (r->type == REDIS_REPLY_STRING) ? atoll(r->str) : 0;
        freeReplyObject(r);
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", v + 1);
        r = cmd2(rc, "SET", k_counter, buf);
        if (!r)
            goto io;
        freeReplyObject(r);
        {
            const char *av[4] = {"SET", k_last, "c", "GET"};
            size_t al[4] = {3, strlen(k_last), 1, 3};
            r = redisCommandArgv(rc, 4, av, al);
        }
        if (!r)
            goto io;
        if (r->type == REDIS_REPLY_STRING && strcmp(r->str, "c") != 0)
            freeReplyObject(cmd2(rc, "INCR", k_hand, NULL));
        freeReplyObject(r);
        r = cmd2(rc, "DECR", k_guard, NULL);
        if (!r)
            goto io;
        freeReplyObject(r);
        st = crd_lock_release(l);
        if (st != CRD_OK) {
            fprintf(stderr, "release: %s (%s)\n", crd_strerror(st), crd_client_errmsg(c));
            errors++;
            continue;
        }
        done++;
    }
    printf("{\"lang\":\"c\",\"done\":%ld,\"errors\":%ld,\"max_wait_ms\":%" PRId64 "}\n", done,
           errors, max_wait);
    fflush(stdout);
    redisFree(rc);
    crd_lock_free(l);
    crd_client_free(c);
    return errors ? 1 : 0;
io:
    fprintf(stderr, "hiredis: %s\n", rc->errstr);
    redisFree(rc);
    crd_lock_free(l);
    crd_client_free(c);
    return 1;
}
