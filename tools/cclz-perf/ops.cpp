#include "ops.h"

#include "error.h"

namespace perf {

const std::vector<Op>& allOps() {
  static const std::vector<Op> ops = {
      {"codec", validateCodec, runCodec},
  };
  return ops;
}

std::vector<std::string> opNames() {
  std::vector<std::string> names;
  for (const auto& op : allOps()) names.emplace_back(op.name);
  return names;
}

const Op& findOp(const std::string& name) {
  for (const auto& op : allOps())
    if (name == op.name) return op;
  fail("unknown op \"{}\"", name);
}

}  // namespace perf
