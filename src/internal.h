/*
 * internal.h -- every layer of src/ at once (base.h lists them), for the CLI, the fuzzers
 * and the unit tests, which link the internals. No file in src/ includes it: each
 * includes its own layer's header.
 */
#ifndef CRD_INTERNAL_H
#define CRD_INTERNAL_H

#include "client.h"

#endif /* CRD_INTERNAL_H */
