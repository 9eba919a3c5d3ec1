// With CCLZ_INTERPOSE_DEBUG=1, counts per op how the user's calls went, printed on stderr when
// the process exits, one line per op that had any:
//   ... CCLZ INFO libcclz_nccl: op=all-gather compressed=3 plain=5 failed=0 forwarded=2 group=2
// compressed: through cclz's lossless codec; plain: through cclz, which found plain data faster
// (adaptive calls); failed: cclz returned an error (the call returned one too); forwarded: to NCCL
// as they were, followed by the count per reason (route.h's names). Calls on cclz's own
// communicators are not counted.
#pragma once

#include "route.h"

namespace cclz::interpose {

enum class Outcome { Compressed, Plain, Failed };

bool statsEnabled();
void countForwarded(Op op, Reason reason);
void countOutcome(Op op, Outcome outcome);

}  // namespace cclz::interpose
