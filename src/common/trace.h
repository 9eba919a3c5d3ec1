// CCLZ_TRACE=1: one line on stderr per step of a collective (the check, the data part, a queued
// job, a host wait for frame sizes), with the process id, the thread and the microseconds since
// the process's first line. For finding where a call spends its time or where it hangs, on a
// machine without a profiler. Off (the default), a step costs a load of a flag; the environment
// is read again every 256 steps of a thread and at each communicator's creation.
#pragma once

namespace cclz {

bool traceEnabled();
// Reads CCLZ_TRACE now (a communicator's creation).
void traceRefresh();
// printf-style; flushed at once, so the last line before a hang is on the terminal.
void traceLine(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace cclz

#define CCLZ_TRACE(...)                                         \
  do {                                                          \
    if (::cclz::traceEnabled()) ::cclz::traceLine(__VA_ARGS__); \
  } while (0)
