/*
 * golden.c -- the recorded-reply rendering and the script reading of golden.h.
 */
#include "golden.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"

void crdt_golden_reply_text(json_t *reply, char *buf, size_t cap)
{
    if (json_is_null(reply)) {
        snprintf(buf, cap, "nil");
    } else if (json_is_integer(reply)) {
        snprintf(buf, cap, "(integer) %lld", (long long)json_integer_value(reply));
    } else if (json_is_array(reply)) {
        size_t o = (size_t)snprintf(buf, cap, "[");
        for (size_t i = 0; i < json_array_size(reply) && o < cap; i++) {
            char el[64];
            crdt_golden_reply_text(json_array_get(reply, i), el, sizeof el);
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", el);
        }
        if (o < cap)
            snprintf(buf + o, cap - o, "]");
    } else if (json_is_string(reply)) {
        snprintf(buf, cap, "\"%s\"", json_string_value(reply));
    } else {
        snprintf(buf, cap, "?");
    }
}

void crdt_golden_script_read(redisContext *r, const char *file, bool load, crdt_golden_script *s)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.lua", CRD_LUA_DIR, file);
    s->text = crdt_slurp(path, &s->len);
    cr_assert_not_null(s->text, "cannot read %s", path);
    redisReply *rep =
        load ? redisCommand(r, "SCRIPT LOAD %b", s->text, s->len)
             : redisCommand(r, "EVAL %s 0 %b", "return redis.sha1hex(ARGV[1])", s->text, s->len);
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len == 40, "%s of %s: %s",
              load ? "SCRIPT LOAD" : "redis.sha1hex", file,
              rep != NULL && rep->type == REDIS_REPLY_ERROR ? rep->str : "no SHA1");
    memcpy(s->sha, rep->str, 41);
    freeReplyObject(rep);
}

bool crdt_golden_script_runs(const crdt_golden_script *s, int argc, char *const *argv,
                             const size_t *argvlen)
{
    if (argc < 2)
        return false;
    if (strcasecmp(argv[0], "EVALSHA") == 0)
        return strcmp(argv[1], s->sha) == 0;
    return strcasecmp(argv[0], "EVAL") == 0 && argvlen[1] == s->len &&
           memcmp(argv[1], s->text, s->len) == 0;
}

json_t *crdt_golden_scenario(const char *file)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/scenarios/%s", CRD_GOLDEN_DIR, file);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s: %s", path, err.text);
    return root;
}

redisContext *crdt_golden_site_start(crdt_golden_site *site, bool cluster)
{
    site->cluster = cluster;
    if (cluster) {
        crdt_cluster_start(&site->cl, 1, 0);
        return crdt_cluster_redis(&site->cl, 0);
    }
    crdt_server_start(&site->srv, false, NULL, NULL, NULL);
    return crdt_redis_port(site->srv.port);
}

void crdt_golden_site_options(crdt_golden_site *site, crd_options *o)
{
    if (site->cluster) {
        crdt_cluster_options(&site->cl, o);
        return;
    }
    crdt_options(o);
    crdt_options_port(o, site->srv.port);
}

void crdt_golden_site_stop(crdt_golden_site *site)
{
    if (site->cluster)
        crdt_cluster_stop(&site->cl);
    else
        crdt_server_stop(&site->srv);
}

void crdt_golden_scripts_read(redisContext *r, const crdt_golden_label *labels, size_t n,
                              crdt_golden_script *scripts)
{
    if (n == 0 || scripts[0].text != NULL)
        return;
    for (size_t i = 0; i < n; i++)
        crdt_golden_script_read(r, labels[i].file, false, &scripts[i]);
}

int crdt_golden_scripts_find(const crdt_golden_script *scripts, size_t n, int argc,
                             char *const *argv, const size_t *argvlen)
{
    for (size_t i = 0; argc >= 3 && i < n; i++)
        if (crdt_golden_script_runs(&scripts[i], argc, argv, argvlen))
            return (int)i;
    return -1;
}

const crdt_golden_label crdt_golden_r47_labels[] = {
    {"rlock.acquire", "rlock_acquire"},
    {"rlock.unlock", "rlock_unlock"},
    {"rlock.force_unlock", "rlock_force_unlock"},
    {"lock.renew", "lock_renew"},
    {"nrlock.acquire", "nrlock_acquire"},
    {"nrfair.acquire", "nrfair_acquire"},
    {"nrfair.try_acquire_no_wait", "nrfair_try_acquire"},
    {"fair.unlock", "fair_unlock"},
    {"fair.force_unlock", "fair_force_unlock"},
    {"fair.acquire_failed", "fair_acquire_failed"},
    /* The spin lock's acquire is the reentrant lock's (README-r47: the same hash and effects). */
    {"spin.acquire", "rlock_acquire"},
    {"spin.unlock", "spin_unlock"},
    {"spin.force_unlock", "spin_force_unlock"},
    {"fml.acquire", "group_acquire"},
    {"fml.try_acquire_once", "group_try_acquire"},
    {"fml.unlock", "group_unlock"},
    {"fml.force_unlock", "group_force_unlock"},
    {"fml.renew", "group_renew"},
    {"fml.is_locked", "group_is_locked"},
    {"fml.is_held_by_thread", "group_is_held"},
    {"read.acquire", "rw_read_acquire"},
    {"read.unlock", "rw_read_unlock"},
    {"read.renew.v4", "rw_read_renew"},
    {"ratelimiter.try_set_rate", "ratelimiter_try_set_rate"},
    {"ratelimiter.try_acquire", "ratelimiter_try_acquire"},
    {"ratelimiter.available_permits", "ratelimiter_available"},
    {"ratelimiter.release", "ratelimiter_release"},
    {"ratelimiter.set_or_update_rate", "ratelimiter_set_rate"},
    {"expirable.expire", "ratelimiter_expire"},
    {"semaphore.release_if_exists", "semaphore_release_if_exists"},
    {"semaphore.try_set_permits", "semaphore_try_set"},
    {"semaphore.try_acquire", "semaphore_acquire"},
    {"semaphore.release", "semaphore_release"},
};
const size_t crdt_golden_r47_nlabels =
    sizeof crdt_golden_r47_labels / sizeof crdt_golden_r47_labels[0];

const char *crdt_golden_r47_file(const char *label)
{
    for (size_t i = 0; label != NULL && i < crdt_golden_r47_nlabels; i++)
        if (strcmp(crdt_golden_r47_labels[i].label, label) == 0)
            return crdt_golden_r47_labels[i].file;
    return NULL;
}
