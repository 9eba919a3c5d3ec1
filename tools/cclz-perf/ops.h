// The ops cclz-perf measures. An op is one file (op_<name>.cpp) with one entry point that turns
// an input into a Row; ops.cpp lists them. The collectives, which need one process per rank, are
// their own family (op_collective.h).
#pragma once

#include <string>
#include <vector>

#include "data.h"
#include "options.h"
#include "report.h"

namespace perf {

struct Context {
  const Options& opt;
  std::string gpuName;  // the device's name, for GPU runs
};

struct Op {
  const char* name;
  // Checks the op's own flags before anything is printed (fails with a message); may be null.
  void (*validate)(const Options& opt);
  Row (*run)(const Context& ctx, const Input& input);
};

const std::vector<Op>& allOps();
std::vector<std::string> opNames();
const Op& findOp(const std::string& name);

// op_codec.cpp: one frame's encode and decode, beside a plain copy of the same bytes.
void validateCodec(const Options& opt);
Row runCodec(const Context& ctx, const Input& input);

}  // namespace perf
