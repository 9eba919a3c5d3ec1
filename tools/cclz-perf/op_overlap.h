// cclz-perf's overlapped GEMM ops (--op ag_gemm|gemm_rs; docs/overlap.md): one process per rank
// under mpirun, rank 0 prints the table. Per size, in one run: the GEMM alone, the plain
// collective alone, the two one after the other, and the overlapped call (plain, and with
// --codec fp8 through the fp8 codec), with the overlap efficiency; -c 1 compares each
// overlapped output with the serial one.
#pragma once

#include <string>

#include "options.h"

namespace perf {

bool isOverlapOp(const std::string& op);

// Runs the sweep; initializes and finalizes MPI. Returns the process exit code.
int runOverlap(Options& opt, const std::string& deviceFlag, int* argc, char*** argv);

}  // namespace perf
