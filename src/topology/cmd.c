/*
 * cmd.c -- the command builder every layer uses: a crd__cmd is built in place (keys, then
 * arguments) with the three EVALSHA slots kept free, so nothing is copied on the way out;
 * crd__cmd_head fills those slots (EVALSHA sha numkeys, or EVAL with the script's text).
 * The scripts are lua/, compiled in with the SHA1 of their exact bytes by
 * cmake/embed_lua.cmake.
 *
 * Pure: no I/O, no lock; any thread (a command belongs to its builder).
 */
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void crd__cmd_init(crd__cmd *cmd, int script, int cap)
{
    cmd->script = script;
    cmd->nkeys = cmd->nargs = 0;
    cmd->used = 0;
    cmd->oom = false;
    cmd->sync = false;
    cmd->deadline_ms = 0;
    cmd->late = NULL;
    cmd->late_what = NULL;
    cmd->handed = 0;
    cmd->unsent = false;
    cmd->interruptible = false;
    cmd->keep_error = NULL;
    memset(cmd->heap, 0, sizeof cmd->heap);
    cmd->heap_used = cmd->heap_cap = 0;
    cmd->cap = CRD__CMD_INLINE;
    cmd->v = cmd->v_inline;
    cmd->len = cmd->len_inline;
    if (cap > CRD__CMD_INLINE) {
        cmd->v = malloc(sizeof *cmd->v * (size_t)(cap + 3));
        cmd->len = malloc(sizeof *cmd->len * (size_t)(cap + 3));
        cmd->cap = cap;
        if (cmd->v == NULL || cmd->len == NULL) {
            free(cmd->v);
            free(cmd->len);
            cmd->v = cmd->v_inline;
            cmd->len = cmd->len_inline;
            cmd->cap = CRD__CMD_INLINE;
            cmd->oom = true;
        }
    }
}

void crd__cmd_free(crd__cmd *cmd)
{
    if (cmd->v != cmd->v_inline) {
        free(cmd->v);
        free(cmd->len);
    }
    for (size_t i = 0; i < sizeof cmd->heap / sizeof cmd->heap[0]; i++)
        free(cmd->heap[i]);
    cmd->v = cmd->v_inline;
    cmd->len = cmd->len_inline;
    memset(cmd->heap, 0, sizeof cmd->heap);
}

static void put(crd__cmd *cmd, const char *p, size_t len)
{
    int i = cmd->nkeys + cmd->nargs;
    if (i >= cmd->cap) {
        cmd->oom = true;
        return;
    }
    cmd->v[3 + i] = p;
    cmd->len[3 + i] = len;
}

void crd__cmd_key(crd__cmd *cmd, const char *p, size_t len)
{
    put(cmd, p, len);
    cmd->nkeys++;
}

void crd__cmd_arg(crd__cmd *cmd, const char *p, size_t len)
{
    put(cmd, p, len);
    cmd->nargs++;
}

void crd__cmd_arg_str(crd__cmd *cmd, const char *s) { crd__cmd_arg(cmd, s, strlen(s)); }

char *crd__cmd_space(crd__cmd *cmd, size_t n)
{
    if (cmd->used + n <= sizeof cmd->scratch) {
        char *p = cmd->scratch + cmd->used;
        cmd->used += n;
        return p;
    }
    size_t last = 0;
    while (last < sizeof cmd->heap / sizeof cmd->heap[0] && cmd->heap[last] != NULL)
        last++;
    if (last > 0 && cmd->heap_used + n <= cmd->heap_cap) {
        char *p = cmd->heap[last - 1] + cmd->heap_used;
        cmd->heap_used += n;
        return p;
    }
    size_t cap = n > 4096 ? n : 4096;
    if (last == sizeof cmd->heap / sizeof cmd->heap[0] || (cmd->heap[last] = malloc(cap)) == NULL) {
        cmd->oom = true;
        return NULL;
    }
    cmd->heap_used = n;
    cmd->heap_cap = cap;
    return cmd->heap[last];
}

void crd__cmd_arg_i64(crd__cmd *cmd, int64_t v)
{
    char *p = crd__cmd_space(cmd, 21);
    if (p == NULL) {
        crd__cmd_arg(cmd, "", 0);
        return;
    }
    char *end = p;
    if (v < 0)
        *end++ = '-';
    end = crd__put_u64(end, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
    crd__cmd_arg(cmd, p, (size_t)(end - p));
}

/* Fills the three leading slots: EVALSHA sha numkeys (EVAL and the script's text when
 * eval). Returns the first word's index (3 for a plain command). */
int crd__cmd_head(crd__cmd *cmd, bool eval)
{
    if (cmd->script == CRD__PLAIN)
        return 3;
    const crd__script_src *src = &crd__scripts[cmd->script];
    /* Not snprintf: this runs for every command, and printf was ~9 % of an uncontended
     * pair's instructions in the library (callgrind). */
    char *end = crd__put_u64(cmd->numkeys, (uint64_t)cmd->nkeys);
    *end = '\0';
    cmd->v[0] = eval ? "EVAL" : "EVALSHA";
    cmd->len[0] = eval ? 4 : 7;
    cmd->v[1] = eval ? src->text : src->sha1;
    cmd->len[1] = eval ? src->len : 40;
    cmd->v[2] = cmd->numkeys;
    cmd->len[2] = (size_t)(end - cmd->numkeys);
    return 0;
}

int crd__cmd_argc(const crd__cmd *cmd, int first) { return 3 - first + cmd->nkeys + cmd->nargs; }
