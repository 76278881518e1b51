/* crlite: Criterion's report hooks, PRE_ALL and POST_ALL only (see criterion.h). */
#ifndef CRLITE_HOOKS_H
#define CRLITE_HOOKS_H

/* Like Criterion's own header, a system header: a cr_assert without a message is not a
 * pedantic warning at the call site. */
#pragma GCC system_header

#include "criterion.h"

#define CRL_HOOK_KIND_PRE_ALL 0
#define CRL_HOOK_KIND_POST_ALL 1

#define ReportHook(kind) CRL__HOOK_##kind
#define CRL__HOOK_PRE_ALL CRL__HOOK(PRE_ALL, struct criterion_test_set)
#define CRL__HOOK_POST_ALL CRL__HOOK(POST_ALL, struct criterion_global_stats)

/* Expands to the head of `static void crl_hook_KIND(T *arg)`: the hook's parameter list
 * and body follow the macro, as with Criterion. */
#define CRL__HOOK(kind, T)                                                                         \
    static void crl_hook_##kind(T *);                                                              \
    static void crl_hook_thunk_##kind(void *arg)                                                   \
    {                                                                                              \
        crl_hook_##kind((T *)arg);                                                                 \
    }                                                                                              \
    __attribute__((constructor)) static void crl_hook_reg_##kind(void)                             \
    {                                                                                              \
        crl__register_hook(CRL_HOOK_KIND_##kind, crl_hook_thunk_##kind);                           \
    }                                                                                              \
    static void crl_hook_##kind

#endif
