/*
 * test_spin.c -- a C waiter behind a Java spin-lock holder (Redisson RSpinLock,
 * PROTOCOL.md 10): the holder uses the RLock hash and owner field but releases without
 * publishing, so the waiter is never woken by a message. Its wait slices end at the
 * holder's TTL, or at max_wait_slice_ms when set: that option bounds how late it notices
 * the release. The Java holder is played by raw commands with Redisson's effects (its
 * acquire is the RLock acquire; its unlock deletes the hash and publishes nothing).
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

typedef struct waiter_run {
    crd_lock *lock;
    uint64_t owner;
    crd_status st;
    int64_t done_at;
} waiter_run;

/* Scripts the waiter's client has had answered: its first try, then the re-check after
 * subscribing; after the second one it sleeps for its slice. */
static atomic_int scripts_answered;

static void count_scripts(void *user, const crd_trace *t)
{
    (void)user;
    bool script = t->argc > 0 && ((t->argvlen[0] == 7 && memcmp(t->argv[0], "EVALSHA", 7) == 0) ||
                                  (t->argvlen[0] == 4 && memcmp(t->argv[0], "EVAL", 4) == 0));
    /* a NOSCRIPT answer is followed by the same script as EVAL: count that one */
    if (script && strncmp(t->reply, "(error) NOSCRIPT", 16) != 0)
        atomic_fetch_add(&scripts_answered, 1);
}

static bool in_its_slice(void *arg)
{
    (void)arg;
    return atomic_load(&scripts_answered) >= 2;
}

static void *wait_for_it(void *arg)
{
    waiter_run *w = arg;
    w->st = crd_lock_acquire_owner(w->lock, w->owner, 20000, 5000);
    w->done_at = crdt_now_ms();
    return NULL;
}

/* The scene of both tests: the Java holder (thread java_thread of a foreign client) holds
 * name for holder_ttl_ms, and a C waiter whose client has max_slice_ms (0 = none) waits
 * for it in a thread of its own. */
typedef struct spin_scene {
    const char *name;
    redisContext *r;
    crd_client *c;
    waiter_run w;
    pthread_t th;
} spin_scene;

/* Set the scene up; returns once the waiter sleeps on its slice. */
static void spin_scene_start(spin_scene *s, const char *name, int java_thread,
                             int64_t holder_ttl_ms, int64_t max_slice_ms)
{
    s->name = name;
    s->r = crdt_redis();
    char field[64];
    snprintf(field, sizeof field, "0b5ba1a6-5a6c-4a0f-9c8e-0f9b2b8f6f1a:%d", java_thread);
    freeReplyObject(crdt_cmd(s->r, "HSET %s %s 1", name, field));
    freeReplyObject(crdt_cmd(s->r, "PEXPIRE %s %lld", name, (long long)holder_ttl_ms));
    crd_options o;
    crdt_options(&o);
    o.max_wait_slice_ms = max_slice_ms;
    o.on_trace = count_scripts;
    atomic_store(&scripts_answered, 0);
    s->c = crdt_client_opts(&o);
    s->w = (waiter_run){crdt_lock(s->c, name), crd_owner_new(), CRD_IO, 0};
    cr_assert_eq(pthread_create(&s->th, NULL, wait_for_it, &s->w), 0);
    /* tried, subscribed, re-checked: it now sleeps on its slice */
    cr_assert(crdt_wait_until(in_its_slice, NULL, crdt_scaled_ms(5000)));
}

/* The spin unlock (the hash deleted, no publish); returns when it happened. */
static int64_t spin_scene_release(spin_scene *s)
{
    int64_t released = crdt_now_ms();
    cr_assert_eq(crdt_cmd_int(s->r, "DEL %s", s->name), 1);
    return released;
}

/* After the waiter's thread returned: release what it got and free the scene. */
static void spin_scene_end(spin_scene *s)
{
    cr_assert_eq(crd_lock_release_owner(s->w.lock, s->w.owner), CRD_OK);
    crd_lock_free(s->w.lock);
    crd_client_free(s->c);
    redisFree(s->r);
}

/* The spin holder takes N with a 30 s lease, the C waiter waits, the holder releases
 * silently: returns how long after the release the waiter got the lock. */
static int64_t silent_release_latency(int64_t max_slice_ms)
{
    spin_scene s;
    spin_scene_start(&s, crdt_key(max_slice_ms > 0 ? "capped" : "uncapped"), 77, 30000,
                     max_slice_ms);
    crdt_sleep_ms(300); /* the holder works a while */
    int64_t released = spin_scene_release(&s);
    pthread_join(s.th, NULL);
    cr_assert_eq(s.w.st, CRD_OK, "%s", crd_strerror(s.w.st));
    spin_scene_end(&s);
    return s.w.done_at - released;
}

Test(spin, max_wait_slice_bounds_how_late_a_waiter_sees_a_silent_release, .timeout = 60)
{
    int64_t capped = silent_release_latency(200);
    fprintf(stderr, "[spin] silent release seen after %lld ms with max_wait_slice_ms 200\n",
            (long long)capped);
    cr_expect(capped >= 0 && capped <= 200 + crdt_scaled_ms(150),
              "%lld ms: more than one slice plus a round trip", (long long)capped);
}

Test(spin, without_a_ceiling_the_waiter_sleeps_until_the_holders_ttl_would_end, .timeout = 60)
{
    /* The uncapped slice is the holder's PTTL (about 30 s): the silent release at 0.3 s
     * is seen only when the slice ends. Bounded here by a 2 s lease instead of 30 s. */
    spin_scene s;
    spin_scene_start(&s, crdt_key("ttl"), 78, 2000, 0);
    int64_t released = spin_scene_release(&s);
    pthread_join(s.th, NULL);
    cr_assert_eq(s.w.st, CRD_OK);
    int64_t late = s.w.done_at - released;
    fprintf(stderr, "[spin] silent release seen after %lld ms with no ceiling (2 s lease)\n",
            (long long)late);
    cr_expect_gt(late, 1000, "woken by no message, it waited for its slice (%lld ms)",
                 (long long)late);
    spin_scene_end(&s);
}
