/*
 * test_scripts.c -- the embedded scripts: the SHA1 the library sends with EVALSHA is the
 * one Redis computes for the exact bytes of lua/<name>.lua as the build expands it (its
 * "-- @include" lines resolved, in generated/lua/ of the build tree; so a script loaded
 * by anyone from that file is found by the library, and no call ever falls back to EVAL
 * once the cache holds the files), and every file opens with its KEYS/ARGV/Returns header.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"

// CRDT_SERIAL_TEST: it flushes the script cache.

/* SCRIPT LOADs every .lua file of lua/; returns how many, fills shas. */
static int load_all(redisContext *r, char shas[][41], int max)
{
    DIR *d = opendir(CRD_LUA_DIR);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".lua") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CRD_LUA_DIR, e->d_name);
        size_t len;
        char *text = crdt_slurp(path, &len);
        cr_assert(strncmp(text, "-- ", 3) == 0 && strstr(text, "KEYS[") != NULL &&
                      strstr(text, "ARGV[") != NULL && strstr(text, "Returns") != NULL,
                  "%s lacks its KEYS/ARGV/Returns header", e->d_name);
        const char *argv[3] = {"SCRIPT", "LOAD", text};
        size_t lens[3] = {6, 4, len};
        redisReply *rep = crdt_cmd_argv(r, 3, argv, lens);
        cr_assert_eq(rep->type, REDIS_REPLY_STRING, "SCRIPT LOAD %s failed", e->d_name);
        memcpy(shas[n], rep->str, 40);
        shas[n][40] = '\0';
        n++;
        freeReplyObject(rep);
        free(text);
    }
    closedir(d);
    return n;
}

Test(scripts, every_evalsha_uses_the_sha1_redis_computes_for_the_lua_file)
{
    redisContext *r = crdt_redis();
    freeReplyObject(crdt_cmd(r, "SCRIPT FLUSH"));
    char shas[128][41];
    int n = load_all(r, shas, 128);
    cr_assert_geq(n, 16, "expected every script of lua/, found %d", n);

    crdt_tracelog *log = crdt_tracelog_new();
    crd_options o;
    crdt_options(&o);
    o.watchdog_timeout_ms = 300;
    crdt_tracelog_attach(log, &o);
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(c, crdt_key("rlock"));
    crd_lock *f = NULL;
    crd_rwlock *rw = NULL;
    cr_assert_eq(crd_fair_lock_new(c, crdt_key("fair"), &f), CRD_OK);
    cr_assert_eq(crd_rwlock_new(c, crdt_key("rw"), &rw), CRD_OK);
    bool was;
    /* Every operation once, with the watchdog running a renewal of each kind. */
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rw), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f, 100, CRD_LEASE_WATCHDOG), CRD_OK); /* waiting form */
    crdt_sleep_ms(450); /* a renewal period passes: renewal scripts run */
    bool locked;
    cr_assert_eq(crd_lock_is_locked(crd_rwlock_read(rw), &locked), CRD_OK);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(rw)), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rw), 0, 5000), CRD_OK);
    cr_assert_eq(crd_lock_release(crd_rwlock_write(rw)), CRD_OK);
    cr_assert_eq(crd_lock_force_unlock(crd_rwlock_write(rw), &was), CRD_OK);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_eq(crd_lock_force_unlock(l, &was), CRD_OK);
    cr_assert_eq(crd_lock_release(f), CRD_OK);
    cr_assert_eq(crd_lock_release(f), CRD_OK);
    cr_assert_eq(crd_lock_force_unlock(f, &was), CRD_OK);

    size_t total = crdt_tracelog_count(log), evalshas = 0;
    for (size_t i = 0; i < total; i++) {
        crdt_trace_entry e;
        cr_assert(crdt_tracelog_get(log, i, &e));
        if (e.argc >= 2 && strcasecmp(e.argv[0], "EVAL") == 0)
            cr_assert_fail("fell back to EVAL although every file was loaded: %s", e.reply);
        if (e.argc >= 2 && strcasecmp(e.argv[0], "EVALSHA") == 0) {
            evalshas++;
            bool known = false;
            for (int k = 0; k < n; k++)
                known = known || strcmp(e.argv[1], shas[k]) == 0;
            cr_assert(known, "EVALSHA %s is not the SHA1 of any lua/ file", e.argv[1]);
            cr_assert(strstr(e.reply, "NOSCRIPT") == NULL, "NOSCRIPT for %s", e.argv[1]);
        }
        crdt_trace_entry_free(&e);
    }
    cr_assert_geq(evalshas, 12);
    crd_lock_free(l);
    crd_lock_free(f);
    crd_rwlock_free(rw);
    crd_client_free(c);
    crdt_tracelog_free(log);
    redisFree(r);
}
