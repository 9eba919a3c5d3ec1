#include "common/error.h"

#include <cstring>

namespace cclz {

void throwError(cclzResult_t code, const std::string& message, const char* file, int line) {
  // Keep only the file's name: the message is for users, the place is for us.
  const char* base = std::strrchr(file, '/');
  throw Error(code, message + " (" + (base ? base + 1 : file) + ":" + std::to_string(line) + ")");
}

}  // namespace cclz
