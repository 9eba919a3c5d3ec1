// cclz-perf's collective ops (--op allgather|reducescatter|allreduce|alltoall|sendrecv): one
// process per rank under mpirun, rank 0 prints an nccl-tests-like table. Each row times the
// compressed collective and, in the same run, the plain collective (NCCL on the GPU, MPI on the
// CPU) on the same data, and checks every iteration against a reference built from all ranks'
// inputs (-c 1).
#pragma once

#include <string>

#include "options.h"

namespace perf {

bool isCollectiveOp(const std::string& op);
const char* const* collectiveOpNames();  // NULL-terminated

// Runs the sweep; initializes and finalizes MPI. Returns the process exit code.
int runCollectives(Options& opt, const std::string& deviceFlag, int* argc, char*** argv);

}  // namespace perf
