#include "thread_state.h"

namespace cclz::interpose {
namespace {
thread_local int depth = 0;
thread_local bool inForward = false;
}  // namespace

int& groupDepth() { return depth; }

bool forwarding() { return inForward; }

ForwardScope::ForwardScope() : outer_(inForward) { inForward = true; }
ForwardScope::~ForwardScope() { inForward = outer_; }

}  // namespace cclz::interpose
