/*
 * golden.h -- helpers of the suites that compare credisson's traffic with the Redisson
 * recordings in tests/golden/ (test_golden.c, test_golden_r47.c, test_golden_sync.c,
 * test_scripts_r47.c, test_watchdog.c).
 *
 * What it provides
 *   - crdt_golden_reply_text: a recorded reply (JSON) rendered the way crd_trace renders
 *     the reply it got, so that the two compare as strings.
 *   - crdt_golden_script_*: our scripts as the library sends them, and which of them a
 *     traced call runs.
 *   - crdt_golden_scenario: a recording of tests/golden/scenarios/ read; crdt_golden_site:
 *     where a replay runs (a server of its own, or a one-master cluster).
 *   - crdt_golden_r47_labels: the 4.7 recordings' script labels and our files, one table
 *     for the replay of the scenarios (test_golden_r47.c) and of the scripts alone
 *     (test_scripts_r47.c).
 *
 * The script readers, crdt_golden_scenario and the site's start assert with Criterion
 * (call them from a test); crdt_golden_reply_text and the finders assert nothing.
 */
#ifndef CRDT_GOLDEN_H
#define CRDT_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

#include "cluster.h"
#include "harness.h"

/* null -> "nil", an integer -> "(integer) N", a string -> "\"s\"", an array -> "[a, b]"
 * (each element so rendered, in at most 64 bytes), anything else -> "?". Always
 * NUL-terminated within cap. */
void crdt_golden_reply_text(json_t *reply, char *buf, size_t cap);

/* One of our scripts as the build expanded it (CRD_LUA_DIR/<file>.lua, includes
 * resolved: what the library sends) and its SHA1 as the server computed it. */
typedef struct crdt_golden_script {
    char *text; /* NUL-terminated; free() it */
    size_t len;
    char sha[41];
} crdt_golden_script;

/* Reads file's script into s and asks r for its SHA1 (both asserted): with load by
 * SCRIPT LOAD, which leaves it in the server's script cache; without by redis.sha1hex,
 * which loads nothing (a replay then sees the library's NOSCRIPT and EVAL). */
void crdt_golden_script_read(redisContext *r, const char *file, bool load, crdt_golden_script *s);
/* Whether a traced call runs s: EVALSHA with its SHA1 or EVAL with its text. */
bool crdt_golden_script_runs(const crdt_golden_script *s, int argc, char *const *argv,
                             const size_t *argvlen);

/* The recording tests/golden/scenarios/<file> (its reading asserted); json_decref it. */
json_t *crdt_golden_scenario(const char *file);

/* Where a scenario replays: a server of its own, or for a cluster recording a cluster of
 * one master holding every slot, as Redisson's was. */
typedef struct crdt_golden_site {
    bool cluster;
    crdt_cluster cl; /* cluster */
    crdt_server srv; /* not cluster */
} crdt_golden_site;

/* Starts the site; returns a raw connection to its server (the cluster's master): the
 * caller's to redisFree. */
redisContext *crdt_golden_site_start(crdt_golden_site *site, bool cluster);
/* Options of a client of the site (crdt_options on the server's port, or the cluster's). */
void crdt_golden_site_options(crdt_golden_site *site, crd_options *o);
void crdt_golden_site_stop(crdt_golden_site *site);

/* A script label of the recordings ("rlock.acquire") and our file that does what Redisson's
 * script did ("rlock_acquire"). */
typedef struct crdt_golden_label {
    const char *label, *file;
} crdt_golden_label;

/* Reads the file of each of the n labels into scripts[i] (crdt_golden_script_read without
 * load), unless scripts[0] was read before: a suite reads its table once. */
void crdt_golden_scripts_read(redisContext *r, const crdt_golden_label *labels, size_t n,
                              crdt_golden_script *scripts);
/* The index of the first of the n scripts a traced call runs (crdt_golden_script_runs), or
 * -1 (also for a call with fewer than 3 arguments: no script call). */
int crdt_golden_scripts_find(const crdt_golden_script *scripts, size_t n, int argc,
                             char *const *argv, const size_t *argvlen);

/* The 4.7 recordings' labels (tests/golden/README-r47.md) and our files. */
extern const crdt_golden_label crdt_golden_r47_labels[];
extern const size_t crdt_golden_r47_nlabels;
/* The file of label in crdt_golden_r47_labels, or NULL (also for a NULL label). */
const char *crdt_golden_r47_file(const char *label);

#endif /* CRDT_GOLDEN_H */
