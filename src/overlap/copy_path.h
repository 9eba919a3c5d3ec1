// How the overlapped GEMMs move their chunks and partials (CCLZ_OVERLAP_COPY; docs/overlap.md):
// NCCL's point-to-point calls, copies into the peers' NCCL window on the copy engines announced
// by flags, or the copy engines where every rank of the communicator can use them and NCCL's
// calls where not (decided at the first overlapped call, alike on every rank).
#pragma once

namespace cclz {

enum class OverlapCopy { Nccl, CopyEngines, Auto };

}  // namespace cclz
