#include "collective/node_layout.h"

#include <unistd.h>

#include <cstdlib>
#include <map>

namespace cclz {

NodeLayout nodeLayoutFromKeys(const std::vector<uint64_t>& keys) {
  NodeLayout l;
  const int n = static_cast<int>(keys.size());
  std::map<uint64_t, int> nodeOfKey;  // in the order of each node's lowest rank
  l.nodeOf.resize(n);
  l.localOf.resize(n);
  for (int r = 0; r < n; ++r) {
    auto [it, added] = nodeOfKey.emplace(keys[r], static_cast<int>(l.ranks.size()));
    if (added) l.ranks.emplace_back();
    l.nodeOf[r] = it->second;
    l.localOf[r] = static_cast<int>(l.ranks[it->second].size());
    l.ranks[it->second].push_back(r);
  }
  l.nodes = static_cast<int>(l.ranks.size());
  l.perNode = l.nodes ? static_cast<int>(l.ranks[0].size()) : 0;
  for (const auto& node : l.ranks)
    if (static_cast<int>(node.size()) != l.perNode) l.perNode = 0;
  return l;
}

uint64_t nodeKey(const std::string& name) {
  std::string id = name;
  if (id.empty()) {
    if (const char* host = std::getenv("NCCL_HOSTID"); host && *host) {
      id = std::string("NCCL_HOSTID=") + host;
    } else {
      char buf[256] = {};
      if (gethostname(buf, sizeof buf - 1) == 0) id = buf;
    }
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace cclz
