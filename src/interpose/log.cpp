#include "log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>

namespace cclz::interpose {
namespace {

void line(const char* level, const char* format, va_list args) {
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  char text[1024];
  std::vsnprintf(text, sizeof text, format, args);
  // One fprintf per line, so that lines of several threads do not interleave.
  std::fprintf(stderr, "%s:%d:%ld CCLZ %s libcclz_nccl: %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), level, text);
}

}  // namespace

void warn(const char* format, ...) {
  va_list args;
  va_start(args, format);
  line("WARN", format, args);
  va_end(args);
}

void info(const char* format, ...) {
  va_list args;
  va_start(args, format);
  line("INFO", format, args);
  va_end(args);
}

}  // namespace cclz::interpose
