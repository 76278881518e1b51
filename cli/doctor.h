/*
 * doctor.h -- what the four files of `credisson doctor` share: the session (the URL's
 * target, the probed node, the findings and what was learned), the raw commands that make
 * a server that stops answering a finding of its own, and the checks and measurements
 * cmd_doctor runs in turn. doctor.c has the command and the report; doctor_findings.c
 * those commands and the findings (it calls no other doctor file); doctor_checks.c where
 * the data is and the checks of the data node; doctor_measure.c the measurements. Main
 * thread only, but for the measurements' own threads (their files say which).
 */
#ifndef CRD_CLI_DOCTOR_H
#define CRD_CLI_DOCTOR_H

#include "probe.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_FINDINGS 64

enum { SEV_OK = 0, SEV_WARN = 1, SEV_FAIL = 2 };

typedef struct finding {
    char check[32];
    int sev;
    char summary[400];
    char why[700];
    char fix[400];
} finding;

typedef struct measured {
    int n;
    double ping_p50, ping_p99, script_p50, script_p99, pubsub_p50, pubsub_p99;
    double pair_p50, pair_p99, handoff_p50, handoff_p99;
    int handoffs;
    bool have_raw, have_pubsub, have_pair, have_handoff;
} measured;

typedef struct doctor {
    const global_opts *g;
    probe_target t;
    bool json;
    int samples;
    int64_t timeout_ms;
    const char *prefix;
    char keybase[160];     /* PREFIX:<pid> */
    char tag[24];          /* a hash tag served by the probed node (cluster), or "" */
    finding f[MAX_FINDINGS];
    int n;
    bool stopped;          /* a timeout or a lost connection ended the raw checks */
    redisContext *c;       /* the probed data node */
    probe_addr node;
    /* what was learned */
    char version[64], server_name[16], mode[32];
    int major, minor;
    int replicas;          /* connected replicas of the probed primary (-1 unknown) */
    bool cluster_node;     /* cluster_enabled:1 */
    bool sync_default;     /* replica sync on by default (Sentinel, Cluster) */
    bool wait_ok, eval_ok, evalsha_ok;
    char acq_sha[48], pub_sha[48];
    int64_t lease_ms;
    int cl_primaries, cl_covered, cl_min_rep; /* cluster: the slot map, replicas by INFO */
    char keys[64][240];    /* own keys to delete at the end */
    int nkeys;
    measured m;
} doctor;

/* One range of a cluster's slot map (CLUSTER SLOTS): its primary and how many replicas. */
typedef struct slot_range {
    int from, to;
    probe_addr primary;
    int replicas;
} slot_range;

/* ---- doctor_findings.c: findings and raw commands ------------------------------------ */

/* Records a finding of check: its severity (SEV_*), why it matters and how to fix it
 * (NULL: nothing to say, as for SEV_OK) and its summary; past MAX_FINDINGS it is dropped. */
void doctor_add(doctor *d, const char *check, int sev, const char *why, const char *fix,
                const char *fmt, ...) CLI_PRINTF(6, 7);
/* An own key: PREFIX:<pid>[tag]:<suffix> into buf, remembered for the clean-up. */
const char *doctor_own_key(doctor *d, const char *suffix, char *buf, size_t cap);
/* A reply of the probed node, or NULL after recording why the server stopped answering
 * (and stopping the checks: d->stopped). */
redisReply *doctor_ask(doctor *d, const char *what, int argc, const char *const *argv);
/* The same with a word list ended by NULL, as probe_cmdv's. */
redisReply *doctor_askv(doctor *d, const char *what, const char *first, ...);
/* Whether r is an error reply (starting with code, unless code is NULL). */
bool doctor_is_err(const redisReply *r, const char *code);

/* ---- doctor_checks.c: where the data is, and the checks of the data node -------------- */

/* Sentinel mode: the master as the sentinels see it; the primary into d->node. */
bool doctor_find_sentinel_primary(doctor *d);
/* Cluster mode: the slot map from the first seed that answers (at most 128 ranges); the
 * first primary into d->node, a hash tag it serves into d->tag. */
bool doctor_find_cluster_primary(doctor *d, slot_range *ranges, int *nranges);
/* The checks of INFO's text (server, version, role, replicas; memory and eviction). */
void doctor_check_info(doctor *d, const char *info);
/* The checks of the data node, in turn: slot checking, scripts, ACL rights, WAIT and the
 * replicas, the configuration, the clock. Each adds its findings. */
void doctor_check_node(doctor *d);

/* ---- doctor_measure.c: the measurements ----------------------------------------------- */

/* d->samples round trips, lock scripts and pub/sub deliveries (none when d->samples is 0),
 * then sharded pub/sub (Redis 7.0+): into d->m, with their findings. */
void doctor_measure_node(doctor *d);
/* The library's own acquire+release pair and hand-off, into d->m. */
void doctor_measure_library(doctor *d);

#endif /* CRD_CLI_DOCTOR_H */
