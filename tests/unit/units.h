/*
 * units.h -- what the two files of the units suite (test_units.c, test_kinds_ext.c,
 * linked into one program) share: a lock of a kind built without a client, and a built
 * command written as one string to compare with Redisson's keys and arguments.
 */
#ifndef CRDT_UNITS_H
#define CRDT_UNITS_H

#include "locks.h"

/* A lock of kind on name with no client (crd__lock_init asserted); crd__lock_clear it. */
crd_lock crdt_unit_lock(crd__kind kind, const char *name);
/* Expects cmd to run script (CRD__SCRIPT_*, CRD__PLAIN, or CRDT_UNIT_ANY: not checked)
 * with the keys and arguments want, then frees it. want is KEYS then ARGV, "|"-joined
 * with "ARGV:" before the first argument; numbers of 10 digits or more (clocks) stand as
 * #, other bytes outside printable ASCII as \xNN. Asserts the builder did not run out of
 * words. */
#define CRDT_UNIT_ANY (-1000)
void crdt_unit_expect(crd__cmd *cmd, int script, const char *want);

#endif /* CRDT_UNITS_H */
