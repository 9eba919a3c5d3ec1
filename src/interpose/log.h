// Lines on stderr in the form of NCCL_DEBUG's ("host:pid:tid CCLZ WARN libcclz_nccl: ..."), so
// that they sit readably among NCCL's own. Printed only when something happens: a failure, a
// setting it does not know, or the counts that CCLZ_INTERPOSE_DEBUG=1 asks for.
#pragma once

namespace cclz::interpose {

void warn(const char* format, ...) __attribute__((format(printf, 1, 2)));
void info(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace cclz::interpose
